//! The connection pool: the URL's settings plus vcode's timeouts, TLS through rustls when the
//! URL says `sslmode=require` (a private CA from `VCODE_DATABASE_CA_FILE`, else the public
//! roots; the certificate and host name are always verified).

use std::sync::Arc;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime, Timeouts};
use tokio_postgres::config::SslMode;

use super::PostgresSettings;
use crate::store::tls::ca_roots;

pub(super) fn pool(settings: &PostgresSettings) -> Result<Pool, String> {
    let mut config: tokio_postgres::Config = settings.url.parse().map_err(|e| format!("{e}"))?;
    config.connect_timeout(settings.connect_timeout);
    config.keepalives_idle(std::time::Duration::from_secs(30));
    if config.get_application_name().is_none() {
        config.application_name("vcode");
    }
    // The server gives up on a statement when the caller does, so a stalled function
    // releases its locks instead of running for nobody.
    let statement_ms = settings.statement_timeout.as_millis();
    let options = match config.get_options() {
        Some(options) => format!("{options} -c statement_timeout={statement_ms}"),
        None => format!("-c statement_timeout={statement_ms}"),
    };
    config.options(&options);
    // Fast: a pooled connection is checked only for being closed; a dead one fails its
    // statement, which is then answered 503, and is replaced on the next checkout.
    let manager_config = ManagerConfig {
        recycling_method: RecyclingMethod::Fast,
    };
    let manager = if config.get_ssl_mode() == SslMode::Require {
        Manager::from_config(config, tls_connector(settings)?, manager_config)
    } else {
        if settings.ca_file.is_some() {
            return Err(
                "VCODE_DATABASE_CA_FILE is set, but VCODE_DATABASE_URL does not say sslmode=require"
                    .to_owned(),
            );
        }
        Manager::from_config(config, tokio_postgres::NoTls, manager_config)
    };
    Pool::builder(manager)
        .max_size(settings.pool_size)
        .runtime(Runtime::Tokio1)
        .timeouts(Timeouts {
            wait: Some(settings.statement_timeout),
            create: Some(settings.connect_timeout),
            recycle: Some(settings.connect_timeout),
        })
        .build()
        .map_err(|e| e.to_string())
}

fn tls_connector(
    settings: &PostgresSettings,
) -> Result<tokio_postgres_rustls::MakeRustlsConnect, String> {
    let roots = match &settings.ca_file {
        Some(path) => ca_roots(path)?.1,
        None => rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        },
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}
