//! The PostgreSQL store's stats role: daily counters. One statement each.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;

use super::{PostgresStore, column, millis};
use crate::store::{StatsStore, StoreError};

/// Stats are kept 7 days after their day ends, as on Redis.
const STATS_RETENTION: Duration = Duration::from_secs(8 * 86_400);

#[async_trait]
impl StatsStore for PostgresStore {
    async fn add_stats(
        &self,
        date: &str,
        counts: &[(&'static str, u64)],
    ) -> Result<(), StoreError> {
        let fields: Vec<&str> = counts.iter().map(|(field, _)| *field).collect();
        let amounts: Vec<i64> = counts.iter().map(|(_, n)| *n as i64).collect();
        self.query(
            "INSERT INTO vcode_stats AS s (day, field, count, expires_at_ms)
             SELECT $1, field, amount, vcode_now_ms() + $4
             FROM unnest($2::text[], $3::bigint[]) AS t (field, amount)
             ON CONFLICT (day, field) DO UPDATE
               SET count = s.count + excluded.count, expires_at_ms = excluded.expires_at_ms",
            &[&date, &fields, &amounts, &millis(STATS_RETENTION)],
        )
        .await
        .map(drop)
    }

    async fn stats(&self, dates: &[String]) -> Result<Vec<HashMap<String, u64>>, StoreError> {
        let rows = self
            .query(
                "SELECT day, field, count FROM vcode_stats
                 WHERE day = ANY ($1) AND expires_at_ms > vcode_now_ms()",
                &[&dates],
            )
            .await?;
        let mut days: Vec<HashMap<String, u64>> = vec![HashMap::new(); dates.len()];
        for row in &rows {
            let day: String = column(row, 0)?;
            let count: i64 = column(row, 2)?;
            if let Some(index) = dates.iter().position(|date| *date == day) {
                days[index].insert(column(row, 1)?, count as u64);
            }
        }
        Ok(days)
    }
}
