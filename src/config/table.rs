//! `vcode check-config`: every setting as one line of a table — variable, value, and where the
//! value came from (`default`, `set` by a variable, or the config `file`) — with secrets as
//! `***` and URL passwords hidden. The settings are read and checked first, so a bad one stops
//! it as it stops start-up.

use std::collections::HashMap;

use super::error::ConfigError;
use super::redact::REDACTED;
use super::sources::{self, FILE, Sources};
use super::{SECRETS, Settings, defaults};
use crate::sms::{ProviderName, SmsSettings};

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

/// The table for the process environment.
pub fn from_env() -> Result<String, ConfigError> {
    Ok(render(&rows(sources::environment()?)?))
}

/// The rows for the variables `vars`, once they pass every check start-up makes.
pub fn rows(vars: impl IntoIterator<Item = (String, String)>) -> Result<Vec<Row>, ConfigError> {
    let vars: HashMap<String, String> = vars.into_iter().collect();
    let settings = Settings::from_vars(vars.clone())?;
    let lookup = |var: &str| vars.get(var).cloned();
    let defaults = defaults();
    let names: Vec<&'static str> = defaults.iter().map(|(name, _)| *name).collect();
    let sources = Sources::read(&lookup, &names, &SECRETS)?;

    let mut rows = Vec::new();
    for (name, default) in defaults {
        rows.push(match sources.given(name) {
            Some((value, FILE)) => Row::new(name, value, "file"),
            Some((value, _)) => Row::new(name, value, "set"),
            None => Row::new(name, default_text(default), "default"),
        });
    }
    for secret in SECRETS {
        rows.push(match secret.origin(&lookup) {
            Some(var) => Row::new(var, REDACTED, "set"),
            None => Row::new(secret.name, UNSET, "default"),
        });
    }
    rows.extend(sms_rows(&settings.sms, &vars));
    Ok(rows)
}

fn default_text(default: Option<String>) -> String {
    match default {
        None => UNSET.to_owned(),
        Some(text) if text.is_empty() => "(none)".to_owned(),
        Some(text) => text,
    }
}

/// The SMS module's settings as parsed; its other variables (provider accounts and secrets)
/// are listed when set, as the sms module says they may be shown (secrets as `***`).
fn sms_rows(sms: &SmsSettings, vars: &HashMap<String, String>) -> Vec<Row> {
    let defaults = SmsSettings::default();
    let origin = |var: &str, differs: bool| match (vars.contains_key(var), differs) {
        (true, _) => "set",
        (false, true) => "file",
        (false, false) => "default",
    };
    let names = |providers: &[ProviderName]| {
        let names: Vec<&str> = providers.iter().map(|p| p.as_str()).collect();
        names.join(",")
    };
    let routes: Vec<String> = sms
        .routes
        .iter()
        .map(|route| format!("{}:{}", route.calling_code, names(&route.providers)))
        .collect();
    let config_file = vars
        .get(FILE)
        .map_or(UNSET.to_owned(), |path| path.trim().to_owned());
    let mut rows = vec![
        Row::new(
            "VCODE_SMS",
            names(&sms.default_route),
            origin("VCODE_SMS", sms.default_route != defaults.default_route),
        ),
        Row::new(
            "VCODE_SMS_ROUTES",
            default_text(Some(routes.join(";"))),
            origin("VCODE_SMS_ROUTES", !routes.is_empty()),
        ),
        Row::new(
            "VCODE_DEFAULT_LOCALE",
            sms.default_locale.to_string(),
            origin(
                "VCODE_DEFAULT_LOCALE",
                sms.default_locale != defaults.default_locale,
            ),
        ),
        Row::new(FILE, config_file, origin(FILE, false)),
    ];
    let shown: Vec<String> = rows.iter().map(|row| row.variable.clone()).collect();
    let mut others: Vec<&String> = vars
        .keys()
        .filter(|var| crate::sms::settings::is_sms_variable(var) && !shown.contains(var))
        .collect();
    others.sort();
    rows.extend(others.into_iter().map(|var| {
        let value = crate::sms::settings::shown_value(var, &vars[var]);
        Row::new(var, value, "set")
    }));
    rows
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
