//! The Cluster and Sentinel backends of the suites: a clean cluster from the pool, or a
//! Sentinel set-up of the test's own (a primary and one sentinel: quick to start, and nothing
//! in a suite fails over).

use std::time::Duration;

use vcode::store::redis::RedisSettings;

use super::{Backend, ClusterLease, RedisSentinel};

/// The same bound as the suites' single Redis.
const COMMAND_TIMEOUT: Duration = Duration::from_millis(500);
/// Long enough that a busy machine never makes the sentinel fail the primary over.
const SUITE_DOWN_AFTER: Duration = Duration::from_secs(30);

/// A deployment a test runs on; it lives as long as the test holds it.
pub enum Deployment {
    Cluster(ClusterLease),
    Sentinel(RedisSentinel),
}

impl Deployment {
    /// The deployment `backend` needs, if it is a Cluster or Sentinel one.
    pub fn start(backend: Backend) -> Option<Self> {
        match backend {
            Backend::Memory | Backend::Redis | Backend::Postgres => None,
            Backend::Cluster => Some(Self::Cluster(ClusterLease::take())),
            Backend::Sentinel => Some(Self::Sentinel(RedisSentinel::start(0, 1, SUITE_DOWN_AFTER))),
        }
    }

    pub fn settings(&self) -> RedisSettings {
        match self {
            Self::Cluster(cluster) => cluster.settings(COMMAND_TIMEOUT),
            Self::Sentinel(sentinel) => sentinel.settings(COMMAND_TIMEOUT),
        }
    }
}
