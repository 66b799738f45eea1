//! The Redis store's health role: whether it answers.

use async_trait::async_trait;

use super::*;
use crate::store::HealthCheck;

#[async_trait]
impl HealthCheck for RedisStore {
    async fn ping(&self) -> Result<(), StoreError> {
        let mut connection = self.connections.get();
        let command = redis::cmd("PING");
        self.bounded(command.query_async::<String>(&mut connection))
            .await
            .map(drop)
    }
}
