//! Settings, read from `VCODE_*` environment variables and checked before anything starts: a
//! bad value stops start-up with a message naming the variable.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::captcha::{CaptchaSettings, render};
use crate::client_ip::TrustedProxies;
use crate::domain::{CodeLength, Purpose, Region};
use crate::keyring::SecretKey;
pub use crate::otp::{AbuseSettings, OtpSettings};
use crate::redact::{REDACTED, redact_url_password};
use crate::store::ResendPolicy;
use crate::store::redis::legacy::VerifyStrategy;
use crate::store::redis::{RedisCredentials, RedisSettings, RedisTopology, read_ca_file};

/// `Debug` (what `vcode check-config` prints, and what logs may hold) shows `***` for every
/// password and token: see [`REDACTED`].
#[derive(Clone)]
pub struct Settings {
    pub bind: SocketAddr,
    pub store: StoreSettings,
    pub otp: OtpSettings,
    pub captcha: CaptchaSettings,
    pub sms: SmsSettings,
    pub abuse: AbuseSettings,
    /// Enables `GET /api/v1/stats` for this bearer token; without one the route does not exist.
    pub admin_token: Option<String>,
    /// Adds the dev routes (outbox) and lets the log sender print codes. Loopback only.
    pub dev_mode: bool,
    pub max_body_bytes: usize,
    /// A request body not received within this is cut off (`VCODE_BODY_TIMEOUT_MS`).
    pub body_timeout: Duration,
    /// The operator listener: `/metrics`, `/api/v1/stats` (`VCODE_ADMIN_BIND`).
    pub admin_bind: SocketAddr,
    /// Whether `VCODE_SMS` was given: the code-printing `log` sender, when not chosen, runs
    /// only on a loopback bind.
    pub sms_chosen: bool,
    /// How often the embedded store drops expired entries.
    pub sweep_interval: Duration,
    /// How verifies read, compare and delete codes (`VCODE_VERIFY_STRATEGY`). The legacy ones
    /// reproduce the postmortem; they need dev mode and Redis.
    pub verify_strategy: VerifyStrategy,
    /// Legacy strategies only: the login's own work, between a verify's GET and its DEL.
    pub legacy_gap: Duration,
    /// Keys the digests and seals of codes and captcha answers (`VCODE_SECRET_KEY`); every
    /// instance sharing a store needs the same. None: a random key per process (embedded only).
    pub secret_key: Option<Arc<SecretKey>>,
    /// The key before a rotation, still accepted for what it digested or sealed.
    pub secret_key_previous: Option<Arc<SecretKey>>,
}

/// `Debug` hides the passwords of the Redis URLs (`RedisTopology`'s own `Debug`).
#[derive(Clone, Debug)]
pub enum StoreSettings {
    Embedded,
    Redis(RedisSettings),
}

// SMS settings (providers, routes, templates) are the sms module's own.
pub use crate::sms::SmsSettings;

impl Default for Settings {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 8080)),
            store: StoreSettings::Embedded,
            otp: OtpSettings::default(),
            captcha: CaptchaSettings::default(),
            sms: SmsSettings::default(),
            abuse: AbuseSettings::default(),
            admin_token: None,
            dev_mode: false,
            max_body_bytes: 4096,
            body_timeout: Duration::from_secs(10),
            admin_bind: SocketAddr::from(([127, 0, 0, 1], 9091)),
            sms_chosen: false,
            sweep_interval: Duration::from_secs(1),
            verify_strategy: VerifyStrategy::Atomic,
            legacy_gap: Duration::ZERO,
            secret_key: None,
            secret_key_previous: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{var}={value:?}: {reason}")]
    Invalid {
        var: &'static str,
        value: String,
        reason: String,
    },
    #[error("{0}")]
    Inconsistent(String),
    /// An SMS setting (the sms module parses them): names its variable or config key.
    #[error(transparent)]
    Sms(#[from] crate::sms::SmsSettingsError),
}

/// Reads one variable through `lookup` and parses it, naming the variable on failure.
struct Env<F> {
    lookup: F,
}

impl<F: Fn(&str) -> Option<String>> Env<F> {
    fn get(&self, var: &'static str) -> Option<String> {
        (self.lookup)(var).filter(|value| !value.trim().is_empty())
    }

    fn parse<T>(
        &self,
        var: &'static str,
        default: T,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<T, ConfigError> {
        match self.get(var) {
            None => Ok(default),
            Some(value) => {
                parse(value.trim()).map_err(|reason| ConfigError::Invalid { var, value, reason })
            }
        }
    }

    fn number(
        &self,
        var: &'static str,
        default: u64,
        range: std::ops::RangeInclusive<u64>,
    ) -> Result<u64, ConfigError> {
        self.parse(var, default, |raw| {
            raw.parse::<u64>()
                .ok()
                .filter(|n| range.contains(n))
                .ok_or_else(|| {
                    format!(
                        "expected a whole number from {} to {}",
                        range.start(),
                        range.end()
                    )
                })
        })
    }

    fn secs(
        &self,
        var: &'static str,
        default: Duration,
        range: std::ops::RangeInclusive<u64>,
    ) -> Result<Duration, ConfigError> {
        self.number(var, default.as_secs(), range)
            .map(Duration::from_secs)
    }

    fn millis(
        &self,
        var: &'static str,
        default: Duration,
        range: std::ops::RangeInclusive<u64>,
    ) -> Result<Duration, ConfigError> {
        self.number(var, default.as_millis() as u64, range)
            .map(Duration::from_millis)
    }

    fn flag(&self, var: &'static str, default: bool) -> Result<bool, ConfigError> {
        self.parse(var, default, |raw| {
            match raw.to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => Ok(true),
                "0" | "false" | "no" | "off" => Ok(false),
                _ => Err("expected true or false (or 1/0, yes/no, on/off)".to_owned()),
            }
        })
    }
}

/// A secret key from `var`, or from the file `<var>_FILE` names (container secrets); not both.
fn secret_key<F: Fn(&str) -> Option<String>>(
    env: &Env<F>,
    var: &'static str,
) -> Result<Option<Arc<SecretKey>>, ConfigError> {
    let file_var: &'static str = match var {
        "VCODE_SECRET_KEY" => "VCODE_SECRET_KEY_FILE",
        _ => "VCODE_SECRET_KEY_PREVIOUS_FILE",
    };
    let hidden = |reason: String, var: &'static str| ConfigError::Invalid {
        var,
        value: REDACTED.to_owned(),
        reason,
    };
    let raw = match (env.get(var), env.get(file_var)) {
        (Some(_), Some(_)) => {
            return Err(ConfigError::Inconsistent(format!(
                "set {var} or {file_var}, not both"
            )));
        }
        (Some(raw), None) => (raw, var),
        (None, Some(path)) => {
            let raw =
                std::fs::read_to_string(path.trim()).map_err(|error| ConfigError::Invalid {
                    var: file_var,
                    value: path.clone(),
                    reason: format!("cannot read it: {error}"),
                })?;
            (raw, file_var)
        }
        (None, None) => return Ok(None),
    };
    SecretKey::parse(&raw.0)
        .map(|key| Some(Arc::new(key)))
        .map_err(|reason| hidden(reason, raw.1))
}

