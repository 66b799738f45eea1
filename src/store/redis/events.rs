//! The event outbox of the Redis store (`events.lua`): on one node (or a Sentinel's primary)
//! one outbox under the tag `{events}`, appended to inside the scripts that change a
//! verification or a prefix block (on one node a script may touch keys of several tags, as the
//! issue already does with the budgets). A Cluster has no outbox yet: start-up refuses events
//! there (`events::EventSettings::check_store`).

use std::sync::LazyLock;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use redis::{Script, Value};

use super::{RedisStore, duration_ms, keys};
use crate::domain::{Destination, Purpose, VerificationId};
use crate::store::events::CLAIM_WINDOW;
use crate::store::{
    ClaimedEvent, EventKind, EventStore, FailedEvent, OutboxStatus, Settlement, StoreError,
    StoredEvent,
};

/// Prepended to every script that appends events.
pub(super) const EVENTS_PRELUDE: &str = include_str!("events.lua");
const SPLIT_PRELUDE: &str = include_str!("events_split.lua");

struct EventScripts {
    claim: Script,
    settle: Script,
    replay: Script,
}

static EVENT_SCRIPTS: LazyLock<EventScripts> = LazyLock::new(|| EventScripts {
    claim: Script::new(&[SPLIT_PRELUDE, include_str!("events_claim.lua")].concat()),
    settle: Script::new(&[SPLIT_PRELUDE, include_str!("events_settle.lua")].concat()),
    replay: Script::new(&[SPLIT_PRELUDE, include_str!("events_replay.lua")].concat()),
});

/// What a step's events are about, passed to its script (`events.lua`).
pub(super) struct EventSubject<'a> {
    pub subject: &'a str,
    pub phone_e164: &'a str,
    pub purpose: &'a str,
    pub detail: &'a str,
}

impl<'a> EventSubject<'a> {
    /// The verification `id` of (`destination`, `purpose`).
    pub fn of(id: &'a VerificationId, destination: &'a Destination, purpose: &'a Purpose) -> Self {
        Self {
            subject: id.as_str(),
            phone_e164: destination.key(),
            purpose: purpose.as_str(),
            detail: "",
        }
    }
}

impl<'a> EventSubject<'a> {
    /// A prefix block's (`subject`: `prefix:<digits>`).
    pub fn prefix(subject: &'a str, detail: &'a str) -> Self {
        Self {
            subject,
            phone_e164: "",
            purpose: "",
            detail,
        }
    }
}

impl RedisStore {
    /// Whether this step's script writes events: on, and one node.
    pub(super) fn writes_events(&self) -> bool {
        self.events_on.load(Ordering::Relaxed) && self.connections.one_node()
    }

    /// The outbox's KEYS and ARGV at the end of a script call, when events are written.
    pub(super) fn outbox_args(
        &self,
        subject: &EventSubject<'_>,
    ) -> Option<([String; 2], [String; 5])> {
        if !self.writes_events() {
            return None;
        }
        let [entries, pending, ..] = keys::outbox_keys();
        Some((
            [entries, pending],
            [
                subject.subject.to_owned(),
                subject.phone_e164.to_owned(),
                subject.purpose.to_owned(),
                subject.detail.to_owned(),
                "outbox".to_owned(),
            ],
        ))
    }

    pub(super) fn add_outbox(
        &self,
        invocation: &mut redis::ScriptInvocation<'_>,
        subject: &EventSubject<'_>,
    ) {
        if let Some((keys, args)) = self.outbox_args(subject) {
            invocation.key(&keys[..]).arg(&args[..]);
        }
    }
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(text) => Some(text.clone()),
        _ => None,
    }
}

/// An entry (`events.lua`) as the event, its tries, the endpoints that took it and its lease.
fn parse_entry(field: &str, entry: &str) -> Option<ClaimedEvent> {
    let fields: Vec<&str> = entry.splitn(11, '|').collect();
    let [
        _due,
        attempts,
        delivered_to,
        lease,
        kind,
        subject,
        phone,
        purpose,
        at,
        place,
        detail,
    ] = fields[..]
    else {
        return None;
    };
    let event = StoredEvent {
        seq: field.parse().ok()?,
        kind: EventKind::parse(kind)?,
        subject: subject.to_owned(),
        phone_e164: phone.to_owned(),
        purpose: purpose.to_owned(),
        at_ms: at.parse().ok()?,
        order_ms: place.parse().ok()?,
        detail: detail.to_owned(),
    };
    Some(ClaimedEvent {
        event,
        attempts: attempts.parse().ok()?,
        delivered_to: delivered_to.parse().ok()?,
        lease: lease.parse().ok()?,
    })
}

fn field_of(seq: u64) -> String {
    format!("{seq:015}")
}

fn broken(what: &str) -> StoreError {
    StoreError::Protocol(format!("event outbox: {what}"))
}

#[async_trait]
impl EventStore for RedisStore {
    async fn record_events(&self, on: bool) -> Result<(), StoreError> {
        self.events_on.store(on, Ordering::Relaxed);
        Ok(())
    }

