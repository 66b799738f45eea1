//! The one connection a `RedisStore` shares between all requests, whatever the topology, and
//! how it is secured: `rediss://` URLs connect over TLS (rustls) and verify the server's
//! certificate and host name against the public roots or the private CA of
//! `VCODE_REDIS_CA_FILE`; user and password in a URL log in as that ACL user.
//!
//! Every variant is multiplexed: requests pipeline over it and never wait for an exclusive
//! connection (a pool of exclusive connections measured ~3x slower here). That is also why
//! deadpool-redis's `cluster` and `sentinel` pools are not used: they hand one connection to
//! one request at a time, and its Sentinel pool recycles a connection on PING, which a demoted
//! primary still answers.

use std::path::Path;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{
    Cmd, ConnectionAddr, ErrorKind, IntoConnectionInfo, Pipeline, RedisError, RedisFuture,
    TlsCertificates, Value,
};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::cluster::ClusterHandle;
use super::sentinel::SentinelConnection;
use super::{RedisSettings, RedisTopology};

#[derive(Clone)]
pub enum RedisConnection {
    /// One node, reconnected by the redis crate's `ConnectionManager`.
    Single(ConnectionManager),
    /// The redis crate's Cluster connection (one multiplexed connection per node), renewed
    /// after a timeout (`cluster.rs`).
    Cluster(ClusterHandle),
    /// The primary that Sentinel names, followed through failovers (`sentinel.rs`).
    Sentinel(SentinelConnection),
}

impl RedisConnection {
    /// Prepares the connection without waiting for Redis to answer.
    pub fn open(settings: &RedisSettings) -> Result<Self, RedisError> {
        let certificates = tls_certificates(settings)?;
        let certificates = certificates.as_ref();
        Ok(match &settings.topology {
            RedisTopology::Single { url } => Self::Single(single(url, certificates, settings)?),
            RedisTopology::Cluster { nodes } => {
                Self::Cluster(ClusterHandle::new(nodes, certificates, settings)?)
            }
            RedisTopology::Sentinel {
                sentinels,
                master,
                master_credentials,
            } => Self::Sentinel(SentinelConnection::new(
                sentinels,
                master,
                master_credentials.as_ref(),
                certificates,
                settings,
            )?),
        })
    }

    /// Told that a call timed out: a Cluster connection may be stuck on a frozen primary that
    /// the cluster has replaced. (Sentinel's connection checks its primary on its own, and one
    /// node has nowhere else to go.)
    pub fn timed_out(&self) {
        if let Self::Cluster(cluster) = self {
            cluster.renew_after_timeout();
        }
    }
}

/// The private CA every `rediss://` connection trusts instead of the public roots, if one is
/// set. Refuses `#insecure` URLs, which would skip verifying the server's certificate.
fn tls_certificates(settings: &RedisSettings) -> Result<Option<TlsCertificates>, RedisError> {
    let urls: Vec<&String> = match &settings.topology {
        RedisTopology::Single { url } => vec![url],
        RedisTopology::Cluster { nodes } => nodes.iter().collect(),
        RedisTopology::Sentinel { sentinels, .. } => sentinels.iter().collect(),
    };
    let (mut uses_tls, mut uses_plain) = (false, false);
    for url in urls {
        match url.as_str().into_connection_info()?.addr() {
            ConnectionAddr::TcpTls { insecure: true, .. } => {
                return Err(invalid(
                    "a rediss:// URL ends in #insecure, which would accept any certificate; \
                     vcode always verifies it (VCODE_REDIS_CA_FILE trusts a private CA)"
                        .to_owned(),
                ));
            }
            ConnectionAddr::TcpTls { .. } => uses_tls = true,
            _ => uses_plain = true,
        }
    }
    if uses_tls && uses_plain {
        // One scheme holds for the nodes discovered too: half a list in TLS protects nothing.
        return Err(invalid(
            "the Redis URLs mix redis:// and rediss://; use one scheme for all".to_owned(),
        ));
    }
    if uses_tls {
        install_crypto_provider();
    }
    match &settings.ca_file {
        None => Ok(None),
        Some(_) if !uses_tls => Err(invalid(
            "VCODE_REDIS_CA_FILE is set, but the Redis URLs are redis://, not rediss://".to_owned(),
        )),
        Some(path) => Ok(Some(TlsCertificates {
            client_tls: None,
            root_cert: Some(read_ca_file(path).map_err(invalid)?),
        })),
    }
}

/// The PEM text of a CA file, once it is known to hold at least one usable CA certificate:
/// a file that trusts nothing would fail every connection instead of start-up.
pub fn read_ca_file(path: &Path) -> Result<Vec<u8>, String> {
    let shown = path.display();
    let pem = std::fs::read(path).map_err(|error| format!("cannot read {shown}: {error}"))?;
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(&pem) {
        let certificate =
            certificate.map_err(|error| format!("{shown}: not a PEM certificate: {error}"))?;
        roots
            .add(certificate)
            .map_err(|error| format!("{shown}: not a CA certificate: {error}"))?;
    }
    if roots.is_empty() {
        return Err(format!("{shown} holds no PEM certificate"));
    }
    Ok(pem)
}

