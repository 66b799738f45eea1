//! The embedded store's idempotency role: `Idempotency-Key` records.

use async_trait::async_trait;

use super::*;
use crate::store::IdempotencyStore;

#[async_trait]
impl IdempotencyStore for MemoryStore {
    async fn begin_idempotent(
        &self,
        key: &str,
        running: &[u8],
        lease: Duration,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let now = self.now_ms();
        let mut shard = self.idempotency.lock(key);
        if let Some(entry) = shard.get(key).filter(|entry| entry.expires_at_ms > now) {
            return Ok(Some(entry.record.to_vec()));
        }
        let entry = IdempotencyEntry {
            record: running.into(),
            expires_at_ms: now.saturating_add(duration_ms(lease)),
        };
        shard.insert(key.into(), entry);
        Ok(None)
    }

    async fn finish_idempotent(
        &self,
        key: &str,
        done: &[u8],
        retention: Duration,
    ) -> Result<(), StoreError> {
        let entry = IdempotencyEntry {
            record: done.into(),
            expires_at_ms: self.now_ms().saturating_add(duration_ms(retention)),
        };
        self.idempotency.lock(key).insert(key.into(), entry);
        Ok(())
    }

    async fn abandon_idempotent(&self, key: &str, running: &[u8]) -> Result<(), StoreError> {
        let mut shard = self.idempotency.lock(key);
        if shard
            .get(key)
            .is_some_and(|entry| *entry.record == *running)
        {
            shard.remove(key);
        }
        Ok(())
    }
}