    async fn claim_events(
        &self,
        limit: usize,
        lease: Duration,
    ) -> Result<Vec<ClaimedEvent>, StoreError> {
        let token = rand::random::<u64>() >> 12 | 1;
        let [entries, pending, ..] = keys::outbox_keys();
        let mut invocation = EVENT_SCRIPTS.claim.prepare_invoke();
        invocation
            .key(entries)
            .key(pending)
            .arg(limit)
            .arg(CLAIM_WINDOW)
            .arg(duration_ms(lease))
            .arg(token);
        let mut connection = self.connections.get();
        let reply: Vec<Value> = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        reply
            .chunks(2)
            .map(|pair| {
                let (field, entry) = match pair {
                    [field, entry] => (text(field), text(entry)),
                    _ => (None, None),
                };
                let (field, entry) = field.zip(entry).ok_or_else(|| broken("claim reply"))?;
                parse_entry(&field, &entry).ok_or_else(|| broken("entry"))
            })
            .collect()
    }

    async fn settle_event(
        &self,
        claim: &ClaimedEvent,
        settlement: &Settlement,
    ) -> Result<bool, StoreError> {
        let (how, due_ms, delivered_to, error) = match settlement {
            Settlement::Done => ("done", 0, 0, ""),
            Settlement::Retry {
                due_ms,
                delivered_to,
                error,
            } => ("retry", *due_ms, *delivered_to, error.as_str()),
            Settlement::Failed {
                delivered_to,
                error,
            } => ("failed", 0, *delivered_to, error.as_str()),
        };
        let mut invocation = EVENT_SCRIPTS.settle.prepare_invoke();
        invocation
            .key(&keys::outbox_keys()[..])
            .arg(field_of(claim.event.seq))
            .arg(claim.lease)
            .arg(how)
            .arg(due_ms)
            .arg(delivered_to)
            .arg(error);
        let mut connection = self.connections.get();
        let settled: i64 = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        Ok(settled == 1)
    }

    async fn failed_events(&self, limit: usize) -> Result<Vec<FailedEvent>, StoreError> {
        let [entries, _, failed, errors] = keys::outbox_keys();
        let mut connection = self.connections.get();
        let command = redis::cmd("ZRANGE")
            .arg(&failed)
            .arg(0)
            .arg(limit.max(1) as i64 - 1)
            .arg("WITHSCORES")
            .to_owned();
        let listed: Vec<(String, u64)> = self.bounded(command.query_async(&mut connection)).await?;
        if listed.is_empty() {
            return Ok(Vec::new());
        }
        let fields: Vec<&str> = listed.iter().map(|(field, _)| field.as_str()).collect();
        let mut pipe = redis::pipe();
        pipe.cmd("HMGET").arg(&entries).arg(&fields);
        pipe.cmd("HMGET").arg(&errors).arg(&fields);
        let (bodies, reasons): (Vec<Option<String>>, Vec<Option<String>>) =
            self.bounded(pipe.query_async(&mut connection)).await?;
        let mut failed_events = Vec::new();
        for (((field, failed_at_ms), body), error) in listed.iter().zip(bodies).zip(reasons) {
            let Some(body) = body else { continue };
            let ClaimedEvent {
                event,
                attempts,
                delivered_to,
                ..
            } = parse_entry(field, &body).ok_or_else(|| broken("entry"))?;
            failed_events.push(FailedEvent {
                event,
                attempts,
                delivered_to,
                error: error.unwrap_or_default(),
                failed_at_ms: *failed_at_ms,
            });
        }
        Ok(failed_events)
    }

    async fn replay_failed(&self, seqs: &[u64]) -> Result<u64, StoreError> {
        let mut invocation = EVENT_SCRIPTS.replay.prepare_invoke();
        invocation.key(&keys::outbox_keys()[..]);
        for seq in seqs {
            invocation.arg(field_of(*seq));
        }
        let mut connection = self.connections.get();
        self.bounded(invocation.invoke_async(&mut connection)).await
    }

    async fn outbox_status(&self) -> Result<OutboxStatus, StoreError> {
        let [_, pending, failed, _] = keys::outbox_keys();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, duration_ms);
        let mut pipe = redis::pipe();
        pipe.cmd("ZCOUNT").arg(&pending).arg("-inf").arg(now);
        pipe.cmd("ZRANGE")
            .arg(&pending)
            .arg(0)
            .arg(0)
            .arg("WITHSCORES");
        pipe.cmd("ZCARD").arg(&failed);
        let mut connection = self.connections.get();
        let (count, oldest, failed): (u64, Vec<(String, u64)>, u64) =
            self.bounded(pipe.query_async(&mut connection)).await?;
        Ok(OutboxStatus {
            pending: count,
            oldest_ms: oldest
                .first()
                .map(|(_, place)| *place)
                .filter(|place| *place <= now),
            failed,
        })
    }
}
