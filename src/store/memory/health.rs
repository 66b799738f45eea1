//! The embedded store's health role: whether it answers.

use async_trait::async_trait;

use super::*;
use crate::store::HealthCheck;

#[async_trait]
impl HealthCheck for MemoryStore {
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
}
