//! The stats role: daily counters shared by every instance.

use async_trait::async_trait;

use super::StoreError;

/// Daily counters.
#[async_trait]
pub trait StatsStore: Send + Sync + 'static {
    /// Adds `counts` to the daily counters of `date` (`YYYY-MM-DD`), kept for 7 days.
    async fn add_stats(&self, date: &str, counts: &[(&'static str, u64)])
    -> Result<(), StoreError>;

    /// The daily counters of each date, in order (empty for a day without any).
    async fn stats(
        &self,
        dates: &[String],
    ) -> Result<Vec<std::collections::HashMap<String, u64>>, StoreError>;
}
