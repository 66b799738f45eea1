//! The event outbox role: the facts of each change of a verification's life (and of the fraud
//! guard's prefixes), written by the store in the same atomic step as the change, then claimed
//! under a lease, delivered and settled by the dispatcher (`crate::events`). The store keeps
//! facts only (never a code); the payload is rendered at delivery.
//!
//! Order: every event has a subject (the verification id, or `prefix:<digits>`) and a place in
//! that subject's order (`order_ms`, then `seq`). A claim hands out only the first pending event
//! of each subject, so a later event of one verification is never delivered before an earlier
//! one has been delivered (or has failed for good).

use std::time::Duration;

use async_trait::async_trait;

use super::StoreError;

/// What a store's step records of a change: the fact, never the event it makes (the events
/// module decides that: `crate::events::event_of`). Stored as text: `created`,
/// `attempt_failed`, `ended=approved`, `delivery=undelivered`, `prefix_blocked`… (the same
/// words in Rust, Lua and SQL), with the numbers an event carries in the entry's `detail`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fact {
    /// A send created the verification (`expires_at_ms`).
    Created,
    /// The store's own timer, written with `Created` and placed at the code's expiry: nothing
    /// writes when a code merely expires, so the dispatcher reads the verification when the
    /// timer falls due.
    ExpiryDue,
    /// A wrong code counted against the verification (`attempts`: its failures so far).
    AttemptFailed,
    /// The verification ended: approved, canceled, its attempts spent (`attempts`), expired.
    Ended(Ending),
    /// A receipt moved its message's delivery to a final word (`provider`, `message_id`,
    /// `error_code`).
    Delivery(FinalDelivery),
    /// A prefix was suspended or held (`country`, `reason`, `until_ms`, `strikes`).
    PrefixBlocked,
    /// An operator lifted a prefix's block (the same details).
    PrefixLifted,
    /// An authenticator app's factor: enrolled, confirmed by its first code, deleted; a
    /// Twilio challenge of it approved or refused (`identity`, `service_sid` or `api_key`,
    /// `challenge_id`). Never a secret or a code.
    Totp(TotpFact),
}

/// What changed of a TOTP factor, as a fact names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TotpFact {
    FactorCreated,
    FactorVerified,
    FactorDeleted,
    ChallengeApproved,
    ChallengeFailed,
}

/// How a verification ended, as a fact names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ending {
    Approved,
    Canceled,
    MaxAttemptsReached,
    Expired,
}

/// A delivery's final word, as a fact names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FinalDelivery {
    Delivered,
    Undelivered,
}

impl Fact {
    pub const ALL: [Fact; 16] = [
        Self::Created,
        Self::ExpiryDue,
        Self::AttemptFailed,
        Self::Ended(Ending::Approved),
        Self::Ended(Ending::Canceled),
        Self::Ended(Ending::MaxAttemptsReached),
        Self::Ended(Ending::Expired),
        Self::Delivery(FinalDelivery::Delivered),
        Self::Delivery(FinalDelivery::Undelivered),
        Self::PrefixBlocked,
        Self::PrefixLifted,
        Self::Totp(TotpFact::FactorCreated),
        Self::Totp(TotpFact::FactorVerified),
        Self::Totp(TotpFact::FactorDeleted),
        Self::Totp(TotpFact::ChallengeApproved),
        Self::Totp(TotpFact::ChallengeFailed),
    ];

