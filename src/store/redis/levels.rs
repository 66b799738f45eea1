//! The Redis store's fraud-guard levels: one string per scope (its counts in fixed point) and
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

/// The records' fixed point: counts in millionths (`levels.lua`).
const SCALE: f64 = 1_000_000.0;

/// One scope's record, `t rs rc ru hs hc hu` (the counts in millionths), read back.
pub(super) fn parse_counts(raw: &str) -> Option<LevelCounts> {
    let mut values = raw
        .split(' ')
        .skip(1)
        .map(|v| v.parse::<u64>().ok().map(|v| v as f64 / SCALE));
    let mut next = || values.next().flatten();
    let recent = Decayed {
        sends: next()?,
        conversions: next()?,
        undelivered: next()?,
    };
    let history = Decayed {
        sends: next()?,
        conversions: next()?,
        undelivered: next()?,
    };
    Some(LevelCounts { recent, history })
}

/// What an event adds, in millionths.
pub(super) fn scaled(count: f64) -> i64 {
    (count * SCALE).round() as i64
}

/// A send's levels, counted in `issue.lua` on one node: their keys and one argument, `n now
/// recent_half history_half ttl`, after the guard's own.
pub(super) fn add_levels(invocation: &mut redis::ScriptInvocation<'_>, levels: &LevelStep<'_>) {
    for scope in levels.scopes {
        invocation.key(fraud_level(scope));
    }
    invocation.arg(format!(
        "{} {} {} {} {}",
        levels.scopes.len(),
        levels.now_ms,
        levels.half_lives.recent_ms,
        levels.half_lives.history_ms,
        levels.record_ttl.as_millis()
    ));
}

/// The levels' records at `reply[at]` (`|`-separated, `issue.lua`).
pub(super) fn records_at(reply: &[Value], at: usize) -> Result<Vec<LevelCounts>, StoreError> {
    let raw = match reply.get(at) {
        Some(Value::BulkString(raw)) => std::str::from_utf8(raw).ok(),
        Some(Value::SimpleString(raw)) => Some(raw.as_str()),
        _ => None,
    }
    .ok_or_else(|| StoreError::Protocol(format!("a send's levels: {:?}", reply.get(at))))?;
    raw.split('|')
        .map(|record| {
            parse_counts(record)
                .ok_or_else(|| StoreError::Protocol(format!("a level's counts: {record:?}")))
        })
        .collect()
}

#[async_trait]
impl LevelStore for RedisStore {
    async fn count_levels(&self, update: &LevelUpdate<'_>) -> Result<Vec<LevelCounts>, StoreError> {
        let mut invocation = LEVELS.prepare_invoke();
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
        invocation
            .arg(update.now_ms)
            .arg(update.half_lives.recent_ms)
            .arg(update.half_lives.history_ms)
            .arg(scaled(change.sends))
            .arg(scaled(change.conversions))
            .arg(scaled(change.undelivered))
            .arg(update.record_ttl.as_millis() as u64)
            .arg(returning_ttl);
        let mut connection = self.connections.get();
        let answer: Vec<String> = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        answer
            .iter()
            .map(|raw| {
                parse_counts(raw)
                    .ok_or_else(|| StoreError::Protocol(format!("a level's counts: {raw:?}")))
            })
            .collect()
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
