//! The Redis store's delivery receipts: a provider's message leads to its verification through
//! `verify_code:message:{<provider>:<message id>}` (`<E.164> <purpose> <id>`, then
//! ` <minute>:<token>` if the fraud guard counted the send; one `SET` after the SMS went out); a
//! receipt reads it, then moves the verification's delivery in `receipt.lua`, under the phone's
//! hash tag, which appends a final word's event to the outbox and counts it in the day's delivery
//! counts (`keys::delivery_counts`: one hash under `{delivery}` on one node, the phone's slot's on
//! a Cluster). The index never changes once written, so reading it outside the script is safe (as a
//! verification's target is).

use async_trait::async_trait;

use super::events::unix_now_ms;
use super::fraud::{decode_mark, encode_mark};
use super::*;
use crate::domain::Region;
use crate::store::{
    DELIVERY_COUNTS_KEPT_HOURS, DeliveryCount, DeliveryTransition, Receipt, ReceiptOutcome,
    ReceiptStore, SentMessage, unix_hour,
};

#[async_trait]
impl ReceiptStore for RedisStore {
    async fn record_message(
        &self,
        message: &SentMessage<'_>,
        keep: Duration,
    ) -> Result<(), StoreError> {
        let SentMessage {
            destination,
            purpose,
            verification: id,
            provider,
            message_id,
            guarded,
        } = *message;
        let mut leads_to = [&encode_target(destination, purpose), " ", id.as_str()].concat();
        if let Some(mark) = guarded {
            leads_to.push(' ');
            leads_to.push_str(&encode_mark(mark));
        }
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
        // The guard's mark, if any, is the one word with a ':'.
        let (leads_to, guarded) = match raw.rsplit_once(' ') {
            Some((rest, mark)) if mark.contains(':') => {
                (rest, Some(decode_mark(mark).ok_or_else(broken)?))
            }
            _ => (raw.as_str(), None),
        };
        let (target, id) = leads_to.rsplit_once(' ').ok_or_else(broken)?;
        let target = decode_target(target).ok_or_else(broken)?;
        let id = VerificationId::parse(id).ok_or_else(broken)?;
        let delivery = match receipt.delivery {
            DeliveryStatus::Delivered => "d",
            DeliveryStatus::Undelivered => "x",
            DeliveryStatus::Sent | DeliveryStatus::Unconfirmed => "",
        };
        let hour = unix_hour(unix_now_ms());
        let country = Phone::parse(&target.phone_e164, Region::default())
            .map_or_else(String::new, |phone| phone.country());
        let slot = (!self.connections.one_node()).then(|| keys::slot_of_tag(&target.phone_e164));
        let mut invocation = Invocation::of(&SCRIPTS.receipt);
        invocation
            .key(&keys::verification_names(&target.phone_e164, &id))
            .key(keys::delivery_counts(slot, hour / 24))
            .arg(delivery)
            .arg(receipt.error_code.unwrap_or(""))
            .arg(format!("{hour} {} {country} ", receipt.provider))
            .arg((DELIVERY_COUNTS_KEPT_HOURS + 24) * 3_600_000);
        if let Some((_, detail)) = receipt.fact().filter(|_| self.writes_events()) {
            let subject = EventSubject {
                tag: &target.phone_e164,
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
                guarded,
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

    async fn delivery_counts(&self, from_hour: u64) -> Result<Vec<DeliveryCount>, StoreError> {
        let to_day = unix_hour(unix_now_ms()) / 24;
        let from_day = (from_hour / 24).max(to_day.saturating_sub(DELIVERY_COUNTS_KEPT_HOURS / 24));
        let fields: Vec<String> = if self.connections.one_node() {
            let mut pipe = redis::pipe();
            for day in from_day..=to_day {
                pipe.cmd("HGETALL").arg(keys::delivery_counts(None, day));
            }
            let mut connection = self.connections.get();
            let days: Vec<HashMap<String, String>> =
                self.bounded(pipe.query_async(&mut connection)).await?;
            days.into_iter()
                .flat_map(|day| day.into_iter().flat_map(|(field, count)| [field, count]))
                .collect()
        } else {
            self.sweep_delivery_counts(from_day, to_day).await?
        };
        Ok(sum_delivery_counts(&fields, from_hour))
    }
}

/// `<hour> <provider> <country> d|x`, receipts, ... summed by (hour, provider, country), from
/// `from_hour` on.
fn sum_delivery_counts(fields: &[String], from_hour: u64) -> Vec<DeliveryCount> {
    let mut counts: std::collections::BTreeMap<(u64, &str, &str), DeliveryCount> =
        std::collections::BTreeMap::new();
    for pair in fields.chunks(2) {
        let [field, count] = pair else { continue };
        let mut parts = field.split(' ');
        let (Some(hour), Some(provider), Some(country), Some(word)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let (Ok(hour), Ok(count)) = (hour.parse::<u64>(), count.parse::<u64>()) else {
            continue;
        };
        if hour < from_hour {
            continue;
        }
        let entry = counts
            .entry((hour, provider, country))
            .or_insert_with(|| DeliveryCount {
                hour,
                provider: provider.to_owned(),
                country: country.to_owned(),
                ..DeliveryCount::default()
            });
        match word {
            "d" => entry.delivered += count,
            "x" => entry.undelivered += count,
            _ => {}
        }
    }
    counts.into_values().collect()
}
