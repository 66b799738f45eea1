//! How secrets are hidden wherever settings are shown (`Debug`, `check-config`, errors): the
//! one redaction of the settings.

/// What `Debug`, `check-config` and configuration errors show instead of a secret.
pub const REDACTED: &str = "***";

/// `raw` with the password of its user info, every query value and the fragment replaced by
/// [`REDACTED`]; scheme, user name, host, port, path and query names are kept (a Redis URL's
/// `/2`, a webhook's path), and a Redis URL's `#insecure`, which says how it connects. Nothing after a Redis URL's host holds an `@` (port,
/// db, `?protocol=`, `#insecure`), so the user info runs to the last `@` and the user name to
/// its first `:`, as the `url` crate (which the redis crate parses with) splits them: a
/// password is hidden whole with `@` or `:` in it (or `/`, `?`, `#`, which the redis crate
/// refuses unencoded), and a `%`-encoded one is hidden as written. Without `scheme://` (in an
/// invalid value) the user info starts the text. Query values are hidden because gateways
/// take tokens there (`?key=…`).
pub fn redact_url(raw: &str) -> String {
    let (before, host_and_rest) = match raw.rfind('@') {
        None => ("".to_owned(), raw),
        Some(at) => {
            let start = raw[..at].find("://").map_or(0, |scheme| scheme + 3);
            let user_info = match raw[start..at].split_once(':') {
                Some((user, password)) if !password.is_empty() => {
                    format!("{}{user}:{REDACTED}", &raw[..start])
                }
                // A user name alone, or an empty password: nothing to hide.
                _ => raw[..at].to_owned(),
            };
            (user_info, &raw[at..])
        }
    };
    let (rest, fragment) = match host_and_rest.split_once('#') {
        Some((rest, "insecure")) => (rest, "#insecure".to_owned()),
        Some((rest, _)) => (rest, format!("#{REDACTED}")),
        None => (host_and_rest, String::new()),
    };
    let Some((path, query)) = rest.split_once('?') else {
        return format!("{before}{rest}{fragment}");
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) => format!("{name}={REDACTED}"),
            None if pair.is_empty() => String::new(),
            None => REDACTED.to_owned(),
        })
        .collect();
    format!("{before}{path}?{}{fragment}", query.join("&"))
}

/// `text` with every URL in it redacted (a list of URLs is comma-separated).
pub fn redact_urls(text: &str) -> String {
    text.split(',')
        .map(|item| redact_url(item.trim()))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_and_query_values_are_hidden_the_rest_kept() {
        for (raw, shown) in [
            ("redis://:pw@h:6379/0", "redis://:***@h:6379/0"),
            ("redis://u:p@ss@h/2#insecure", "redis://u:***@h/2#insecure"),
            ("redis://u@h?protocol=resp3", "redis://u@h?protocol=***"),
            (
                "https://u:pw@gw.example/send?key=abc&x#frag",
                "https://u:***@gw.example/send?key=***&***#***",
            ),
            ("https://gw.example/send", "https://gw.example/send"),
            ("not a url :pw@x", "not a url :***@x"),
        ] {
            assert_eq!(redact_url(raw), shown, "{raw}");
        }
        assert_eq!(
            redact_urls("redis://:a@h1:1, redis://:b@h2:2"),
            "redis://:***@h1:1,redis://:***@h2:2"
        );
    }
}
