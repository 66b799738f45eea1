//! `vcode check-config`: every setting as one line of a table — variable, value, and where the
//! value came from (`default`, `set` by a variable, or the config `file`) — with secrets as
//! `***` and URL passwords and query values hidden. The settings are read and checked first,
//! so a bad one (or an unknown variable) stops it as it stops start-up, and nothing of it is
//! printed.

use std::collections::HashMap;

use super::{Settings, secrets};
use crate::config::ConfigError;
use crate::config::redact::REDACTED;
use crate::config::sources::{self, FILE};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub variable: String,
    pub value: String,
    /// `default`, `set` or `file`.
    pub origin: &'static str,
}

impl Row {
    fn new(variable: &str, value: impl Into<String>, origin: &'static str) -> Self {
        Self {
            variable: variable.to_owned(),
            value: value.into(),
            origin,
        }
    }
}

const UNSET: &str = "(unset)";
const TEST_NUMBERS: &str = "VCODE_TEST_NUMBERS";

/// The table for the process environment.
pub fn from_env() -> Result<String, ConfigError> {
    Ok(render(&rows(sources::environment()?)?))
}

/// The rows for the variables `vars`, once they pass every check start-up makes.
pub fn rows(vars: impl IntoIterator<Item = (String, String)>) -> Result<Vec<Row>, ConfigError> {
    let vars: HashMap<String, String> = vars.into_iter().collect();
    let settings = Settings::from_vars(vars.clone())?;
    let lookup = |var: &str| vars.get(var).cloned();
    let sources = super::sources(&lookup)?;
    let mut rows = Vec::new();
    for setting in sources.settings() {
        let shown = match &setting.key {
            Some(key) if !setting.variable => key.as_str(),
            _ => setting.name.as_str(),
        };
        // Test numbers' codes pass as their owners: shown masked, without codes.
        let given = sources.given(&setting.name).map(|(value, origin)| {
            if setting.name == TEST_NUMBERS {
                (settings.otp.test_numbers_masked(), origin)
            } else {
                (value, origin)
            }
        });
        let row = match given {
            Some((value, FILE)) => Row::new(shown, value, "file"),
            Some((value, _)) => Row::new(shown, value, "set"),
            // A per-purpose template variable or a file table that is not given: no row.
            None if setting.key.is_none() || !setting.variable => continue,
            None => Row::new(shown, default_text(setting.default.clone()), "default"),
        };
        rows.push(row);
    }
    for secret in secrets() {
        rows.push(match secret.origin(&lookup) {
            Some(var) => Row::new(var, REDACTED, "set"),
            None => Row::new(secret.name, UNSET, "default"),
        });
    }
    let config_file = vars.get(FILE).map_or(UNSET, |path| path.trim());
    let origin = if vars.contains_key(FILE) {
        "set"
    } else {
        "default"
    };
    rows.push(Row::new(FILE, config_file, origin));
    Ok(rows)
}

fn default_text(default: Option<String>) -> String {
    match default {
        None => UNSET.to_owned(),
        Some(text) if text.is_empty() => "(none)".to_owned(),
        Some(text) => text,
    }
}

/// The rows as aligned columns under a header.
pub fn render(rows: &[Row]) -> String {
    let header = Row::new("VARIABLE", "VALUE", "ORIGIN");
    let width = |column: fn(&Row) -> &str| {
        rows.iter()
            .chain([&header])
            .map(|row| column(row).chars().count())
            .max()
            .unwrap_or(0)
    };
    let variable_width = width(|row| &row.variable);
    let value_width = width(|row| &row.value);
    let mut table = String::new();
    for row in [&header].into_iter().chain(rows) {
        let line = format!(
            "{:variable_width$}  {:value_width$}  {}",
            row.variable, row.value, row.origin
        );
        table.push_str(line.trim_end());
        table.push('\n');
    }
    table
}
