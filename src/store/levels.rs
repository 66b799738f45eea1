//! The fraud guard's levels (issue 39): each scope's decayed traffic (number ranges at several
//! depths, the country, the mail domain, the service), remembered over days in one small
//! record per scope, and the destinations that verified before (as keyed digests, never as
//! numbers), whom no suspension of their range refuses.

use std::time::Duration;

use async_trait::async_trait;

use super::StoreError;
use crate::domain::traffic::{HalfLives, LevelChange, LevelCounts, RecordLife};

/// One event for the levels of one send: what it adds to each of `scopes`, at `now_ms`, and for
/// a conversion the destination to remember as returning (its digest, until `now_ms` +
/// `returning_ttl`).
#[derive(Clone, Copy, Debug)]
pub struct LevelUpdate<'a> {
    pub scopes: &'a [&'a str],
    pub change: LevelChange,
    pub now_ms: u64,
    pub half_lives: HalfLives,
    /// How long a scope's record outlives its last event (by the scope's history sends, all
    /// its shards' on a sharded store, after the event).
    pub record_life: RecordLife,
    pub returning: Option<(u64, Duration)>,
}

#[async_trait]
pub trait LevelStore: Send + Sync + 'static {
    /// Decays each scope's record to `now_ms`, adds the change, and answers the records after
    /// it, in the order of `scopes`. Atomic per scope: concurrent updates are each counted once.
    async fn count_levels(&self, update: &LevelUpdate<'_>) -> Result<Vec<LevelCounts>, StoreError>;

    /// Whether any of `digests` (the destination's under the current key and the previous
    /// one) verified within its remembered time.
    async fn is_returning(&self, digests: &[u64], now_ms: u64) -> Result<bool, StoreError>;
}
