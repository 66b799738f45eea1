//! The traffic report's counts (sends, verified, refused and undelivered per minute, per
//! prefix, country and service) as this instance counts them between flushes, added to the
//! store about once a second (`FraudStore::add_traffic`). No verdict reads them (the levels
//! judge), so they may lag: counted in the store on every send, with the running tallies the
//! minute guard judged on, they were about 130k of redis-server's 380k instructions a send
//! (callgrind, 2026-12-06). The console and the spend caps read them a second or two late.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::domain::traffic::{BUCKET_MS, RETENTION_MINUTES};
use crate::store::{FraudStore, StoreError, TrafficChange};

/// What one event changes in its prefix's minute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrafficEvent {
    pub sends: i64,
    pub conversions: i64,
    pub refused: i64,
    pub undelivered: i64,
}

impl TrafficEvent {
    /// A send that went out (or may have).
    pub const SEND: Self = Self::of(1, 0, 0, 0);
    /// A send the guard refused (never counted as a send).
    pub const REFUSED: Self = Self::of(0, 0, 1, 0);
    /// A verified code.
    pub const CONVERSION: Self = Self::of(0, 1, 0, 0);
    /// A send a receipt called undelivered (still a send).
    pub const UNDELIVERED: Self = Self::of(0, 0, 0, 1);

    const fn of(sends: i64, conversions: i64, refused: i64, undelivered: i64) -> Self {
        Self {
            sends,
            conversions,
            refused,
            undelivered,
        }
    }

    fn add(&mut self, other: &Self) {
        self.sends += other.sends;
        self.conversions += other.conversions;
        self.refused += other.refused;
        self.undelivered += other.undelivered;
    }

    fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// One prefix's minutes (nearly always one: the current) with its country.
#[derive(Debug)]
struct Pending {
    country: String,
    minutes: Vec<(u64, TrafficEvent)>,
}

impl Pending {
    fn add(&mut self, minute: u64, event: &TrafficEvent) {
        match self.minutes.iter_mut().find(|(m, _)| *m == minute) {
            Some((_, counts)) => counts.add(event),
            None => self.minutes.push((minute, *event)),
        }
    }
}

/// This instance's counts since its last flush, by prefix.
#[derive(Debug, Default)]
pub struct TrafficCounter {
    pending: Mutex<HashMap<String, Pending>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl TrafficCounter {
    /// Counts `event` in `prefix`'s (of `country`) minute of `at_ms`.
    pub fn count(&self, prefix: &str, country: &str, at_ms: u64, event: TrafficEvent) {
        let minute = at_ms / BUCKET_MS;
        let mut pending = lock(&self.pending);
        // Looked up borrowed first: a prefix counted already since the flush (nearly every
        // send's) needs no owned copy of its name.
        if let Some(entry) = pending.get_mut(prefix) {
            entry.add(minute, &event);
            return;
        }
        pending.insert(
            prefix.to_owned(),
            Pending {
                country: country.to_owned(),
                minutes: vec![(minute, event)],
            },
        );
    }

    /// Adds what was counted here to the store. A failed flush keeps its counts for the next
    /// one, but never minutes past retention (the store would not keep them either): a store
    /// down for a day costs this instance a day of prefixes at most.
    pub async fn flush(&self, store: &dyn FraudStore, now_ms: u64) -> Result<(), StoreError> {
        let taken = std::mem::take(&mut *lock(&self.pending));
        let changes: Vec<TrafficChange> = taken
            .iter()
            .flat_map(|(prefix, pending)| {
                pending
                    .minutes
                    .iter()
                    .filter(|(_, counts)| !counts.is_empty())
                    .map(move |(minute, counts)| TrafficChange {
                        prefix: prefix.clone(),
                        country: pending.country.clone(),
                        minute: *minute,
                        sends: counts.sends,
                        conversions: counts.conversions,
                        refused: counts.refused,
                        undelivered: counts.undelivered,
                    })
            })
            .collect();
        if changes.is_empty() {
            return Ok(());
        }
        let added = store.add_traffic(&changes).await;
        if added.is_err() {
            let oldest = (now_ms / BUCKET_MS).saturating_sub(RETENTION_MINUTES);
            let mut pending = lock(&self.pending);
            for (prefix, kept) in taken {
                let entry = pending.entry(prefix).or_insert_with(|| Pending {
                    country: kept.country,
                    minutes: Vec::new(),
                });
                for (minute, counts) in kept.minutes.iter().filter(|(m, _)| *m >= oldest) {
                    entry.add(*minute, counts);
                }
            }
            pending.retain(|_, entry| !entry.minutes.is_empty());
        }
        added
    }

    /// How many prefix-minutes wait for a flush.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        lock(&self.pending).values().map(|p| p.minutes.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{MemoryStore, TrafficCounts};
    use std::sync::Arc;

    /// Now, as the stores prune minutes past retention by the clock.
    fn at() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
    }

