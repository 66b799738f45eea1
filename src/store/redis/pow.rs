//! The Redis store's used proof-of-work challenges: `SET NX PX` on
//! `verify_code:pow:{<digest>}` in `record_pow.lua` (which does nothing once its caller has
//! given up), so that of concurrent recorders of one digest on any instance exactly one finds
//! it new.

use async_trait::async_trait;

use super::*;
use crate::store::PowReplayStore;

#[async_trait]
impl PowReplayStore for RedisStore {
    async fn record_solved_pow(&self, digest: &str, ttl: Duration) -> Result<bool, StoreError> {
        let mut invocation = Invocation::of(&SCRIPTS.record_pow);
        invocation.key(keys::pow(digest));
        // PX is at least 1: a zero TTL is an error in Redis, and such a challenge is expired.
        invocation
            .arg(duration_ms(ttl).max(1))
            .arg(self.give_up_at_ms());
        let mut connection = self.connections.get();
        let recorded: i64 = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        if recorded < 0 {
            return Err(self.ran_too_late());
        }
        Ok(recorded == 1)
    }

    async fn forget_solved_pow(&self, digest: &str) -> Result<(), StoreError> {
        let mut connection = self.connections.get();
        let command = redis::cmd("DEL").arg(keys::pow(digest)).to_owned();
        self.bounded(command.query_async::<()>(&mut connection))
            .await
    }
}
