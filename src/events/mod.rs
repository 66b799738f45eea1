//! Events an application can follow: every change of a verification's life (and the fraud
//! guard's prefix blocks), delivered at least once to the configured endpoints as Standard
//! Webhooks requests (`signature`), in order per verification, from the store's outbox
//! (`crate::store::EventStore`), by the `dispatcher`. This module owns the event types and
//! their payload; the store owns the outbox and writes each event in the step of its change.
//!
//! The stores record facts, never events: what changed (`ended=approved`,
//! `delivery=undelivered`, `attempt_failed`…, `crate::store::Fact`) and the numbers an event
//! carries. [`event_of`] is the one place a fact becomes an event (the dispatcher adds the
//! expiry timer's, which reads the verification). How a store step records a fact (e.g. a
//! delivery receipt moving a verification to `delivered`), inside the step that makes the
//! change and only there:
//! - memory: `self.events.append(OutboxEntry::of_verification(Fact::Delivery(..), id,
//!   phone, purpose, unix_now_ms()).with_detail(format!("provider={p};message_id={m}")))`
//!   while holding the verification's lock (the outbox lock is always taken last);
//! - Redis: prepend `EVENTS_PRELUDE` to the script, call
//!   `outbox_append('delivery=delivered', now, now, 'provider=…;message_id=…')` in it,
//!   and `self.add_outbox(&mut invocation, &EventSubject::of(id, phone, purpose))` on the
//!   invocation (it adds the outbox's keys and arguments only when events are on);
//! - PostgreSQL: change the verification's row; its trigger (`vcode_verification_facts`,
//!   functions.sql) writes the fact. A step whose detail is not on the row calls
//!   `vcode_fact_append` in its own function while that trigger is enabled (`vcode_receipt`).
//!
//! `detail` is `key=value` pairs joined by `;`: the payload shows each as a field of `data`
//! (`provider`, `message_id`, `error_code` for receipts). Never a code.

pub mod dispatcher;
mod operations;
pub mod settings;
pub mod signature;

use serde_json::{Map, Value, json};

pub use self::dispatcher::{Dispatcher, Dispatching};
pub use self::operations::EventOperations;
pub use self::settings::{Endpoint, EventSettings, EventVariables};
pub use self::signature::WebhookSecret;
pub use crate::store::{Fact, OutboxEntry};

use crate::domain::masked_e164;
use crate::store::{Ending, FinalDelivery, TotpFact};

/// The events an application can follow: each payload's `type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    Created,
    Delivered,
    Undelivered,
    Approved,
    FailedAttempt,
    MaxAttemptsReached,
    Expired,
    Canceled,
    PrefixSuspended,
    PrefixLifted,
    FactorCreated,
    FactorVerified,
    FactorDeleted,
    ChallengeApproved,
    ChallengeFailed,
}

impl EventKind {
    pub const ALL: [EventKind; 15] = [
        Self::Created,
        Self::Delivered,
        Self::Undelivered,
        Self::Approved,
        Self::FailedAttempt,
        Self::MaxAttemptsReached,
        Self::Expired,
        Self::Canceled,
        Self::PrefixSuspended,
        Self::PrefixLifted,
        Self::FactorCreated,
        Self::FactorVerified,
        Self::FactorDeleted,
        Self::ChallengeApproved,
        Self::ChallengeFailed,
    ];

    /// The payload's `type`, and the name an endpoint's filter lists.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "verification.created",
            Self::Delivered => "verification.delivered",
            Self::Undelivered => "verification.undelivered",
            Self::Approved => "verification.approved",
            Self::FailedAttempt => "verification.failed_attempt",
            Self::MaxAttemptsReached => "verification.max_attempts_reached",
            Self::Expired => "verification.expired",
            Self::Canceled => "verification.canceled",
            Self::PrefixSuspended => "prefix.suspended",
            Self::PrefixLifted => "prefix.lifted",
            Self::FactorCreated => "factor.created",
            Self::FactorVerified => "factor.verified",
            Self::FactorDeleted => "factor.deleted",
            Self::ChallengeApproved => "challenge.approved",
            Self::ChallengeFailed => "challenge.failed",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == raw)
    }
}

/// The event a fact makes; `None` for the expiry timer, which makes `Expired` only if the
/// verification is still unresolved when it falls due (the dispatcher reads it then).
pub fn event_of(fact: Fact) -> Option<EventKind> {
    Some(match fact {
        Fact::Created => EventKind::Created,
        Fact::ExpiryDue => return None,
        Fact::AttemptFailed => EventKind::FailedAttempt,
        Fact::Ended(Ending::Approved) => EventKind::Approved,
        Fact::Ended(Ending::Canceled) => EventKind::Canceled,
        Fact::Ended(Ending::MaxAttemptsReached) => EventKind::MaxAttemptsReached,
        Fact::Ended(Ending::Expired) => EventKind::Expired,
        Fact::Delivery(FinalDelivery::Delivered) => EventKind::Delivered,
        Fact::Delivery(FinalDelivery::Undelivered) => EventKind::Undelivered,
        Fact::PrefixBlocked => EventKind::PrefixSuspended,
        Fact::PrefixLifted => EventKind::PrefixLifted,
        Fact::Totp(TotpFact::FactorCreated) => EventKind::FactorCreated,
        Fact::Totp(TotpFact::FactorVerified) => EventKind::FactorVerified,
        Fact::Totp(TotpFact::FactorDeleted) => EventKind::FactorDeleted,
        Fact::Totp(TotpFact::ChallengeApproved) => EventKind::ChallengeApproved,
        Fact::Totp(TotpFact::ChallengeFailed) => EventKind::ChallengeFailed,
    })
}