    /// The text the stores write (Lua and SQL spell the same).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::ExpiryDue => "expiry_due",
            Self::AttemptFailed => "attempt_failed",
            Self::Ended(Ending::Approved) => "ended=approved",
            Self::Ended(Ending::Canceled) => "ended=canceled",
            Self::Ended(Ending::MaxAttemptsReached) => "ended=max_attempts_reached",
            Self::Ended(Ending::Expired) => "ended=expired",
            Self::Delivery(FinalDelivery::Delivered) => "delivery=delivered",
            Self::Delivery(FinalDelivery::Undelivered) => "delivery=undelivered",
            Self::PrefixBlocked => "prefix_blocked",
            Self::PrefixLifted => "prefix_lifted",
            Self::Totp(TotpFact::FactorCreated) => "factor_created",
            Self::Totp(TotpFact::FactorVerified) => "factor_verified",
            Self::Totp(TotpFact::FactorDeleted) => "factor_deleted",
            Self::Totp(TotpFact::ChallengeApproved) => "challenge_approved",
            Self::Totp(TotpFact::ChallengeFailed) => "challenge_failed",
        }
    }

    /// A stored fact; also the event names entries written before facts held
    /// (`verification.approved`, `timer.expiry`…), so that an outbox upgraded with events
    /// pending delivers them.
    pub fn parse(raw: &str) -> Option<Self> {
        if let Some(fact) = Self::ALL.into_iter().find(|fact| fact.as_str() == raw) {
            return Some(fact);
        }
        let legacy = match raw {
            "timer.expiry" => "expiry_due",
            "verification.created" => "created",
            "verification.failed_attempt" => "attempt_failed",
            "verification.delivered" => "delivery=delivered",
            "verification.undelivered" => "delivery=undelivered",
            "prefix.suspended" => "prefix_blocked",
            "prefix.lifted" => "prefix_lifted",
            other => {
                let ending = other.strip_prefix("verification.")?;
                return Self::ALL
                    .into_iter()
                    .find(|fact| fact.as_str().strip_prefix("ended=") == Some(ending));
            }
        };
        Self::parse(legacy)
    }
}

/// One event as the outbox holds it. Times are unix milliseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboxEntry {
    /// Its number in its outbox: unique there, ascending in writing order.
    pub seq: u64,
    pub fact: Fact,
    /// What it is about, and what it is ordered within: the verification id, or
    /// `prefix:<digits>`.
    pub subject: String,
    /// E.164 (masked in the payload), `""` for a prefix event.
    pub phone_e164: String,
    pub purpose: String,
    /// When it happened.
    pub at_ms: u64,
    /// Its place in its subject's order: `at_ms`, or the timer's due time.
    pub order_ms: u64,
    /// Kind-specific facts, `key=value` pairs joined by `;` (e.g. `attempts=3`,
    /// `provider=twilio;message_id=SM…`, `country=GB;reason=surge;until_ms=…`).
    pub detail: String,
}

impl OutboxEntry {
    /// The `webhook-id`: the same on every try, unique across restarts of an embedded store
    /// (whose numbers start again) by the time it happened.
    pub fn webhook_id(&self) -> String {
        format!("msg_{}_{}", self.at_ms, self.seq)
    }
}

/// An event handed to one dispatcher until `lease` runs out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimedEntry {
    pub event: OutboxEntry,
    /// Tries before this one.
    pub attempts: u32,
    /// The endpoints (bits by their index) that already took it.
    pub delivered_to: u64,
    /// The claim's own token: a settle with another (a lease that ran out) changes nothing.
    pub lease: u64,
}

/// How a claimed event's try ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Settlement {
    /// Every endpoint took it (or none wanted it): it leaves the outbox.
    Done,
    /// Try again at `due_ms`; `delivered_to` are the endpoints that took it so far.
    Retry {
        due_ms: u64,
        delivered_to: u64,
        error: String,
    },
    /// Given up (retried for the whole retry period): kept for the operator's replay.
    Failed { delivered_to: u64, error: String },
}

/// An event given up on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailedEntry {
    pub event: OutboxEntry,
    pub attempts: u32,
    pub delivered_to: u64,
    pub error: String,
    pub failed_at_ms: u64,
}

/// The outbox at a glance (for the metrics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutboxStatus {
    /// Events due or retrying (timers not yet due left out).
    pub pending: u64,
    /// The place (`order_ms`) of the oldest of them.
    pub oldest_ms: Option<u64>,
    pub failed: u64,
}

