//! The service's settings, gathered: `Settings` holds every module's settings struct
//! (`OtpSettings`, `CaptchaSettings`, the stores', the SMS providers'…), adds the few settings
//! that are the whole service's (addresses, dev mode, secrets, in `secrets`) and the rules that
//! span several of them (`validate`). It stands above the modules it gathers; the vocabulary
//! each module writes its own settings with (text adapters, secrets, sources, errors) is
//! `crate::config`, on the ground floor. A bad value, an unknown `VCODE_*` variable or settings
//! that do not go together stop start-up with a message naming the variable; `vcode
//! check-config` prints `table`.
//!
//! Why serde and figment: each settings struct is the one definition of its variables (the
//! field's serde name *is* the variable), so the known names, the file's keys, the defaults
//! that `check-config` shows and the parsing cannot drift apart; figment layers the config file
//! under the variables, remembers which layer each value came from and points its errors at
//! the key. `envy` names no field in its errors and is unmaintained; clap's `env` reads only the
//! process environment, where `Settings::from_lookup` must also read a map. The ranges and
//! reasons stay ours: they are the product's messages.

mod secrets;
pub mod table;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use self::secrets::ADMIN_TOKEN;
use self::secrets::{
    SECRET_KEY, SECRET_KEY_PREVIOUS, SECRETS, admin_token, api_keys, pow_hmac_key, secret,
    secret_key, token_keys, twilio_accounts,
};
pub use crate::api_keys::ApiKeySettings;
use crate::api_keys::ApiKeys;
pub use crate::captcha::CaptchaSettings;
pub use crate::config::ConfigError;
use crate::config::secret::{Secret, SecretVariable};
use crate::config::sources::{self as variables, Setting, Sources, Table, settings_of};
use crate::config::text::{Flag, Millis, Secs, Whole, parse_text, show_text};
pub use crate::email::EmailSettings;
use crate::email::EmailVariables;
pub use crate::events::EventSettings;
use crate::events::EventVariables;
pub use crate::fraud::FraudSettings;
use crate::keyring::SecretKey;
pub use crate::otp::{AbuseSettings, NumberTypes, OtpSettings, Regions, TestNumbers};
use crate::postmortem::VerifyStrategy;
use crate::pow::PowSettings;
pub use crate::sms::SmsSettings;
use crate::store::postgres::{PostgresSettings, PostgresVariables};
use crate::store::redis::{RedisSettings, RedisVariables, SENTINEL_MASTER_PASSWORD};
use crate::telemetry::LogSettings;
use crate::token::SigningKey;
pub use crate::token::TokenSettings;
use crate::twilio_compat::TwilioAccounts;

