//! The error that stops start-up: it names the variable (or the config file's key) and shows
//! its value, never a secret's.

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// One setting's value is refused. `var` is the variable, or the key with
    /// `(VCODE_CONFIG_FILE)`; `value` is shown with passwords hidden, a secret's as `***`.
    #[error("{var}={value:?}: {reason}")]
    Invalid {
        var: String,
        value: String,
        reason: String,
    },
    /// Settings that do not go together; the message names them.
    #[error("{0}")]
    Inconsistent(String),
    /// A `VCODE_*` variable (or a config file key) that no setting reads: a misspelling would
    /// otherwise leave the setting at its default without a word.
    #[error("unknown {what} {name}{}", did_you_mean(nearest))]
    Unknown {
        what: &'static str,
        name: String,
        nearest: Option<String>,
    },
    /// A variable a release retired: refused, with why, rather than silently doing nothing.
    #[error("{name} is retired: {why}")]
    Retired { name: String, why: &'static str },
}

impl ConfigError {
    pub fn invalid(
        var: impl Into<String>,
        value: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Self::Invalid {
            var: var.into(),
            value: value.into(),
            reason: reason.into(),
        }
    }
}

/// `: did you mean X?`, or nothing when no known name is close.
fn did_you_mean(nearest: &Option<String>) -> String {
    nearest
        .as_ref()
        .map(|name| format!(": did you mean {name}?"))
        .unwrap_or_default()
}
