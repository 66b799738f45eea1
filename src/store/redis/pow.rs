//! The Redis store's used proof-of-work challenges: `SET NX PX` on
//! `verify_code:pow:{<digest>}`, one command, so that of concurrent recorders of one digest on
//! any instance exactly one finds it new.

use async_trait::async_trait;

use super::*;
use crate::store::PowReplayStore;

#[async_trait]
impl PowReplayStore for RedisStore {
    async fn record_solved_pow(&self, digest: &str, ttl: Duration) -> Result<bool, StoreError> {
        let mut connection = self.connections.get();
        // PX is at least 1: a zero TTL is an error in Redis, and such a challenge is expired.
        let command = redis::cmd("SET")
            .arg(keys::pow(digest))
            .arg(1)
            .arg("NX")
            .arg("PX")
            .arg(duration_ms(ttl).max(1))
            .to_owned();
        let reply: Option<String> = self.bounded(command.query_async(&mut connection)).await?;
        Ok(reply.is_some())
    }
}
