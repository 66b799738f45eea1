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

/// Directives added to `RUST_LOG` unless it names the crate (the first item): sources whose
/// lines at their own level would mislead or flood.
const QUIET_UNLESS_NAMED: [(&str, &str); 1] = [
    // An ERROR line ("stream error: request parse error: …") for every malformed request — a
    // garbage request line, a bad header, a head too large — which the client has already
    // been answered (400, 431): any client could fill the log, and bury real errors, at will.
    // A filter cannot lower a line's level, so these stay out of the log unless asked for.
    ("actix_http", "actix_http::h1::dispatcher=off"),
];

/// `filter` with the [`QUIET_UNLESS_NAMED`] directives it does not override by naming them.
fn directives(filter: &str) -> String {
    QUIET_UNLESS_NAMED
        .iter()
        .filter(|(named, _)| !filter.contains(named))
        .fold(filter.to_owned(), |directives, (_, quiet)| {
            format!("{directives},{quiet}")
        })
}

pub fn init(settings: &LogSettings) {
    let filter =
        EnvFilter::try_new(directives(&settings.filter)).unwrap_or_else(|_| EnvFilter::new("info"));
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
