//! The secrets among the service's own settings: the operator routes' token, the key that
//! digests and seals codes (and the one before a rotation) and the token signing keys, the API keys' digests. Each is read from its variable or
//! its `_FILE` twin, never shown, and checked here (length, key material, randomness).

use std::sync::Arc;

use secrecy::ExposeSecret;

use crate::api_keys::ApiKeys;
use crate::config::ConfigError;
use crate::config::redact::REDACTED;
use crate::config::secret::{Secret, SecretVariable};
use crate::keyring::SecretKey;
use crate::store::redis::SENTINEL_MASTER_PASSWORD;
use crate::token::{SigningKey, parse_pem_keys};
use crate::twilio_compat::TwilioAccounts;
use crate::weak_secret::token_weakness;

/// The operator listener's bearer token: enables the stats route and guards every operator
/// route.
pub const ADMIN_TOKEN: SecretVariable =
    SecretVariable::new("VCODE_ADMIN_TOKEN", "VCODE_ADMIN_TOKEN_FILE");
pub const SECRET_KEY: SecretVariable =
    SecretVariable::new("VCODE_SECRET_KEY", "VCODE_SECRET_KEY_FILE");
pub const SECRET_KEY_PREVIOUS: SecretVariable = SecretVariable::new(
    "VCODE_SECRET_KEY_PREVIOUS",
    "VCODE_SECRET_KEY_PREVIOUS_FILE",
);
/// The verification tokens' signing keys: PEM, one or more PKCS#8 Ed25519 private keys.
pub const TOKEN_KEY: SecretVariable =
    SecretVariable::new("VCODE_TOKEN_KEY", "VCODE_TOKEN_KEY_FILE");
/// The API keys' names and digests (`name:sha256hex`, comma- or line-separated).
pub const API_KEYS: SecretVariable = SecretVariable::new("VCODE_API_KEYS", "VCODE_API_KEYS_FILE");
/// The Twilio-compatible API's accounts and API keys (`AC…:sha256hex`, `AC…/SK…:sha256hex`).
pub const TWILIO_ACCOUNTS: SecretVariable = SecretVariable::new(
    "VCODE_TWILIO_COMPAT_ACCOUNTS",
    "VCODE_TWILIO_COMPAT_ACCOUNTS_FILE",
);
/// Signs proof-of-work challenges instead of a key derived from `VCODE_SECRET_KEY`.
pub const POW_HMAC_KEY: SecretVariable =
    SecretVariable::new("VCODE_POW_HMAC_KEY", "VCODE_POW_HMAC_KEY_FILE");
/// Every secret the settings read (the SMS providers' are the sms module's).
pub const SECRETS: [SecretVariable; 8] = [
    API_KEYS,
    ADMIN_TOKEN,
    POW_HMAC_KEY,
    SECRET_KEY,
    SECRET_KEY_PREVIOUS,
    SENTINEL_MASTER_PASSWORD,
    TOKEN_KEY,
    TWILIO_ACCOUNTS,
];

/// The secret `variable` gives, if any.
pub fn secret(
    lookup: &dyn Fn(&str) -> Option<String>,
    variable: SecretVariable,
) -> Result<Option<Secret>, ConfigError> {
    Ok(variable.read(lookup)?.map(|(secret, _)| secret))
}

/// `VCODE_ADMIN_TOKEN`: long enough not to be guessed, and no block repeated or counted
/// (`weak_secret` says why a token gets a lighter test than a key).
pub fn admin_token(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Option<Secret>, ConfigError> {
    let token = at_least(lookup, ADMIN_TOKEN, 16, "use at least 16 characters")?;
    not_weak(lookup, ADMIN_TOKEN, token)
}

/// `VCODE_POW_HMAC_KEY`: as long as a key of 32 random characters, and as random.
pub fn pow_hmac_key(
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Secret>, ConfigError> {
    let reason = "use at least 32 random characters (`openssl rand -hex 32`)";
    let key = at_least(lookup, POW_HMAC_KEY, 32, reason)?;
    not_weak(lookup, POW_HMAC_KEY, key)
}

/// The secret `variable` gives, refused when shorter than `length`.
fn at_least(
    lookup: &dyn Fn(&str) -> Option<String>,
    variable: SecretVariable,
    length: usize,
    reason: &str,
) -> Result<Option<Secret>, ConfigError> {
    match variable.read(lookup)? {
        Some((secret, origin)) if secret.expose_secret().len() < length => {
            Err(ConfigError::invalid(origin, REDACTED, reason))
        }
        found => Ok(found.map(|(secret, _)| secret)),
    }
}

/// `secret` (of `variable`), refused when a block of it repeats or counts.
fn not_weak(
    lookup: &dyn Fn(&str) -> Option<String>,
    variable: SecretVariable,
    secret: Option<Secret>,
) -> Result<Option<Secret>, ConfigError> {
    let Some(secret) = secret else {
        return Ok(None);
    };
    match token_weakness(secret.expose_secret()) {
        None => Ok(Some(secret)),
        Some(reason) => Err(ConfigError::invalid(
            variable.origin(lookup).unwrap_or(variable.name),
            REDACTED,
            format!("not random: {reason}; use a random token (`openssl rand -hex 32`)"),
        )),
    }
}

/// A secret key: hex or base64 of at least 32 bytes that look random (`SecretKey::parse`).
pub fn secret_key(
    lookup: &dyn Fn(&str) -> Option<String>,
    variable: SecretVariable,
) -> Result<Option<Arc<SecretKey>>, ConfigError> {
    let Some((raw, origin)) = variable.read(lookup)? else {
        return Ok(None);
    };
    SecretKey::parse(raw.expose_secret())
        .map(|key| Some(Arc::new(key)))
        .map_err(|reason| ConfigError::invalid(origin, REDACTED, reason))
}

/// `VCODE_TOKEN_KEY` (or its file): the token signing keys, the first signs.
pub fn token_keys(
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Arc<Vec<SigningKey>>>, ConfigError> {
    let Some((pem, origin)) = TOKEN_KEY.read(lookup)? else {
        return Ok(None);
    };
    parse_pem_keys(pem.expose_secret())
        .map(|keys| Some(Arc::new(keys)))
        .map_err(|reason| ConfigError::invalid(origin, REDACTED, reason))
}

/// `VCODE_TWILIO_COMPAT_ACCOUNTS` (or its file): the Twilio-compatible API's credential
/// digests. An error names the entry, never shows it.
pub fn twilio_accounts(
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<TwilioAccounts>, ConfigError> {
    let Some((text, origin)) = TWILIO_ACCOUNTS.read(lookup)? else {
        return Ok(None);
    };
    let accounts = TwilioAccounts::parse(text.expose_secret())
        .map_err(|reason| ConfigError::invalid(origin, REDACTED, reason))?;
    match accounts.typed_entry() {
        Some(reason) => Err(ConfigError::invalid(origin, REDACTED, reason)),
        None => Ok(Some(accounts)),
    }
}

/// `VCODE_API_KEYS` (or its file): the callers' key digests. An error names the entry, never
/// shows it.
pub fn api_keys(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Option<ApiKeys>, ConfigError> {
    let Some((text, origin)) = API_KEYS.read(lookup)? else {
        return Ok(None);
    };
    let keys = ApiKeys::parse(text.expose_secret())
        .map_err(|reason| ConfigError::invalid(origin, REDACTED, reason))?;
    match keys.typed_entry() {
        Some(reason) => Err(ConfigError::invalid(origin, REDACTED, reason)),
        None => Ok(Some(keys)),
    }
}
