//! The one connection a `RedisStore` shares between all requests, whatever the topology, and
//! how it is secured: `rediss://` URLs connect over TLS (rustls) and verify the server's
//! certificate and host name against the public roots or the private CA of
//! `VCODE_REDIS_CA_FILE`; user and password in a URL log in as that ACL user.
//!
//! Every variant is multiplexed: requests pipeline over it and never wait for an exclusive
//! connection (a pool of exclusive connections measured ~3x slower here). On one node, each
//! runtime thread (each HTTP worker) gets a connection of its own (`Connections`): a shared
//! one's I/O runs on one thread, so every command and every reply crossed threads, a wake-up
//! each way (measured: 25 % less CPU per request and 25 % more requests per second with one per
//! worker, `examples/thin_verify.rs`'s two rows). That is also why
//! deadpool-redis's `cluster` and `sentinel` pools are not used: they hand one connection to
//! one request at a time, and its Sentinel pool recycles a connection on PING, which a demoted
//! primary still answers.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{Cmd, Pipeline, RedisError, RedisFuture, Value};
use thread_local::ThreadLocal;

use super::cluster::ClusterHandle;
use super::sentinel::SentinelConnection;
use super::tls::{client, tls_certificates};
use super::{RedisSettings, RedisTopology};

/// The connections a store uses: on one node, one per runtime thread, opened on that thread's
/// first call, so that its I/O runs where its requests do; a Cluster's or Sentinel's connection
/// is one, shared (each keeps watchers and renewals of its own on the store's runtime).
#[derive(Clone)]
pub enum Connections {
    PerThread(Arc<PerThread>),
    Shared(RedisConnection),
}

pub struct PerThread {
    client: redis::Client,
    config: ConnectionManagerConfig,
    /// Each thread's connection, with the runtime its tasks run on: a thread that runs a new
    /// runtime (a test's) opens a new one instead of using one whose runtime is gone.
    own: ThreadLocal<RefCell<Option<(tokio::runtime::Id, ConnectionManager)>>>,
    /// The one opened with the store, for a call made outside any runtime.
    first: ConnectionManager,
}

impl Connections {
    /// Prepares the connections without waiting for Redis to answer.
    pub fn open(settings: &RedisSettings) -> Result<Self, RedisError> {
        let certificates = tls_certificates(settings)?;
        let certificates = certificates.as_ref();
        Ok(match &settings.topology {
            RedisTopology::Single { url } => {
                let client = client(url, certificates)?;
                let config = manager_config(settings);
                let first =
                    ConnectionManager::new_lazy_with_config(client.clone(), config.clone())?;
                Self::PerThread(Arc::new(PerThread {
                    client,
                    config,
                    own: ThreadLocal::new(),
                    first,
                }))
            }
            RedisTopology::Cluster { nodes } => Self::Shared(RedisConnection::Cluster(
                ClusterHandle::new(nodes, certificates, settings)?,
            )),
            RedisTopology::Sentinel {
                sentinels,
                master,
                master_credentials,
            } => Self::Shared(RedisConnection::Sentinel(SentinelConnection::new(
                sentinels,
                master,
                master_credentials.as_ref(),
                certificates,
                settings,
            )?)),
        })
    }

    /// The connection for a call made on this thread.
    pub fn get(&self) -> RedisConnection {
        match self {
            Self::PerThread(per_thread) => RedisConnection::Single(per_thread.get()),
            Self::Shared(connection) => connection.clone(),
        }
    }

    /// Whether every key lives on one node (one node, or Sentinel's primary), so that one script
    /// may touch keys of any hash tag; on a Cluster a script stays within one slot.
    pub fn one_node(&self) -> bool {
        !matches!(self, Self::Shared(RedisConnection::Cluster(_)))
    }

    /// See [`RedisConnection::timed_out`].
    pub fn timed_out(&self) {
        if let Self::Shared(connection) = self {
            connection.timed_out();
        }
    }
}

impl PerThread {
    fn get(&self) -> ConnectionManager {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return self.first.clone();
        };
        let mut own = self.own.get_or_default().borrow_mut();
        match &*own {
            Some((id, connection)) if *id == runtime.id() => connection.clone(),
            _ => {
                // Lazy: connects on its first command, on this thread's runtime. It fails only
                // for settings that `open` has already accepted once.
                let connection = ConnectionManager::new_lazy_with_config(
                    self.client.clone(),
                    self.config.clone(),
                )
                .unwrap_or_else(|_| self.first.clone());
                *own = Some((runtime.id(), connection.clone()));
                connection
            }
        }
    }
}

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
    /// Told that a call timed out: a Cluster connection may be stuck on a frozen primary that
    /// the cluster has replaced. (Sentinel's connection checks its primary on its own, and one
    /// node has nowhere else to go.)
    pub fn timed_out(&self) {
        if let Self::Cluster(cluster) = self {
            cluster.renew_after_timeout();
        }
    }
}

fn manager_config(settings: &RedisSettings) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(settings.connect_timeout))
        // No timer of the crate's: every call is bounded by the command timeout already
        // (`RedisStore::bounded`), and a second timer per call was 2 % of a verify's
        // instructions.
        .set_response_timeout(None)
        // Few, short retries: while Redis is down requests fail fast and every new request
        // starts a fresh reconnect, so service resumes as soon as Redis is back.
        .set_number_of_retries(1)
        .set_min_delay(Duration::from_millis(50))
        .set_max_delay(Duration::from_millis(200))
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
            older_instances: false,
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
            assert!(Connections::open(&settings(topology)).is_err());
        }
    }

    #[tokio::test]
    async fn connections_open_without_reaching_redis() {
        for url in ["redis://127.0.0.1:1", "rediss://127.0.0.1:1"] {
            for topology in topologies(url) {
                let mut connection = Connections::open(&settings(topology.clone()))
                    .unwrap()
                    .get();
                let command = redis::cmd("PING");
                let ping = command.query_async::<String>(&mut connection);
                let answer = tokio::time::timeout(Duration::from_secs(2), ping).await;
                assert!(matches!(answer, Ok(Err(_))), "{topology:?} fails fast");
            }
        }
    }

    fn open_error(settings: &RedisSettings) -> String {
        match Connections::open(settings) {
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
