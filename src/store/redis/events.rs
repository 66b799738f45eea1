//! The event outbox of the Redis store (`events.lua`), appended to inside the scripts that
//! change a verification or a prefix block, so an event is written in the step of its change.
//!
//! On one node (or a Sentinel's primary) one outbox under the tag `{events}` (on one node a
//! script may touch keys of several tags, as the issue already does with the budgets).
//!
//! On a Cluster a script stays within one slot, so each slot has its own outbox, under a tag
//! that hashes to that slot (`keys::outbox_keys_in`): a verification's events all go to its
//! phone's slot (so they keep their order), a prefix's to the guard's. The dispatcher finds
//! the outboxes with due events in two ways: the slots this process wrote to since its last
//! claim, a settled event's slot when the settle finds its outbox next due (the subject's next
//! event at once, a timer at its time), and when its own expiry timers and
//! retries fall due (hints kept in memory: a lock and
//! an insert on the send's path, no command), and, every `SWEEP_EVERY`, a sweep
//! (`events_sweep.lua`, one script on every primary) that lists the slots with events placed
//! by now: what another instance left when it died. The sweep costs each primary tens of
//! milliseconds (docs/events.md), hence the hints and 16 calls of 1,024 slots each; a slot it finds
//! busy but not yet due (a dead instance's lease or backoff) is looked at again after 1, 2, 4,
//! 8 and 16 s. A claim, a settle and a replay each stay one script on one slot, the lease
//! inside the entry as on one node; an event's `seq` carries its slot in its low 14 bits.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::{LazyLock, MutexGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use redis::{Script, Value};

use super::connection::RedisConnection;
use super::{Invocation, RedisStore, duration_ms, keys};
use crate::domain::{Destination, Purpose, VerificationId};
use crate::store::events::CLAIM_WINDOW;
use crate::store::{
    ClaimedEntry, EventStore, Fact, FailedEntry, OutboxEntry, OutboxStatus, Settlement, StoreError,
};

/// The one-node outbox's keys, formatted once.
static ONE_NODE_OUTBOX: LazyLock<[String; 4]> = LazyLock::new(keys::outbox_keys);

/// Prepended to every script that appends events.
pub(super) const EVENTS_PRELUDE: &str = include_str!("events.lua");
const SPLIT_PRELUDE: &str = include_str!("events_split.lua");

struct EventScripts {
    claim: Script,
    settle: Script,
    replay: Script,
}

/// The Cluster sweep, each slot's outbox tag before it (`local TAGS = {...}`, about 130 kB):
/// loaded on each primary once, then called by its digest.
static SWEEP: LazyLock<Script> = LazyLock::new(|| Script::new(&SWEEP_SOURCE));

static SWEEP_SOURCE: LazyLock<String> = LazyLock::new(|| {
    let tags: Vec<String> = keys::slot_tags()
        .iter()
        .map(|tag| format!("'{tag}'"))
        .collect();
    format!(
        "local TAGS = {{{}}}\n{}",
        tags.join(","),
        include_str!("events_sweep.lua")
    )
});

static EVENT_SCRIPTS: LazyLock<EventScripts> = LazyLock::new(|| EventScripts {
    claim: Script::new(&[SPLIT_PRELUDE, include_str!("events_claim.lua")].concat()),
    settle: Script::new(&[SPLIT_PRELUDE, include_str!("events_settle.lua")].concat()),
    replay: Script::new(&[SPLIT_PRELUDE, include_str!("events_replay.lua")].concat()),
});

/// What a step's events are about, passed to its script (`events.lua`).
pub(super) struct EventSubject<'a> {
    /// The hash tag of the step's keys (the destination's key, or the guard's): on a Cluster the
    /// event goes to the outbox of that tag's slot.
    pub tag: &'a str,
    pub subject: &'a str,
    pub phone_e164: &'a str,
    pub purpose: &'a str,
    pub detail: &'a str,
}

impl<'a> EventSubject<'a> {
    /// The verification `id` of (`destination`, `purpose`).
    pub fn of(id: &'a VerificationId, destination: &'a Destination, purpose: &'a Purpose) -> Self {
        Self {
            tag: destination.key(),
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
            tag: keys::FRAUD_TAG,
            subject,
            phone_e164: "",
            purpose: "",
            detail,
        }
    }
}