/// The fields with a serde name are read here; the others are the parts' own. `Debug` (logs,
/// tests) shows every secret as `***`: each is a `secrecy` type or hides itself.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default)]
pub struct Settings {
    #[serde(rename = "VCODE_BIND", with = "address")]
    pub bind: SocketAddr,
    #[serde(skip)]
    pub store: StoreSettings,
    #[serde(skip)]
    pub otp: OtpSettings,
    #[serde(skip)]
    pub captcha: CaptchaSettings,
    #[serde(skip)]
    pub sms: SmsSettings,
    #[serde(skip)]
    pub abuse: AbuseSettings,
    /// The fraud guard (`VCODE_FRAUD_*`).
    #[serde(skip)]
    pub fraud: FraudSettings,
    /// The email channel's relay (`VCODE_EMAIL_*`); off without `VCODE_EMAIL_SMTP_URL`.
    #[serde(skip)]
    pub email: EmailSettings,
    /// The event webhooks (`VCODE_EVENTS_*`); no endpoint: no events.
    #[serde(skip)]
    pub events: EventSettings,
    /// Enables `GET /api/v1/stats` for this bearer token; without one the route does not exist.
    #[serde(skip)]
    pub admin_token: Option<Secret>,
    /// Adds the dev routes (outbox) and lets the log sender print codes. Loopback only.
    #[serde(rename = "VCODE_DEV_MODE", with = "Flag")]
    pub dev_mode: bool,
    /// Serves the demo page at `/demo` (dev mode serves it too).
    #[serde(rename = "VCODE_DEMO", with = "Flag")]
    pub demo: bool,
    #[serde(rename = "VCODE_MAX_BODY_BYTES", with = "Whole::<256, 1_048_576>")]
    pub max_body_bytes: usize,
    /// A request body not received within this is cut off.
    #[serde(rename = "VCODE_BODY_TIMEOUT_MS", with = "Millis::<100, 60_000>")]
    pub body_timeout: Duration,
    /// On SIGTERM or SIGINT: `/readyz` answers 503 at once, no new connection is taken, and the
    /// requests in flight get this long to finish.
    #[serde(rename = "VCODE_SHUTDOWN_GRACE_SECS", with = "Secs::<1, 300>")]
    pub shutdown_grace: Duration,
    /// Between the signal and the listeners' close: `/readyz` answers 503 while new requests
    /// are still served, so that a load balancer takes the instance out first.
    #[serde(rename = "VCODE_SHUTDOWN_DRAIN_MS", with = "Millis::<0, 60_000>")]
    pub shutdown_drain: Duration,
    /// The operator listener: `/metrics`, `/api/v1/stats`.
    #[serde(rename = "VCODE_ADMIN_BIND", with = "admin_address")]
    pub admin_bind: SocketAddr,
    /// How often the embedded store drops expired entries.
    #[serde(skip)]
    pub sweep_interval: Duration,
    /// How verifies read, compare and delete codes. The legacy ones reproduce the postmortem;
    /// they need dev mode and Redis.
    #[serde(rename = "VCODE_VERIFY_STRATEGY", with = "verify_strategy")]
    pub verify_strategy: VerifyStrategy,
    /// Legacy strategies only: the login's own work, between a verify's GET and its DEL.
    #[serde(rename = "VCODE_LEGACY_GAP_MS", with = "Millis::<0, 10_000>")]
    pub legacy_gap: Duration,
    /// Keys the digests and seals of codes and captcha answers; every instance sharing a store
    /// needs the same. None: a random key per process (embedded only).
    #[serde(skip)]
    pub secret_key: Option<Arc<SecretKey>>,
    /// The key before a rotation, still accepted for what it digested or sealed.
    #[serde(skip)]
    pub secret_key_previous: Option<Arc<SecretKey>>,
    #[serde(skip)]
    pub log: LogSettings,
    #[serde(skip)]
    pub pow: PowSettings,
    /// What `otp/send` needs first: `none`, `captcha`, `pow` or `captcha,pow`. Resolved into
    /// `captcha.send_requires_captcha` (whose `VCODE_SEND_REQUIRES_CAPTCHA` is its older alias)
    /// and `pow.send_requires_pow`.
    #[serde(rename = "VCODE_SEND_GATE", with = "send_gate")]
    pub send_gate: RequiredGates,
    #[serde(skip)]
    pub token: TokenSettings,
    /// The keys that sign verification tokens (`VCODE_TOKEN_KEY[_FILE]`), the first signs.
    /// None: derived from the secret key (random per process without one).
    #[serde(skip)]
    pub token_keys: Option<Arc<Vec<SigningKey>>>,
    /// Which operations need an API key (`VCODE_REQUIRE_API_KEY`).
    #[serde(skip)]
    pub api_key: ApiKeySettings,
    /// The callers' keys as names and digests (`VCODE_API_KEYS[_FILE]`).
    #[serde(skip)]
    pub api_keys: Option<ApiKeys>,
    /// The Twilio-compatible API's accounts as SIDs and digests
    /// (`VCODE_TWILIO_COMPAT_ACCOUNTS[_FILE]`); none: its paths authenticate no one.
    #[serde(skip)]
    pub twilio_accounts: Option<TwilioAccounts>,
}

/// Which gates `VCODE_SEND_GATE` requires before any code or SMS exists (the gates
/// themselves are `otp::SendGate`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequiredGates {
    pub captcha: bool,
    pub pow: bool,
}

