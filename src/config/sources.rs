//! Where the settings come from, as figment layers: the optional config file
//! (`VCODE_CONFIG_FILE`), then the variables, which override it. The settings types say what
//! may be set: each field's serde name is its variable, and the table its type belongs to
//! ([`Table`]) says where the file holds it (`code_length = 8` at the top sets
//! `VCODE_CODE_LENGTH`; `[sms.twilio] account_sid` sets `VCODE_TWILIO_ACCOUNT_SID`). So the
//! known names, the file's keys and `check-config`'s rows are all derived from the types.
//! Secrets are not among them: they come from a variable or its `_FILE` twin only. Also here:
//! the refusal of unknown names (with the nearest known one), and the errors that name the
//! variable or key a refused value came from.

use figment::value::{Dict, Map, Value};
use figment::{Figment, Metadata, Profile, Provider};
use secrecy::ExposeSecret;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::error::ConfigError;
use super::names::field_names;
use super::redact::redact_urls;
use super::secret::SecretVariable;
use super::text::Text;

/// What figment calls the layers; `check-config` shows where a value came from.
pub const FILE: &str = "VCODE_CONFIG_FILE";
pub const VARIABLES: &str = "variables";

/// Where a settings type lives in the config file, and how its variables are named there.
#[derive(Clone, Copy, Debug)]
pub struct Table {
    /// The file's table (`""` for the top level, `"sms.twilio"`).
    pub path: &'static str,
    /// What the table's variables start with: the rest, lower-cased, is the key
    /// (`VCODE_TWILIO_` + `ACCOUNT_SID` → `account_sid`).
    pub prefix: &'static str,
    /// Keys named otherwise than by that rule: (variable, key).
    pub renamed: &'static [(&'static str, &'static str)],
    /// Fields only the file can set (nested tables: texts, per-locale templates); they are not
    /// variables.
    pub file_only: &'static [&'static str],
}

impl Table {
    /// The top level of the file: `VCODE_CODE_LENGTH` is `code_length`.
    pub const TOP: Table = Table::new("", "VCODE_");

    pub const fn new(path: &'static str, prefix: &'static str) -> Self {
        Self {
            path,
            prefix,
            renamed: &[],
            file_only: &[],
        }
    }

    /// The file key of the field named `name`.
    fn key(&self, name: &str) -> String {
        let leaf = match self.renamed.iter().find(|(var, _)| *var == name) {
            Some((_, key)) => (*key).to_owned(),
            None => name
                .strip_prefix(self.prefix)
                .unwrap_or(name)
                .to_ascii_lowercase(),
        };
        join(self.path, &leaf)
    }
}

/// One setting the sources may hold.
#[derive(Clone, Debug)]
pub struct Setting {
    /// The serde name it is stored and extracted under (the variable's name).
    pub name: String,
    /// Whether a variable of that name sets it (not for file-only fields).
    pub variable: bool,
    /// The config file key that sets it, if the file can.
    pub key: Option<String>,
    /// Its default as text; `None` when unset by default.
    pub default: Option<String>,
}

impl Setting {
    /// A setting only a variable can give (a per-purpose template id).
    pub fn variable(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            variable: true,
            key: None,
            default: None,
        }
    }
}

/// The settings of type `T`, which the file holds in `table`, with their defaults.
pub fn settings_of<T>(table: Table) -> Vec<Setting>
where
    T: Serialize + Default + for<'de> Deserialize<'de>,
{
    let defaults = serde_json::to_value(T::default()).expect("settings serialize to JSON");
    field_names::<T>()
        .iter()
        .map(|name| Setting {
            name: (*name).to_owned(),
            variable: !table.file_only.contains(name),
            key: Some(table.key(name)),
            default: defaults
                .get(name)
                .and_then(|value| value.as_str())
                .map(str::to_owned),
        })
        .collect()
}

pub struct Sources {
    figment: Figment,
    settings: Vec<Setting>,
}