    fn totals(traffic: &TrafficCounts) -> (u64, u64, u64, u64) {
        traffic.service.iter().fold((0, 0, 0, 0), |t, c| {
            (
                t.0 + c.sends,
                t.1 + c.conversions,
                t.2 + c.refused,
                t.3 + c.undelivered,
            )
        })
    }

    #[tokio::test]
    async fn a_flush_adds_each_prefix_minute_once_and_empties() {
        let (at, minute) = (at(), at() / BUCKET_MS);
        let store = MemoryStore::default();
        let counter = TrafficCounter::default();
        for _ in 0..3 {
            counter.count("44740", "GB", at, TrafficEvent::SEND);
        }
        // A change may take a count back (the store never reads one below 0).
        let taken_back = TrafficEvent {
            sends: -1,
            ..TrafficEvent::default()
        };
        counter.count("44740", "GB", at, taken_back);
        counter.count("44740", "GB", at, TrafficEvent::REFUSED);
        counter.count("44740", "GB", at, TrafficEvent::CONVERSION);
        counter.count("1202", "US", at + BUCKET_MS, TrafficEvent::SEND);
        counter.count("1202", "US", at + BUCKET_MS, TrafficEvent::UNDELIVERED);
        assert_eq!(counter.waiting(), 2);
        counter.flush(&store, at).await.unwrap();
        assert_eq!(counter.waiting(), 0);
        let traffic = store.fraud_traffic(minute, minute + 1).await.unwrap();
        assert_eq!(totals(&traffic), (3, 1, 1, 1));
        let gb = &traffic.prefixes.iter().find(|p| p.0 == "44740").unwrap();
        assert_eq!(
            (gb.1.as_str(), gb.2[0].sends, gb.2[0].minute),
            ("GB", 2, minute)
        );
        // A second flush with nothing new adds nothing.
        counter.flush(&store, at).await.unwrap();
        let again = store.fraud_traffic(minute, minute + 1).await.unwrap();
        assert_eq!(totals(&again), (3, 1, 1, 1));
    }

    /// A store that refuses every call.
    struct Down;

    #[async_trait::async_trait]
    impl FraudStore for Down {
        async fn admit_send(
            &self,
            _: &crate::store::FraudSend<'_>,
            _: bool,
        ) -> Result<crate::store::Admission, StoreError> {
            Err(StoreError::Unavailable("down".into()))
        }
        async fn block_prefix(
            &self,
            _: &crate::store::PrefixBlock,
            _: u64,
        ) -> Result<bool, StoreError> {
            Err(StoreError::Unavailable("down".into()))
        }
        async fn prefix_blocks(&self) -> Result<Vec<crate::store::PrefixBlock>, StoreError> {
            Err(StoreError::Unavailable("down".into()))
        }
        async fn lift_block(&self, _: &str, _: u64) -> Result<bool, StoreError> {
            Err(StoreError::Unavailable("down".into()))
        }
        async fn add_traffic(&self, _: &[TrafficChange]) -> Result<(), StoreError> {
            Err(StoreError::Unavailable("down".into()))
        }
        async fn fraud_traffic(&self, _: u64, _: u64) -> Result<TrafficCounts, StoreError> {
            Err(StoreError::Unavailable("down".into()))
        }
    }

    #[tokio::test]
    async fn a_failed_flush_keeps_its_counts_but_not_past_retention() {
        let (at, minute) = (at(), at() / BUCKET_MS);
        let counter = TrafficCounter::default();
        let old = at - (RETENTION_MINUTES + 2) * BUCKET_MS;
        counter.count("44740", "GB", old, TrafficEvent::SEND);
        counter.count("44740", "GB", at, TrafficEvent::SEND);
        assert!(counter.flush(&Down, at).await.is_err());
        // The old minute is let go, the current one kept, and counted on top of what follows.
        assert_eq!(counter.waiting(), 1);
        counter.count("44740", "GB", at, TrafficEvent::SEND);
        let store = MemoryStore::default();
        counter.flush(&store, at).await.unwrap();
        let traffic = store.fraud_traffic(0, minute).await.unwrap();
        assert_eq!(totals(&traffic), (2, 0, 0, 0));
    }

    #[tokio::test]
    async fn concurrent_counts_and_flushes_count_every_event_once() {
        let (at, minute) = (at(), at() / BUCKET_MS);
        let store = Arc::new(MemoryStore::default());
        let counter = Arc::new(TrafficCounter::default());
        let mut tasks = Vec::new();
        for task in 0..8u64 {
            let (store, counter) = (store.clone(), counter.clone());
            tasks.push(tokio::spawn(async move {
                for i in 0..200u64 {
                    let prefix = if (task + i) % 2 == 0 { "44740" } else { "1202" };
                    counter.count(prefix, "GB", at, TrafficEvent::SEND);
                    if i % 25 == 0 {
                        counter.flush(&*store, at).await.unwrap();
                    }
                    tokio::task::yield_now().await;
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        counter.flush(&*store, at).await.unwrap();
        let traffic = store.fraud_traffic(minute, minute).await.unwrap();
        assert_eq!(totals(&traffic).0, 1600);
    }
}