#[derive(Clone, Debug, Default)]
pub enum StoreSettings {
    #[default]
    Embedded,
    Redis(RedisSettings),
    Postgres(PostgresSettings),
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
            store: StoreSettings::Embedded,
            otp: OtpSettings::default(),
            captcha: CaptchaSettings::default(),
            sms: SmsSettings::default(),
            abuse: AbuseSettings::default(),
            fraud: FraudSettings::default(),
            email: EmailSettings::default(),
            events: EventSettings::default(),
            admin_token: None,
            dev_mode: false,
            demo: false,
            max_body_bytes: 4096,
            body_timeout: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(10),
            shutdown_drain: Duration::ZERO,
            admin_bind: SocketAddr::from(([127, 0, 0, 1], 9091)),
            sweep_interval: Duration::from_secs(1),
            verify_strategy: VerifyStrategy::Atomic,
            legacy_gap: Duration::ZERO,
            secret_key: None,
            secret_key_previous: None,
            log: LogSettings::default(),
            pow: PowSettings::default(),
            send_gate: RequiredGates::default(),
            token: TokenSettings::default(),
            token_keys: None,
            api_key: ApiKeySettings::default(),
            api_keys: None,
            twilio_accounts: None,
        }
    }
}

/// Every setting the sources read, in the order `check-config` shows them, with per-purpose
/// template variables for `purposes`. The names are the settings types' serde names, the file
/// keys their tables': this is the list of known names.
fn all_settings(purposes: &[String]) -> Vec<Setting> {
    let top = Table::TOP;
    [
        settings_of::<Settings>(top),
        settings_of::<RedisVariables>(top),
        settings_of::<PostgresVariables>(top),
        settings_of::<OtpSettings>(top),
        settings_of::<AbuseSettings>(top),
        settings_of::<FraudSettings>(top),
        settings_of::<EventVariables>(crate::events::settings::TABLE),
        settings_of::<CaptchaSettings>(top),
        settings_of::<LogSettings>(top),
        settings_of::<PowSettings>(top),
        settings_of::<TokenSettings>(top),
        settings_of::<ApiKeySettings>(top),
        settings_of::<EmailVariables>(top),
        crate::sms::settings::settings(purposes),
    ]
    .concat()
}

/// The config file's tables.
fn tables() -> Vec<Table> {
    [
        &[Table::TOP, crate::events::settings::TABLE][..],
        &crate::sms::settings::TABLES,
    ]
    .concat()
}

/// Every secret: the service's own, the SMS providers' and the mail relay's.
fn secrets() -> Vec<SecretVariable> {
    [
        &SECRETS[..],
        &crate::sms::settings::SECRETS,
        &[crate::email::settings::SMTP_PASSWORD],
        &[crate::events::settings::WEBHOOK_SECRET],
    ]
    .concat()
}

/// Settings that may hold a password (in a URL's user info or query), so that each may also come
/// from a file, as the secrets do.
const WITH_FILES: [SecretVariable; 7] = [
    SecretVariable::new("VCODE_REDIS_URL", "VCODE_REDIS_URL_FILE"),
    SecretVariable::new(
        "VCODE_REDIS_CLUSTER_NODES",
        "VCODE_REDIS_CLUSTER_NODES_FILE",
    ),
    SecretVariable::new("VCODE_REDIS_SENTINELS", "VCODE_REDIS_SENTINELS_FILE"),
    SecretVariable::new("VCODE_DATABASE_URL", "VCODE_DATABASE_URL_FILE"),
    SecretVariable::new("VCODE_SMS_WEBHOOK_URL", "VCODE_SMS_WEBHOOK_URL_FILE"),
    SecretVariable::new("VCODE_EMAIL_SMTP_URL", "VCODE_EMAIL_SMTP_URL_FILE"),
    SecretVariable::new("VCODE_EVENTS_WEBHOOK_URL", "VCODE_EVENTS_WEBHOOK_URL_FILE"),
];

