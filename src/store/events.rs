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

/// What happened. `ExpiryDue` is the store's own timer, written with `Created` at the code's
/// expiry: nothing writes when a code merely expires, so the dispatcher, when the timer falls
/// due, reads the verification and delivers `verification.expired` only if it is still
/// unresolved (not approved, canceled or spent) then.
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
    ExpiryDue,
}

impl EventKind {
    pub const ALL: [EventKind; 11] = [
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
        Self::ExpiryDue,
    ];

    /// The name stored and, but for the timer, the payload's `type`.
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
            Self::ExpiryDue => "timer.expiry",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == raw)
    }
}

/// One event as the outbox holds it. Times are unix milliseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredEvent {
    /// Its number in its outbox: unique there, ascending in writing order.
    pub seq: u64,
    pub kind: EventKind,
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

impl StoredEvent {
    /// The `webhook-id`: the same on every try, unique across restarts of an embedded store
    /// (whose numbers start again) by the time it happened.
    pub fn webhook_id(&self) -> String {
        format!("msg_{}_{}", self.at_ms, self.seq)
    }
}

/// An event handed to one dispatcher until `lease` runs out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimedEvent {
    pub event: StoredEvent,
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
pub struct FailedEvent {
    pub event: StoredEvent,
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
    ) -> Result<Vec<ClaimedEvent>, StoreError>;

    /// Records a try's outcome if `claim` still holds the event's lease; false otherwise.
    async fn settle_event(
        &self,
        claim: &ClaimedEvent,
        settlement: &Settlement,
    ) -> Result<bool, StoreError>;

    /// Failed events, oldest first.
    async fn failed_events(&self, limit: usize) -> Result<Vec<FailedEvent>, StoreError>;

    /// Puts failed events (`seqs`; empty: all) back as due now, their tries counted anew.
    /// Returns how many.
    async fn replay_failed(&self, seqs: &[u64]) -> Result<u64, StoreError>;

    async fn outbox_status(&self) -> Result<OutboxStatus, StoreError>;
}

impl StoredEvent {
    /// An event of verification `id` that happened at `at_ms`, to append (the store numbers
    /// it). For a step that emits one: `StoredEvent::of_verification(kind, ...)`, then
    /// `with_detail` for its facts, then the backend's append inside the step (see
    /// `crate::events`).
    pub fn of_verification(
        kind: EventKind,
        id: &str,
        phone_e164: &str,
        purpose: &str,
        at_ms: u64,
    ) -> Self {
        Self {
            seq: 0,
            kind,
            subject: id.to_owned(),
            phone_e164: phone_e164.to_owned(),
            purpose: purpose.to_owned(),
            at_ms,
            order_ms: at_ms,
            detail: String::new(),
        }
    }

    /// An event of a destination prefix (the fraud guard's).
    pub fn of_prefix(kind: EventKind, prefix: &str, at_ms: u64) -> Self {
        Self {
            subject: [PREFIX_SUBJECT, prefix].concat(),
            ..Self::of_verification(kind, "", "", "", at_ms)
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