/// The Redis topology: one node, a Cluster or Sentinel, exactly one of them; none of them is
/// the embedded store.
fn redis_topology<F: Fn(&str) -> Option<String>>(
    env: &Env<F>,
) -> Result<Option<RedisTopology>, ConfigError> {
    let url = env.get("VCODE_REDIS_URL");
    let nodes = env.get("VCODE_REDIS_CLUSTER_NODES");
    let sentinels = env.get("VCODE_REDIS_SENTINELS");
    let master = env.get("VCODE_REDIS_SENTINEL_MASTER");
    let set: Vec<&str> = [
        ("VCODE_REDIS_URL", url.is_some()),
        ("VCODE_REDIS_CLUSTER_NODES", nodes.is_some()),
        (
            "VCODE_REDIS_SENTINELS",
            sentinels.is_some() || master.is_some(),
        ),
    ]
    .into_iter()
    .filter_map(|(var, is_set)| is_set.then_some(var))
    .collect();
    if set.len() > 1 {
        return Err(ConfigError::Inconsistent(format!(
            "set one of VCODE_REDIS_URL (one node), VCODE_REDIS_CLUSTER_NODES (Cluster) or \
             VCODE_REDIS_SENTINELS with VCODE_REDIS_SENTINEL_MASTER (Sentinel), not {}",
            set.join(" and ")
        )));
    }
    let master_credentials = sentinel_master_credentials(env)?;
    if master_credentials.is_some() && sentinels.is_none() {
        return Err(ConfigError::Inconsistent(
            "VCODE_REDIS_SENTINEL_MASTER_USERNAME and VCODE_REDIS_SENTINEL_MASTER_PASSWORD log \
             in to the primary that Sentinel names and need VCODE_REDIS_SENTINELS; for one node \
             or a Cluster, put user and password in the URLs"
                .to_owned(),
        ));
    }
    if let Some(url) = url {
        if !is_redis_url(&url) {
            return Err(ConfigError::Invalid {
                var: "VCODE_REDIS_URL",
                value: redact_url_password(&url),
                reason: "expected redis://host:port[/db]".to_owned(),
            });
        }
        refuse_insecure("VCODE_REDIS_URL", &url)?;
        return Ok(Some(RedisTopology::Single { url }));
    }
    if let Some(nodes) = nodes {
        let nodes = redis_urls("VCODE_REDIS_CLUSTER_NODES", &nodes)?;
        return Ok(Some(RedisTopology::Cluster { nodes }));
    }
    match (sentinels, master) {
        (None, None) => Ok(None),
        (Some(sentinels), Some(master)) => {
            let sentinels = redis_urls("VCODE_REDIS_SENTINELS", &sentinels)?;
            let name_char = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
            if !master.chars().all(name_char) {
                return Err(ConfigError::Invalid {
                    var: "VCODE_REDIS_SENTINEL_MASTER",
                    value: master,
                    reason: "expected the name the sentinels monitor, such as mymaster".to_owned(),
                });
            }
            Ok(Some(RedisTopology::Sentinel {
                sentinels,
                master,
                master_credentials,
            }))
        }
        _ => Err(ConfigError::Inconsistent(
            "VCODE_REDIS_SENTINELS and VCODE_REDIS_SENTINEL_MASTER go together".to_owned(),
        )),
    }
}

/// The login to the data nodes behind Sentinel; the sentinels' own is in their URLs.
fn sentinel_master_credentials<F: Fn(&str) -> Option<String>>(
    env: &Env<F>,
) -> Result<Option<RedisCredentials>, ConfigError> {
    let username = env.get("VCODE_REDIS_SENTINEL_MASTER_USERNAME");
    match (username, env.get("VCODE_REDIS_SENTINEL_MASTER_PASSWORD")) {
        (None, None) => Ok(None),
        (username, Some(password)) => Ok(Some(RedisCredentials { username, password })),
        (Some(_), None) => Err(ConfigError::Inconsistent(
            "VCODE_REDIS_SENTINEL_MASTER_USERNAME needs VCODE_REDIS_SENTINEL_MASTER_PASSWORD"
                .to_owned(),
        )),
    }
}

/// `VCODE_REDIS_CA_FILE`: a readable PEM file of CA certificates, for `rediss://` URLs only
/// (with `redis://` it would protect nothing).
fn redis_ca_file<F: Fn(&str) -> Option<String>>(
    env: &Env<F>,
    topology: &RedisTopology,
) -> Result<Option<PathBuf>, ConfigError> {
    const VAR: &str = "VCODE_REDIS_CA_FILE";
    let Some(raw) = env.get(VAR) else {
        return Ok(None);
    };
    let first_url = match topology {
        RedisTopology::Single { url } => url,
        RedisTopology::Cluster { nodes } => &nodes[0],
        RedisTopology::Sentinel { sentinels, .. } => &sentinels[0],
    };
    if !first_url.starts_with("rediss://") {
        return Err(ConfigError::Inconsistent(format!(
            "{VAR} verifies rediss:// servers, but the Redis URLs are redis://"
        )));
    }
    let path = PathBuf::from(raw.trim());
    read_ca_file(&path).map_err(|reason| ConfigError::Invalid {
        var: VAR,
        value: raw,
        reason,
    })?;
    Ok(Some(path))
}

fn is_redis_url(url: &str) -> bool {
    url.starts_with("redis://") || url.starts_with("rediss://")
}

/// `#insecure` would make the redis crate accept any certificate: never honoured.
fn refuse_insecure(var: &'static str, url: &str) -> Result<(), ConfigError> {
    match url.split_once('#') {
        Some((_, "insecure")) => Err(ConfigError::Invalid {
            var,
            value: redact_url_password(url),
            reason: "#insecure would skip verifying the server's certificate; vcode always \
                     verifies it (VCODE_REDIS_CA_FILE trusts a private CA)"
                .to_owned(),
        }),
        _ => Ok(()),
    }
}

