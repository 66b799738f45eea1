//! The embedded store's dev outbox role: the dev outbox (dev mode only).

use async_trait::async_trait;

use super::*;
use crate::store::OutboxStore;

#[async_trait]
impl OutboxStore for MemoryStore {
    async fn push_outbox(&self, message: &OutboxMessage) -> Result<(), StoreError> {
        let expires_at_ms = self.now_ms().saturating_add(duration_ms(OUTBOX_TTL));
        let mut outboxes = self.outboxes.lock(&message.phone);
        let outbox = outboxes.entry(message.phone.as_str().into()).or_default();
        if outbox.messages.len() == OUTBOX_CAPACITY {
            outbox.messages.pop_front();
        }
        outbox.messages.push_back(message.clone());
        outbox.expires_at_ms = expires_at_ms;
        Ok(())
    }

    async fn outbox(&self, destination: &Destination) -> Result<Vec<OutboxMessage>, StoreError> {
        let now = self.now_ms();
        Ok(self
            .outboxes
            .lock(destination.key())
            .get(destination.key())
            .filter(|outbox| outbox.expires_at_ms > now)
            .map(|outbox| outbox.messages.iter().cloned().collect())
            .unwrap_or_default())
    }
}
