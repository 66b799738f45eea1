//! The Redis store's dev outbox role: the dev outbox (dev mode only).

use async_trait::async_trait;

use super::*;
use crate::store::OutboxStore;

#[async_trait]
impl OutboxStore for RedisStore {
    async fn push_outbox(&self, message: &OutboxMessage) -> Result<(), StoreError> {
        let key = keys::outbox(&message.phone);
        let json = serde_json::to_string(message)
            .map_err(|e| StoreError::Protocol(format!("outbox message: {e}")))?;
        let mut connection = self.connections.get();
        let pipeline = redis::pipe()
            .atomic()
            .rpush(&key, json)
            .ignore()
            .ltrim(&key, -(OUTBOX_CAPACITY as isize), -1)
            .ignore()
            .pexpire(&key, duration_ms(OUTBOX_TTL) as i64)
            .ignore()
            .to_owned();
        self.bounded(pipeline.query_async::<()>(&mut connection))
            .await
    }

    async fn outbox(&self, destination: &Destination) -> Result<Vec<OutboxMessage>, StoreError> {
        let mut connection = self.connections.get();
        let command = redis::cmd("LRANGE")
            .arg(keys::outbox(destination.key()))
            .arg(0)
            .arg(-1)
            .to_owned();
        let raw: Vec<String> = self.bounded(command.query_async(&mut connection)).await?;
        raw.iter()
            .map(|json| {
                serde_json::from_str(json)
                    .map_err(|e| StoreError::Protocol(format!("outbox message: {e}")))
            })
            .collect()
    }
}