/// A comma-separated list of one or more `redis://` or `rediss://` URLs, all of one scheme:
/// the nodes found through them are reached the same way.
fn redis_urls(var: &'static str, raw: &str) -> Result<Vec<String>, ConfigError> {
    let urls: Vec<String> = raw.split(',').map(|url| url.trim().to_owned()).collect();
    let shown = || {
        urls.iter()
            .map(|url| redact_url_password(url))
            .collect::<Vec<_>>()
            .join(",")
    };
    if !urls.iter().all(|url| is_redis_url(url)) {
        return Err(ConfigError::Invalid {
            var,
            value: shown(),
            reason: "expected comma-separated redis://host:port URLs".to_owned(),
        });
    }
    let tls = urls
        .iter()
        .filter(|url| url.starts_with("rediss://"))
        .count();
    if tls != 0 && tls != urls.len() {
        return Err(ConfigError::Invalid {
            var,
            value: shown(),
            reason: "mixes redis:// and rediss://; use one scheme for all".to_owned(),
        });
    }
    for url in &urls {
        refuse_insecure(var, url)?;
    }
    Ok(urls)
}

// The `Debug` impls below name every field (destructuring): a field added to these settings
// does not compile until it is printed here, in clear or hidden.
impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Settings {
            bind,
            store,
            otp,
            captcha,
            sms,
            abuse,
            admin_token,
            dev_mode,
            max_body_bytes,
            body_timeout,
            admin_bind,
            sms_chosen,
            sweep_interval,
            verify_strategy,
            legacy_gap,
            secret_key,
            secret_key_previous,
        } = self;
        f.debug_struct("Settings")
            .field("bind", bind)
            .field("store", store)
            .field("otp", otp)
            .field("captcha", captcha)
            .field("sms", sms)
            .field("abuse", abuse)
            // `Some("***")` or `None`: whether the stats route exists, not its token.
            .field("admin_token", &admin_token.as_ref().map(|_| REDACTED))
            .field("dev_mode", dev_mode)
            .field("max_body_bytes", max_body_bytes)
            .field("body_timeout", body_timeout)
            .field("admin_bind", admin_bind)
            .field("sms_chosen", sms_chosen)
            .field("sweep_interval", sweep_interval)
            .field("verify_strategy", verify_strategy)
            .field("legacy_gap", legacy_gap)
            .field("secret_key", &secret_key.as_ref().map(|_| REDACTED))
            .field(
                "secret_key_previous",
                &secret_key_previous.as_ref().map(|_| REDACTED),
            )
            .finish()
    }
}

