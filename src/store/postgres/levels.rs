//! The PostgreSQL store's fraud-guard levels: rows per scope and shard, decayed and summed in
//! one function (`vcode_levels_count`, functions.sql), and the returning destinations.

use async_trait::async_trait;

use super::shards::SendToken;
use super::*;
use crate::domain::traffic::{Decayed, LevelCounts};
use crate::store::{LevelStep, LevelStore, LevelUpdate};

fn bigint(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A send's levels as `vcode_issue_guarded_levels` takes them after the and the
/// guard's arguments.
pub(super) struct LevelArgs<'a> {
    scopes: Vec<&'a str>,
    half_lives: (f64, f64),
    ttl: i64,
    young_ttl: i64,
    young_sends: f64,
}

impl<'a> LevelArgs<'a> {
    pub(super) fn of(step: &LevelStep<'a>) -> Self {
        Self {
            scopes: step.scopes.iter().map(String::as_str).collect(),
            half_lives: (step.half_lives.recent_ms, step.half_lives.history_ms),
            ttl: bigint(step.record_life.ttl.as_millis() as u64),
            young_ttl: bigint(step.record_life.young_ttl.as_millis() as u64),
            young_sends: step.record_life.young_sends,
        }
    }

    pub(super) fn params(&self) -> [&(dyn ToSql + Sync); 6] {
        [
            &self.scopes,
            &self.half_lives.0,
            &self.half_lives.1,
            &self.ttl,
            &self.young_ttl,
            &self.young_sends,
        ]
    }
}

/// Each scope's counts from `o_levels` (six a scope: the recent sends, conversions and
/// undelivered, then the history's).
pub(super) fn counts_of(flat: &[f64]) -> Result<Vec<LevelCounts>, StoreError> {
    if !flat.len().is_multiple_of(6) {
        return Err(StoreError::Protocol(format!(
            "a send's levels: {} numbers",
            flat.len()
        )));
    }
    Ok(flat.chunks_exact(6).map(level_counts).collect())
}

/// One scope's counts from its six numbers, in the order `counts_of` and `count_levels` read.
fn level_counts(c: &[f64]) -> LevelCounts {
    LevelCounts {
        recent: Decayed {
            sends: c[0],
            conversions: c[1],
            undelivered: c[2],
        },
        history: Decayed {
            sends: c[3],
            conversions: c[4],
            undelivered: c[5],
        },
    }
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
                Ok(level_counts(&[
                    read(1)?,
                    read(2)?,
                    read(3)?,
                    read(4)?,
                    read(5)?,
                    read(6)?,
                ]))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_s_levels_are_read_six_numbers_a_scope_in_order() {
        let counts = counts_of(&[1., 2., 3., 4., 5., 6., 7., 8., 9., 10., 11., 12.]).unwrap();
        assert_eq!(counts.len(), 2);
        assert_eq!(
            (counts[0].recent.sends, counts[0].recent.undelivered),
            (1., 3.)
        );
        assert_eq!(
            (counts[1].history.sends, counts[1].history.conversions),
            (10., 11.)
        );
        assert!(counts_of(&[1.; 7]).is_err());
    }
}
