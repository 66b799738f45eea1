//! The one connection a `RedisStore` shares between all requests, whatever the topology.
//!
//! Every variant is multiplexed: requests pipeline over it and never wait for an exclusive
//! connection (a pool of exclusive connections measured ~3x slower here). That is also why
//! deadpool-redis's `cluster` and `sentinel` pools are not used: they hand one connection to
//! one request at a time, and its Sentinel pool recycles a connection on PING, which a demoted
//! primary still answers.

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClientBuilder, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisError, RedisFuture, Value};

use super::sentinel::SentinelConnection;
use super::{RedisSettings, RedisTopology};

/// Redirections (MOVED, ASK, READONLY after a failover) a Cluster call may follow; they are
/// quick, and the command timeout bounds the whole call anyway.
const CLUSTER_RETRIES: u32 = 3;
/// Pauses between Cluster retries (ms): short, so a retry still fits in the command timeout.
const CLUSTER_RETRY_WAIT_MS: (u64, u64) = (10, 100);

#[derive(Clone)]
pub enum RedisConnection {
    /// One node, reconnected by the redis crate's `ConnectionManager`.
    Single(ConnectionManager),
    /// The redis crate's Cluster connection: one multiplexed connection per node; it follows
    /// MOVED/ASK and refreshes its slot map on redirections, READONLY and lost nodes.
    Cluster(ClusterConnection),
    /// The primary that Sentinel names, followed through failovers (`sentinel.rs`).
    Sentinel(SentinelConnection),
}

impl RedisConnection {
    /// Prepares the connection without waiting for Redis to answer.
    pub fn open(settings: &RedisSettings) -> Result<Self, RedisError> {
        Ok(match &settings.topology {
            RedisTopology::Single { url } => Self::Single(single(url, settings)?),
            RedisTopology::Cluster { nodes } => Self::Cluster(cluster(nodes, settings)?),
            RedisTopology::Sentinel { sentinels, master } => {
                Self::Sentinel(SentinelConnection::new(sentinels, master, settings)?)
            }
        })
    }
}

fn single(url: &str, settings: &RedisSettings) -> Result<ConnectionManager, RedisError> {
    let client = redis::Client::open(url)?;
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

fn cluster(nodes: &[String], settings: &RedisSettings) -> Result<ClusterConnection, RedisError> {
    let (min_wait, max_wait) = CLUSTER_RETRY_WAIT_MS;
    let client = ClusterClientBuilder::new(nodes.iter().map(String::as_str))
        .retries(CLUSTER_RETRIES)
        .min_retry_wait(min_wait)
        .max_retry_wait(max_wait)
        .build()?;
    let config = ClusterConfig::new()
        .set_connection_timeout(settings.connect_timeout)
        .set_response_timeout(settings.command_timeout);
    // Connects to the seeds in the background: a Cluster that is down at start-up only makes
    // requests fail (503) until it is up.
    Ok(client.get_pending_async_connection_with_config(config))
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
