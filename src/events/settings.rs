//! The event webhooks' settings (`VCODE_EVENTS_*`): one endpoint from the variables
//! (`VCODE_EVENTS_WEBHOOK_URL`, `VCODE_EVENTS_WEBHOOK_SECRET[_FILE]`, an event filter), more
//! from the config file (`[[events.endpoints]]`, each with its URL, the file holding its
//! secret and its filter), and how the dispatcher delivers: timeout, first retry delay, how
//! long it retries, how often it looks. No endpoint: events are off and nothing is written.

use std::time::Duration;

use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};

use super::EventKind;
use super::signature::WebhookSecret;
use crate::config::error::ConfigError;
use crate::config::secret::SecretVariable;
use crate::config::sources::{Sources, Table};
use crate::config::text::{Millis, OptionalText, Secs};
use crate::sms::{UrlRefusal, check_url};

pub const TABLE: Table = Table {
    path: "events",
    prefix: "VCODE_EVENTS_",
    renamed: &[],
    file_only: &["VCODE_EVENTS_ENDPOINTS"],
};

pub const WEBHOOK_SECRET: SecretVariable = SecretVariable::new(
    "VCODE_EVENTS_WEBHOOK_SECRET",
    "VCODE_EVENTS_WEBHOOK_SECRET_FILE",
);

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default)]
pub struct EventVariables {
    #[serde(rename = "VCODE_EVENTS_WEBHOOK_URL", with = "OptionalText")]
    url: Option<String>,
    /// The events the variables' endpoint receives: names, comma-separated; empty: all.
    #[serde(rename = "VCODE_EVENTS_WEBHOOK_EVENTS", with = "OptionalText")]
    filter: Option<String>,
    #[serde(
        rename = "VCODE_EVENTS_WEBHOOK_TIMEOUT_MS",
        with = "Millis::<100, 30_000>"
    )]
    timeout: Duration,
    /// The first retry's delay; each next one doubles, up to an hour.
    #[serde(
        rename = "VCODE_EVENTS_RETRY_BACKOFF_MS",
        with = "Millis::<100, 600_000>"
    )]
    backoff: Duration,
    /// How long an event is retried before it is given up (kept for a replay).
    #[serde(rename = "VCODE_EVENTS_RETRY_FOR_SECS", with = "Secs::<60, 2_592_000>")]
    retry_for: Duration,
    /// How often an idle dispatcher looks for due events.
    #[serde(rename = "VCODE_EVENTS_POLL_MS", with = "Millis::<10, 60_000>")]
    poll: Duration,
    /// `[[events.endpoints]]`: `url`, `secret_file`, `events` (a list; absent: all).
    #[serde(rename = "VCODE_EVENTS_ENDPOINTS", skip_serializing)]
    endpoints: Vec<EndpointGiven>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EndpointGiven {
    url: String,
    secret_file: String,
    #[serde(default)]
    events: Vec<String>,
}

impl Default for EventVariables {
    fn default() -> Self {
        Self {
            url: None,
            filter: None,
            timeout: Duration::from_secs(5),
            backoff: Duration::from_secs(1),
            retry_for: Duration::from_secs(24 * 3600),
            poll: Duration::from_millis(250),
            endpoints: Vec::new(),
        }
    }
}

/// Where events go: a URL, the secrets that sign (several during a rotation), which events.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub url: String,
    pub secrets: Vec<WebhookSecret>,
    /// `None`: every event.
    pub events: Option<Vec<EventKind>>,
}

impl Endpoint {
    pub fn wants(&self, kind: EventKind) -> bool {
        self.events
            .as_ref()
            .is_none_or(|events| events.contains(&kind))
    }
}

#[derive(Clone, Debug)]
pub struct EventSettings {
    pub endpoints: Vec<Endpoint>,
    pub timeout: Duration,
    pub backoff: Duration,
    pub retry_for: Duration,
    pub poll: Duration,
}

impl Default for EventSettings {
    fn default() -> Self {
        let defaults = EventVariables::default();
        Self {
            endpoints: Vec::new(),
            timeout: defaults.timeout,
            backoff: defaults.backoff,
            retry_for: defaults.retry_for,
            poll: defaults.poll,
        }
    }
}

/// The longest wait between two tries.
const MAX_BACKOFF: Duration = Duration::from_secs(3600);

