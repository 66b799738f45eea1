//! The wide levels (a country, all mail, the service) counted on this instance and added to the
//! store about once a second, where the number ranges and mail domains are counted in the store
//! on every send. Every send of a country changes that country's record and the service's:
//! counted in the store on each send, those two records made a send cost the shared server
//! 1.6x its instructions on Redis and PostgreSQL's sends a second 0.6x (sixteen shards each
//! summed, 2026-12-06). A verdict reads a wide level as the store last answered it plus what
//! this instance counted since: the other instances' sends reach it within about two flushes,
//! against evidence of hundreds of sends. Near its verdict a wide level is counted in the store
//! again on every send, the first of them with what this instance counted since its flush
//! (`keep_exact`): at 30 SMS a second the second's lag let a concentrated bot on two instances
//! be paid 29 where one instance paid 14 (2026-12-06), as the country's verdict came after each
//! range's own. The ranges stay exact: a bot spread over instances
//! must not get a range's handful once per instance.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::domain::traffic::{Decayed, HalfLives, LevelChange, LevelCounts, RecordLife};
use crate::store::{LevelStore, LevelUpdate, StoreError};

/// How often an instance adds what it counted to the store (and reads the others' back).
pub const FLUSH_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// A wide level whose excess (`levels::assess`) passes this share of what it is allowed is
/// counted in the store on every send, for `EXACT_FOR_MS` after the last send that found it so.
/// Honest traffic keeps its levels far below (codes being typed are all of their excess).
pub const EXACT_NEAR_SHARE: f64 = 0.25;
pub const EXACT_FOR_MS: u64 = 60_000;

/// A read older than this is not judged on: the scope is counted in the store again (the first
/// send after a pause, or while flushes fail). Memory of scopes read no longer is let go then.
const FRESH_MS: u64 = 5_000;

/// What one event or many add: to both memories, and to the history alone (a refused send
/// taken back).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Adds {
    both: Decayed,
    history_only: Decayed,
}

impl Adds {
    fn add(&mut self, change: &LevelChange) {
        let into = if change.recent {
            &mut self.both
        } else {
            &mut self.history_only
        };
        *into = into.plus(&change.amounts());
    }

    fn merge(&mut self, other: &Adds) {
        self.both = self.both.plus(&other.both);
        self.history_only = self.history_only.plus(&other.history_only);
    }

    fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The changes that add `self` to a record: both memories' first, then the history's alone.
    fn changes(&self) -> impl Iterator<Item = LevelChange> {
        [(self.both, true), (self.history_only, false)]
            .into_iter()
            .filter(|(amounts, _)| *amounts != Decayed::default())
            .map(|(amounts, recent)| LevelChange::of(&amounts, recent))
    }
}

/// One wide scope as this instance sees it.
#[derive(Debug)]
struct WideScope {
    /// The store's record after this instance's last flush or count of it, at `read_ms`.
    read: LevelCounts,
    read_ms: u64,
    /// Counted here since, not yet in a flush.
    pending: Adds,
    /// Taken by a flush that has not answered yet.
    in_flight: Adds,
    /// Counted in the store on every send until then (`keep_exact`).
    exact_until_ms: u64,
}

impl WideScope {
    /// The scope's counts at `now_ms`: the read, decayed, plus what is not in it yet (whose
    /// decay over a second or two is below a hundredth of the recent memory's).
    fn view(&self, now_ms: u64, half: &HalfLives) -> LevelCounts {
        let mut counts = self
            .read
            .updated(self.read_ms, now_ms, half, &LevelChange::default());
        for adds in [&self.pending, &self.in_flight] {
            let plus = |d: &mut Decayed, a: &Decayed| {
                d.sends = (d.sends + a.sends).max(0.0);
                d.conversions = (d.conversions + a.conversions).max(0.0);
                d.undelivered = (d.undelivered + a.undelivered).max(0.0);
            };
            plus(&mut counts.recent, &adds.both);
            plus(&mut counts.history, &adds.both);
            plus(&mut counts.history, &adds.history_only);
        }
        counts
    }
}

