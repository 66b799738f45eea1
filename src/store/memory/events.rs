//! The embedded store's event outbox: in this process's memory, under one lock taken last
//! (inside a step's code, verification or fraud locks), so an event is appended in the same
//! critical section as its change. It is lost with the process: start-up says so.
//!
//! Bounded, as memory is: while the receiver fails, at most `MAX_PENDING` events wait; past
//! that the oldest waiting one is given up as failed ("the embedded outbox is full"), and at
//! most `MAX_FAILED` failed ones are kept for the operator, the oldest dropped first. Each
//! event given up or dropped so is counted (`vcode_event_deliveries_total{outcome="dropped"}`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;

use super::*;
use crate::store::events::CLAIM_WINDOW;
use crate::store::{ClaimedEntry, EventStore, FailedEntry, OutboxEntry, OutboxStatus, Settlement};

/// Events waiting (due, retrying or timers) and failed events kept, at most (about 1.5 kB
/// each: 10,000 waiting events held 15 MB).
const MAX_PENDING: usize = 10_000;
const MAX_FAILED: usize = 1_000;
const FULL: &str = "the embedded outbox is full: given up for newer events";

struct Pending {
    event: OutboxEntry,
    due_ms: u64,
    attempts: u32,
    delivered_to: u64,
    lease: u64,
}

#[derive(Default)]
struct OutboxState {
    last_seq: u64,
    /// By (place in the subject's order, seq): the order claims walk in.
    pending: BTreeMap<(u64, u64), Pending>,
    /// seq → its place, to settle by seq.
    places: HashMap<u64, u64>,
    failed: BTreeMap<u64, FailedEntry>,
}

impl OutboxState {
    /// Drops the oldest failed events past `MAX_FAILED`, counted.
    fn keep_failed_bounded(&mut self) {
        while self.failed.len() > MAX_FAILED {
            self.failed.pop_first();
            crate::metrics::count_event_delivery("dropped");
        }
    }
}

#[derive(Default)]
pub(super) struct EventOutbox {
    on: AtomicBool,
    state: Mutex<OutboxState>,
}

impl EventOutbox {
    pub(super) fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Appends `event` (numbered here), due at its place; nothing while events are off. Call it
    /// inside the step's own locks.
    pub(super) fn append(&self, mut event: OutboxEntry) {
        if !self.is_on() {
            return;
        }
        let mut state = lock(&self.state);
        state.last_seq += 1;
        event.seq = state.last_seq;
        let place = (event.order_ms, event.seq);
        state.places.insert(event.seq, event.order_ms);
        state.pending.insert(
            place,
            Pending {
                due_ms: event.order_ms,
                event,
                attempts: 0,
                delivered_to: 0,
                lease: 0,
            },
        );
        if state.pending.len() > MAX_PENDING
            && let Some((_, oldest)) = state.pending.pop_first()
        {
            state.places.remove(&oldest.event.seq);
            crate::metrics::count_event_delivery("dropped");
            state.failed.insert(
                oldest.event.seq,
                FailedEntry {
                    event: oldest.event,
                    attempts: oldest.attempts,
                    delivered_to: oldest.delivered_to,
                    error: FULL.to_owned(),
                    failed_at_ms: unix_now_ms(),
                },
            );
        }
        state.keep_failed_bounded();
    }

    /// Drops the pending events of `subject` (a send rolled back: its id was never handed out).
    pub(super) fn forget_subject(&self, subject: &str) {
        if !self.is_on() {
            return;
        }
        let mut state = lock(&self.state);
        let state = &mut *state;
        let places = &mut state.places;
        state.pending.retain(|_, pending| {
            let keep = pending.event.subject != subject;
            if !keep {
                places.remove(&pending.event.seq);
            }
            keep
        });
    }
}

#[async_trait]
impl EventStore for MemoryStore {
    async fn record_events(&self, on: bool) -> Result<(), StoreError> {
        self.events.on.store(on, Ordering::Relaxed);
        Ok(())
    }

    async fn claim_events(
        &self,
        limit: usize,
        lease: Duration,
    ) -> Result<Vec<ClaimedEntry>, StoreError> {
        let now = unix_now_ms();
        let mut state = lock(&self.events.state);
        let mut seen = HashSet::new();
        let mut claimed = Vec::new();
        // Placed by now: a later expiry timer is neither due nor ahead of anything due.
        let placed = state.pending.range_mut(..=(now, u64::MAX));
        for pending in placed.map(|(_, pending)| pending).take(CLAIM_WINDOW) {
            if claimed.len() >= limit {
                break;
            }
            if !seen.insert(pending.event.subject.clone()) || pending.due_ms > now {
                continue;
            }
            pending.due_ms = now.saturating_add(duration_ms(lease));
            pending.lease = rand::random();
            claimed.push(ClaimedEntry {
                event: pending.event.clone(),
                attempts: pending.attempts,
                delivered_to: pending.delivered_to,
                lease: pending.lease,
            });
        }
        Ok(claimed)
    }

