//! Where an SMS setting comes from: an environment variable (through a lookup closure), else a
//! key of the config file's `[sms]` table, else a default. Every error names the variable or
//! the key; secrets come only from a variable or its `*_FILE` twin and are never shown.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::time::Duration;

use secrecy::SecretString;

/// A setting that could not be used, naming its variable or config key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting}: {reason}")]
pub struct SmsSettingsError {
    /// `VCODE_ALIYUN_ACCESS_KEY_ID`, `sms.aliyun.templates.login.template (VCODE_CONFIG_FILE)`,
    /// with the value where it is not secret.
    pub setting: String,
    pub reason: String,
}

impl SmsSettingsError {
    pub fn new(setting: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            setting: setting.into(),
            reason: reason.into(),
        }
    }
}

pub type Result<T> = std::result::Result<T, SmsSettingsError>;

/// A value and where it came from, for error messages.
pub struct Found<T> {
    pub value: T,
    pub origin: String,
}

impl<T> Found<T> {
    pub fn error(&self, reason: impl Into<String>) -> SmsSettingsError {
        SmsSettingsError::new(self.origin.clone(), reason)
    }
}

/// The variables and the `[sms]` table, with the keys read so far (to refuse unknown ones).
pub struct Source<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
    sms: Option<&'a toml::Table>,
    read_keys: RefCell<BTreeSet<String>>,
}

/// How a config key is named in errors.
pub fn key_origin(path: &str) -> String {
    format!("{path} (VCODE_CONFIG_FILE)")
}

impl<'a> Source<'a> {
    pub fn new(lookup: &'a dyn Fn(&str) -> Option<String>, sms: Option<&'a toml::Table>) -> Self {
        Self {
            lookup,
            sms,
            read_keys: RefCell::new(BTreeSet::new()),
        }
    }

    /// A variable's value, trimmed; unset or blank is `None`.
    pub fn var(&self, var: &str) -> Option<String> {
        (self.lookup)(var)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    /// The TOML value at `path` (dotted, below `sms`), recorded as known.
    pub fn key(&self, path: &str) -> Option<&'a toml::Value> {
        {
            // The key and the tables holding it.
            let mut read = self.read_keys.borrow_mut();
            for (end, _) in path.match_indices('.') {
                read.insert(path[..end].to_owned());
            }
            read.insert(path.to_owned());
        }
        let mut parts = path.split('.').skip(1);
        let mut value = self.sms?.get(parts.next()?)?;
        for part in parts {
            value = value.as_table()?.get(part)?;
        }
        Some(value)
    }

    /// The table at `path`, if any; an error if the key holds something else.
    pub fn table(&self, path: &str) -> Result<Option<&'a toml::Table>> {
        match self.key(path) {
            None => Ok(None),
            Some(toml::Value::Table(table)) => Ok(Some(table)),
            Some(_) => Err(SmsSettingsError::new(key_origin(path), "expected a table")),
        }
    }

    /// A string from `var`, else from the key `path`.
    pub fn string(&self, var: Option<&str>, path: &str) -> Result<Option<Found<String>>> {
        let in_file = self.key(path);
        if let Some(var) = var
            && let Some(value) = self.var(var)
        {
            let origin = format!("{var}={value:?}");
            return Ok(Some(Found { value, origin }));
        }
        match in_file {
            None => Ok(None),
            Some(toml::Value::String(value)) => Ok(Some(Found {
                value: value.trim().to_owned(),
                origin: key_origin(&format!("{path} = {value:?}")),
            })),
            Some(_) => Err(SmsSettingsError::new(key_origin(path), "expected a string")),
        }
    }

    /// A list of strings: `var` split on `,`, else the key's array.
    pub fn list(&self, var: Option<&str>, path: &str) -> Result<Option<Found<Vec<String>>>> {
        let in_file = self.key(path);
        if let Some(var) = var
            && let Some(value) = self.var(var)
        {
            let items = value.split(',').map(|s| s.trim().to_owned()).collect();
            let origin = format!("{var}={value:?}");
            return Ok(Some(Found {
                value: items,
                origin,
            }));
        }
        match in_file {
            None => Ok(None),
            Some(toml::Value::Array(items)) => {
                let items = items
                    .iter()
                    .map(|item| item.as_str().map(|s| s.trim().to_owned()))
                    .collect::<Option<Vec<String>>>()
                    .ok_or_else(|| {
                        SmsSettingsError::new(key_origin(path), "expected an array of strings")
                    })?;
                Ok(Some(Found {
                    value: items,
                    origin: key_origin(path),
                }))
            }
            Some(_) => Err(SmsSettingsError::new(
                key_origin(path),
                "expected an array of strings",
            )),
        }
    }

    /// Milliseconds within `range`, from `var` or the key, else `default`.
    pub fn millis(
        &self,
        var: &str,
        path: &str,
        default: Duration,
        range: std::ops::RangeInclusive<u64>,
    ) -> Result<Duration> {
        let reason = || {
            format!(
                "expected milliseconds from {} to {}",
                range.start(),
                range.end()
            )
        };
        let in_file = self.key(path);
        let millis = if let Some(value) = self.var(var) {
            value
                .parse::<u64>()
                .map_err(|_| SmsSettingsError::new(format!("{var}={value:?}"), reason()))?
        } else {
            match in_file {
                None => return Ok(default),
                Some(toml::Value::Integer(n)) => u64::try_from(*n)
                    .map_err(|_| SmsSettingsError::new(key_origin(path), reason()))?,
                Some(_) => return Err(SmsSettingsError::new(key_origin(path), reason())),
            }
        };
        if range.contains(&millis) {
            Ok(Duration::from_millis(millis))
        } else {
            Err(SmsSettingsError::new(format!("{var} or {path}"), reason()))
        }
    }

    /// A secret from `var` or the file named by `var_FILE` (a container secret), never from
    /// the config file, whose key `path` is refused so that it cannot be committed by mistake.
    pub fn secret(&self, var: &str, path: &str) -> Result<Option<SecretString>> {
        if self.key(path).is_some() {
            return Err(SmsSettingsError::new(
                key_origin(path),
                format!("secrets are not read from the config file: set {var} or {var}_FILE"),
            ));
        }
        let file_var = format!("{var}_FILE");
        match (self.var(var), self.var(&file_var)) {
            (Some(_), Some(_)) => Err(SmsSettingsError::new(
                var,
                format!("set {var} or {file_var}, not both"),
            )),
            (Some(value), None) => Ok(Some(SecretString::from(value))),
            (None, Some(file)) => {
                let content = std::fs::read_to_string(&file).map_err(|e| {
                    SmsSettingsError::new(format!("{file_var}={file:?}"), e.to_string())
                })?;
                let value = content.trim();
                if value.is_empty() {
                    return Err(SmsSettingsError::new(
                        format!("{file_var}={file:?}"),
                        "the file is empty",
                    ));
                }
                Ok(Some(SecretString::from(value.to_owned())))
            }
            (None, None) => Ok(None),
        }
    }

    /// The first key of the `[sms]` table that nothing read: a typo to refuse.
    pub fn unknown_key(&self) -> Option<String> {
        self.unknown_key_in("sms", self.sms?)
    }

    fn unknown_key_in(&self, path: &str, table: &toml::Table) -> Option<String> {
        let read = self.read_keys.borrow();
        table.iter().find_map(|(name, value)| {
            let key = format!("{path}.{name}");
            if !read.contains(&key) {
                return Some(key);
            }
            match value {
                toml::Value::Table(inner) => self.unknown_key_in(&key, inner),
                _ => None,
            }
        })
    }
}