impl Sources {
    /// The known `settings` from the variables, over the config file if `VCODE_CONFIG_FILE`
    /// names one. A blank variable counts as unset. `tables` are the file's tables (to tell a
    /// table from a misspelt key); `secrets` are refused in the file; `with_files` are settings
    /// that may also come from the file their `_FILE` twin names (URLs that may hold a
    /// password, as a container secret).
    pub fn read(
        lookup: &dyn Fn(&str) -> Option<String>,
        settings: Vec<Setting>,
        tables: &[Table],
        secrets: &[SecretVariable],
        with_files: &[SecretVariable],
    ) -> Result<Self, ConfigError> {
        let file = match lookup(FILE).filter(|path| !path.trim().is_empty()) {
            Some(path) => Some(read_config_file(path.trim())?),
            None => None,
        };
        let mut from_file = Dict::new();
        if let Some(file) = &file {
            let reader = FileReader {
                settings: &settings,
                tables,
                secrets,
            };
            reader.read("", file, &mut from_file)?;
        }
        let mut from_variables = Dict::new();
        for setting in settings.iter().filter(|setting| setting.variable) {
            if let Some(value) = lookup(&setting.name).filter(|value| !value.trim().is_empty()) {
                from_variables.insert(setting.name.clone(), Value::from(value));
            }
        }
        for variable in with_files.iter().filter(|v| lookup(v.file).is_some()) {
            if let Some((value, _)) = variable.read(lookup)? {
                let value = value.expose_secret().to_owned();
                from_variables.insert(variable.name.to_owned(), Value::from(value));
            }
        }
        let figment = Figment::new()
            .merge(Layer::new(FILE, from_file))
            .merge(Layer::new(VARIABLES, from_variables));
        Ok(Self { figment, settings })
    }

    /// A settings type, its fields read by their serde names.
    pub fn extract<T: DeserializeOwned>(&self) -> Result<T, ConfigError> {
        self.figment.extract().map_err(|error| self.refusal(error))
    }

    /// The settings these sources know, in the order given.
    pub fn settings(&self) -> &[Setting] {
        &self.settings
    }

    /// The text `name` was given, shown with URL passwords and query values hidden, and the
    /// layer it came from ([`FILE`] or [`VARIABLES`]); `None` when it was not given.
    pub fn given(&self, name: &str) -> Option<(String, &'static str)> {
        let value = self.figment.find_value(name).ok()?;
        Some((redact_urls(&text_of(&value)), self.layer_of(name)))
    }

    /// How errors name the setting `name`: its variable, or its key when the file gave it.
    pub fn origin(&self, name: &str) -> String {
        self.origin_within(name, &[])
    }

    /// How errors name `path` within the setting `name` (a nested table's own key).
    fn origin_within(&self, name: &str, path: &[String]) -> String {
        let key = self
            .settings
            .iter()
            .find(|setting| setting.name == name)
            .and_then(|setting| setting.key.clone());
        match (self.layer_of(name), key) {
            (FILE, Some(key)) => {
                let inner: String = path.iter().map(|part| format!(".{part}")).collect();
                format!("{key}{inner} ({FILE})")
            }
            _ => name.to_owned(),
        }
    }

    fn layer_of(&self, name: &str) -> &'static str {
        match self.figment.find_metadata(name) {
            Some(metadata) if metadata.name == FILE => FILE,
            _ => VARIABLES,
        }
    }

    /// The error of a refused value, naming its variable (or its key in the config file).
    fn refusal(&self, error: figment::Error) -> ConfigError {
        let Some(name) = error.path.first() else {
            return ConfigError::Inconsistent(error.to_string());
        };
        let (value, _) = self.given(name).unwrap_or_default();
        let setting = self.origin_within(name, &error.path[1..]);
        ConfigError::invalid(setting, value, error.kind.to_string())
    }
}

/// Reads the file's tables into values under the settings' names.
struct FileReader<'a> {
    settings: &'a [Setting],
    tables: &'a [Table],
    secrets: &'a [SecretVariable],
}

