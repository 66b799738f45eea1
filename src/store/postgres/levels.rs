//! The PostgreSQL store's fraud-guard levels: rows per scope and shard, decayed and summed in
//! one function (`vcode_levels_count`, functions.sql), and the returning destinations.

use async_trait::async_trait;

use super::shards::SendToken;
use super::*;
use crate::domain::traffic::{Decayed, LevelCounts};
use crate::store::{LevelStore, LevelUpdate};

fn bigint(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

#[async_trait]
impl LevelStore for PostgresStore {
    async fn count_levels(&self, update: &LevelUpdate<'_>) -> Result<Vec<LevelCounts>, StoreError> {
        let scopes: Vec<&str> = update.scopes.to_vec();
        let token = SendToken::new(rand::random());
        let (returning, until) = match update.returning {
            Some((digest, ttl)) => (
                digest as i64,
                bigint(update.now_ms + ttl.as_millis() as u64),
            ),
            None => (0, 0),
        };
        let change = update.change;
        let rows = self
            .run(
                "SELECT ord, rs, rc, ru, hs, hc, hu FROM vcode_levels_count($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
                &[
                    &scopes,
                    &token,
                    &bigint(update.now_ms),
                    &update.half_lives.recent_ms,
                    &update.half_lives.history_ms,
                    &change.sends,
                    &change.conversions,
                    &change.undelivered,
                    &bigint(update.record_life.ttl.as_millis() as u64),
                    &bigint(update.record_life.young_ttl.as_millis() as u64),
                    &update.record_life.young_sends,
                    &returning,
                    &until,
                    &change.recent,
                ],
                None,
                Some(&token),
            )
            .await?;
        rows.iter()
            .map(|row| {
                let read = |i: usize| row.try_get::<_, f64>(i).map_err(db_error);
                Ok(LevelCounts {
                    recent: Decayed {
                        sends: read(1)?,
                        conversions: read(2)?,
                        undelivered: read(3)?,
                    },
                    history: Decayed {
                        sends: read(4)?,
                        conversions: read(5)?,
                        undelivered: read(6)?,
                    },
                })
            })
            .collect()
    }

    async fn is_returning(&self, digests: &[u64], now_ms: u64) -> Result<bool, StoreError> {
        let digests: Vec<i64> = digests.iter().map(|d| *d as i64).collect();
        let row = self
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM vcode_fraud_returning WHERE digest = ANY($1) AND expires_at_ms > $2)",
                &[&digests, &bigint(now_ms)],
            )
            .await?;
        row.try_get(0).map_err(db_error)
    }
}
