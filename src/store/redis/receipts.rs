//! The Redis store's delivery receipts: a provider's message leads to its verification through
//! `verify_code:message:{<provider>:<message id>}` (`<E.164> <purpose> <id>`, one `SET` after
//! the SMS went out); a receipt reads it, then moves the verification's delivery in
//! `receipt.lua`, under the phone's hash tag, which appends a final word's event to the outbox. The index never changes once written, so reading
//! it outside the script is safe (as a verification's target is).

use async_trait::async_trait;

use super::*;
use crate::store::{DeliveryTransition, Receipt, ReceiptOutcome, ReceiptStore};

#[async_trait]
impl ReceiptStore for RedisStore {
    async fn record_message(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        id: &VerificationId,
        provider: &str,
        message_id: &str,
        keep: Duration,
    ) -> Result<(), StoreError> {
        let leads_to = [&encode_target(destination, purpose), " ", id.as_str()].concat();
        let command = redis::cmd("SET")
            .arg(keys::message(provider, message_id))
            .arg(leads_to)
            .arg("PX")
            .arg(duration_ms(keep).max(1))
            .to_owned();
        let mut connection = self.connections.get();
        self.bounded(command.query_async::<()>(&mut connection))
            .await
    }

    async fn apply_receipt(&self, receipt: &Receipt<'_>) -> Result<ReceiptOutcome, StoreError> {
        let mut connection = self.connections.get();
        let command = redis::cmd("GET")
            .arg(keys::message(receipt.provider, receipt.message_id))
            .to_owned();
        let raw: Option<String> = self.bounded(command.query_async(&mut connection)).await?;
        let Some(raw) = raw else {
            return Ok(ReceiptOutcome::Unknown);
        };
        let broken = || StoreError::Protocol(format!("message index {raw:?}"));
        let (target, id) = raw.rsplit_once(' ').ok_or_else(broken)?;
        let target = decode_target(target).ok_or_else(broken)?;
        let id = VerificationId::parse(id).ok_or_else(broken)?;
        let delivery = match receipt.delivery {
            DeliveryStatus::Delivered => "d",
            DeliveryStatus::Undelivered => "x",
            DeliveryStatus::Sent | DeliveryStatus::Unconfirmed => "",
        };
        let mut invocation = SCRIPTS.receipt.prepare_invoke();
        invocation
            .key(keys::verification(&target.phone_e164, &id))
            .arg(delivery)
            .arg(receipt.error_code.unwrap_or(""));
        if let Some((_, detail)) = receipt.event().filter(|_| self.writes_events()) {
            let subject = EventSubject {
                subject: id.as_str(),
                phone_e164: &target.phone_e164,
                purpose: &target.purpose,
                detail: &detail,
            };
            self.add_outbox(&mut invocation, &subject);
        }
        let reply: Vec<Value> = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        if reply.is_empty() {
            return Ok(ReceiptOutcome::Unknown);
        }
        if int_at(&reply, 0) == Some(0) {
            return Ok(ReceiptOutcome::Unchanged);
        }
        let transition = (|| {
            Some(DeliveryTransition {
                previous: delivery_of(bytes_at(&reply, 1)?)?,
                created_at_ms: u64_at(&reply, 2)?,
                changed_at_ms: u64_at(&reply, 3)?,
                verification: id,
                target,
                provider: receipt.provider.to_owned(),
                message_id: receipt.message_id.to_owned(),
                delivery: receipt.delivery,
                error_code: receipt.error_code.map(str::to_owned),
            })
        })();
        transition
            .map(ReceiptOutcome::Changed)
            .ok_or_else(|| protocol("receipt", &reply))
    }
}
