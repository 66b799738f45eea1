//! The operator's side of the outbox: the events given up after the retry period, and their
//! replay (due again at once, their tries counted anew, the same `webhook-id`).

use std::sync::Arc;

use crate::store::{EventStore, FailedEntry, StoreError};

/// The most failed events one list shows.
pub const MAX_LISTED: usize = 1000;

pub struct EventOperations {
    outbox: Arc<dyn EventStore>,
}

impl EventOperations {
    pub fn new(outbox: Arc<dyn EventStore>) -> Self {
        Self { outbox }
    }

    /// The oldest `limit` failed events (at most [`MAX_LISTED`]).
    pub async fn failed(&self, limit: usize) -> Result<Vec<FailedEntry>, StoreError> {
        self.outbox.failed_events(limit.min(MAX_LISTED)).await
    }

    /// Puts the failed events `seqs` (none: all) back; returns how many.
    pub async fn replay(&self, seqs: &[u64]) -> Result<u64, StoreError> {
        let replayed = self.outbox.replay_failed(seqs).await?;
        tracing::info!(replayed, "failed events replayed by an operator");
        Ok(replayed)
    }
}
