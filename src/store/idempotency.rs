//! The idempotency role: `Idempotency-Key` records, claimed in one step, kept as opaque bytes.

use std::time::Duration;

use async_trait::async_trait;

use super::StoreError;

/// `Idempotency-Key` records. The store keeps them as opaque bytes: what a record means is
/// the use case's business.
#[async_trait]
pub trait IdempotencyStore: Send + Sync + 'static {
    /// Claims `key` with `running` for `lease` (returns `None`), or returns the record the key
    /// already holds. One step, so of concurrent first requests exactly one runs. A claim that
    /// reaches a shared store after its caller gave up waiting claims nothing.
    async fn begin_idempotent(
        &self,
        key: &str,
        running: &[u8],
        lease: Duration,
    ) -> Result<Option<Vec<u8>>, StoreError>;

    /// Replaces the running record with the finished one, kept for `retention`.
    async fn finish_idempotent(
        &self,
        key: &str,
        done: &[u8],
        retention: Duration,
    ) -> Result<(), StoreError>;

    /// Frees `key` if it still holds `running`, so that a retry runs again.
    async fn abandon_idempotent(&self, key: &str, running: &[u8]) -> Result<(), StoreError>;
}
