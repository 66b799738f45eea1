//! The Cluster connection: the redis crate's multiplexed `ClusterConnection`, renewed after a
//! timeout. The seeds' scheme, user and password hold for every node the crate discovers; with
//! TLS, each node's certificate is verified against the address the cluster announces for it.
//!
//! The crate follows MOVED and ASK and refreshes its slot map on redirections, on READONLY and
//! on refused connections. A primary that stops answering without closing its connections
//! (frozen, or cut off by a partition) yields only timeouts, which the crate retries on the
//! same node even after the cluster has promoted its replica. So a timed-out call renews the
//! connection, at most once per `RENEW_PAUSE`; the new one reads the slot map afresh.
//!
//! When no node can be reached, the crate answers "no connections found" and keeps the reason
//! to itself; the first seed, asked directly, tells it (a refused certificate, a wrong
//! password, nothing listening), so that the error and `/readyz` say why.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use redis::aio::ConnectionLike;
use redis::cluster::{ClusterClient, ClusterClientBuilder, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{MultipleNodeRoutingInfo, ResponsePolicy, RoutingInfo};
use redis::{
    AsyncConnectionConfig, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult,
    TlsCertificates, Value,
};

use super::RedisSettings;

/// Redirections (MOVED, ASK, READONLY after a failover) a call may follow; they are quick, and
/// the command timeout bounds the whole call anyway.
const RETRIES: u32 = 3;
/// Pauses between retries (ms): short, so a retry still fits in the command timeout.
const RETRY_WAIT_MS: (u64, u64) = (10, 100);
/// The shortest time between two renewals: while a frozen primary is being failed over,
/// every call times out, and one renewal per pause is enough to notice the new primary.
const RENEW_PAUSE: Duration = Duration::from_secs(1);

#[derive(Clone)]
pub struct ClusterHandle {
    shared: Arc<Shared>,
}

struct Shared {
    client: ClusterClient,
    config: ClusterConfig,
    /// The runtime the store was opened in: a renewed connection's background task runs
    /// there, not on whichever (actix worker) runtime saw the timeout.
    runtime: tokio::runtime::Handle,
    current: Mutex<Current>,
    /// The first seed alone, asked why no node can be reached.
    seed: redis::Client,
    seed_config: AsyncConnectionConfig,
    connect_timeout: Duration,
    /// The seed's last answer, with when it came: asked at most once per `RENEW_PAUSE`.
    diagnosis: Mutex<Option<(Instant, Option<String>)>>,
}

struct Current {
    connection: ClusterConnection,
    since: Instant,
}

impl ClusterHandle {
    /// Prepares the connection; it connects to the seeds in the background, so a Cluster that
    /// is down at start-up only makes calls fail (503) until it is up.
    pub fn new(
        nodes: &[String],
        certificates: Option<&TlsCertificates>,
        settings: &RedisSettings,
    ) -> RedisResult<Self> {
        // The connection starts its background task at once: an error here beats a panic there.
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            RedisError::from((
                ErrorKind::Client,
                "a Redis Cluster connection is opened inside a Tokio runtime",
            ))
        })?;
        let (min_wait, max_wait) = RETRY_WAIT_MS;
        let mut builder = ClusterClientBuilder::new(nodes.iter().map(String::as_str))
            .retries(RETRIES)
            .min_retry_wait(min_wait)
            .max_retry_wait(max_wait);
        if let Some(certificates) = certificates {
            builder = builder.certs(certificates.clone());
        }
        let client = builder.build()?;
        let config = ClusterConfig::new()
            .set_connection_timeout(settings.connect_timeout)
            .set_response_timeout(settings.command_timeout);
        let connection = client.get_pending_async_connection_with_config(config.clone());
        Ok(Self {
            shared: Arc::new(Shared {
                client,
                config,
                runtime,
                current: Mutex::new(Current {
                    connection,
                    since: Instant::now(),
                }),
                seed: super::tls::client(&nodes[0], certificates)?,
                seed_config: AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(settings.connect_timeout))
                    .set_response_timeout(Some(settings.command_timeout)),
                connect_timeout: settings.connect_timeout,
                diagnosis: Mutex::new(None),
            }),
        })
    }

    /// Replaces the connection after a timeout, unless it was replaced within `RENEW_PAUSE`.
    pub fn renew_after_timeout(&self) {
        let mut current = self.shared.lock();
        if current.since.elapsed() < RENEW_PAUSE {
            return;
        }
        tracing::warn!("a Redis Cluster call timed out; reconnecting to read the slot map afresh");
        let _runtime = self.shared.runtime.enter();
        *current = Current {
            connection: self
                .shared
                .client
                .get_pending_async_connection_with_config(self.shared.config.clone()),
            since: Instant::now(),
        };
    }

    /// `cmd` on every primary: their array replies joined (`join`), or one of their replies
    /// once all succeeded (the event outbox's sweep, and loading it).
    pub async fn on_every_primary(&self, cmd: Cmd, join: bool) -> RedisResult<Value> {
        let mut connection = self.connection();
        let policy = if join {
            ResponsePolicy::CombineArrays
        } else {
            ResponsePolicy::AllSucceeded
        };
        let routing = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, Some(policy)));
        let result = connection.route_command(cmd, routing).await;
        self.inspect(result)
    }

    fn connection(&self) -> ClusterConnection {
        self.shared.lock().connection.clone()
    }

    fn inspect<T>(&self, result: RedisResult<T>) -> RedisResult<T> {
        match result {
            Err(error) if error.is_timeout() => {
                self.renew_after_timeout();
                Err(error)
            }
            Err(error) if error.kind() == ErrorKind::ClusterConnectionNotFound => {
                Err(self.explain(error))
            }
            result => result,
        }
    }

    /// `error` with the reason the first seed gave for refusing a connection, if it did. The
    /// seed is asked again at most once per `RENEW_PAUSE`, in the background: a failing call
    /// still fails at once, with the last answer.
    fn explain(&self, error: RedisError) -> RedisError {
        let mut diagnosis = self.shared.diagnosis();
        if diagnosis
            .as_ref()
            .is_none_or(|(at, _)| at.elapsed() >= RENEW_PAUSE)
        {
            // Dated now before asking, so that concurrent calls do not ask too.
            let previous = diagnosis.take().and_then(|(_, reason)| reason);
            *diagnosis = Some((Instant::now(), previous));
            self.shared.runtime.spawn(probe_seed(self.shared.clone()));
        }
        match diagnosis.as_ref().and_then(|(_, reason)| reason.clone()) {
            Some(reason) => RedisError::from((
                ErrorKind::ClusterConnectionNotFound,
                "no Redis Cluster node could be reached",
                reason,
            )),
            None => error,
        }
    }
}