/// The sources for `lookup`: its variables over the config file. The purposes are read first,
/// for they name the per-purpose template variables.
fn sources(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Sources, ConfigError> {
    let (tables, secrets) = (tables(), secrets());
    let read = |settings| Sources::read(lookup, settings, &tables, &secrets, &WITH_FILES);
    let first = read(all_settings(&[]))?;
    let purposes: Vec<String> = first
        .extract::<OtpSettings>()?
        .purposes
        .iter()
        .map(|purpose| purpose.as_str().to_owned())
        .collect();
    read(all_settings(&purposes))
}

/// What a `VCODE_*` variable may be named: every setting's variable, and every secret's and
/// its `_FILE` twin's.
fn known_variables(sources: &Sources) -> Vec<String> {
    let names = sources
        .settings()
        .iter()
        .filter(|setting| setting.variable)
        .map(|setting| setting.name.clone());
    let secrets = secrets()
        .into_iter()
        .flat_map(|secret| [secret.name.to_owned(), secret.file.to_owned()]);
    let files = WITH_FILES.iter().map(|setting| setting.file.to_owned());
    names
        .chain(secrets)
        .chain(files)
        .chain([variables::FILE.to_owned()])
        .collect()
}

impl Settings {
    /// Settings from the process environment; unknown `VCODE_*` variables are refused.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(variables::environment()?)
    }

    /// Settings from all the variables set (the environment, or a map in tests): like
    /// [`Settings::from_lookup`], and a `VCODE_*` variable that no setting reads is refused.
    pub fn from_vars(
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let vars: HashMap<String, String> = vars.into_iter().collect();
        let lookup = |var: &str| vars.get(var).cloned();
        let sources = sources(&lookup)?;
        variables::refuse_unknown(vars.keys(), &known_variables(&sources))?;
        Self::read(&sources, &lookup)
    }

    /// Settings from any variable source (the environment, or a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let lookup: &dyn Fn(&str) -> Option<String> = &lookup;
        Self::read(&sources(lookup)?, lookup)
    }

    fn read(
        sources: &Sources,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let master_password = secret(lookup, SENTINEL_MASTER_PASSWORD)?;
        let otp: OtpSettings = sources.extract()?;
        let purposes: Vec<String> = otp.purposes.iter().map(|p| p.as_str().to_owned()).collect();
        let settings = Settings {
            store: store_settings(
                sources
                    .extract::<RedisVariables>()?
                    .settings(master_password)?,
                sources.extract::<PostgresVariables>()?.settings()?,
            )?,
            otp,
            captcha: sources.extract()?,
            abuse: sources.extract()?,
            fraud: sources.extract()?,
            email: sources
                .extract::<EmailVariables>()?
                .settings(secret(lookup, crate::email::settings::SMTP_PASSWORD)?)?,
            events: EventSettings::read(sources, lookup)?,
            log: sources.extract()?,
            pow: PowSettings {
                hmac_key: pow_hmac_key(lookup)?,
                ..sources.extract()?
            },
            token: sources.extract()?,
            token_keys: token_keys(lookup)?,
            api_key: sources.extract()?,
            api_keys: api_keys(lookup)?,
            twilio_accounts: twilio_accounts(lookup)?,
            admin_token: admin_token(lookup)?,
            secret_key: secret_key(lookup, SECRET_KEY)?,
            secret_key_previous: secret_key(lookup, SECRET_KEY_PREVIOUS)?,
            sms: SmsSettings::read(sources, lookup, &purposes)?,
            ..sources.extract()?
        };
        let settings = settings.with_send_gate(lookup)?;
        settings.validate()?;
        Ok(settings)
    }

    /// Resolves `VCODE_SEND_GATE` and its older alias `VCODE_SEND_REQUIRES_CAPTCHA`: either
    /// alone decides; both set must agree.
    fn with_send_gate(
        mut self,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let set = |var: &str| lookup(var).is_some_and(|value| !value.trim().is_empty());
        let alias = self.captcha.send_requires_captcha;
        if set("VCODE_SEND_GATE") {
            if set("VCODE_SEND_REQUIRES_CAPTCHA") && alias != self.send_gate.captcha {
                return Err(ConfigError::Inconsistent(format!(
                    "VCODE_SEND_REQUIRES_CAPTCHA={alias} disagrees with VCODE_SEND_GATE; set VCODE_SEND_GATE alone"
                )));
            }
        } else {
            self.send_gate.captcha = alias;
        }
        self.captcha.send_requires_captcha = self.send_gate.captcha;
        self.pow.send_requires_pow = self.send_gate.pow;
        Ok(self)
    }

    /// Rules that span several settings; `Application::build` checks them too.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(conflict) = self.abuse.geo_conflicts() {
            return Err(ConfigError::Inconsistent(conflict));
        }
        if self.sms.uses_log() && !self.sms.log_chosen && !self.bind.ip().is_loopback() {
            // Through the default or through any route: every code it sends is in the log.
            return Err(ConfigError::Inconsistent(format!(
                "VCODE_SMS, VCODE_SMS_ROUTES: the log sender prints codes and serves a route only on a loopback address, not {} (VCODE_BIND); choose real senders, or VCODE_SMS=log to print codes anyway",
                self.bind
            )));
        }
        if self.secret_key.is_none() && !matches!(self.store, StoreSettings::Embedded) {
            return Err(ConfigError::Inconsistent(
                "a shared store needs VCODE_SECRET_KEY (or VCODE_SECRET_KEY_FILE), the same on every instance: at least 32 random bytes, hex or base64 (`openssl rand -hex 32`)".to_owned(),
            ));
        }
        if self.secret_key.is_none() && self.secret_key_previous.is_some() {
            return Err(ConfigError::Inconsistent(
                "VCODE_SECRET_KEY_PREVIOUS is only read beside VCODE_SECRET_KEY".to_owned(),
            ));
        }
        let has_keys = self.api_keys.as_ref().is_some_and(|keys| !keys.is_empty());
        if !self.api_key.required.is_empty() && !has_keys {
            return Err(ConfigError::Inconsistent(
                "VCODE_REQUIRE_API_KEY needs keys: set VCODE_API_KEYS (or VCODE_API_KEYS_FILE) to name:sha256hex entries (`vcode api-key NAME` prints one)".to_owned(),
            ));
        }
        if self.api_key.required.is_empty() && has_keys {
            // Keys that nothing checks would let an operator believe the API is closed.
            return Err(ConfigError::Inconsistent(
                "VCODE_API_KEYS is set but VCODE_REQUIRE_API_KEY requires them nowhere: set it to send, verify or send,verify".to_owned(),
            ));
        }
        if self.admin_token.is_none() && !self.admin_bind.ip().is_loopback() {
            // The metrics tell traffic, provider failures and API key names; the stats more.
            return Err(ConfigError::Inconsistent(format!(
                "VCODE_ADMIN_BIND={} is not a loopback address: the operator routes (/metrics, /api/v1/stats) would be open to the network; set VCODE_ADMIN_TOKEN (or VCODE_ADMIN_TOKEN_FILE), which every operator route then requires, or bind a loopback address",
                self.admin_bind
            )));
        }
        let test_numbers = self
            .otp
            .test_numbers()
            .map_err(|reason| ConfigError::invalid("VCODE_TEST_NUMBERS", "", reason))?;
        if !test_numbers.is_empty()
            && !self.bind.ip().is_loopback()
            && !self.otp.test_numbers_on_public_bind
        {
            // Anyone who knows a test number and its code passes as its owner.
            return Err(ConfigError::Inconsistent(format!(
                "VCODE_TEST_NUMBERS: test numbers verify with a fixed code and are refused on the non-loopback address {} (VCODE_BIND); set VCODE_TEST_NUMBERS_ON_PUBLIC_BIND=true to serve them anyway (app-store review)",
                self.bind
            )));
        }
        if self.dev_mode && !self.bind.ip().is_loopback() {
            return Err(ConfigError::Inconsistent(format!(
                "VCODE_DEV_MODE exposes codes and is refused on the non-loopback address {} (VCODE_BIND)",
                self.bind
            )));
        }
        if self.verify_strategy.is_legacy() {
            // The legacy strategies lose codes on purpose: never where real users are.
            if !self.dev_mode {
                return Err(ConfigError::Inconsistent(format!(
                    "VCODE_VERIFY_STRATEGY={} loses codes by design and is refused outside dev mode (VCODE_DEV_MODE)",
                    self.verify_strategy
                )));
            }
            if !matches!(self.store, StoreSettings::Redis(_)) {
                return Err(ConfigError::Inconsistent(format!(
                    "VCODE_VERIFY_STRATEGY={} runs on the Redis store only (VCODE_REDIS_URL)",
                    self.verify_strategy
                )));
            }
            if self.otp.verify_by != crate::otp::VerifyBy::Phone {
                // The Go service knew no verification ids.
                return Err(ConfigError::Inconsistent(format!(
                    "VCODE_VERIFY_STRATEGY={} verifies by phone, as the Go service did: set VCODE_VERIFY_BY=phone",
                    self.verify_strategy
                )));
            }
        }
        Ok(())
    }
}

