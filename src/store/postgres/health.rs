//! The PostgreSQL store's health role: whether it answers. One statement each.

use async_trait::async_trait;

use super::PostgresStore;
use crate::store::{HealthCheck, StoreError};

#[async_trait]
impl HealthCheck for PostgresStore {
    async fn ping(&self) -> Result<(), StoreError> {
        // The schema's own function: a database without vcode's schema is not ready.
        self.query("SELECT vcode_now_ms()", &[]).await.map(drop)
    }
}
