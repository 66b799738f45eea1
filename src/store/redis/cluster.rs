//! The Cluster connection: the redis crate's multiplexed `ClusterConnection`, renewed after a
//! timeout.
//!
//! The crate follows MOVED and ASK and refreshes its slot map on redirections, on READONLY and
//! on refused connections. A primary that stops answering without closing its connections
//! (frozen, or cut off by a partition) yields only timeouts, which the crate retries on the
//! same node even after the cluster has promoted its replica. So a timed-out call renews the
//! connection, at most once per `RENEW_PAUSE`; the new one reads the slot map afresh.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use redis::aio::ConnectionLike;
use redis::cluster::{ClusterClient, ClusterClientBuilder, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult, Value};

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
}

struct Current {
    connection: ClusterConnection,
    since: Instant,
}

impl ClusterHandle {
    /// Prepares the connection; it connects to the seeds in the background, so a Cluster that
    /// is down at start-up only makes calls fail (503) until it is up.
    pub fn new(nodes: &[String], settings: &RedisSettings) -> RedisResult<Self> {
        // The connection starts its background task at once: an error here beats a panic there.
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            RedisError::from((
                ErrorKind::Client,
                "a Redis Cluster connection is opened inside a Tokio runtime",
            ))
        })?;
        let (min_wait, max_wait) = RETRY_WAIT_MS;
        let client = ClusterClientBuilder::new(nodes.iter().map(String::as_str))
            .retries(RETRIES)
            .min_retry_wait(min_wait)
            .max_retry_wait(max_wait)
            .build()?;
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

    fn connection(&self) -> ClusterConnection {
        self.shared.lock().connection.clone()
    }

    fn inspect<T>(&self, result: RedisResult<T>) -> RedisResult<T> {
        if result.as_ref().is_err_and(RedisError::is_timeout) {
            self.renew_after_timeout();
        }
        result
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Current> {
        // Every update is one assignment: the value is whole even if a holder panicked.
        self.current
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
