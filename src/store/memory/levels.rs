//! The embedded store's fraud-guard levels: one record per scope and the returning
//! destinations' digests, under one lock (a send updates a handful of scopes at once). Both are
//! bounded: past their caps, the records idle longest and the digests nearest their end go
//! first (in one pass, then not again until the map has grown by a tenth).

use std::collections::HashMap;
use std::hash::BuildHasher;

use async_trait::async_trait;

use smallvec::SmallVec;

use super::{HashedKey, KeyKind, MemoryStore, PassHash};
use crate::domain::traffic::LevelCounts;
use crate::store::{LevelStore, LevelUpdate, StoreError};

/// At most this many scopes are remembered (about 120 bytes each: 24 MB).
pub(super) const MAX_SCOPES: usize = 200_000;
/// At most this many returning destinations (about 32 bytes each: 32 MB).
pub(super) const MAX_RETURNING: usize = 1_000_000;

#[derive(Default)]
pub(super) struct LevelState {
    /// Scope → its counts, when they last changed and until when they are kept (wall-clock
    /// ms, as every instance's). By the scope's hashed name: no name is read back, and the
    /// names' own allocations were a cache miss each of a send's five lookups in 200k records.
    scopes: HashMap<HashedKey, (LevelCounts, u64, u64), PassHash>,
    /// Digest → until when (wall-clock ms).
    returning: HashMap<u64, u64>,
}

/// Keeps the newest `keep` of `map` by `age` (larger is newer).
fn trim<K: Clone + Eq + std::hash::Hash, V, S: BuildHasher>(
    map: &mut HashMap<K, V, S>,
    keep: usize,
    newness: impl Fn(&V) -> u64,
) {
    if map.len() <= keep {
        return;
    }
    let mut ages: Vec<u64> = map.values().map(&newness).collect();
    let cut = ages.len() - keep;
    let (_, threshold, _) = ages.select_nth_unstable(cut);
    let threshold = *threshold;
    map.retain(|_, value| newness(value) >= threshold);
}

impl LevelState {
    /// Counts `update` in the records of `scopes`, its scopes' keys in order.
    fn count(&mut self, scopes: &[HashedKey], update: &LevelUpdate<'_>) -> Vec<LevelCounts> {
        if self.scopes.len() >= MAX_SCOPES + MAX_SCOPES / 10 {
            let now = update.now_ms;
            self.scopes.retain(|_, (_, _, until)| *until > now);
            trim(&mut self.scopes, MAX_SCOPES, |(_, then, _)| *then);
        }
        let now = update.now_ms;
        let answer = scopes
            .iter()
            .map(|key| {
                let (counts, then, until) =
                    self.scopes
                        .entry(*key)
                        .or_insert((LevelCounts::default(), now, 0));
                // A record past its time starts afresh, as the shared stores' expired key.
                if *until <= now {
                    *counts = LevelCounts::default();
                    *then = now;
                }
                *counts = counts.updated(*then, now, &update.half_lives, &update.change);
                *then = now.max(*then);
                let ttl = update.record_life.ttl_for(counts.history.sends);
                *until = now + ttl.as_millis() as u64;
                *counts
            })
            .collect();
        if let Some((digest, ttl)) = update.returning {
            if self.returning.len() >= MAX_RETURNING + MAX_RETURNING / 10 {
                let now = update.now_ms;
                self.returning.retain(|_, until| *until > now);
                trim(&mut self.returning, MAX_RETURNING, |until| *until);
            }
            self.returning
                .insert(digest, update.now_ms + ttl.as_millis() as u64);
        }
        answer
    }
}

#[async_trait]
impl LevelStore for MemoryStore {
    async fn count_levels(&self, update: &LevelUpdate<'_>) -> Result<Vec<LevelCounts>, StoreError> {
        // Hashed before the lock that every send takes.
        let scopes: SmallVec<[HashedKey; 8]> = update
            .scopes
            .iter()
            .map(|scope| self.keys.hash(KeyKind::Level, &[scope]))
            .collect();
        Ok(self
            .levels
            .lock()
            .expect("levels lock")
            .count(&scopes, update))
    }

    async fn is_returning(&self, digests: &[u64], now_ms: u64) -> Result<bool, StoreError> {
        let state = self.levels.lock().expect("levels lock");
        Ok(digests.iter().any(|digest| {
            state
                .returning
                .get(digest)
                .is_some_and(|until| *until > now_ms)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimming_keeps_the_newest() {
        let mut map: HashMap<u32, u64> = (0..100).map(|i| (i, u64::from(i))).collect();
        trim(&mut map, 10, |v| *v);
        assert_eq!(map.len(), 10);
        assert!(map.keys().all(|k| *k >= 90));
    }
}
