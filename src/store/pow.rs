//! The proof-of-work role: solved challenges, remembered until they expire, so that each is
//! accepted once by every instance sharing the store.

use std::time::Duration;

use async_trait::async_trait;

use super::StoreError;

/// Solved proof-of-work challenges, remembered until they expire, so that each is accepted
/// once, by every instance sharing the store.
#[async_trait]
pub trait PowReplayStore: Send + Sync + 'static {
    /// Records the challenge `digest` for `ttl` unless it is recorded already, in one atomic
    /// step; true if it was new. Of concurrent recorders of one digest exactly one gets true. A
    /// record that reaches a shared store after its caller gave up waiting records nothing.
    async fn record_solved_pow(&self, digest: &str, ttl: Duration) -> Result<bool, StoreError>;

    /// Forgets a recorded challenge, so that it is accepted once more: the send it was
    /// recorded for failed on the server side before any SMS went out.
    async fn forget_solved_pow(&self, digest: &str) -> Result<(), StoreError>;
}