/// This instance's wide levels (bounded: a scope is let go once its read is stale and nothing
/// of it is pending; there are as many as countries served, and two).
pub struct WideLevels {
    scopes: Mutex<HashMap<String, WideScope>>,
    half_lives: HalfLives,
    record_life: RecordLife,
}

impl WideLevels {
    pub fn new(half_lives: HalfLives, record_life: RecordLife) -> Self {
        Self {
            scopes: Mutex::default(),
            half_lives,
            record_life,
        }
    }

    fn update<'a>(
        &self,
        scopes: &'a [&'a str],
        change: LevelChange,
        now_ms: u64,
    ) -> LevelUpdate<'a> {
        LevelUpdate {
            scopes,
            change,
            now_ms,
            half_lives: self.half_lives,
            record_life: self.record_life,
            returning: None,
        }
    }

    /// Counts `change` in each of `scopes` and answers their counts after it, in order: here
    /// where a fresh read is at hand, else in the store (whose answer becomes the read).
    pub async fn count(
        &self,
        store: &dyn LevelStore,
        scopes: &[&str],
        change: LevelChange,
        now_ms: u64,
    ) -> Result<Vec<LevelCounts>, StoreError> {
        let mut counts = Vec::with_capacity(scopes.len());
        let mut unread: Vec<&str> = Vec::new();
        // Scopes near their verdict with sends counted here not yet added: counted in the store
        // with them, each on its own (what another instance reads then is all this one saw).
        let mut carried: Vec<(usize, &str, Decayed)> = Vec::new();
        {
            let mut known = self.scopes.lock().expect("wide levels lock");
            for scope in scopes {
                match known.get_mut(*scope) {
                    Some(wide)
                        if now_ms.saturating_sub(wide.read_ms) < FRESH_MS
                            && wide.exact_until_ms <= now_ms =>
                    {
                        wide.pending.add(&change);
                        counts.push(Some(wide.view(now_ms, &self.half_lives)));
                    }
                    Some(wide)
                        if change.recent
                            && wide.exact_until_ms > now_ms
                            && wide.in_flight.is_empty()
                            && wide.pending.both != Decayed::default() =>
                    {
                        wide.in_flight.both = std::mem::take(&mut wide.pending.both);
                        carried.push((counts.len(), scope, wide.in_flight.both));
                        counts.push(None);
                    }
                    _ => {
                        unread.push(scope);
                        counts.push(None);
                    }
                }
            }
        }
        for (slot, scope, adds) in carried {
            let with_them = LevelChange::of(&change.amounts().plus(&adds), true);
            let answer = store
                .count_levels(&self.update(&[scope], with_them, now_ms))
                .await;
            let mut known = self.scopes.lock().expect("wide levels lock");
            let wide = known.get_mut(scope);
            match (answer, wide) {
                (Ok(records), Some(wide)) => {
                    wide.in_flight = Adds::default();
                    if let Some(record) = records.into_iter().next() {
                        wide.read = record;
                        wide.read_ms = now_ms;
                    }
                    counts[slot] = Some(wide.view(now_ms, &self.half_lives));
                }
                (Ok(records), None) => counts[slot] = records.into_iter().next(),
                (Err(error), wide) => {
                    if let Some(wide) = wide {
                        let flown = std::mem::take(&mut wide.in_flight);
                        wide.pending.merge(&flown);
                    }
                    return Err(error);
                }
            }
        }
        if !unread.is_empty() {
            let read = store
                .count_levels(&self.update(&unread, change, now_ms))
                .await?;
            let mut known = self.scopes.lock().expect("wide levels lock");
            let mut read = read.into_iter();
            let slots = counts.iter_mut().filter(|c| c.is_none());
            for (slot, scope) in slots.zip(&unread) {
                let record = read.next().ok_or_else(|| {
                    StoreError::Protocol("the levels answered fewer scopes than asked".into())
                })?;
                let wide = known.entry((*scope).to_owned()).or_insert(WideScope {
                    read: record,
                    read_ms: now_ms,
                    pending: Adds::default(),
                    in_flight: Adds::default(),
                    exact_until_ms: 0,
                });
                wide.read = record;
                wide.read_ms = now_ms;
                *slot = Some(wide.view(now_ms, &self.half_lives));
            }
        }
        Ok(counts.into_iter().flatten().collect())
    }

    /// Counts `scope` in the store on every send until `until_ms` (it is near its verdict).
    pub fn keep_exact(&self, scope: &str, until_ms: u64) {
        let mut known = self.scopes.lock().expect("wide levels lock");
        if let Some(wide) = known.get_mut(scope) {
            wide.exact_until_ms = wide.exact_until_ms.max(until_ms);
        }
    }

    /// Adds what was counted here to the store, one scope at a time, and takes its answer as
    /// the scope's read; what a failed flush took is pending again. Lets go of the scopes no
    /// send asked for since their read went stale.
    pub async fn flush(&self, store: &dyn LevelStore, now_ms: u64) {
        let taken: Vec<(String, Adds)> = {
            let mut known = self.scopes.lock().expect("wide levels lock");
            known.retain(|_, wide| {
                !wide.pending.is_empty()
                    || !wide.in_flight.is_empty()
                    || now_ms.saturating_sub(wide.read_ms) < FRESH_MS
                    || wide.exact_until_ms > now_ms
            });
            known
                .iter_mut()
                .filter(|(_, wide)| !wide.pending.is_empty() && wide.in_flight.is_empty())
                .map(|(scope, wide)| {
                    wide.in_flight = std::mem::take(&mut wide.pending);
                    (scope.clone(), wide.in_flight)
                })
                .collect()
        };
        let mut failed = None;
        for (scope, adds) in taken {
            let mut answer = None;
            for change in adds.changes() {
                match store
                    .count_levels(&self.update(&[scope.as_str()], change, now_ms))
                    .await
                {
                    Ok(records) => answer = records.into_iter().next(),
                    Err(error) => {
                        failed = Some(error);
                        answer = None;
                        break;
                    }
                }
            }
            let mut known = self.scopes.lock().expect("wide levels lock");
            let Some(wide) = known.get_mut(&scope) else {
                continue;
            };
            let flown = std::mem::take(&mut wide.in_flight);
            match answer {
                Some(record) => {
                    wide.read = record;
                    wide.read_ms = now_ms;
                }
                // Counted again with the next flush. (A failure between the two changes of
                // one scope counts its first twice: a refused send's withdrawal racing a
                // store outage, rare and harmless.)
                None => wide.pending.merge(&flown),
            }
        }
        if let Some(error) = failed {
            tracing::warn!(%error, "fraud guard: the wide levels' counts not added to the store (again in a second)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::traffic::LEVEL_RECORD_LIFE;
    use crate::store::MemoryStore;

    fn wide() -> WideLevels {
        WideLevels::new(HalfLives::default(), LEVEL_RECORD_LIFE)
    }

    async fn stored(store: &dyn LevelStore, scope: &str, now_ms: u64) -> LevelCounts {
        let scopes = [scope];
        store
            .count_levels(&wide().update(&scopes, LevelChange::default(), now_ms))
            .await
            .unwrap()[0]
    }

    #[tokio::test]
    async fn a_scope_is_counted_in_the_store_first_then_here_until_a_flush_adds_it() {
        let store = MemoryStore::default();
        let levels = wide();
        let now = 1_000_000;
        // The first send reads the store (and counts itself there).
        let first = levels
            .count(&store, &["s"], LevelChange::SEND, now)
            .await
            .unwrap();
        assert_eq!(first[0].recent.sends, 1.0);
        // The next ones are counted here: seen at once, not yet in the store.
        for i in 1..5 {
            let counts = levels
                .count(&store, &["s"], LevelChange::SEND, now + i)
                .await
                .unwrap();
            assert!((counts[0].history.sends - (1 + i) as f64).abs() < 1e-6);
        }
        levels
            .count(&store, &["s"], LevelChange::REFUSED, now + 5)
            .await
            .unwrap();
        assert!((stored(&store, "s", now + 6).await.history.sends - 1.0).abs() < 1e-6);
        levels.flush(&store, now + 10).await;
        let after = stored(&store, "s", now + 10).await;
        assert!((after.recent.sends - 5.0).abs() < 1e-3, "{after:?}");
        assert!((after.history.sends - 4.0).abs() < 1e-3, "{after:?}");
        // Another instance's sends reach this one's view with its next flush.
        let other = wide();
        other
            .count(&store, &["s"], LevelChange::SEND, now + 11)
            .await
            .unwrap();
        for _ in 0..3 {
            other
                .count(&store, &["s"], LevelChange::SEND, now + 12)
                .await
                .unwrap();
        }
        other.flush(&store, now + 13).await;
        levels
            .count(&store, &["s"], LevelChange::SEND, now + 14)
            .await
            .unwrap();
        levels.flush(&store, now + 15).await;
        let seen = levels
            .count(&store, &["s"], LevelChange::default(), now + 16)
            .await
            .unwrap()[0];
        assert!((seen.recent.sends - 10.0).abs() < 1e-2, "{seen:?}");
    }

    /// A store whose writes fail while `down`.
    struct Flaky {
        store: MemoryStore,
        down: std::sync::atomic::AtomicBool,
    }

    #[async_trait::async_trait]
    impl LevelStore for Flaky {
        async fn count_levels(
            &self,
            update: &LevelUpdate<'_>,
        ) -> Result<Vec<LevelCounts>, StoreError> {
            if self.down.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(StoreError::Unavailable("down".into()));
            }
            self.store.count_levels(update).await
        }

        async fn is_returning(&self, digests: &[u64], now_ms: u64) -> Result<bool, StoreError> {
            self.store.is_returning(digests, now_ms).await
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_counts_and_flushes_count_every_event_once_even_when_a_flush_fails() {
        use std::sync::atomic::{AtomicU64, Ordering};
        let store = std::sync::Arc::new(Flaky {
            store: MemoryStore::default(),
            down: false.into(),
        });
        let levels = std::sync::Arc::new(wide());
        // One clock for all: no decay, so the counts are exact.
        let now = 5_000_000;
        // Read once (in the store) before the flushes start failing.
        levels
            .count(&*store, &["c:CN", "s"], LevelChange::SEND, now)
            .await
            .unwrap();
        // What each scope's counts took (a count the store refused took nothing: the
        // country goes near its verdict halfway, and is then counted in the store, down or not).
        let taken: std::sync::Arc<[[AtomicU64; 2]; 2]> = std::sync::Arc::new(Default::default());
        let counters: Vec<_> = (0..8)
            .map(|_| {
                let (store, levels, taken) = (store.clone(), levels.clone(), taken.clone());
                tokio::spawn(async move {
                    for i in 0..500 {
                        let (change, kind) = if i % 5 == 4 {
                            (LevelChange::CONVERSION, 1)
                        } else {
                            (LevelChange::SEND, 0)
                        };
                        for (scope, taken) in ["c:CN", "s"].into_iter().zip(taken.iter()) {
                            if levels.count(&*store, &[scope], change, now).await.is_ok() {
                                taken[kind].fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        let flusher = {
            let (store, levels) = (store.clone(), levels.clone());
            tokio::spawn(async move {
                for round in 0..200 {
                    // Every fourth flush meets a store that does not answer.
                    store.down.store(round % 4 == 3, Ordering::SeqCst);
                    if round == 100 {
                        levels.keep_exact("c:CN", u64::MAX);
                    }
                    levels.flush(&*store, now).await;
                    tokio::task::yield_now().await;
                }
                store.down.store(false, Ordering::SeqCst);
            })
        };
        for counter in counters {
            counter.await.unwrap();
        }
        flusher.await.unwrap();
        levels.flush(&*store, now).await;
        for (scope, taken) in ["c:CN", "s"].into_iter().zip(taken.iter()) {
            let counts = stored(&store.store, scope, now).await;
            let sends = taken[0].load(Ordering::SeqCst) as f64;
            let conversions = taken[1].load(Ordering::SeqCst) as f64;
            assert_eq!(counts.recent.sends, sends + 1.0, "{scope}: {counts:?}");
            assert_eq!(
                counts.history.conversions, conversions,
                "{scope}: {counts:?}"
            );
        }
        // The service never met the store: all of its counts were taken.
        assert_eq!(taken[1][0].load(Ordering::SeqCst), 3_200);
    }

    #[tokio::test]
    async fn a_level_near_its_verdict_is_counted_in_the_store_on_every_send_until_it_cools() {
        let store = MemoryStore::default();
        let levels = wide();
        let now = 1_000_000;
        levels
            .count(&store, &["c:GB"], LevelChange::SEND, now)
            .await
            .unwrap();
        levels
            .count(&store, &["c:GB"], LevelChange::SEND, now + 1)
            .await
            .unwrap();
        assert!((stored(&store, "c:GB", now + 2).await.recent.sends - 1.0).abs() < 1e-3);
        levels.keep_exact("c:GB", now + 100);
        for i in 3..6 {
            levels
                .count(&store, &["c:GB"], LevelChange::SEND, now + i)
                .await
                .unwrap();
        }
        // The three went to the store at once, the first with the one counted here before.
        let counts = stored(&store, "c:GB", now + 6).await;
        assert!((counts.recent.sends - 5.0).abs() < 1e-3, "{counts:?}");
        let seen = levels
            .count(&store, &["c:GB"], LevelChange::default(), now + 7)
            .await
            .unwrap()[0];
        assert!((seen.recent.sends - 5.0).abs() < 1e-3, "{seen:?}");
        // Once it cools, counted here again.
        levels
            .count(&store, &["c:GB"], LevelChange::SEND, now + 101)
            .await
            .unwrap();
        let counts = stored(&store, "c:GB", now + 102).await;
        assert!((counts.recent.sends - 5.0).abs() < 1e-2, "{counts:?}");
        levels.flush(&store, now + 103).await;
        let counts = stored(&store, "c:GB", now + 104).await;
        assert!((counts.recent.sends - 6.0).abs() < 1e-2, "{counts:?}");
    }

    #[tokio::test]
    async fn what_a_failed_count_near_the_verdict_carried_is_added_by_the_next_flush() {
        use std::sync::atomic::Ordering;
        let store = Flaky {
            store: MemoryStore::default(),
            down: false.into(),
        };
        let levels = wide();
        let now = 2_000_000;
        for _ in 0..3 {
            levels
                .count(&store, &["s"], LevelChange::SEND, now)
                .await
                .unwrap();
        }
        levels.keep_exact("s", now + 1_000);
        store.down.store(true, Ordering::SeqCst);
        assert!(
            levels
                .count(&store, &["s"], LevelChange::SEND, now)
                .await
                .is_err()
        );
        store.down.store(false, Ordering::SeqCst);
        levels.flush(&store, now).await;
        // The first send (in the store) and the two counted here; not the one that failed.
        assert_eq!(stored(&store.store, "s", now).await.history.sends, 3.0);
    }

    #[tokio::test]
    async fn a_stale_read_is_counted_in_the_store_again_and_forgotten_when_idle() {
        let store = MemoryStore::default();
        let levels = wide();
        levels
            .count(&store, &["c:CN"], LevelChange::SEND, 0)
            .await
            .unwrap();
        levels
            .count(&store, &["c:CN"], LevelChange::SEND, 1)
            .await
            .unwrap();
        // Not flushed and stale: counted in the store (what was pending stays pending).
        let counts = levels
            .count(&store, &["c:CN"], LevelChange::SEND, FRESH_MS + 1)
            .await
            .unwrap()[0];
        assert!((counts.history.sends - 3.0).abs() < 1e-3, "{counts:?}");
        levels.flush(&store, FRESH_MS + 2).await;
        assert!((stored(&store, "c:CN", FRESH_MS + 3).await.history.sends - 3.0).abs() < 1e-3);
        levels.flush(&store, 3 * FRESH_MS).await;
        assert!(levels.scopes.lock().unwrap().is_empty());
    }
}
