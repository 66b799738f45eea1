//! The Redis store's fraud-guard levels: one string per scope (its counts, eight packed doubles) and
//! one key per returning destination, all under the guard's hash tag (`{guard}`), so that a send's scopes are one
//! script on one node (`levels.lua`).

use std::sync::LazyLock;

use async_trait::async_trait;

use super::keys::{fraud_level, fraud_returning};
use super::*;
use crate::domain::traffic::{Decayed, LevelCounts};
use crate::store::{LevelStep, LevelStore, LevelUpdate};

/// `levels_count`, which `issue.lua` takes in too (the send's levels in its own step).
pub(super) const LEVELS_PRELUDE: &str = include_str!("levels_prelude.lua");

static LEVELS: LazyLock<Script> =
    LazyLock::new(|| Script::new(&[LEVELS_PRELUDE, include_str!("levels.lua")].concat()));

/// A record's length: eight little-endian doubles, `t rs rc ru hs hc hu e` (`levels_prelude.lua`).
const RECORD_LEN: usize = 64;

/// The records `levels_count` answers, concatenated, read back.
pub(super) fn parse_records(raw: &[u8]) -> Result<Vec<LevelCounts>, StoreError> {
    if !raw.len().is_multiple_of(RECORD_LEN) {
        return Err(StoreError::Protocol(format!(
            "a level's counts: {} bytes, not records of {RECORD_LEN}",
            raw.len()
        )));
    }
    Ok(raw
        .chunks_exact(RECORD_LEN)
        .map(|record| {
            let value = |i: usize| {
                let bytes = record[i * 8..i * 8 + 8].try_into().expect("8 bytes");
                f64::from_le_bytes(bytes)
            };
            LevelCounts {
                recent: Decayed {
                    sends: value(1),
                    conversions: value(2),
                    undelivered: value(3),
                },
                history: Decayed {
                    sends: value(4),
                    conversions: value(5),
                    undelivered: value(6),
                },
            }
        })
        .collect())
}

/// A send's levels, counted in `issue.lua` on one node: their keys and one argument, `n now
/// recent_half history_half ttl young_ttl young_sends` as seven little-endian doubles (Redis
/// reads text numbers with a `strtod` each), after the guard's own.
pub(super) fn add_levels(invocation: &mut Invocation<'_>, levels: &LevelStep<'_>) {
    for scope in levels.scopes {
        invocation.key(fraud_level(scope));
    }
    let life = &levels.record_life;
    invocation.arg(pack(&[
        levels.scopes.len() as f64,
        levels.now_ms as f64,
        levels.half_lives.recent_ms,
        levels.half_lives.history_ms,
        life.ttl.as_millis() as f64,
        life.young_ttl.as_millis() as f64,
        life.young_sends,
    ]));
}

/// Numbers as the scripts' `struct.unpack('<d…')` reads them: little-endian doubles, one after
/// the other (Redis reads a number written as text with a `strtod` each).
fn pack(numbers: &[f64]) -> Vec<u8> {
    let mut packed = Vec::with_capacity(numbers.len() * 8);
    for number in numbers {
        packed.extend_from_slice(&number.to_le_bytes());
    }
    packed
}

/// The levels' records at `reply[at]` (packed, `issue.lua`).
pub(super) fn records_at(reply: &[Value], at: usize) -> Result<Vec<LevelCounts>, StoreError> {
    match reply.get(at) {
        Some(Value::BulkString(raw)) => parse_records(raw),
        other => Err(StoreError::Protocol(format!("a send's levels: {other:?}"))),
    }
}

#[async_trait]
impl LevelStore for RedisStore {
    async fn count_levels(&self, update: &LevelUpdate<'_>) -> Result<Vec<LevelCounts>, StoreError> {
        let mut invocation = Invocation::of(&LEVELS);
        for scope in update.scopes {
            invocation.key(fraud_level(scope));
        }
        let returning_ttl = match update.returning {
            Some((digest, ttl)) => {
                invocation.key(fraud_returning(digest));
                ttl.as_millis().max(1) as u64
            }
            None => 0,
        };
        let change = update.change;
        let life = &update.record_life;
        invocation
            .arg(pack(&[
                update.now_ms as f64,
                update.half_lives.recent_ms,
                update.half_lives.history_ms,
                change.sends,
                change.conversions,
                change.undelivered,
                life.ttl.as_millis() as f64,
                life.young_ttl.as_millis() as f64,
                life.young_sends,
            ]))
            .arg(returning_ttl)
            .arg(if change.recent { "1" } else { "0" });
        let mut connection = self.connections.get();
        let answer: Vec<u8> = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        parse_records(&answer)
    }

    async fn is_returning(&self, digests: &[u64], _now_ms: u64) -> Result<bool, StoreError> {
        let mut command = redis::cmd("EXISTS");
        for digest in digests {
            command.arg(fraud_returning(*digest));
        }
        let mut connection = self.connections.get();
        let found: u64 = self.bounded(command.query_async(&mut connection)).await?;
        Ok(found > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_read_back_from_their_packed_doubles() {
        let fields = [1.7e12, 1.0, 0.5, 0.25, 9.0, 4.5, 2.0, 1.6e12];
        let mut raw: Vec<u8> = fields.iter().flat_map(|v: &f64| v.to_le_bytes()).collect();
        raw.extend_from_slice(&raw.clone());
        let records = parse_records(&raw).unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(records[1].recent.conversions, 0.5);
        assert_eq!(records[1].history.undelivered, 2.0);
        assert_eq!(parse_records(b"").unwrap(), []);
        assert!(matches!(
            parse_records(&raw[..63]),
            Err(StoreError::Protocol(_))
        ));
    }
}