/// The one store the settings choose: Redis, PostgreSQL, or (neither) the embedded store.
fn store_settings(
    redis: Option<RedisSettings>,
    postgres: Option<PostgresSettings>,
) -> Result<StoreSettings, ConfigError> {
    match (redis, postgres) {
        (None, None) => Ok(StoreSettings::Embedded),
        (Some(redis), None) => Ok(StoreSettings::Redis(redis)),
        (None, Some(postgres)) => Ok(StoreSettings::Postgres(postgres)),
        (Some(_), Some(_)) => Err(ConfigError::Inconsistent(
            "set one store: VCODE_DATABASE_URL (PostgreSQL) or a Redis one (VCODE_REDIS_URL, \
             VCODE_REDIS_CLUSTER_NODES or VCODE_REDIS_SENTINELS), not both"
                .to_owned(),
        )),
    }
}

/// An address to listen on; `example` is shown when it does not parse.
fn parse_address(raw: &str, example: &str) -> Result<SocketAddr, String> {
    raw.parse()
        .map_err(|_| format!("expected an address such as {example}"))
}

mod address {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
        parse_text(d, |raw| parse_address(raw, "127.0.0.1:8080"))
    }

    pub fn serialize<S: Serializer>(address: &SocketAddr, s: S) -> Result<S::Ok, S::Error> {
        show_text(address, s)
    }
}