/// How often a dispatcher on a Cluster sweeps every slot's outbox (`events_sweep.lua`); in
/// between it claims from the slots its own process wrote to or retries in.
const SWEEP_EVERY: Duration = Duration::from_secs(30);
/// The slots one sweep call looks at: 16 calls a sweep, each holding a primary about 1 to 2 ms
/// (docs/events.md).
const SWEEP_CHUNK: u16 = 1024;
/// How long one sweep call may take.
const SWEEP_TIMEOUT: Duration = Duration::from_secs(5);
/// When a slot the sweep found busy is looked at again (ms after the sweep).
const RECHECKS_MS: [u64; 5] = [1_000, 2_000, 4_000, 8_000, 16_000];
/// How long after its expiry an expiry timer's slot is looked at.
const TIMER_SLACK_MS: u64 = 500;
/// Timed hints are kept by due time rounded up to this (ms): fewer entries.
const HINT_GRAIN_MS: u64 = 100;
/// How long a Cluster's outbox status (a sweep) is reused for the metrics.
const STATUS_EVERY: Duration = Duration::from_secs(30);
/// The bits of a Cluster event's `seq` that hold its slot.
const SLOT_BITS: u32 = 14;

/// What a Cluster store knows of its outboxes between claims.
#[derive(Default)]
pub(super) struct ClusterOutboxes {
    /// The slots this process appended to, or claimed from, since its last claim.
    hinted: BTreeSet<u16>,
    /// Slots to look at from a time on (unix ms, rounded up to `HINT_GRAIN_MS`): this
    /// process's expiry timers and retries, and the sweep's re-checks.
    timed: BTreeMap<u64, BTreeSet<u16>>,
    swept_at: Option<Instant>,
    status: Option<(Instant, OutboxStatus)>,
}

impl ClusterOutboxes {
    fn hint_at(&mut self, slot: u16, due_ms: u64) {
        let due = due_ms.div_ceil(HINT_GRAIN_MS) * HINT_GRAIN_MS;
        self.timed.entry(due).or_default().insert(slot);
    }

    /// The slots hinted now and those whose time has come.
    fn take_due(&mut self, now_ms: u64) -> BTreeSet<u16> {
        let mut slots = std::mem::take(&mut self.hinted);
        let later = self.timed.split_off(&(now_ms + 1));
        for (_, due) in std::mem::replace(&mut self.timed, later) {
            slots.extend(due);
        }
        slots
    }
}

impl RedisStore {
    /// Whether this step's script writes events.
    pub(super) fn writes_events(&self) -> bool {
        self.events_on.load(Ordering::Relaxed)
    }

    /// On a Cluster with events on, looks at the outbox of `tag`'s slot again `after` from
    /// now (an expiry timer this process wrote); nothing else (no clock read) otherwise.
    pub(super) fn hint_outbox_after(&self, tag: &str, after: Duration) {
        if self.writes_events() && !self.connections.one_node() {
            // The script's clock places the timer a little after this one's reading.
            let due_ms = unix_now_ms() + duration_ms(after) + TIMER_SLACK_MS;
            self.cluster_outboxes()
                .hint_at(keys::slot_of_tag(tag), due_ms);
        }
    }

