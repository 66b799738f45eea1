//! Which shard of the fraud guard's level records (`vcode_fraud_levels.shard`, migration 0015)
//! a statement of this instance writes: a lock-free set of the 16 shards, one claimed by each
//! such statement while the store holds its connection, so that no two in-flight statements of
//! one instance write the same shard's rows (the second would wait for the first's commit). The
//! statement's token carries the shard in its low bits (`vcode_fraud_shard`), so the statement
//! names it unchanged. Each instance starts at its own random shard, so that two instances
//! under light load do not both write shard 0. With every shard claimed (more statements in
//! flight than shards: a pool larger than 16) a token keeps its own bits. (The traffic
//! report's counts were sharded the same way until each instance flushed them once a second:
//! migration 0018.)

use std::error::Error;
use std::sync::atomic::{AtomicI64, AtomicU16, Ordering};

use bytes::BytesMut;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

/// As many as `vcode_fraud_shard` names (`token & 15`).
const SHARDS: u32 = 16;
const SHARD_BITS: i64 = SHARDS as i64 - 1;

/// The shards claimed now, one bit each.
#[derive(Debug)]
pub(super) struct Shards {
    taken: AtomicU16,
    /// Where this instance's search for a free shard starts.
    offset: u32,
}

/// A claimed shard, free again when dropped.
#[derive(Debug)]
pub(super) struct Claim<'a> {
    shards: &'a Shards,
    shard: u32,
}

impl Shards {
    pub(super) fn new() -> Self {
        Self::starting_at(rand::random::<u32>() % SHARDS)
    }

    fn starting_at(offset: u32) -> Self {
        Self {
            taken: AtomicU16::new(0),
            offset,
        }
    }

    /// The first free shard from the offset on, claimed; `None` if every one is taken.
    pub(super) fn claim(&self) -> Option<Claim<'_>> {
        let mut taken = self.taken.load(Ordering::Relaxed);
        loop {
            // Bit i of `free` is shard (offset + i) mod 16.
            let free = (!taken).rotate_right(self.offset);
            if free == 0 {
                return None;
            }
            let shard = (free.trailing_zeros() + self.offset) % SHARDS;
            match self.taken.compare_exchange_weak(
                taken,
                taken | 1 << shard,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    return Some(Claim {
                        shards: self,
                        shard,
                    });
                }
                Err(now) => taken = now,
            }
        }
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.shards
            .taken
            .fetch_and(!(1 << self.shard), Ordering::Release);
    }
}

/// A statement's token as its parameter (a `bigint`): its low bits become the shard the
/// statement claims (`SendToken::claim`) before it is sent.
#[derive(Debug)]
pub(super) struct SendToken(AtomicI64);

impl SendToken {
    pub(super) fn new(token: u64) -> Self {
        Self(AtomicI64::new(token as i64))
    }

    /// The token as the statement sent it (the tests read which shard it names).
    #[cfg(test)]
    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed) as u64
    }

    /// Claims a free shard of `shards` and names it in the token's low bits, until the claim
    /// is dropped; `None` (the token unchanged) if none is free.
    pub(super) fn claim<'a>(&self, shards: &'a Shards) -> Option<Claim<'a>> {
        let claim = shards.claim()?;
        let token = self.0.load(Ordering::Relaxed);
        self.0.store(
            token & !SHARD_BITS | i64::from(claim.shard),
            Ordering::Relaxed,
        );
        Some(claim)
    }
}

impl ToSql for SendToken {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        self.0.load(Ordering::Relaxed).to_sql(ty, out)
    }

    fn accepts(ty: &Type) -> bool {
        <i64 as ToSql>::accepts(ty)
    }

    to_sql_checked!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_claims_never_share_a_shard_and_start_at_the_offset() {
        let shards = Shards::starting_at(13);
        let claims: Vec<Claim<'_>> = (0..16).map(|_| shards.claim().unwrap()).collect();
        let order: Vec<u32> = claims.iter().map(|claim| claim.shard).collect();
        assert_eq!(
            order,
            [13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
        );
        assert!(shards.claim().is_none(), "all sixteen are taken");
        // A shard given back is the next one claimed.
        let mut claims = claims;
        drop(claims.remove(5));
        assert_eq!(shards.claim().map(|claim| claim.shard), Some(2));
    }

    #[test]
    fn a_token_names_its_claimed_shard_in_its_low_bits_only() {
        let shards = Shards::starting_at(0);
        let _first = shards.claim().unwrap();
        let token = SendToken::new(u64::MAX - 15);
        let claim = token.claim(&shards).unwrap();
        assert_eq!(claim.shard, 1);
        assert_eq!(token.get(), u64::MAX - 14);
        // Every shard taken: the token keeps its own bits.
        let held: Vec<_> = (0..14).map(|_| shards.claim().unwrap()).collect();
        let other = SendToken::new(0xabcd_ef07);
        assert!(other.claim(&shards).is_none());
        assert_eq!(other.get(), 0xabcd_ef07);
        drop(held);
    }

    #[test]
    fn concurrent_claims_are_exclusive() {
        use std::sync::atomic::AtomicBool;
        let shards = std::sync::Arc::new(Shards::new());
        let held: std::sync::Arc<[AtomicBool; 16]> = Default::default();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (shards, held) = (shards.clone(), held.clone());
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        // 4 threads x 4 claims: never more than the 16 shards.
                        let claims: Vec<_> = (0..4).map(|_| shards.claim().unwrap()).collect();
                        for claim in &claims {
                            let was = held[claim.shard as usize].swap(true, Ordering::SeqCst);
                            assert!(!was, "shard {} claimed twice", claim.shard);
                        }
                        for claim in &claims {
                            held[claim.shard as usize].store(false, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(shards.taken.load(Ordering::Relaxed), 0, "all given back");
    }
}
