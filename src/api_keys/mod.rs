//! API keys for server-to-server callers: which operations require one
//! (`VCODE_REQUIRE_API_KEY`), the configured keys as names and SHA-256 digests
//! (`VCODE_API_KEYS`), and who a presented key is. Only digests are held; a key is compared in
//! time independent of its content, and only its name is ever logged or counted.

mod entries;
mod settings;

use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngExt;
use sha2::{Digest, Sha256};

use crate::domain::SendBudget;
use crate::domain::secret::constant_time_eq;
use crate::weak_secret::typed_secret_digest;

pub use self::entries::{CredentialEntry, credential_entries};
pub use self::settings::{ApiKeySettings, Operation};

/// What `vcode api-key` generates starts with this, so a leaked key is recognisable (secret
/// scanners, logs).
pub const KEY_PREFIX: &str = "vck_";
const MAX_NAME: usize = 64;

/// A configured caller's name: what logs and metrics show instead of its key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ApiKeyName(Arc<str>);

impl ApiKeyName {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A name without a key, for the tests of what names are used for.
    #[cfg(test)]
    pub(crate) fn named(name: &str) -> Self {
        Self(name.into())
    }
}

impl fmt::Display for ApiKeyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The configured keys: names and the SHA-256 of each key.
#[derive(Clone, Default)]
pub struct ApiKeys {
    keys: Vec<(ApiKeyName, [u8; 32])>,
    /// The callers whose entries set a send budget of their own.
    budgets: Vec<(ApiKeyName, SendBudget)>,
}

impl fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.keys.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("ApiKeys").field("names", &names).finish()
    }
}

impl ApiKeys {
    /// `name:sha256hex` entries separated by commas or new lines (blank lines and `#` comments
    /// skipped), each with its own send budget if it sets one (`name:sha256hex hour=N day=N`).
    /// Names are 1 to 64 of `A-Za-z0-9_.-`, each once; no digest twice.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut keys: Vec<(ApiKeyName, [u8; 32])> = Vec::new();
        let mut budgets = Vec::new();
        let entries = credential_entries(text, "name:sha256hex", |name| {
            format!(
                "expected the key's SHA-256 as 64 hex digits (`vcode api-key {name}` prints the line)"
            )
        })?;
        for CredentialEntry {
            number,
            who: name,
            digest,
            budget,
        } in entries
        {
            let valid_name = (1..=MAX_NAME).contains(&name.len())
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
            if !valid_name {
                return Err(format!(
                    "entry {number}: the name must be 1 to {MAX_NAME} of A-Za-z0-9_.-"
                ));
            }
            if keys.iter().any(|(known, _)| known.as_str() == name) {
                return Err(format!("entry {number}: the name {name} twice"));
            }
            if keys.iter().any(|(_, known)| *known == digest) {
                return Err(format!(
                    "entry {number} ({name}): the same key as another entry"
                ));
            }
            keys.push((ApiKeyName(name.into()), digest));
            if !budget.is_default() {
                budgets.push((ApiKeyName(name.into()), budget));
            }
        }
        if keys.is_empty() {
            return Err("expected at least one name:sha256hex entry".to_owned());
        }
        Ok(Self { keys, budgets })
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The callers whose entries set a send budget of their own.
    pub fn budgets(&self) -> impl Iterator<Item = (&ApiKeyName, SendBudget)> {
        self.budgets.iter().map(|(name, budget)| (name, *budget))
    }

    /// The first entry whose digest is a typed secret's (`weak_secret::typed_secret_digest`),
    /// named, never shown.
    pub fn typed_entry(&self) -> Option<String> {
        self.keys
            .iter()
            .find(|(name, digest)| typed_secret_digest(digest, name.as_str()))
            .map(|(name, _)| {
                format!("the key of {name} is a typed secret, not a drawn one (`vcode api-key {name}` draws one)")
            })
    }

    /// The name of the key `presented` is, if any. Every configured digest is compared, each
    /// in constant time, so the time says neither the key nor which entry matched.
    pub fn identify(&self, presented: &str) -> Option<&ApiKeyName> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut found = None;
        for (name, expected) in &self.keys {
            if constant_time_eq(&digest, expected) {
                found = Some(name);
            }
        }
        found
    }
}

/// Which operations need a key, and the keys: what the routes ask before the use case runs.
#[derive(Clone, Debug, Default)]
pub struct ApiKeyGate {
    required: Vec<Operation>,
    keys: ApiKeys,
}

/// Why a request was refused: no key where one is required, or not a configured one.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("missing or unknown API key")]
pub struct Unauthorized;

impl ApiKeyGate {
    pub fn new(settings: &ApiKeySettings, keys: ApiKeys) -> Self {
        Self {
            required: settings.required.clone(),
            keys,
        }
    }

    /// Whether `operation` needs a key.
    pub fn requires(&self, operation: Operation) -> bool {
        self.required.contains(&operation)
    }

    /// `Ok(Some(name))`: the caller presented `name`'s key (a tenant, whether or not
    /// `operation` requires a key); `Ok(None)`: the operation is open and the caller presented
    /// no key, or any token where no keys are configured (a proxy's own header, say). Where
    /// keys are configured a key presented is always checked: a wrong one is refused even
    /// where none is required, so that a tenant whose key is wrong never runs as a browser.
    pub fn check(
        &self,
        operation: Operation,
        presented: Option<&str>,
    ) -> Result<Option<&ApiKeyName>, Unauthorized> {
        match presented.filter(|_| !self.keys.is_empty()) {
            Some(key) => self.keys.identify(key).map(Some).ok_or(Unauthorized),
            None if self.requires(operation) => Err(Unauthorized),
            None => Ok(None),
        }
    }

    /// Whether a request presenting `presented` is checked at all (see [`check`](Self::check)).
    pub fn checks(&self, operation: Operation, presented: Option<&str>) -> bool {
        self.requires(operation) || (presented.is_some() && !self.keys.is_empty())
    }
}

/// A new key (`vck_` and 32 random bytes, base64url) and its configuration line
/// `name:sha256hex`.
pub fn generate(name: &str) -> Result<(String, String), String> {
    let mut bytes = [0u8; 32];
    rand::rng().fill(&mut bytes);
    let key = format!("{KEY_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes));
    let line = format!("{name}:{}", hex::encode(Sha256::digest(key.as_bytes())));
    ApiKeys::parse(&line)?;
    Ok((key, line))
}

#[cfg(test)]
mod tests;