mod admin_address {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
        parse_text(d, |raw| parse_address(raw, "127.0.0.1:9091"))
    }

    pub use super::address::serialize;
}

mod verify_strategy {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<VerifyStrategy, D::Error> {
        parse_text(d, |raw| {
            VerifyStrategy::parse(raw).ok_or_else(|| {
                "expected atomic, legacy-original or legacy-postmortem-fix".to_owned()
            })
        })
    }

    pub fn serialize<S: Serializer>(strategy: &VerifyStrategy, s: S) -> Result<S::Ok, S::Error> {
        show_text(strategy.as_str(), s)
    }
}

mod send_gate {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<RequiredGates, D::Error> {
        parse_text(d, |raw| {
            let mut items: Vec<String> = raw
                .split(',')
                .map(|item| item.trim().to_ascii_lowercase())
                .collect();
            items.sort();
            let gate = |captcha, pow| Ok(RequiredGates { captcha, pow });
            match items.iter().map(String::as_str).collect::<Vec<_>>()[..] {
                ["none"] => gate(false, false),
                ["captcha"] => gate(true, false),
                ["pow"] => gate(false, true),
                ["captcha", "pow"] => gate(true, true),
                _ => Err("expected none, captcha, pow or captcha,pow".to_owned()),
            }
        })
    }

    pub fn serialize<S: Serializer>(gate: &RequiredGates, s: S) -> Result<S::Ok, S::Error> {
        let text = match (gate.captcha, gate.pow) {
            (false, false) => "none",
            (true, false) => "captcha",
            (false, true) => "pow",
            (true, true) => "captcha,pow",
        };
        show_text(text, s)
    }
}