/// Fields of `detail` shown as numbers.
const NUMERIC_DETAILS: [&str; 4] = ["expires_at_ms", "attempts", "until_ms", "strikes"];

/// The request body of `event` (shown as `kind`: the expiry timer is sent as `expired`):
/// `{"type", "timestamp", "data"}` as Standard Webhooks suggests. The phone is masked.
pub fn payload(event: &OutboxEntry, kind: EventKind) -> Vec<u8> {
    let mut data = Map::new();
    match event.prefix() {
        Some(prefix) => {
            data.insert("prefix".into(), json!(prefix));
        }
        // A factor's (its SID is its subject): no phone, no purpose.
        None if matches!(event.fact, Fact::Totp(_)) => {
            data.insert("factor_id".into(), json!(event.subject));
        }
        None => {
            data.insert("verification_id".into(), json!(event.subject));
            data.insert("purpose".into(), json!(event.purpose));
            data.insert("phone".into(), json!(masked_e164(&event.phone_e164)));
        }
    }
    let at_ms = if kind == EventKind::Expired {
        event.order_ms
    } else {
        event.at_ms
    };
    data.insert("occurred_at_ms".into(), json!(at_ms));
    for pair in event.detail.split(';').filter(|pair| !pair.is_empty()) {
        let Some((key, value)) = pair.split_once('=') else {
            continue;
        };
        let value = match value.parse::<u64>() {
            Ok(number) if NUMERIC_DETAILS.contains(&key) => Value::from(number),
            _ => Value::from(value),
        };
        data.insert(key.to_owned(), value);
    }
    let body = json!({
        "type": kind.as_str(),
        "timestamp": rfc3339(at_ms),
        "data": data,
    });
    serde_json::to_vec(&body).expect("JSON of plain values")
}

/// `2026-12-02T13:27:10.123Z`.
fn rfc3339(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Days to a civil date (Howard Hinnant's algorithm), from 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        unix_ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fact_reads_back_and_every_event_has_one_fact() {
        for fact in Fact::ALL {
            assert_eq!(Fact::parse(fact.as_str()), Some(fact));
        }
        for kind in EventKind::ALL {
            let facts: Vec<Fact> = Fact::ALL
                .into_iter()
                .filter(|fact| event_of(*fact) == Some(kind))
                .collect();
            assert_eq!(facts.len(), 1, "{kind:?}: {facts:?}");
        }
        assert_eq!(event_of(Fact::ExpiryDue), None, "the dispatcher decides");
    }

    #[test]
    fn entries_written_before_facts_keep_their_events() {
        // An outbox upgraded with events pending holds their event names (the factors' events
        // came after facts: never stored under their names).
        for kind in &EventKind::ALL[..10] {
            let kind = *kind;
            let fact = Fact::parse(kind.as_str()).unwrap_or_else(|| panic!("{kind:?}"));
            assert_eq!(event_of(fact), Some(kind));
        }
        assert_eq!(Fact::parse("timer.expiry"), Some(Fact::ExpiryDue));
        assert_eq!(Fact::parse("verification.sent"), None);
        assert_eq!(Fact::parse("ended=pending"), None);
    }

    #[test]
    fn formats_utc_times() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_614_265_330_123), "2021-02-25T15:02:10.123Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn a_payload_masks_the_phone_and_carries_no_code() {
        let event = OutboxEntry::of_verification(
            Fact::AttemptFailed,
            "AAECAwQFBgcICQoLDA0ODw",
            "+8613800138000",
            "login",
            1_614_265_330_123,
        )
        .with_detail("attempts=2".into());
        let body: Value =
            serde_json::from_slice(&payload(&event, EventKind::FailedAttempt)).unwrap();
        assert_eq!(body["type"], "verification.failed_attempt");
        assert_eq!(body["timestamp"], "2021-02-25T15:02:10.123Z");
        assert_eq!(body["data"]["verification_id"], "AAECAwQFBgcICQoLDA0ODw");
        assert_eq!(body["data"]["attempts"], 2);
        let phone = body["data"]["phone"].as_str().unwrap();
        assert!(phone.contains('*') && !phone.contains("00138"), "{phone}");
    }

    #[test]
    fn the_expiry_timer_is_sent_as_expired_at_its_time() {
        let event =
            OutboxEntry::of_verification(Fact::ExpiryDue, "id", "+8613800138000", "login", 1000)
                .placed_at(301_000);
        let body: Value = serde_json::from_slice(&payload(&event, EventKind::Expired)).unwrap();
        assert_eq!(body["type"], "verification.expired");
        assert_eq!(body["data"]["occurred_at_ms"], 301_000);
    }
}