    fn cluster_outboxes(&self) -> MutexGuard<'_, ClusterOutboxes> {
        // Every update is a whole insert or assignment: the value holds even after a panic.
        self.cluster_outboxes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The outbox's KEYS and ARGV at the end of a script call, when events are written (as
    /// `add_outbox` writes them): on a
    /// Cluster the outbox of the slot of `subject.tag` (noted for this process's dispatcher).
    pub(super) fn outbox_args(
        &self,
        subject: &EventSubject<'_>,
    ) -> Option<([String; 2], [String; 5])> {
        if !self.writes_events() {
            return None;
        }
        let [entries, pending, ..] = if self.connections.one_node() {
            keys::outbox_keys()
        } else {
            let slot = keys::slot_of_tag(subject.tag);
            self.cluster_outboxes().hinted.insert(slot);
            keys::outbox_keys_in(slot)
        };
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

    /// `outbox_args` written straight into `invocation`: no string is built for it on one
    /// node (every step with events on passes these, a verify by phone even when it finds no
    /// code).
    pub(super) fn add_outbox(&self, invocation: &mut Invocation<'_>, subject: &EventSubject<'_>) {
        if !self.writes_events() {
            return;
        }
        if self.connections.one_node() {
            let [entries, pending, ..] = &*ONE_NODE_OUTBOX;
            invocation.key(entries).key(pending);
        } else {
            let slot = keys::slot_of_tag(subject.tag);
            self.cluster_outboxes().hinted.insert(slot);
            let [entries, pending, ..] = keys::outbox_keys_in(slot);
            invocation.key(entries).key(pending);
        }
        invocation
            .arg(subject.subject)
            .arg(subject.phone_e164)
            .arg(subject.purpose)
            .arg(subject.detail)
            .arg("outbox");
    }
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(text) => Some(text.clone()),
        _ => None,
    }
}