    async fn settle_event(
        &self,
        claim: &ClaimedEntry,
        settlement: &Settlement,
    ) -> Result<bool, StoreError> {
        let mut state = lock(&self.events.state);
        let seq = claim.event.seq;
        let Some(&order) = state.places.get(&seq) else {
            return Ok(false);
        };
        let place = (order, seq);
        if state
            .pending
            .get(&place)
            .is_none_or(|pending| pending.lease != claim.lease)
        {
            return Ok(false);
        }
        match settlement {
            Settlement::Done => {
                state.pending.remove(&place);
                state.places.remove(&seq);
            }
            Settlement::Retry {
                due_ms,
                delivered_to,
                ..
            } => {
                let pending = state.pending.get_mut(&place).expect("looked up above");
                pending.due_ms = *due_ms;
                pending.delivered_to = *delivered_to;
                pending.attempts += 1;
                pending.lease = 0;
            }
            Settlement::Failed {
                delivered_to,
                error,
            } => {
                let pending = state.pending.remove(&place).expect("looked up above");
                state.places.remove(&seq);
                state.failed.insert(
                    seq,
                    FailedEntry {
                        event: pending.event,
                        attempts: pending.attempts + 1,
                        delivered_to: *delivered_to,
                        error: error.clone(),
                        failed_at_ms: unix_now_ms(),
                    },
                );
                state.keep_failed_bounded();
            }
        }
        Ok(true)
    }

    async fn failed_events(&self, limit: usize) -> Result<Vec<FailedEntry>, StoreError> {
        Ok(lock(&self.events.state)
            .failed
            .values()
            .take(limit)
            .cloned()
            .collect())
    }

    async fn replay_failed(&self, seqs: &[u64]) -> Result<u64, StoreError> {
        let now = unix_now_ms();
        let mut state = lock(&self.events.state);
        let chosen: Vec<u64> = match seqs {
            [] => state.failed.keys().copied().collect(),
            seqs => seqs.to_vec(),
        };
        let mut replayed = 0;
        for seq in chosen {
            let Some(failed) = state.failed.remove(&seq) else {
                continue;
            };
            let order = failed.event.order_ms;
            state.places.insert(seq, order);
            state.pending.insert(
                (order, seq),
                Pending {
                    event: failed.event,
                    due_ms: now,
                    attempts: 0,
                    delivered_to: failed.delivered_to,
                    lease: 0,
                },
            );
            replayed += 1;
        }
        Ok(replayed)
    }

    async fn outbox_status(&self) -> Result<OutboxStatus, StoreError> {
        let now = unix_now_ms();
        let state = lock(&self.events.state);
        let mut status = OutboxStatus {
            failed: state.failed.len() as u64,
            ..OutboxStatus::default()
        };
        for ((order, _), _) in state.pending.iter().filter(|((order, _), _)| *order <= now) {
            status.pending += 1;
            status.oldest_ms = Some(status.oldest_ms.map_or(*order, |oldest| oldest.min(*order)));
        }
        Ok(status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u64) -> OutboxEntry {
        OutboxEntry {
            seq: 0,
            fact: crate::store::Fact::Created,
            subject: format!("v{seq}"),
            phone_e164: "+8613800138000".to_owned(),
            purpose: "login".to_owned(),
            at_ms: seq,
            order_ms: seq,
            detail: String::new(),
        }
    }

    #[test]
    fn a_failing_receiver_leaves_a_bounded_outbox() {
        let outbox = EventOutbox::default();
        outbox.on.store(true, Ordering::Relaxed);
        for seq in 0..(MAX_PENDING + MAX_FAILED + 500) as u64 {
            outbox.append(event(seq));
        }
        let state = lock(&outbox.state);
        assert_eq!(state.pending.len(), MAX_PENDING);
        assert_eq!(state.places.len(), MAX_PENDING);
        assert_eq!(state.failed.len(), MAX_FAILED);
        // The newest wait; the oldest given up are the ones dropped.
        let (_, first_pending) = state.pending.first_key_value().unwrap();
        assert_eq!(first_pending.event.order_ms, (MAX_FAILED + 500) as u64);
        assert!(state.failed.values().all(|failed| failed.error == FULL));
    }
}