/// Connects to the first seed alone and records why it failed (`None`: it did not).
async fn probe_seed(shared: Arc<Shared>) {
    let seed = shared.seed.get_connection_info().addr().to_string();
    let connect = shared
        .seed
        .get_multiplexed_async_connection_with_config(&shared.seed_config);
    let reason = match tokio::time::timeout(shared.connect_timeout, connect).await {
        Ok(Ok(_)) => None,
        Ok(Err(error)) => Some(format!("seed {seed}: {error}")),
        Err(_) => Some(format!("seed {seed}: no answer within the connect timeout")),
    };
    *shared.diagnosis() = Some((Instant::now(), reason));
}

impl Shared {
    // Every update is one assignment: a value is whole even if a holder panicked.
    fn lock(&self) -> MutexGuard<'_, Current> {
        self.current
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn diagnosis(&self) -> MutexGuard<'_, Option<(Instant, Option<String>)>> {
        self.diagnosis
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl ConnectionLike for ClusterHandle {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let mut connection = self.connection();
        Box::pin(async move {
            let result = connection.req_packed_command(cmd).await;
            self.inspect(result)
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let mut connection = self.connection();
        Box::pin(async move {
            let result = connection
                .req_packed_commands(pipeline, offset, count)
                .await;
            self.inspect(result)
        })
    }

    fn get_db(&self) -> i64 {
        0
    }
}
