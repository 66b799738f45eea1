//! The Redis store's stats role: daily counters.

use async_trait::async_trait;

use super::*;
use crate::store::StatsStore;

#[async_trait]
impl StatsStore for RedisStore {
    async fn add_stats(
        &self,
        date: &str,
        counts: &[(&'static str, u64)],
    ) -> Result<(), StoreError> {
        let key = keys::stats(date);
        let mut pipeline = redis::pipe();
        for (field, n) in counts {
            pipeline.hincr(&key, *field, *n).ignore();
        }
        // Kept 7 days after the day ends.
        pipeline.expire(&key, 8 * 86_400).ignore();
        let mut connection = self.connections.get();
        self.bounded(pipeline.query_async::<()>(&mut connection))
            .await
    }

    async fn stats(&self, dates: &[String]) -> Result<Vec<HashMap<String, u64>>, StoreError> {
        // One command per day, not one pipeline: the days' keys lie in different Cluster slots.
        let mut connection = self.connections.get();
        let days = async {
            let mut days = Vec::with_capacity(dates.len());
            for date in dates {
                let command = redis::cmd("HGETALL").arg(keys::stats(date)).to_owned();
                days.push(command.query_async(&mut connection).await?);
            }
            Ok(days)
        };
        self.bounded(days).await
    }
}