impl FileReader<'_> {
    fn read(&self, path: &str, table: &toml::Table, into: &mut Dict) -> Result<(), ConfigError> {
        for (key, value) in table {
            let key = join(path, key);
            if let Some(setting) = self.settings.iter().find(|s| s.key.as_ref() == Some(&key)) {
                let value = Value::serialize(value).map_err(|error| {
                    ConfigError::invalid(format!("{key} ({FILE})"), "", error.to_string())
                })?;
                into.insert(setting.name.clone(), value);
                continue;
            }
            if let Some(secret) = self.secret_at(&key) {
                let (name, file) = (secret.name, secret.file);
                return Err(ConfigError::Inconsistent(format!(
                    "{key} ({FILE}): secrets are never read from the config file; set {name} or \
                     {file}"
                )));
            }
            match value {
                toml::Value::Table(inner) if self.tables.iter().any(|t| t.path == key) => {
                    self.read(&key, inner, into)?;
                }
                _ => {
                    let keys = self
                        .settings
                        .iter()
                        .filter_map(|setting| setting.key.as_deref())
                        .chain(self.tables.iter().map(|table| table.path));
                    return Err(ConfigError::Unknown {
                        what: "key in VCODE_CONFIG_FILE:",
                        nearest: nearest(&key, keys),
                        name: key,
                    });
                }
            }
        }
        Ok(())
    }

    /// The secret whose variable the key `key` would be.
    fn secret_at(&self, key: &str) -> Option<&SecretVariable> {
        let (path, leaf) = key.rsplit_once('.').unwrap_or(("", key));
        let table = self.tables.iter().find(|table| table.path == path)?;
        let variable = format!("{}{}", table.prefix, leaf.to_ascii_uppercase());
        self.secrets.iter().find(|secret| secret.name == variable)
    }
}

/// Reads and parses the TOML file at `path`, naming `VCODE_CONFIG_FILE` on failure.
fn read_config_file(path: &str) -> Result<toml::Table, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|error| ConfigError::invalid(FILE, path, error.to_string()))?;
    text.parse::<toml::Table>()
        .map_err(|error| ConfigError::invalid(FILE, path, error.to_string().trim().to_owned()))
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

/// Variables a release retired, and why (what a deployment that sets one should do instead).
const RETIRED: &[(&str, &str)] = &[
    (
        "VCODE_FRAUD_MIN_SENDS",
        "the fraud guard's per-minute round is gone (2026-12-06); its levels judge every send \
         (VCODE_FRAUD_EVIDENCE sets how many unexplained sends a level may have)",
    ),
    (
        "VCODE_FRAUD_SURGE_FLOOR",
        "the fraud guard's per-minute round is gone (2026-12-06); its levels judge every send \
         (VCODE_FRAUD_EVIDENCE sets how many unexplained sends a level may have)",
    ),
    (
        "VCODE_FRAUD_SURGE_FACTOR",
        "the fraud guard's per-minute round is gone (2026-12-06); its levels judge a surge \
         against each range's own history",
    ),
    (
        "VCODE_REDIS_INDEX_EVERY_ID",
        "renamed VCODE_REDIS_OLDER_INSTANCES (2026-12-07): during a rolling upgrade it also \
         writes verifications under the key and binding older builds read",
    ),
];

/// Whether start-up refuses `name` as retired (documented as such, never accepted).
pub fn is_retired(name: &str) -> bool {
    RETIRED.iter().any(|(retired, _)| *retired == name)
}

/// Refuses the first `VCODE_*` name that is not `known`, suggesting the nearest known name
/// (a retired one says why it is gone).
/// Nothing of its value is shown: a misspelt secret is still a secret.
pub fn refuse_unknown<'a>(
    names: impl IntoIterator<Item = &'a String>,
    known: &[String],
) -> Result<(), ConfigError> {
    let mut unknown: Vec<&String> = names
        .into_iter()
        .filter(|name| name.starts_with("VCODE_"))
        .filter(|name| !known.contains(name))
        .collect();
    unknown.sort();
    if let Some((name, why)) = unknown
        .iter()
        .find_map(|name| RETIRED.iter().find(|(retired, _)| retired == name))
    {
        return Err(ConfigError::Retired {
            name: (*name).to_owned(),
            why,
        });
    }
    match unknown.first() {
        None => Ok(()),
        Some(name) => Err(ConfigError::Unknown {
            what: "variable",
            name: (*name).clone(),
            nearest: nearest(name, known.iter().map(String::as_str)),
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

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// A value as the text a variable would hold (file arrays joined by commas; a table, which
/// no variable holds, as its TOML-like form).
fn text_of(value: &Value) -> String {
    match value.deserialize::<Text>() {
        Ok(Text(text)) => text,
        Err(_) => "(a table)".to_owned(),
    }
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