/// The redis crate builds its TLS settings with the process's default rustls provider. Ring is
/// installed unless another one was: with none installed and two compiled in (a dependency
/// may add aws-lc-rs), rustls would panic instead of choosing.
fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn invalid(reason: String) -> RedisError {
    RedisError::from((
        ErrorKind::InvalidClientConfig,
        "bad Redis TLS settings",
        reason,
    ))
}

/// A client for `url`, trusting `certificates` if it is a `rediss://` one.
pub(super) fn client(
    url: &str,
    certificates: Option<&TlsCertificates>,
) -> Result<redis::Client, RedisError> {
    let info = url.into_connection_info()?;
    match (info.addr(), certificates) {
        (ConnectionAddr::TcpTls { .. }, Some(certificates)) => {
            redis::Client::build_with_tls(info, certificates.clone())
        }
        _ => redis::Client::open(info),
    }
}

fn single(
    url: &str,
    certificates: Option<&TlsCertificates>,
    settings: &RedisSettings,
) -> Result<ConnectionManager, RedisError> {
    let client = client(url, certificates)?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(settings.connect_timeout))
        .set_response_timeout(Some(settings.command_timeout))
        // Few, short retries: while Redis is down requests fail fast and every new request
        // starts a fresh reconnect, so service resumes as soon as Redis is back.
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_millis(200));
    ConnectionManager::new_lazy_with_config(client, config)
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(connection) => connection.req_packed_command(cmd),
            Self::Cluster(connection) => connection.req_packed_command(cmd),
            Self::Sentinel(connection) => connection.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(connection) => connection.req_packed_commands(pipeline, offset, count),
            Self::Cluster(connection) => connection.req_packed_commands(pipeline, offset, count),
            Self::Sentinel(connection) => connection.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(connection) => connection.get_db(),
            Self::Cluster(connection) => connection.get_db(),
            Self::Sentinel(connection) => connection.get_db(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::time::Duration;

    fn settings(topology: RedisTopology) -> RedisSettings {
        RedisSettings {
            topology,
            connect_timeout: Duration::from_millis(100),
            command_timeout: Duration::from_millis(100),
            ca_file: None,
        }
    }

    /// One node, a Cluster and Sentinel, each on `url`.
    fn topologies(url: &str) -> [RedisTopology; 3] {
        [
            RedisTopology::Single {
                url: url.to_owned(),
            },
            RedisTopology::Cluster {
                nodes: vec![url.to_owned()],
            },
            RedisTopology::Sentinel {
                sentinels: vec![url.to_owned()],
                master: "vcode".to_owned(),
                master_credentials: None,
            },
        ]
    }

    #[test]
    fn cluster_and_sentinel_connections_outside_a_runtime_are_errors_not_panics() {
        for topology in topologies("redis://127.0.0.1:1").into_iter().skip(1) {
            assert!(RedisConnection::open(&settings(topology)).is_err());
        }
    }

    #[tokio::test]
    async fn connections_open_without_reaching_redis() {
        for url in ["redis://127.0.0.1:1", "rediss://127.0.0.1:1"] {
            for topology in topologies(url) {
                let mut connection = RedisConnection::open(&settings(topology.clone())).unwrap();
                let command = redis::cmd("PING");
                let ping = command.query_async::<String>(&mut connection);
                let answer = tokio::time::timeout(Duration::from_secs(2), ping).await;
                assert!(matches!(answer, Ok(Err(_))), "{topology:?} fails fast");
            }
        }
    }

    fn open_error(settings: &RedisSettings) -> String {
        match RedisConnection::open(settings) {
            Ok(_) => panic!("{settings:?} opened"),
            Err(error) => error.to_string(),
        }
    }

    #[tokio::test]
    async fn insecure_urls_mixed_schemes_and_a_ca_for_plain_urls_are_refused() {
        for topology in topologies("rediss://:s3cret@127.0.0.1:1/#insecure") {
            let error = open_error(&settings(topology));
            assert!(
                error.contains("#insecure") && !error.contains("s3cret"),
                "{error}"
            );
        }
        let mixed = RedisTopology::Cluster {
            nodes: vec![
                "rediss://127.0.0.1:1".to_owned(),
                "redis://127.0.0.1:2".to_owned(),
            ],
        };
        assert!(open_error(&settings(mixed)).contains("mix"));
        for topology in topologies("redis://127.0.0.1:1") {
            let with_ca = RedisSettings {
                ca_file: Some(PathBuf::from("/nonexistent/ca.pem")),
                ..settings(topology)
            };
            assert!(open_error(&with_ca).contains("VCODE_REDIS_CA_FILE"));
        }
        for topology in topologies("rediss://127.0.0.1:1") {
            let missing_ca = RedisSettings {
                ca_file: Some(PathBuf::from("/nonexistent/ca.pem")),
                ..settings(topology)
            };
            assert!(open_error(&missing_ca).contains("/nonexistent/ca.pem"));
        }
    }
}
