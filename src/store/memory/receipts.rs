//! The embedded store's receipts role: which message carried which send, and what became of it.

use async_trait::async_trait;

use super::verifications::message_key;
use super::*;
use crate::store::{DeliveryCount, ReceiptStore, SentMessage};

#[async_trait]
impl ReceiptStore for MemoryStore {
    async fn record_message(
        &self,
        message: &SentMessage<'_>,
        keep: Duration,
    ) -> Result<(), StoreError> {
        let SentMessage {
            verification: id,
            provider,
            message_id,
            guarded,
            ..
        } = *message;
        let key = message_key(provider, message_id);
        let entry = MessageEntry {
            verification: id.clone(),
            guarded,
            retained_until_ms: self.now_ms().saturating_add(duration_ms(keep)),
        };
        self.messages.lock(&key).insert(key.into_boxed_str(), entry);
        Ok(())
    }

    async fn apply_receipt(&self, receipt: &Receipt<'_>) -> Result<ReceiptOutcome, StoreError> {
        let now = self.now_ms();
        let key = message_key(receipt.provider, receipt.message_id);
        let Some((id, guarded)) = self
            .messages
            .lock(&key)
            .get(key.as_str())
            .filter(|entry| entry.retained_until_ms > now)
            .map(|entry| (entry.verification.clone(), entry.guarded))
        else {
            return Ok(ReceiptOutcome::Unknown);
        };
        let id_key = self.keys.verification(&id);
        let mut verifications = self.verifications.lock(id_key);
        let Some(entry) = verifications
            .get_mut(&id_key)
            .filter(|entry| entry.retained_until_ms > now)
        else {
            return Ok(ReceiptOutcome::Unknown);
        };
        let previous = entry.delivery;
        if receipt.delivery.rank() <= previous.rank() {
            return Ok(ReceiptOutcome::Unchanged);
        }
        entry.delivery = receipt.delivery;
        entry.delivery_error = receipt.error_code.map(Into::into);
        if let Some((fact, detail)) = receipt.fact() {
            self.verification_event(fact, &id, entry, || detail);
            self.count_delivery(receipt, entry.target.destination());
        }
        Ok(ReceiptOutcome::Changed(DeliveryTransition {
            verification: id.clone(),
            target: entry.target.to_target(),
            provider: receipt.provider.to_owned(),
            message_id: receipt.message_id.to_owned(),
            previous,
            delivery: receipt.delivery,
            error_code: receipt.error_code.map(str::to_owned),
            created_at_ms: entry.created_at_unix_ms,
            guarded,
            changed_at_ms: unix_now_ms(),
        }))
    }

    async fn delivery_counts(&self, from_hour: u64) -> Result<Vec<DeliveryCount>, StoreError> {
        let counts = self
            .delivery_counts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Ok(counts
            .range((from_hour, String::new(), String::new())..)
            .map(|(_, count)| count.clone())
            .collect())
    }
}