/// An entry (`events.lua`) as the event, its tries, the endpoints that took it and its lease;
/// `slot`: the Cluster slot of its outbox (kept in its `seq`), `None` on one node.
fn parse_entry(field: &str, entry: &str, slot: Option<u16>) -> Option<ClaimedEntry> {
    let fields: Vec<&str> = entry.splitn(11, '|').collect();
    let [
        _due,
        attempts,
        delivered_to,
        lease,
        fact,
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
    let local: u64 = field.parse().ok()?;
    let event = OutboxEntry {
        seq: match slot {
            Some(slot) => local << SLOT_BITS | u64::from(slot),
            None => local,
        },
        fact: Fact::parse(fact)?,
        subject: subject.to_owned(),
        phone_e164: phone.to_owned(),
        purpose: purpose.to_owned(),
        at_ms: at.parse().ok()?,
        order_ms: place.parse().ok()?,
        detail: detail.to_owned(),
    };
    Some(ClaimedEntry {
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

pub(super) fn unix_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, duration_ms)
}

/// One outbox: its keys and, on a Cluster, its slot.
struct Outbox {
    keys: [String; 4],
    slot: Option<u16>,
}

impl Outbox {
    fn single() -> Self {
        Self {
            keys: keys::outbox_keys(),
            slot: None,
        }
    }

    fn in_slot(slot: u16) -> Self {
        Self {
            keys: keys::outbox_keys_in(slot),
            slot: Some(slot),
        }
    }

    /// The outbox that holds event `seq`, and the event's field there.
    fn of(seq: u64, cluster: bool) -> (Self, String) {
        if !cluster {
            return (Self::single(), field_of(seq));
        }
        let slot = (seq & ((1 << SLOT_BITS) - 1)) as u16;
        (Self::in_slot(slot), field_of(seq >> SLOT_BITS))
    }
}

impl RedisStore {
    fn is_cluster(&self) -> bool {
        !self.connections.one_node()
    }

    /// Up to `limit` due events of `outbox`, leased under `token`.
    async fn claim_in(
        &self,
        outbox: &Outbox,
        limit: usize,
        lease: Duration,
        token: u64,
    ) -> Result<Vec<ClaimedEntry>, StoreError> {
        let [entries, pending, ..] = &outbox.keys;
        let mut invocation = Invocation::of(&EVENT_SCRIPTS.claim);
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
                parse_entry(&field, &entry, outbox.slot).ok_or_else(|| broken("entry"))
            })
            .collect()
    }

    /// `events_sweep.lua` in `mode` on every primary: its replies joined.
    async fn sweep(&self, mode: &str) -> Result<Vec<i64>, StoreError> {
        self.sweep_with(mode, &[]).await
    }

    /// The delivery counts of the days `from_day..=to_day` of every slot (`receipts.rs`):
    /// their fields and values, one after the other.
    pub(super) async fn sweep_delivery_counts(
        &self,
        from_day: u64,
        to_day: u64,
    ) -> Result<Vec<String>, StoreError> {
        let days: Vec<u64> = (from_day..=to_day).collect();
        self.sweep_with("delivery", &days).await
    }

    /// `sweep_with` over every slot, `SWEEP_CHUNK` slots a call: each call holds a primary
    /// for a fraction of the whole sweep's time.
    async fn sweep_with<T: redis::FromRedisValue>(
        &self,
        mode: &str,
        days: &[u64],
    ) -> Result<Vec<T>, StoreError> {
        let mut joined = Vec::new();
        for first in (0..keys::CLUSTER_SLOTS).step_by(usize::from(SWEEP_CHUNK)) {
            let last = first + (SWEEP_CHUNK - 1);
            joined.extend(self.sweep_chunk(mode, first, last, days).await?);
        }
        Ok(joined)
    }

    async fn sweep_chunk<T: redis::FromRedisValue>(
        &self,
        mode: &str,
        first: u16,
        last: u16,
        days: &[u64],
    ) -> Result<Vec<T>, StoreError> {
        let RedisConnection::Cluster(cluster) = self.connections.get() else {
            return Err(broken("a sweep outside a Cluster"));
        };
        let now = unix_now_ms();
        let call = |command: &str, script: &str| {
            redis::cmd(command)
                .arg(script)
                .arg(0)
                .arg(mode)
                .arg(now)
                .arg(first)
                .arg(last)
                .arg(days)
                .to_owned()
        };
        let sweep = async {
            let evalsha = || call("EVALSHA", SWEEP.get_hash());
            match cluster.on_every_primary(evalsha(), true).await {
                Ok(reply) => Ok(reply),
                // A primary that does not have it yet (a new one, or after a restart) answers
                // NOSCRIPT, which the joined reply does not survive: load it everywhere, then
                // again.
                Err(_) => {
                    let load = redis::cmd("SCRIPT")
                        .arg("LOAD")
                        .arg(SWEEP_SOURCE.as_str())
                        .to_owned();
                    cluster.on_every_primary(load, false).await?;
                    cluster.on_every_primary(evalsha(), true).await
                }
            }
        };
        // Never on a request's path but the operator's; a loaded primary may take longer
        // than a step's command timeout allows.
        let reply = self.bounded_for(SWEEP_TIMEOUT, sweep).await?;
        redis::from_redis_value(reply).map_err(|_| broken("sweep reply"))
    }

    /// The slots whose pending index holds events placed by now.
    async fn sweep_slots(&self) -> Result<Vec<u16>, StoreError> {
        let slots = self.sweep("due").await?;
        Ok(slots
            .into_iter()
            .filter_map(|slot| u16::try_from(slot).ok())
            .collect())
    }

    /// `claim_events` on a Cluster: from the slots this process wrote to and, every
    /// `SWEEP_EVERY`, from every slot with events placed by now. The slots are asked at once,
    /// each for its share of `limit`; one that gave its whole share is asked again next time,
    /// the others when a settle finds their next event due.
    async fn claim_in_cluster(
        &self,
        limit: usize,
        lease: Duration,
        token: u64,
    ) -> Result<Vec<ClaimedEntry>, StoreError> {
        let now = unix_now_ms();
        let (mut slots, sweep) = {
            let mut outboxes = self.cluster_outboxes();
            let sweep = outboxes
                .swept_at
                .is_none_or(|at| at.elapsed() >= SWEEP_EVERY);
            if sweep {
                outboxes.swept_at = Some(Instant::now());
            }
            (outboxes.take_due(now), sweep)
        };
        if sweep {
            match self.sweep_slots().await {
                Ok(found) => {
                    let mut outboxes = self.cluster_outboxes();
                    for slot in &found {
                        for after in RECHECKS_MS {
                            outboxes.hint_at(*slot, now + after);
                        }
                    }
                    slots.extend(found);
                }
                Err(error) => {
                    // Swept again at the next claim.
                    self.cluster_outboxes().swept_at = None;
                    self.cluster_outboxes().hinted.extend(&slots);
                    return Err(error);
                }
            }
        }
        // Beyond `limit` slots, the rest wait for the next claim.
        let chosen: Vec<u16> = slots.iter().copied().take(limit.max(1)).collect();
        self.cluster_outboxes()
            .hinted
            .extend(slots.iter().skip(chosen.len()));
        if chosen.is_empty() {
            return Ok(Vec::new());
        }
        let share = limit.div_ceil(chosen.len()).max(1);
        let claims = chosen.iter().map(|slot| async move {
            let claimed = self
                .claim_in(&Outbox::in_slot(*slot), share, lease, token)
                .await;
            (*slot, claimed)
        });
        let mut claimed = Vec::new();
        let mut first_error = None;
        for (slot, result) in futures_util::future::join_all(claims).await {
            match result {
                Ok(events) => {
                    // A full share may have left due events behind; otherwise each settle
                    // says when its slot is next due.
                    if events.len() >= share {
                        self.cluster_outboxes().hinted.insert(slot);
                    }
                    claimed.extend(events);
                }
                Err(error) => {
                    self.cluster_outboxes().hinted.insert(slot);
                    first_error.get_or_insert(error);
                }
            }
        }
        match first_error {
            Some(error) if claimed.is_empty() => Err(error),
            _ => Ok(claimed),
        }
    }

    /// Failed events of every slot, oldest first, at most `limit`.
    async fn failed_in_cluster(&self, limit: usize) -> Result<Vec<FailedEntry>, StoreError> {
        let slots = self.sweep("failed").await?;
        let mut failed = Vec::new();
        for slot in slots
            .into_iter()
            .filter_map(|slot| u16::try_from(slot).ok())
        {
            let outbox = Outbox::in_slot(slot);
            let command = redis::cmd("ZRANGE")
                .arg(&outbox.keys[2])
                .arg(0)
                .arg(limit.max(1) as i64 - 1)
                .arg("WITHSCORES")
                .to_owned();
            let mut connection = self.connections.get();
            let listed: Vec<(String, u64)> =
                self.bounded(command.query_async(&mut connection)).await?;
            failed.extend(self.failed_in(&outbox, &listed).await?);
        }
        failed.sort_by_key(|event| event.failed_at_ms);
        failed.truncate(limit);
        Ok(failed)
    }

    /// The failed events `listed` (field, failed at) of `outbox`.
    async fn failed_in(
        &self,
        outbox: &Outbox,
        listed: &[(String, u64)],
    ) -> Result<Vec<FailedEntry>, StoreError> {
        if listed.is_empty() {
            return Ok(Vec::new());
        }
        let [entries, _, _, errors] = &outbox.keys;
        let fields: Vec<&str> = listed.iter().map(|(field, _)| field.as_str()).collect();
        let mut pipe = redis::pipe();
        pipe.cmd("HMGET").arg(entries).arg(&fields);
        pipe.cmd("HMGET").arg(errors).arg(&fields);
        let mut connection = self.connections.get();
        let (bodies, reasons): (Vec<Option<String>>, Vec<Option<String>>) =
            self.bounded(pipe.query_async(&mut connection)).await?;
        let mut failed_events = Vec::new();
        for (((field, failed_at_ms), body), error) in listed.iter().zip(bodies).zip(reasons) {
            let Some(body) = body else { continue };
            let ClaimedEntry {
                event,
                attempts,
                delivered_to,
                ..
            } = parse_entry(field, &body, outbox.slot).ok_or_else(|| broken("entry"))?;
            failed_events.push(FailedEntry {
                event,
                attempts,
                delivered_to,
                error: error.unwrap_or_default(),
                failed_at_ms: *failed_at_ms,
            });
        }
        Ok(failed_events)
    }

    /// `events_replay.lua` on `outbox`: `fields`, or (none) every failed one.
    async fn replay_in(&self, outbox: &Outbox, fields: &[String]) -> Result<u64, StoreError> {
        let mut invocation = Invocation::of(&EVENT_SCRIPTS.replay);
        invocation.key(&outbox.keys[..]);
        for field in fields {
            invocation.arg(field);
        }
        let mut connection = self.connections.get();
        self.bounded(invocation.invoke_async(&mut connection)).await
    }

    /// `outbox_status` of the one outbox.
    async fn read_status(&self) -> Result<OutboxStatus, StoreError> {
        let [_, pending, failed, _] = keys::outbox_keys();
        let now = unix_now_ms();
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

    /// `outbox_status` of every slot's outbox: each primary's sums (`events_sweep.lua`).
    async fn read_cluster_status(&self) -> Result<OutboxStatus, StoreError> {
        let sums = self.sweep("status").await?;
        let mut status = OutboxStatus::default();
        for sum in sums.chunks(3) {
            let [pending, oldest, failed] = sum else {
                return Err(broken("sweep reply"));
            };
            status.pending += u64::try_from(*pending).unwrap_or(0);
            status.failed += u64::try_from(*failed).unwrap_or(0);
            if let Ok(place) = u64::try_from(*oldest) {
                status.oldest_ms = Some(status.oldest_ms.map_or(place, |seen| seen.min(place)));
            }
        }
        Ok(status)
    }
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
    ) -> Result<Vec<ClaimedEntry>, StoreError> {
        let token = rand::random::<u64>() >> 12 | 1;
        if self.is_cluster() {
            return self.claim_in_cluster(limit, lease, token).await;
        }
        self.claim_in(&Outbox::single(), limit, lease, token).await
    }

    async fn settle_event(
        &self,
        claim: &ClaimedEntry,
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
        let (outbox, field) = Outbox::of(claim.event.seq, self.is_cluster());
        let mut invocation = Invocation::of(&EVENT_SCRIPTS.settle);
        invocation
            .key(&outbox.keys[..])
            .arg(field)
            .arg(claim.lease)
            .arg(how)
            .arg(due_ms)
            .arg(delivered_to)
            .arg(error);
        let mut connection = self.connections.get();
        let answer: Vec<i64> = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        let settled = answer.first() == Some(&1);
        // On a Cluster the slot is looked at again when the script says its outbox is next
        // due (the subject's next event, at once; an expiry timer, at its time; nothing left,
        // never), and a retry when it falls due: no claim that can only come back empty.
        if let (Some(slot), true) = (outbox.slot, settled) {
            let mut outboxes = self.cluster_outboxes();
            if let Some(&next) = answer.get(1).filter(|next| **next >= 0) {
                outboxes.hint_at(slot, u64::try_from(next).unwrap_or(0));
            }
            if let Settlement::Retry { due_ms, .. } = settlement {
                outboxes.hint_at(slot, *due_ms);
            }
        }
        Ok(settled)
    }

    async fn failed_events(&self, limit: usize) -> Result<Vec<FailedEntry>, StoreError> {
        if self.is_cluster() {
            return self.failed_in_cluster(limit).await;
        }
        let outbox = Outbox::single();
        let mut connection = self.connections.get();
        let command = redis::cmd("ZRANGE")
            .arg(&outbox.keys[2])
            .arg(0)
            .arg(limit.max(1) as i64 - 1)
            .arg("WITHSCORES")
            .to_owned();
        let listed: Vec<(String, u64)> = self.bounded(command.query_async(&mut connection)).await?;
        self.failed_in(&outbox, &listed).await
    }

    async fn replay_failed(&self, seqs: &[u64]) -> Result<u64, StoreError> {
        if !self.is_cluster() {
            let fields: Vec<String> = seqs.iter().map(|seq| field_of(*seq)).collect();
            return self.replay_in(&Outbox::single(), &fields).await;
        }
        let mut by_slot: BTreeMap<u16, Vec<String>> = BTreeMap::new();
        if seqs.is_empty() {
            for slot in self.sweep("failed").await? {
                if let Ok(slot) = u16::try_from(slot) {
                    by_slot.insert(slot, Vec::new());
                }
            }
        } else {
            for seq in seqs {
                let (outbox, field) = Outbox::of(*seq, true);
                if let Some(slot) = outbox.slot {
                    by_slot.entry(slot).or_default().push(field);
                }
            }
        }
        let mut replayed = 0;
        for (slot, fields) in by_slot {
            replayed += self.replay_in(&Outbox::in_slot(slot), &fields).await?;
            self.cluster_outboxes().hinted.insert(slot);
        }
        Ok(replayed)
    }

    async fn outbox_status(&self) -> Result<OutboxStatus, StoreError> {
        if !self.is_cluster() {
            return self.read_status().await;
        }
        if let Some((at, status)) = self.cluster_outboxes().status
            && at.elapsed() < STATUS_EVERY
        {
            return Ok(status);
        }
        let status = self.read_cluster_status().await?;
        self.cluster_outboxes().status = Some((Instant::now(), status));
        Ok(status)
    }
}
