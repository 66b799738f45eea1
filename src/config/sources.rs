//! Where the settings come from, as figment layers: the optional config file's top-level keys
//! (`VCODE_CONFIG_FILE`; `code_length = 8` sets `VCODE_CODE_LENGTH`), then the variables, which
//! override it. Secrets are not among them: they come from variables only. Also here: the
//! refusal of unknown names (with the nearest known one), and the errors that name the variable
//! or key a refused value came from.

use figment::value::{Dict, Map, Value};
use figment::{Figment, Metadata, Profile, Provider};
use serde::de::DeserializeOwned;

use super::error::ConfigError;
use super::redact::redact_url_password;
use super::secret::SecretVariable;
use super::text::Text;

/// What figment calls the layers; `check-config` shows where a value came from.
pub const FILE: &str = "VCODE_CONFIG_FILE";
pub const VARIABLES: &str = "variables";

/// The config file's table that the sms module reads itself.
const SMS_TABLE: &str = "sms";

pub struct Sources {
    figment: Figment,
    file: Option<toml::Table>,
}

impl Sources {
    /// The variables that `names` lists, over the config file if `VCODE_CONFIG_FILE` names one.
    /// A blank variable counts as unset.
    pub fn read(
        lookup: &dyn Fn(&str) -> Option<String>,
        names: &[&'static str],
        secrets: &[SecretVariable],
    ) -> Result<Self, ConfigError> {
        let file = match lookup(FILE).filter(|path| !path.trim().is_empty()) {
            Some(path) => Some(crate::sms::settings::read_config_file(path.trim())?),
            None => None,
        };
        let mut from_file = Dict::new();
        for (key, value) in file.iter().flatten() {
            if key == SMS_TABLE {
                continue;
            }
            let var = variable_of(key);
            if secrets.iter().any(|secret| secret.name == var) {
                return Err(ConfigError::Inconsistent(format!(
                    "{key} ({FILE}): secrets are never read from the config file; set {var} or \
                     {var}_FILE"
                )));
            }
            if !names.contains(&var.as_str()) {
                let keys: Vec<String> = names.iter().filter_map(|name| key_of(name)).collect();
                return Err(ConfigError::Unknown {
                    what: "key in VCODE_CONFIG_FILE:",
                    nearest: nearest(key, keys.iter().map(String::as_str)),
                    name: key.clone(),
                });
            }
            let value = Value::serialize(value).map_err(|error| {
                ConfigError::invalid(format!("{key} ({FILE})"), "", error.to_string())
            })?;
            from_file.insert(var, value);
        }
        let mut from_variables = Dict::new();
        for name in names {
            if let Some(value) = lookup(name).filter(|value| !value.trim().is_empty()) {
                from_variables.insert((*name).to_owned(), Value::from(value));
            }
        }
        let figment = Figment::new()
            .merge(Layer::new(FILE, from_file))
            .merge(Layer::new(VARIABLES, from_variables));
        Ok(Self { figment, file })
    }

    /// The parsed config file, for the settings that read their own tables (SMS).
    pub fn file(&self) -> Option<&toml::Table> {
        self.file.as_ref()
    }

    /// A settings type, its fields read by their serde names.
    pub fn extract<T: DeserializeOwned>(&self) -> Result<T, ConfigError> {
        self.figment.extract().map_err(|error| self.refusal(error))
    }

    /// The text `var` was given, shown with any URL password hidden, and the layer it came
    /// from ([`FILE`] or [`VARIABLES`]); `None` when it was not given.
    pub fn given(&self, var: &str) -> Option<(String, &'static str)> {
        let value = self.figment.find_value(var).ok()?;
        let layer = match self.figment.find_metadata(var) {
            Some(metadata) if metadata.name == FILE => FILE,
            _ => VARIABLES,
        };
        Some((shown(&text_of(&value)), layer))
    }

    /// The error of a refused value, naming its variable (or its key in the config file).
    fn refusal(&self, error: figment::Error) -> ConfigError {
        let Some(var) = error.path.last() else {
            return ConfigError::Inconsistent(error.to_string());
        };
        let (value, layer) = self.given(var).unwrap_or_default();
        let setting = match (layer, key_of(var)) {
            (FILE, Some(key)) => format!("{key} ({FILE})"),
            _ => var.clone(),
        };
        ConfigError::invalid(setting, value, error.kind.to_string())
    }
}

/// The `VCODE_*` variables and `RUST_LOG` of this process. A value that is not UTF-8 is
/// refused, naming its variable, rather than ignored.
pub fn environment() -> Result<Vec<(String, String)>, ConfigError> {
    let mut vars = Vec::new();
    for (name, value) in std::env::vars_os() {
        let Some(name) = name.to_str().filter(|name| is_ours(name)) else {
            continue;
        };
        let value = value.into_string().map_err(|value| {
            ConfigError::invalid(name, value.to_string_lossy(), "not UTF-8 text")
        })?;
        vars.push((name.to_owned(), value));
    }
    Ok(vars)
}

fn is_ours(name: &str) -> bool {
    name.starts_with("VCODE_") || name == "RUST_LOG"
}

/// Refuses the first `VCODE_*` name that is neither `known` nor an SMS provider's variable,
/// suggesting the nearest known name.
pub fn refuse_unknown<'a>(
    names: impl IntoIterator<Item = &'a String>,
    known: &[&'static str],
) -> Result<(), ConfigError> {
    let mut unknown: Vec<&String> = names
        .into_iter()
        .filter(|name| name.starts_with("VCODE_"))
        .filter(|name| !known.contains(&name.as_str()))
        .filter(|name| !crate::sms::settings::is_sms_variable(name))
        .collect();
    unknown.sort();
    match unknown.first() {
        None => Ok(()),
        Some(name) => Err(ConfigError::Unknown {
            what: "variable",
            name: (*name).clone(),
            nearest: nearest(name, known.iter().copied()),
        }),
    }
}

/// The candidate closest to `name` by edit distance, if it is close enough to be a misspelling
/// (a quarter of the name's length, at least 2 edits).
fn nearest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<String> {
    let allowed = (name.len() / 4).max(2);
    candidates
        .map(|candidate| (strsim::levenshtein(name, candidate), candidate))
        .filter(|(distance, _)| *distance <= allowed)
        .min()
        .map(|(_, candidate)| candidate.to_owned())
}

/// `code_length` → `VCODE_CODE_LENGTH`.
fn variable_of(key: &str) -> String {
    format!("VCODE_{}", key.to_ascii_uppercase())
}

/// `VCODE_CODE_LENGTH` → `code_length`; `RUST_LOG` has no key.
fn key_of(var: &str) -> Option<String> {
    var.strip_prefix("VCODE_").map(str::to_ascii_lowercase)
}

/// A value as the text a variable would hold (file arrays joined by commas).
fn text_of(value: &Value) -> String {
    value
        .deserialize::<Text>()
        .map(|Text(text)| text)
        .unwrap_or_default()
}

/// `text` with the password of every URL in it hidden (a list of URLs is comma-separated).
pub fn shown(text: &str) -> String {
    text.split(',')
        .map(|item| redact_url_password(item.trim()))
        .collect::<Vec<_>>()
        .join(",")
}

/// One source's values, named for errors and `check-config`.
struct Layer {
    name: &'static str,
    values: Dict,
}

impl Layer {
    fn new(name: &'static str, values: Dict) -> Self {
        Self { name, values }
    }
}

impl Provider for Layer {
    fn metadata(&self) -> Metadata {
        Metadata::named(self.name)
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        Ok(Profile::Default.collect(self.values.clone()))
    }
}
