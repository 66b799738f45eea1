//! The embedded store's used proof-of-work challenges: digest → expiry, one shard lock per
//! record, so that of concurrent recorders of one digest exactly one finds it new.

use async_trait::async_trait;

use super::*;
use crate::store::PowReplayStore;

/// A solved challenge, kept until the challenge itself would have expired.
#[derive(Debug)]
pub(super) struct SolvedPow {
    expires_at_ms: u64,
}

impl Expiring for SolvedPow {
    fn expires_at_ms(&self) -> u64 {
        self.expires_at_ms
    }
}

#[async_trait]
impl PowReplayStore for MemoryStore {
    async fn record_solved_pow(&self, digest: &str, ttl: Duration) -> Result<bool, StoreError> {
        let now = self.now_ms();
        let mut shard = self.pow_replays.lock(digest);
        if shard
            .get(digest)
            .is_some_and(|solved| solved.expires_at_ms > now)
        {
            return Ok(false);
        }
        let solved = SolvedPow {
            expires_at_ms: now.saturating_add(duration_ms(ttl)),
        };
        shard.insert(digest.into(), solved);
        Ok(true)
    }

    async fn forget_solved_pow(&self, digest: &str) -> Result<(), StoreError> {
        self.pow_replays.lock(digest).remove(digest);
        Ok(())
    }
}
