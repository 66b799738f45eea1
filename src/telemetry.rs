//! Logs: their settings (`RUST_LOG` filters, `VCODE_LOG_FORMAT=json` for machines), checked
//! with the other settings, their set-up, and the per-request span every log line of a request
//! is nested in.

use std::io::IsTerminal;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use tracing_subscriber::EnvFilter;

use crate::config::text::{parse_text, show_text};

/// How the service logs; each field's serde name is its variable. Both are checked before
/// anything starts: a filter or format that does not parse would otherwise be dropped silently.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default)]
pub struct LogSettings {
    /// `tracing` filter directives (`info`, `vcode=debug,actix_web=warn`).
    #[serde(rename = "RUST_LOG", with = "filter")]
    pub filter: String,
    #[serde(rename = "VCODE_LOG_FORMAT", with = "format")]
    pub format: LogFormat,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// For people.
    #[default]
    Text,
    /// One JSON object per line, for machines.
    Json,
}

impl Default for LogSettings {
    fn default() -> Self {
        Self {
            filter: "info".to_owned(),
            format: LogFormat::Text,
        }
    }
}

mod filter {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        parse_text(d, |raw| {
            EnvFilter::builder()
                .parse(raw)
                .map(|_| raw.to_owned())
                .map_err(|error| format!("not a log filter: {error}"))
        })
    }

    pub fn serialize<S: Serializer>(filter: &str, s: S) -> Result<S::Ok, S::Error> {
        show_text(filter, s)
    }
}

mod format {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<LogFormat, D::Error> {
        parse_text(d, |raw| match raw {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err("expected text or json".to_owned()),
        })
    }

    pub fn serialize<S: Serializer>(format: &LogFormat, s: S) -> Result<S::Ok, S::Error> {
        show_text(
            match format {
                LogFormat::Text => "text",
                LogFormat::Json => "json",
            },
            s,
        )
    }
}

pub fn init(settings: &LogSettings) {
    // tracing-actix-web adds a WARN line for every 4xx answer; vcode logs outcomes itself (and
    // the causes of 5xx answers in `ApiError::reply`), so it stays quiet unless asked for by name.
    let directives = if settings.filter.contains("tracing_actix_web") {
        settings.filter.clone()
    } else {
        format!("{},tracing_actix_web=off", settings.filter)
    };
    let filter = EnvFilter::try_new(&directives).unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours for a terminal only: in a file or a log shipper the escape codes are noise, and
    // they made each line about a third longer.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stdout().is_terminal());
    // A second call (several apps in one test process) keeps the first subscriber.
    let _ = match settings.format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