/// Events written with the changes they describe, claimed under a lease, settled.
#[async_trait]
pub trait EventStore: Send + Sync + 'static {
    /// Whether this process's steps write events (off when no endpoint is configured: then
    /// nothing is written and the send and verify cost nothing more).
    async fn record_events(&self, on: bool) -> Result<(), StoreError>;

    /// Up to `limit` due events, each the first pending one of its subject, leased for `lease`
    /// (another claim skips them until then). One atomic step: concurrent dispatchers never
    /// get one event at once.
    async fn claim_events(
        &self,
        limit: usize,
        lease: Duration,
    ) -> Result<Vec<ClaimedEntry>, StoreError>;

    /// Records a try's outcome if `claim` still holds the event's lease; false otherwise.
    async fn settle_event(
        &self,
        claim: &ClaimedEntry,
        settlement: &Settlement,
    ) -> Result<bool, StoreError>;

    /// Failed events, oldest first.
    async fn failed_events(&self, limit: usize) -> Result<Vec<FailedEntry>, StoreError>;

    /// Puts failed events (`seqs`; empty: all) back as due now, their tries counted anew.
    /// Returns how many.
    async fn replay_failed(&self, seqs: &[u64]) -> Result<u64, StoreError>;

    async fn outbox_status(&self) -> Result<OutboxStatus, StoreError>;
}

impl OutboxEntry {
    /// A fact of verification `id` that happened at `at_ms`, to append (the store numbers it).
    /// For a step that records one: `OutboxEntry::of_verification(fact, ...)`, then
    /// `with_detail` for its numbers, then the backend's append inside the step (see
    /// `crate::events`).
    pub fn of_verification(
        fact: Fact,
        id: &str,
        phone_e164: &str,
        purpose: &str,
        at_ms: u64,
    ) -> Self {
        Self {
            seq: 0,
            fact,
            subject: id.to_owned(),
            phone_e164: phone_e164.to_owned(),
            purpose: purpose.to_owned(),
            at_ms,
            order_ms: at_ms,
            detail: String::new(),
        }
    }

    /// A fact of TOTP factor `factor` (its SID is the subject: one factor's events in order),
    /// with its `detail` (`identity=…;service_sid=…`).
    pub fn of_factor(fact: TotpFact, factor: &str, at_ms: u64, detail: String) -> Self {
        Self {
            detail,
            ..Self::of_verification(Fact::Totp(fact), factor, "", "", at_ms)
        }
    }

    /// An event of a destination prefix (the fraud guard's).
    pub fn of_prefix(fact: Fact, prefix: &str, at_ms: u64) -> Self {
        Self {
            subject: [PREFIX_SUBJECT, prefix].concat(),
            ..Self::of_verification(fact, "", "", "", at_ms)
        }
    }

    pub fn with_detail(mut self, detail: String) -> Self {
        self.detail = detail;
        self
    }

    /// Placed (and due) at `order_ms` rather than when it was written: the expiry timer.
    pub fn placed_at(mut self, order_ms: u64) -> Self {
        self.order_ms = order_ms;
        self
    }

    /// The value of `key` in `detail`.
    pub fn detail_value(&self, key: &str) -> Option<&str> {
        self.detail.split(';').find_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            (k == key).then_some(v)
        })
    }

    /// The prefix of a prefix event.
    pub fn prefix(&self) -> Option<&str> {
        self.subject.strip_prefix(PREFIX_SUBJECT)
    }
}

/// What a prefix event's subject starts with (a verification id never does).
pub const PREFIX_SUBJECT: &str = "prefix:";

/// How many pending events placed by now, from the oldest, a claim looks through for the first
/// of each subject: a bound on the claim's work however long the outbox has grown (the expiry
/// timers of pending codes, placed later, are not looked at).
pub const CLAIM_WINDOW: usize = 2048;

/// A prefix event's facts: its country, why, until when and its strikes.
pub fn block_detail(block: &super::PrefixBlock) -> String {
    format!(
        "country={};reason={};until_ms={};strikes={}",
        block.country,
        block.reason.as_str(),
        block.until_ms,
        block.strikes
    )
}
