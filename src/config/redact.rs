//! How secrets are hidden wherever settings are shown (`Debug`, `check-config`, errors).

/// What `Debug` and configuration errors show instead of a password or a token.
pub const REDACTED: &str = "***";

/// `raw` with the password of its user info (`scheme://user:password@host…`) replaced by
/// [`REDACTED`]; scheme, user name, host, port and db are kept. Nothing after a Redis URL's host
/// holds an `@` (port, db, `?protocol=`, `#insecure`), so the user info runs to the last `@`
/// and the user name to its first `:`, as the `url` crate (which the redis crate parses with)
/// splits them: a password is hidden whole with `@` or `:` in it (or `/`, `?`, `#`, which the
/// redis crate refuses unencoded), and a `%`-encoded one is hidden as written. Without
/// `scheme://` (in an invalid value) the user info starts the text.
pub fn redact_url_password(raw: &str) -> String {
    let Some(at) = raw.rfind('@') else {
        return raw.to_owned();
    };
    let start = raw[..at].find("://").map_or(0, |scheme| scheme + 3);
    match raw[start..at].split_once(':') {
        Some((user, password)) if !password.is_empty() => {
            format!("{}{user}:{REDACTED}{}", &raw[..start], &raw[at..])
        }
        // A user name alone, or an empty password: nothing to hide.
        _ => raw.to_owned(),
    }
}