impl EventSettings {
    pub fn is_on(&self) -> bool {
        !self.endpoints.is_empty()
    }

    /// The wait after try number `attempts` (from 1) failed: the first delay, doubled each
    /// time, at most an hour.
    pub fn backoff_after(&self, attempts: u32) -> Duration {
        let doubled = self.backoff.saturating_mul(
            1u32.checked_shl(attempts.saturating_sub(1))
                .unwrap_or(u32::MAX),
        );
        doubled.min(MAX_BACKOFF)
    }

    pub fn read(
        sources: &Sources,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let given: EventVariables = sources.extract()?;
        let mut endpoints = Vec::new();
        let secret = WEBHOOK_SECRET.read(lookup)?;
        match (&given.url, secret) {
            (Some(url), Some((secret, origin))) => {
                let url_origin = sources.origin("VCODE_EVENTS_WEBHOOK_URL");
                endpoints.push(Endpoint {
                    url: checked_url(url, &url_origin)?,
                    secrets: secrets(secret.expose_secret(), origin)?,
                    events: filter(
                        given.filter.as_deref().unwrap_or(""),
                        &sources.origin("VCODE_EVENTS_WEBHOOK_EVENTS"),
                    )?,
                });
            }
            (Some(_), None) => {
                return Err(ConfigError::Inconsistent(
                    "VCODE_EVENTS_WEBHOOK_URL needs VCODE_EVENTS_WEBHOOK_SECRET (or its _FILE): whsec_ and the base64 of at least 24 random bytes (`echo whsec_$(openssl rand -base64 32)`), which the receiver verifies webhook-signature with".to_owned(),
                ));
            }
            (None, Some((_, origin))) => {
                return Err(ConfigError::Inconsistent(format!(
                    "{origin} is set but VCODE_EVENTS_WEBHOOK_URL is not"
                )));
            }
            (None, None) => {}
        }
        let origin = sources.origin("VCODE_EVENTS_ENDPOINTS");
        for (at, endpoint) in given.endpoints.iter().enumerate() {
            let origin = format!("{origin}[{at}]");
            let text = std::fs::read_to_string(&endpoint.secret_file).map_err(|e| {
                ConfigError::invalid(
                    &origin,
                    &endpoint.secret_file,
                    format!("secret_file cannot be read: {e}"),
                )
            })?;
            endpoints.push(Endpoint {
                url: checked_url(&endpoint.url, &origin)?,
                secrets: secrets(&text, &origin)?,
                events: filter(&endpoint.events.join(","), &origin)?,
            });
        }
        if endpoints.len() > 64 {
            return Err(ConfigError::invalid(
                &origin,
                "",
                "at most 64 endpoints (each one's delivery is a bit of a 64-bit mask)",
            ));
        }
        Ok(Self {
            endpoints,
            timeout: given.timeout,
            backoff: given.backoff,
            retry_for: given.retry_for,
            poll: given.poll,
        })
    }
}

fn checked_url(url: &str, origin: &str) -> Result<String, ConfigError> {
    match check_url(url) {
        Ok(_) => Ok(url.to_owned()),
        Err(UrlRefusal::PlainHttp) => Err(ConfigError::invalid(
            origin,
            crate::config::redact::redact_urls(url),
            "expected https:// (http:// only to a loopback host)",
        )),
        Err(UrlRefusal::NotHttps) => Err(ConfigError::invalid(
            origin,
            crate::config::redact::redact_urls(url),
            "expected an https:// URL",
        )),
    }
}

fn secrets(text: &str, origin: &str) -> Result<Vec<WebhookSecret>, ConfigError> {
    WebhookSecret::parse_list(text).map_err(|reason| ConfigError::invalid(origin, "***", reason))
}

/// Event names, comma-separated; empty or `*`: every event.
fn filter(raw: &str, origin: &str) -> Result<Option<Vec<EventKind>>, ConfigError> {
    let names: Vec<&str> = raw
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .collect();
    if names.is_empty() || names == ["*"] {
        return Ok(None);
    }
    names
        .iter()
        .map(|name| {
            EventKind::parse(name).ok_or_else(|| {
                    ConfigError::invalid(
                        origin,
                        *name,
                        "not an event: verification.created, .delivered, .undelivered, .approved, .failed_attempt, .max_attempts_reached, .expired, .canceled, prefix.suspended, prefix.lifted",
                    )
                })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}