impl Settings {
    /// Settings from the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|var| std::env::var(var).ok())
    }

    /// Settings from any variable source (the environment, or a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let env = Env { lookup };
        let defaults = Settings::default();
        let otp_defaults = OtpSettings::default();

        let bind = env.parse("VCODE_BIND", defaults.bind, |raw| {
            raw.parse()
                .map_err(|_| "expected an address such as 127.0.0.1:8080".to_owned())
        })?;

        let store = match redis_topology(&env)? {
            None => StoreSettings::Embedded,
            Some(topology) => StoreSettings::Redis(RedisSettings {
                ca_file: redis_ca_file(&env, &topology)?,
                topology,
                connect_timeout: env.millis(
                    "VCODE_REDIS_CONNECT_TIMEOUT_MS",
                    Duration::from_millis(1000),
                    10..=60_000,
                )?,
                command_timeout: env.millis(
                    "VCODE_REDIS_COMMAND_TIMEOUT_MS",
                    Duration::from_millis(500),
                    10..=60_000,
                )?,
            }),
        };

        let code_length = env.parse("VCODE_CODE_LENGTH", otp_defaults.code_length, |raw| {
            raw.parse::<u8>()
                .ok()
                .and_then(CodeLength::new)
                .ok_or_else(|| {
                    format!(
                        "expected a length from {} to {}",
                        CodeLength::MIN,
                        CodeLength::MAX
                    )
                })
        })?;
        let otp = OtpSettings {
            code_length,
            code_ttl: env.secs("VCODE_CODE_TTL_SECS", otp_defaults.code_ttl, 1..=86_400)?,
            resend_cooldown: env.secs(
                "VCODE_RESEND_COOLDOWN_SECS",
                otp_defaults.resend_cooldown,
                0..=86_400,
            )?,
            max_attempts: env.number(
                "VCODE_MAX_ATTEMPTS",
                u64::from(otp_defaults.max_attempts),
                1..=100,
            )? as u32,
            resend: env.parse("VCODE_RESEND", otp_defaults.resend, |raw| match raw {
                "reuse" => Ok(ResendPolicy::Reuse),
                "rotate" => Ok(ResendPolicy::Rotate),
                _ => Err("expected reuse or rotate".to_owned()),
            })?,
            purposes: env.parse("VCODE_PURPOSES", otp_defaults.purposes.clone(), |raw| {
                let purposes: Vec<Purpose> = raw
                    .split(',')
                    .map(str::trim)
                    .filter(|item| !item.is_empty())
                    .map(|item| {
                        Purpose::parse(item).ok_or(format!("{item:?} is not [a-z0-9_-]{{1,32}}"))
                    })
                    .collect::<Result<_, _>>()?;
                if purposes.is_empty() {
                    return Err("expected at least one purpose".to_owned());
                }
                Ok(purposes)
            })?,
            default_region: env.parse(
                "VCODE_DEFAULT_REGION",
                otp_defaults.default_region,
                |raw| {
                    Region::parse(raw).ok_or_else(|| {
                        "expected an ISO 3166 region code such as CN or US".to_owned()
                    })
                },
            )?,
        };

        let captcha_defaults = CaptchaSettings::default();
        let captcha = CaptchaSettings {
            ttl: env.secs("VCODE_CAPTCHA_TTL_SECS", captcha_defaults.ttl, 10..=3600)?,
            length: env.number(
                "VCODE_CAPTCHA_LENGTH",
                captcha_defaults.length as u64,
                render::MIN_LEN as u64..=render::MAX_LEN as u64,
            )? as usize,
            width: env.number(
                "VCODE_CAPTCHA_WIDTH",
                u64::from(captcha_defaults.width),
                u64::from(render::MIN_WIDTH)..=u64::from(render::MAX_WIDTH),
            )? as u32,
            height: env.number(
                "VCODE_CAPTCHA_HEIGHT",
                u64::from(captcha_defaults.height),
                u64::from(render::MIN_HEIGHT)..=u64::from(render::MAX_HEIGHT),
            )? as u32,
            send_requires_captcha: env.flag("VCODE_SEND_REQUIRES_CAPTCHA", false)?,
        };

        let abuse_defaults = AbuseSettings::default();
        let limit = |var, default: u32| -> Result<u32, ConfigError> {
            env.number(var, u64::from(default), 0..=1_000_000)
                .map(|n| n as u32)
        };
        let abuse = AbuseSettings {
            sends_per_phone_hour: limit(
                "VCODE_QUOTA_PHONE_HOUR",
                abuse_defaults.sends_per_phone_hour,
            )?,
            sends_per_phone_day: limit(
                "VCODE_QUOTA_PHONE_DAY",
                abuse_defaults.sends_per_phone_day,
            )?,
            sends_per_ip_hour: limit("VCODE_QUOTA_IP_HOUR", abuse_defaults.sends_per_ip_hour)?,
            failed_verifies_per_phone_day: limit(
                "VCODE_QUOTA_PHONE_FAILS_DAY",
                abuse_defaults.failed_verifies_per_phone_day,
            )?,
            failed_verifies_per_client_day: limit(
                "VCODE_QUOTA_CLIENT_FAILS_DAY",
                abuse_defaults.failed_verifies_per_client_day,
            )?,
            captchas_per_client_minute: limit(
                "VCODE_QUOTA_CAPTCHA_IP_MINUTE",
                abuse_defaults.captchas_per_client_minute,
            )?,
            client_ipv6_prefix: env.number(
                "VCODE_CLIENT_IPV6_PREFIX",
                u64::from(abuse_defaults.client_ipv6_prefix),
                32..=128,
            )? as u8,
            sends_global_minute: limit(
                "VCODE_QUOTA_GLOBAL_MINUTE",
                abuse_defaults.sends_global_minute,
            )?,
            allowed_regions: env.parse("VCODE_ALLOWED_REGIONS", Vec::new(), |raw| {
                raw.split(',')
                    .map(str::trim)
                    .filter(|item| !item.is_empty())
                    .map(|item| {
                        Region::parse(item)
                            .ok_or(format!("{item:?} is not a region code such as CN"))
                    })
                    .collect()
            })?,
            trusted_proxies: env.parse(
                "VCODE_TRUSTED_PROXIES",
                TrustedProxies::default(),
                TrustedProxies::parse,
            )?,
            ..abuse_defaults
        };
        let admin_token = env.get("VCODE_ADMIN_TOKEN");
        if admin_token.as_ref().is_some_and(|token| token.len() < 16) {
            return Err(ConfigError::Invalid {
                var: "VCODE_ADMIN_TOKEN",
                value: "<hidden>".to_owned(),
                reason: "use at least 16 characters".to_owned(),
            });
        }

        // SMS: delegated to the sms module (variables over VCODE_CONFIG_FILE's [sms] table).
        let sms = SmsSettings::from_lookup(|var| (env.lookup)(var))?;

        let settings = Settings {
            bind,
            store,
            otp,
            captcha,
            sms,
            abuse,
            admin_token,
            dev_mode: env.flag("VCODE_DEV_MODE", false)?,
            body_timeout: env.millis(
                "VCODE_BODY_TIMEOUT_MS",
                defaults.body_timeout,
                100..=60_000,
            )?,
            admin_bind: env.parse("VCODE_ADMIN_BIND", defaults.admin_bind, |raw| {
                raw.parse()
                    .map_err(|_| "expected an address such as 127.0.0.1:9091".to_owned())
            })?,
            sms_chosen: env.get("VCODE_SMS").is_some(),
            max_body_bytes: env.number(
                "VCODE_MAX_BODY_BYTES",
                defaults.max_body_bytes as u64,
                256..=1_048_576,
            )? as usize,
            sweep_interval: defaults.sweep_interval,
            verify_strategy: env.parse(
                "VCODE_VERIFY_STRATEGY",
                defaults.verify_strategy,
                |raw| {
                    VerifyStrategy::parse(raw).ok_or_else(|| {
                        "expected atomic, legacy-original or legacy-postmortem-fix".to_owned()
                    })
                },
            )?,
            legacy_gap: env.millis("VCODE_LEGACY_GAP_MS", defaults.legacy_gap, 0..=10_000)?,
            secret_key: secret_key(&env, "VCODE_SECRET_KEY")?,
            secret_key_previous: secret_key(&env, "VCODE_SECRET_KEY_PREVIOUS")?,
        };
        settings.validate()?;
        Ok(settings)
    }

    /// Rules that span several settings; `Application::build` checks them too.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !self.sms_chosen && self.sms.uses_log() && !self.bind.ip().is_loopback() {
            return Err(ConfigError::Inconsistent(format!(
                "VCODE_SMS is not set: the default log sender prints codes and runs only on a loopback address, not {} (VCODE_BIND); choose a sender with VCODE_SMS (VCODE_SMS=log to print codes anyway)",
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
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

    /// Settings from `vars`; a shared store gets a secret key unless `vars` name one.
    fn settings(vars: &[(&str, &str)]) -> Result<Settings, ConfigError> {
        let mut vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let shared = vars.keys().any(|var| var.starts_with("VCODE_REDIS_"));
        let keyed = vars.keys().any(|var| var.starts_with("VCODE_SECRET_KEY"));
        if shared && !keyed {
            vars.insert("VCODE_SECRET_KEY".into(), KEY.into());
        }
        Settings::from_lookup(|var| vars.get(var).cloned())
    }

    #[test]
    fn a_shared_store_needs_a_secret_key_and_keys_are_never_shown() {
        let url = ("VCODE_REDIS_URL", "redis://127.0.0.1:6379");
        let error = settings(&[url, ("VCODE_SECRET_KEY", "")]).unwrap_err();
        assert!(error.to_string().contains("VCODE_SECRET_KEY"), "{error}");
        let error = settings(&[url, ("VCODE_SECRET_KEY", "abcd")]).unwrap_err();
        assert!(error.to_string().contains("VCODE_SECRET_KEY"), "{error}");
        assert!(!error.to_string().contains("abcd"), "{error}");
        let s = settings(&[
            url,
            ("VCODE_SECRET_KEY", KEY),
            ("VCODE_SECRET_KEY_PREVIOUS", KEY),
        ])
        .unwrap();
        assert!(s.secret_key.is_some() && s.secret_key_previous.is_some());
        assert_debug_hides(&s, &[KEY, "0011223344"], &["secret_key"]);
        let dir = std::env::temp_dir().join(format!("vcode-key-{}", std::process::id()));
        std::fs::write(&dir, format!("{KEY}\n")).unwrap();
        let from_file = settings(&[url, ("VCODE_SECRET_KEY_FILE", dir.to_str().unwrap())]).unwrap();
        assert!(from_file.secret_key.is_some());
        let both = settings(&[
            url,
            ("VCODE_SECRET_KEY", KEY),
            ("VCODE_SECRET_KEY_FILE", dir.to_str().unwrap()),
        ]);
        assert!(both.is_err());
        std::fs::remove_file(dir).unwrap();
        // Embedded: optional (a random key per process).
        assert!(settings(&[]).unwrap().secret_key.is_none());
    }

    /// The Redis store's settings, or a panic.
    fn redis_of(s: &Settings) -> &RedisSettings {
        match &s.store {
            StoreSettings::Redis(redis) => redis,
            StoreSettings::Embedded => panic!("expected the Redis store"),
        }
    }

    /// Both `Debug` forms (`{:#?}` is what `vcode check-config` prints): none shows a
    /// secret, each shows every expected piece.
    fn assert_debug_hides(s: &Settings, secrets: &[&str], shown: &[&str]) {
        for debug in [format!("{s:?}"), format!("{s:#?}")] {
            for secret in secrets {
                assert!(!debug.contains(secret), "{secret:?} shown in {debug}");
            }
            for piece in shown {
                assert!(debug.contains(piece), "{piece:?} missing from {debug}");
            }
        }
    }

    /// What the redis crate will connect with: `host:port` and the password.
    fn connection_info(url: &str) -> (String, Option<String>) {
        let client = redis::Client::open(url).unwrap();
        let info = client.get_connection_info();
        (
            info.addr().to_string(),
            info.redis_settings().password().map(str::to_owned),
        )
    }

    #[test]
    fn debug_hides_the_password_of_a_single_redis_url() {
        for (url, secrets, shown, host, password) in [
            (
                "redis://:s3cret@127.0.0.1:6390/0",
                &["s3cret"][..],
                &["redis://:***@127.0.0.1:6390/0"][..],
                "127.0.0.1:6390",
                "s3cret",
            ),
            (
                "redis://vcode:s3cret@redis.internal:6379/2",
                &["s3cret"],
                &["redis://vcode:***@redis.internal:6379/2"],
                "redis.internal:6379",
                "s3cret",
            ),
            (
                "rediss://default:s3cret@cache.example.com:6380",
                &["s3cret"],
                &["rediss://default:***@cache.example.com:6380"],
                "cache.example.com:6380",
                "s3cret",
            ),
            // `@` and `:` in the password: the host is after the last `@`.
            (
                "redis://vcode:p@ss:w0rd@10.1.2.3:6379/1",
                &["p@ss", "ss:w0rd", "w0rd", "p%40ss"],
                &["redis://vcode:***@10.1.2.3:6379/1"],
                "10.1.2.3:6379",
                "p@ss:w0rd",
            ),
            // Percent-encoded, hidden as written; the redis crate decodes it.
            (
                "redis://:s3cr%40t%3A1@10.1.2.3:6379",
                &["s3cr", "%40t", "t%3A1"],
                &["redis://:***@10.1.2.3:6379"],
                "10.1.2.3:6379",
                "s3cr@t:1",
            ),
        ] {
            let s = settings(&[("VCODE_REDIS_URL", url)]).unwrap();
            assert_debug_hides(&s, secrets, shown);
            // The connection still gets the real URL, password included.
            let real = RedisTopology::Single {
                url: url.to_owned(),
            };
            assert_eq!(redis_of(&s).topology, real);
            let (addr, real_password) = connection_info(url);
            assert_eq!(addr, host);
            assert_eq!(real_password.as_deref(), Some(password));
        }
    }

    #[test]
    fn debug_hides_the_passwords_of_cluster_nodes() {
        let nodes =
            "rediss://:n0de-s3cret@10.0.0.1:7000, rediss://vcode:other-s3cret@10.0.0.2:7001";
        let s = settings(&[("VCODE_REDIS_CLUSTER_NODES", nodes)]).unwrap();
        assert_debug_hides(
            &s,
            &["n0de-s3cret", "other-s3cret"],
            &[
                "Cluster",
                "rediss://:***@10.0.0.1:7000",
                "rediss://vcode:***@10.0.0.2:7001",
            ],
        );
        let RedisTopology::Cluster { nodes } = &redis_of(&s).topology else {
            panic!("expected a Cluster")
        };
        assert_eq!(
            nodes,
            &[
                "rediss://:n0de-s3cret@10.0.0.1:7000",
                "rediss://vcode:other-s3cret@10.0.0.2:7001"
            ]
        );
        let real: Vec<Option<String>> = nodes.iter().map(|url| connection_info(url).1).collect();
        assert_eq!(
            real,
            [
                Some("n0de-s3cret".to_owned()),
                Some("other-s3cret".to_owned())
            ]
        );
    }

    #[test]
    fn debug_hides_the_passwords_of_sentinels() {
        let sentinels = "redis://:sent1nel-s3cret@10.0.0.1:26379,redis://admin:a@b:c@sentinel-2.internal:26379,redis://10.0.0.3:26379";
        let s = settings(&[
            ("VCODE_REDIS_SENTINELS", sentinels),
            ("VCODE_REDIS_SENTINEL_MASTER", "vcode-main"),
        ])
        .unwrap();
        assert_debug_hides(
            &s,
            &["sent1nel-s3cret", "a@b", "b:c", "a%40b"],
            &[
                "redis://:***@10.0.0.1:26379",
                "redis://admin:***@sentinel-2.internal:26379",
                // No password: shown as it is.
                "redis://10.0.0.3:26379",
                "vcode-main",
            ],
        );
        let RedisTopology::Sentinel {
            sentinels, master, ..
        } = &redis_of(&s).topology
        else {
            panic!("expected Sentinel")
        };
        assert_eq!(master, "vcode-main");
        let real: Vec<(String, Option<String>)> =
            sentinels.iter().map(|url| connection_info(url)).collect();
        assert_eq!(
            real,
            [
                (
                    "10.0.0.1:26379".to_owned(),
                    Some("sent1nel-s3cret".to_owned())
                ),
                (
                    "sentinel-2.internal:26379".to_owned(),
                    Some("a@b:c".to_owned())
                ),
                ("10.0.0.3:26379".to_owned(), None),
            ]
        );
    }

    #[test]
    fn debug_shows_whether_the_admin_token_is_set_but_never_the_token() {
        let token = "t0ken-0123456789abcdef";
        let s = settings(&[("VCODE_ADMIN_TOKEN", token)]).unwrap();
        assert_debug_hides(
            &s,
            &[token, "0123456789abcdef"],
            &["admin_token: Some(", "\"***\""],
        );
        assert_eq!(s.admin_token.as_deref(), Some(token));

        let unset = settings(&[]).unwrap();
        assert_debug_hides(&unset, &["***"], &["admin_token: None"]);
    }

    #[test]
    fn debug_hides_the_webhook_urls_credentials() {
        let url = "https://sms:hunter2-s3cret@gateway.example:9443/v1/sms?api_key=k3y-s3cret&region=cn&t0ken#frag-s3cret";
        let signing = "whsec-s3cret-0123456789abcdef0123456789";
        let s = settings(&[
            ("VCODE_SMS", "webhook"),
            ("VCODE_SMS_WEBHOOK_URL", url),
            ("VCODE_SMS_WEBHOOK_SECRET", signing),
        ])
        .unwrap();
        assert_debug_hides(
            &s,
            &["hunter2", "k3y-s3cret", "t0ken", "frag-s3cret", signing],
            &["https://sms:***@gateway.example:9443/v1/sms?api_key=***&region=***&***#***"],
        );
        let real = &s.sms.webhook.as_ref().expect("the webhook sender").url;
        assert_eq!(real, url);
    }

    #[test]
    fn invalid_urls_in_errors_do_not_show_their_passwords() {
        for (var, value, shown) in [
            (
                "VCODE_REDIS_URL",
                "http://:s3cret@10.0.0.1:6379",
                "http://:***@10.0.0.1:6379",
            ),
            (
                "VCODE_REDIS_URL",
                "redis:/vcode:s3cret@10.0.0.1:6379",
                "redis:***@10.0.0.1:6379",
            ),
            (
                "VCODE_REDIS_CLUSTER_NODES",
                "redis://:s3cret@10.0.0.1:7000, :s3cret@10.0.0.2:7000",
                "redis://:***@10.0.0.1:7000,:***@10.0.0.2:7000",
            ),
            (
                "VCODE_SMS_WEBHOOK_URL",
                "ftp://sms:s3cret@gateway.example/?token=s3cret",
                "ftp://sms:***@gateway.example/?token=***",
            ),
        ] {
            let mut vars = vec![(var, value)];
            if var == "VCODE_SMS_WEBHOOK_URL" {
                vars.push(("VCODE_SMS", "webhook"));
            }
            let error = settings(&vars).unwrap_err();
            for text in [error.to_string(), format!("{error:?}")] {
                assert!(!text.contains("s3cret"), "{text}");
                assert!(text.contains(var) || text.contains("Invalid"), "{text}");
                assert!(text.contains(shown), "{shown:?} missing from {text}");
            }
        }
    }

    #[test]
    fn url_passwords_are_hidden_whatever_they_contain() {
        for (url, redacted) in [
            ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
            ("redis://vcode@10.0.0.1", "redis://vcode@10.0.0.1"),
            ("redis://vcode:@10.0.0.1", "redis://vcode:@10.0.0.1"),
            ("redis://:a@b@10.0.0.1:6379", "redis://:***@10.0.0.1:6379"),
            (
                "redis://:a/b?c#d@10.0.0.1:6379/3",
                "redis://:***@10.0.0.1:6379/3",
            ),
            (
                "rediss://u:p@10.0.0.1:6380/#insecure",
                "rediss://u:***@10.0.0.1:6380/#insecure",
            ),
            ("redis://[::1]:6379", "redis://[::1]:6379"),
            ("redis://:p@[::1]:6379", "redis://:***@[::1]:6379"),
        ] {
            assert_eq!(redact_url_password(url), redacted, "{url}");
        }
    }

    #[test]
    fn defaults_match_the_design() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.bind.to_string(), "127.0.0.1:8080");
        assert!(matches!(s.store, StoreSettings::Embedded));
        assert_eq!(s.sms.default_route, [crate::sms::ProviderName::Log]);
        assert_eq!(s.otp.code_length.get(), 6);
        assert_eq!(s.otp.code_ttl, Duration::from_secs(300));
        assert_eq!(s.otp.resend_cooldown, Duration::from_secs(60));
        assert_eq!(s.otp.max_attempts, 5);
        assert_eq!(s.otp.resend, ResendPolicy::Reuse);
        assert_eq!(s.otp.default_region.as_str(), "CN");
        assert!(!s.dev_mode);
        assert_eq!(s.captcha.ttl, Duration::from_secs(300));
        assert_eq!(s.captcha.length, 5);
        assert_eq!((s.captcha.width, s.captcha.height), (160, 60));
        assert!(!s.captcha.send_requires_captcha);
        assert_eq!(s.abuse.sends_per_phone_hour, 5);
        assert_eq!(s.abuse.sends_per_phone_day, 10);
        assert_eq!(s.abuse.sends_per_ip_hour, 20);
        assert_eq!(s.abuse.failed_verifies_per_phone_day, 100);
        assert_eq!(s.abuse.failed_verifies_per_client_day, 10);
        assert_eq!(s.abuse.client_ipv6_prefix, 64);
        assert_eq!(s.abuse.sends_global_minute, 0);
        assert!(s.abuse.allowed_regions.is_empty());
        assert!(s.abuse.trusted_proxies.is_empty());
        assert!(s.admin_token.is_none());
    }

    #[test]
    fn abuse_limits_parse() {
        let s = settings(&[
            ("VCODE_QUOTA_PHONE_HOUR", "0"),
            ("VCODE_QUOTA_GLOBAL_MINUTE", "1000"),
            ("VCODE_ALLOWED_REGIONS", "cn, HK"),
            ("VCODE_TRUSTED_PROXIES", "10.0.0.0/8,::1"),
            ("VCODE_ADMIN_TOKEN", "0123456789abcdef"),
        ])
        .unwrap();
        assert_eq!(s.abuse.sends_per_phone_hour, 0);
        assert_eq!(s.abuse.sends_global_minute, 1000);
        let regions: Vec<&str> = s.abuse.allowed_regions.iter().map(Region::as_str).collect();
        assert_eq!(regions, ["CN", "HK"]);
        assert!(!s.abuse.trusted_proxies.is_empty());
        assert_eq!(s.admin_token.as_deref(), Some("0123456789abcdef"));
    }

    #[test]
    fn redis_settings_have_timeouts_of_at_most_a_second_by_default() {
        let s = settings(&[("VCODE_REDIS_URL", "redis://127.0.0.1:6390")]).unwrap();
        let StoreSettings::Redis(redis) = s.store else {
            panic!("expected the Redis store")
        };
        assert!(redis.connect_timeout <= Duration::from_secs(1));
        assert!(redis.command_timeout <= Duration::from_secs(1));
    }

    #[test]
    fn redis_is_one_node_a_cluster_or_sentinel() {
        let topology = |vars: &[(&str, &str)]| match settings(vars).unwrap().store {
            StoreSettings::Redis(redis) => redis.topology,
            StoreSettings::Embedded => panic!("expected the Redis store"),
        };
        assert_eq!(
            topology(&[("VCODE_REDIS_URL", "redis://127.0.0.1:6390/2")]),
            RedisTopology::Single {
                url: "redis://127.0.0.1:6390/2".to_owned()
            }
        );
        assert_eq!(
            topology(&[(
                "VCODE_REDIS_CLUSTER_NODES",
                "redis://10.0.0.1:7000, redis://10.0.0.2:7000"
            )]),
            RedisTopology::Cluster {
                nodes: vec![
                    "redis://10.0.0.1:7000".to_owned(),
                    "redis://10.0.0.2:7000".to_owned()
                ]
            }
        );
        assert_eq!(
            topology(&[
                (
                    "VCODE_REDIS_SENTINELS",
                    "redis://10.0.0.1:26379,redis://10.0.0.2:26379"
                ),
                ("VCODE_REDIS_SENTINEL_MASTER", "vcode-main"),
            ]),
            RedisTopology::Sentinel {
                sentinels: vec![
                    "redis://10.0.0.1:26379".to_owned(),
                    "redis://10.0.0.2:26379".to_owned()
                ],
                master: "vcode-main".to_owned(),
                master_credentials: None,
            }
        );
    }

    #[test]
    fn two_redis_topologies_or_half_a_sentinel_setting_are_refused() {
        let url = ("VCODE_REDIS_URL", "redis://127.0.0.1:6390");
        let nodes = ("VCODE_REDIS_CLUSTER_NODES", "redis://127.0.0.1:7000");
        let sentinels = ("VCODE_REDIS_SENTINELS", "redis://127.0.0.1:26379");
        let master = ("VCODE_REDIS_SENTINEL_MASTER", "mymaster");
        for vars in [
            vec![url, nodes],
            vec![url, sentinels, master],
            vec![nodes, sentinels, master],
            vec![url, master],
        ] {
            let error = settings(&vars).unwrap_err().to_string();
            for var in [url.0, nodes.0, sentinels.0, master.0] {
                assert!(error.contains(var), "{vars:?}: {error}");
            }
        }
        for half in [sentinels, master] {
            let error = settings(&[half]).unwrap_err().to_string();
            assert!(
                error.contains(sentinels.0) && error.contains(master.0),
                "{error}"
            );
        }
        let bad_sentinel = settings(&[(sentinels.0, "127.0.0.1:26379"), master]).unwrap_err();
        assert!(bad_sentinel.to_string().contains(sentinels.0));
        let bad_name = settings(&[sentinels, (master.0, "my master")]).unwrap_err();
        assert!(bad_name.to_string().contains(master.0));
    }

    /// A file holding `text`, named for the test that uses it.
    fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("vcode-config-{}-{name}", std::process::id()));
        std::fs::write(&path, text).expect("a temporary file");
        path
    }

    fn ca_pem() -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.self_signed(&key).unwrap().pem()
    }

    #[test]
    fn a_private_ca_file_is_read_for_rediss_urls_only() {
        let ca = temp_file("ca.pem", &ca_pem());
        let ca_var = ("VCODE_REDIS_CA_FILE", ca.to_str().unwrap());
        let master = ("VCODE_REDIS_SENTINEL_MASTER", "m");
        for topology in [
            vec![("VCODE_REDIS_URL", "rediss://127.0.0.1:6390")],
            vec![(
                "VCODE_REDIS_CLUSTER_NODES",
                "rediss://10.0.0.1:7000,rediss://10.0.0.2:7000",
            )],
            vec![("VCODE_REDIS_SENTINELS", "rediss://10.0.0.1:26379"), master],
        ] {
            let s = settings(&[&topology[..], &[ca_var]].concat()).unwrap();
            assert_eq!(redis_of(&s).ca_file.as_deref(), Some(ca.as_path()));
            assert!(format!("{s:?}").contains(ca_var.1));
        }
        let plain = settings(&[("VCODE_REDIS_URL", "redis://127.0.0.1:6390"), ca_var]);
        assert!(plain.unwrap_err().to_string().contains(ca_var.0));

        let not_pem = temp_file("not-a-ca.pem", "not a certificate\n");
        let missing = ca.with_extension("missing");
        for (path, reason) in [(&not_pem, "no PEM certificate"), (&missing, "cannot read")] {
            let error = settings(&[
                ("VCODE_REDIS_URL", "rediss://127.0.0.1:6390"),
                (ca_var.0, path.to_str().unwrap()),
            ])
            .unwrap_err()
            .to_string();
            assert!(
                error.contains(ca_var.0) && error.contains(reason),
                "{error}"
            );
        }
        let _ = std::fs::remove_file(ca);
        let _ = std::fs::remove_file(not_pem);
    }

    #[test]
    fn insecure_tls_and_mixed_schemes_are_refused_without_showing_passwords() {
        let master = ("VCODE_REDIS_SENTINEL_MASTER", "m");
        for (vars, reason) in [
            (
                vec![(
                    "VCODE_REDIS_URL",
                    "rediss://:s3cret@127.0.0.1:6390/#insecure",
                )],
                "#insecure",
            ),
            (
                vec![(
                    "VCODE_REDIS_CLUSTER_NODES",
                    "rediss://:s3cret@10.0.0.1:7000/#insecure",
                )],
                "#insecure",
            ),
            (
                vec![
                    (
                        "VCODE_REDIS_SENTINELS",
                        "rediss://:s3cret@10.0.0.1:26379/#insecure",
                    ),
                    master,
                ],
                "#insecure",
            ),
            (
                vec![(
                    "VCODE_REDIS_CLUSTER_NODES",
                    "rediss://:s3cret@10.0.0.1:7000,redis://:s3cret@10.0.0.2:7000",
                )],
                "mixes",
            ),
            (
                vec![
                    (
                        "VCODE_REDIS_SENTINELS",
                        "redis://:s3cret@10.0.0.1:26379,rediss://:s3cret@10.0.0.2:26379",
                    ),
                    master,
                ],
                "mixes",
            ),
        ] {
            let error = settings(&vars).unwrap_err().to_string();
            assert!(
                error.contains(vars[0].0) && error.contains(reason),
                "{error}"
            );
            assert!(!error.contains("s3cret"), "{error}");
        }
    }

    #[test]
    fn sentinel_master_credentials_log_in_to_the_primary_and_stay_hidden() {
        let sentinel = [
            ("VCODE_REDIS_SENTINELS", "rediss://:sent1nel@10.0.0.1:26379"),
            ("VCODE_REDIS_SENTINEL_MASTER", "vcode-main"),
        ];
        let user = ("VCODE_REDIS_SENTINEL_MASTER_USERNAME", "vcode");
        let password = ("VCODE_REDIS_SENTINEL_MASTER_PASSWORD", "d4ta-s3cret");
        let credentials = |vars: &[(&str, &str)]| {
            let s = settings(&[&sentinel[..], vars].concat()).unwrap();
            assert_debug_hides(&s, &["d4ta-s3cret", "sent1nel"], &["master_credentials"]);
            match &redis_of(&s).topology {
                RedisTopology::Sentinel {
                    master_credentials, ..
                } => master_credentials.clone(),
                other => panic!("expected Sentinel, not {other:?}"),
            }
        };
        assert_eq!(credentials(&[]), None);
        let both = credentials(&[user, password]).unwrap();
        assert_eq!(both.username.as_deref(), Some("vcode"));
        assert_eq!(both.password, "d4ta-s3cret");
        assert_eq!(credentials(&[password]).unwrap().username, None);

        let alone = settings(&[&sentinel[..], &[user]].concat()).unwrap_err();
        assert!(alone.to_string().contains(password.0), "{alone}");
        let not_sentinel =
            settings(&[("VCODE_REDIS_URL", "redis://127.0.0.1:6390"), password]).unwrap_err();
        assert!(not_sentinel.to_string().contains("VCODE_REDIS_SENTINELS"));
        assert!(!not_sentinel.to_string().contains(password.1));
    }

    #[test]
    fn bad_values_name_their_variable() {
        for (var, value) in [
            ("VCODE_BIND", "localhost"),
            ("VCODE_REDIS_URL", "http://x"),
            ("VCODE_REDIS_CLUSTER_NODES", "redis://a:7000,b:7000"),
            ("VCODE_REDIS_CLUSTER_NODES", ","),
            ("VCODE_CODE_LENGTH", "3"),
            ("VCODE_CODE_LENGTH", "11"),
            ("VCODE_CODE_TTL_SECS", "0"),
            ("VCODE_CODE_TTL_SECS", "five"),
            ("VCODE_RESEND_COOLDOWN_SECS", "-1"),
            ("VCODE_MAX_ATTEMPTS", "0"),
            ("VCODE_RESEND", "sometimes"),
            ("VCODE_DEFAULT_REGION", "XX"),
            ("VCODE_SMS", "pigeon"),
            ("VCODE_DEV_MODE", "maybe"),
            ("VCODE_CAPTCHA_LENGTH", "3"),
            ("VCODE_CAPTCHA_LENGTH", "7"),
            ("VCODE_CAPTCHA_WIDTH", "20"),
            ("VCODE_CAPTCHA_HEIGHT", "5000"),
            ("VCODE_CAPTCHA_TTL_SECS", "0"),
            ("VCODE_SEND_REQUIRES_CAPTCHA", "sure"),
            ("VCODE_QUOTA_PHONE_HOUR", "-1"),
            ("VCODE_QUOTA_IP_HOUR", "lots"),
            ("VCODE_QUOTA_PHONE_FAILS_DAY", "1.5"),
            ("VCODE_ALLOWED_REGIONS", "CN,XX"),
            ("VCODE_TRUSTED_PROXIES", "10.0.0.0/99"),
            ("VCODE_ADMIN_TOKEN", "short"),
        ] {
            let error = settings(&[(var, value)]).unwrap_err().to_string();
            assert!(error.contains(var), "{var}={value}: {error}");
        }
    }

    #[test]
    fn webhook_needs_a_valid_url() {
        let missing = settings(&[("VCODE_SMS", "webhook")]).unwrap_err();
        assert!(missing.to_string().contains("VCODE_SMS_WEBHOOK_URL"));
        let bad = settings(&[
            ("VCODE_SMS", "webhook"),
            ("VCODE_SMS_WEBHOOK_URL", "ftp://gateway"),
        ])
        .unwrap_err();
        assert!(bad.to_string().contains("VCODE_SMS_WEBHOOK_URL"));
        let ok = settings(&[
            ("VCODE_SMS", "webhook"),
            ("VCODE_SMS_WEBHOOK_URL", "http://127.0.0.1:9000/sms"),
        ])
        .unwrap();
        assert!(ok.sms.webhook.is_some());
    }

    #[test]
    fn dev_mode_refuses_a_non_loopback_bind() {
        let error = settings(&[("VCODE_DEV_MODE", "1"), ("VCODE_BIND", "0.0.0.0:8080")])
            .unwrap_err()
            .to_string();
        assert!(error.contains("VCODE_DEV_MODE"), "{error}");
        assert!(settings(&[("VCODE_DEV_MODE", "1"), ("VCODE_BIND", "[::1]:8080")]).is_ok());
    }

    #[test]
    fn verify_strategy_is_atomic_by_default_and_legacy_only_in_dev_mode_on_redis() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.verify_strategy, VerifyStrategy::Atomic);
        assert_eq!(s.legacy_gap, Duration::ZERO);

        let redis = ("VCODE_REDIS_URL", "redis://127.0.0.1:6390");
        let dev = ("VCODE_DEV_MODE", "1");
        for strategy in ["legacy-original", "legacy-postmortem-fix"] {
            let chosen = ("VCODE_VERIFY_STRATEGY", strategy);
            let s = settings(&[chosen, dev, redis, ("VCODE_LEGACY_GAP_MS", "25")]).unwrap();
            assert_eq!(s.verify_strategy.as_str(), strategy);
            assert_eq!(s.legacy_gap, Duration::from_millis(25));
            for refused in [vec![chosen, redis], vec![chosen, dev]] {
                let error = settings(&refused).unwrap_err().to_string();
                assert!(error.contains("VCODE_VERIFY_STRATEGY"), "{error}");
            }
        }
        let atomic = settings(&[("VCODE_VERIFY_STRATEGY", "atomic")]).unwrap();
        assert_eq!(atomic.verify_strategy, VerifyStrategy::Atomic);
    }

    #[test]
    fn bad_verify_strategy_values_name_their_variable() {
        for (var, value) in [
            ("VCODE_VERIFY_STRATEGY", "legacy"),
            ("VCODE_VERIFY_STRATEGY", "ATOMIC"),
            ("VCODE_LEGACY_GAP_MS", "-1"),
            ("VCODE_LEGACY_GAP_MS", "10001"),
            ("VCODE_LEGACY_GAP_MS", "soon"),
        ] {
            let error = settings(&[(var, value)]).unwrap_err().to_string();
            assert!(error.contains(var), "{var}={value}: {error}");
        }
    }
}
