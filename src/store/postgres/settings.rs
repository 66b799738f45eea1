//! How vcode reaches PostgreSQL, read from the `VCODE_DATABASE_*` variables: the URL (unset:
//! another store), the timeouts, the pool's size and a private CA for `sslmode=require`.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::error::ConfigError;
use crate::config::redact::redact_url;
use crate::config::text::{Millis, OptionalText, Whole};
use crate::store::tls::read_ca_file;

#[derive(Clone)]
pub struct PostgresSettings {
    /// A libpq-style URL, `postgres://user:password@host:port/database?sslmode=require`.
    pub url: String,
    pub connect_timeout: Duration,
    /// Bounds every operation from the pool's wait to the reply, and is the server's
    /// `statement_timeout` too.
    pub statement_timeout: Duration,
    pub pool_size: usize,
    /// PEM certificates of the private CA that `sslmode=require` servers are verified
    /// against, in place of the public roots (`VCODE_DATABASE_CA_FILE`).
    pub ca_file: Option<PathBuf>,
    /// How often expired rows are deleted (in batches).
    pub sweep_interval: Duration,
}

impl std::fmt::Debug for PostgresSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresSettings")
            .field("url", &redact_url(&self.url))
            .field("connect_timeout", &self.connect_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .field("pool_size", &self.pool_size)
            .field("ca_file", &self.ca_file)
            .field("sweep_interval", &self.sweep_interval)
            .finish()
    }
}

impl PostgresSettings {
    /// Settings for `url` with the defaults of the variables.
    pub fn new(url: impl Into<String>) -> Self {
        let defaults = PostgresVariables::default();
        Self {
            url: url.into(),
            connect_timeout: defaults.connect_timeout,
            statement_timeout: defaults.statement_timeout,
            pool_size: defaults.pool_size,
            ca_file: None,
            sweep_interval: defaults.sweep_interval,
        }
    }

    /// Whether the URL asks for TLS (`sslmode=require`): then the server's certificate and
    /// name are always verified.
    pub fn uses_tls(&self) -> bool {
        self.url
            .parse::<tokio_postgres::Config>()
            .is_ok_and(|config| config.get_ssl_mode() == tokio_postgres::config::SslMode::Require)
    }
}

/// The `VCODE_DATABASE_*` variables as given (no `Debug`: the URL holds a password).
#[derive(Deserialize, Serialize)]
#[serde(default)]
pub struct PostgresVariables {
    #[serde(rename = "VCODE_DATABASE_URL", with = "OptionalText")]
    pub url: Option<String>,
    #[serde(rename = "VCODE_DATABASE_CA_FILE", with = "OptionalText")]
    pub ca_file: Option<String>,
    #[serde(
        rename = "VCODE_DATABASE_CONNECT_TIMEOUT_MS",
        with = "Millis::<10, 60_000>"
    )]
    pub connect_timeout: Duration,
    #[serde(
        rename = "VCODE_DATABASE_STATEMENT_TIMEOUT_MS",
        with = "Millis::<10, 60_000>"
    )]
    pub statement_timeout: Duration,
    #[serde(rename = "VCODE_DATABASE_POOL_SIZE", with = "Whole::<1, 1000>")]
    pub pool_size: usize,
    #[serde(
        rename = "VCODE_DATABASE_SWEEP_INTERVAL_MS",
        with = "Millis::<100, 3_600_000>"
    )]
    pub sweep_interval: Duration,
}

impl Default for PostgresVariables {
    fn default() -> Self {
        Self {
            url: None,
            ca_file: None,
            connect_timeout: Duration::from_millis(1000),
            statement_timeout: Duration::from_millis(500),
            pool_size: 16,
            sweep_interval: Duration::from_secs(10),
        }
    }
}

impl PostgresVariables {
    /// The PostgreSQL settings, or `None` when `VCODE_DATABASE_URL` is unset.
    pub fn settings(self) -> Result<Option<PostgresSettings>, ConfigError> {
        const URL: &str = "VCODE_DATABASE_URL";
        const CA: &str = "VCODE_DATABASE_CA_FILE";
        let Some(url) = self.url else {
            if self.ca_file.is_some() {
                return Err(ConfigError::Inconsistent(format!(
                    "{CA} is read only beside {URL}"
                )));
            }
            return Ok(None);
        };
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(ConfigError::invalid(
                URL,
                redact_url(&url),
                "expected postgres://user:password@host:port/database[?sslmode=require]",
            ));
        }
        if let Err(error) = url.parse::<tokio_postgres::Config>() {
            return Err(ConfigError::invalid(
                URL,
                redact_url(&url),
                format!("{error} (sslmode may be disable, prefer or require)"),
            ));
        }
        let mut settings = PostgresSettings {
            url,
            connect_timeout: self.connect_timeout,
            statement_timeout: self.statement_timeout,
            pool_size: self.pool_size,
            ca_file: None,
            sweep_interval: self.sweep_interval,
        };
        if let Some(raw) = self.ca_file {
            if !settings.uses_tls() {
                return Err(ConfigError::Inconsistent(format!(
                    "{CA} verifies the server of an sslmode=require URL, but {URL} does not ask for TLS"
                )));
            }
            let path = PathBuf::from(&raw);
            read_ca_file(&path).map_err(|reason| ConfigError::invalid(CA, raw, reason))?;
            settings.ca_file = Some(path);
        }
        Ok(Some(settings))
    }
}
