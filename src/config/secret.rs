//! Secrets among the settings (tokens, keys, passwords): held in `secrecy` types so that no
//! `Debug`, log line or error can show them by accident, read only from a variable or from the
//! file its `_FILE` twin names (container secrets) and never from the config file, and refused
//! when blank: an empty token is a mistake, not "unset".

use std::fmt;

use secrecy::{ExposeSecret, SecretString};

use super::error::ConfigError;
use super::redact::REDACTED;

/// A secret text. `Debug` shows `"***"`; [`ExposeSecret`] gives the text where it is used.
#[derive(Clone)]
pub struct Secret(SecretString);

impl ExposeSecret<str> for Secret {
    fn expose_secret(&self) -> &str {
        self.0.expose_secret()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(REDACTED, f)
    }
}

impl From<String> for Secret {
    fn from(text: String) -> Self {
        Self(SecretString::from(text))
    }
}

impl From<&str> for Secret {
    fn from(text: &str) -> Self {
        Self(SecretString::from(text))
    }
}

/// A secret's variable and its `_FILE` twin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SecretVariable {
    pub name: &'static str,
    pub file: &'static str,
}

impl SecretVariable {
    pub const fn new(name: &'static str, file: &'static str) -> Self {
        Self { name, file }
    }

    /// The secret, trimmed, and the variable it came from; `None` when neither is set.
    /// Errors name the variable and show no part of the secret.
    pub fn read(
        &self,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<(Secret, &'static str)>, ConfigError> {
        let (text, origin) = match (lookup(self.name), lookup(self.file)) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::Inconsistent(format!(
                    "set {} or {}, not both",
                    self.name, self.file
                )));
            }
            (Some(text), None) => (text, self.name),
            (None, Some(path)) => {
                let text = std::fs::read_to_string(path.trim()).map_err(|error| {
                    ConfigError::invalid(
                        self.file,
                        path.clone(),
                        format!("cannot read it: {error}"),
                    )
                })?;
                (text, self.file)
            }
            (None, None) => return Ok(None),
        };
        let text = text.trim();
        if text.is_empty() {
            return Err(ConfigError::invalid(
                origin,
                "",
                "a blank secret is refused: give one, or unset the variable",
            ));
        }
        Ok(Some((Secret::from(text), origin)))
    }

    /// Whether either variable is set (for `vcode check-config`).
    pub fn origin(&self, lookup: &dyn Fn(&str) -> Option<String>) -> Option<&'static str> {
        [self.name, self.file]
            .into_iter()
            .find(|var| lookup(var).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: SecretVariable = SecretVariable::new("VCODE_T", "VCODE_T_FILE");

    fn read(vars: &[(&str, &str)]) -> Result<Option<(String, &'static str)>, String> {
        let lookup = |var: &str| {
            vars.iter()
                .find(|(name, _)| *name == var)
                .map(|(_, value)| value.to_string())
        };
        TOKEN
            .read(&lookup)
            .map(|found| found.map(|(secret, origin)| (secret.expose_secret().to_owned(), origin)))
            .map_err(|error| error.to_string())
    }

    #[test]
    fn a_secret_comes_from_its_variable_or_its_file_not_both() {
        assert_eq!(read(&[]), Ok(None));
        assert_eq!(
            read(&[("VCODE_T", " s3cret \n")]),
            Ok(Some(("s3cret".to_owned(), "VCODE_T")))
        );
        let path = std::env::temp_dir().join(format!("vcode-secret-{}", std::process::id()));
        std::fs::write(&path, "from-file\n").unwrap();
        let file = path.to_str().unwrap();
        assert_eq!(
            read(&[("VCODE_T_FILE", file)]),
            Ok(Some(("from-file".to_owned(), "VCODE_T_FILE")))
        );
        let both = read(&[("VCODE_T", "s3cret"), ("VCODE_T_FILE", file)]).unwrap_err();
        assert!(
            both.contains("VCODE_T_FILE") && !both.contains("s3cret"),
            "{both}"
        );
        std::fs::remove_file(&path).unwrap();
        let missing = read(&[("VCODE_T_FILE", file)]).unwrap_err();
        assert!(missing.contains("VCODE_T_FILE") && missing.contains("cannot read"));
    }

    #[test]
    fn a_blank_secret_is_an_error_not_unset() {
        for blank in ["", "   ", "\n"] {
            let error = read(&[("VCODE_T", blank)]).unwrap_err();
            assert!(
                error.starts_with("VCODE_T=") && error.contains("blank"),
                "{error}"
            );
        }
    }

    #[test]
    fn debug_shows_stars_only() {
        let secret = Secret::from("s3cret");
        assert_eq!(format!("{secret:?}"), "\"***\"");
        assert_eq!(format!("{:?}", Some(secret)), "Some(\"***\")");
    }
}
