//! The Redis store's fraud-guard levels: one hash per scope and one key per returning
//! destination, all under the guard's hash tag (`{guard}`), so that a send's scopes are one
//! script on one node (`levels.lua`).

use std::sync::LazyLock;

use async_trait::async_trait;

use super::keys::{fraud_level, fraud_returning};
use super::*;
use crate::domain::traffic::{Decayed, LevelCounts};
use crate::store::{LevelStore, LevelUpdate};

static LEVELS: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("levels.lua")));

/// One scope's answer, `rs,rc,ru,hs,hc,hu`, read back.
fn parse_counts(raw: &str) -> Option<LevelCounts> {
    let mut values = raw.split(',').map(|v| v.parse::<f64>().ok());
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
            .arg(change.sends)
            .arg(change.conversions)
            .arg(change.undelivered)
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
