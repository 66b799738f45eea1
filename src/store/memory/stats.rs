//! The embedded store's stats role: daily counters.

use async_trait::async_trait;

use super::*;
use crate::store::StatsStore;

#[async_trait]
impl StatsStore for MemoryStore {
    async fn add_stats(
        &self,
        date: &str,
        counts: &[(&'static str, u64)],
    ) -> Result<(), StoreError> {
        let mut stats = lock(&self.stats);
        let day = stats.entry(date.to_owned()).or_default();
        for (field, n) in counts {
            *day.entry((*field).to_owned()).or_default() += n;
        }
        // Dates sort as strings: drop the oldest beyond the retention (plus today).
        while stats.len() > 8 {
            stats.pop_first();
        }
        Ok(())
    }

    async fn stats(&self, dates: &[String]) -> Result<Vec<HashMap<String, u64>>, StoreError> {
        let stats = lock(&self.stats);
        Ok(dates
            .iter()
            .map(|date| stats.get(date).cloned().unwrap_or_default())
            .collect())
    }
}
