//! The Redis store's dev inbox role: the dev inbox (dev mode only).

use async_trait::async_trait;

use super::*;
use crate::store::DevInboxStore;

#[async_trait]
impl DevInboxStore for RedisStore {
    async fn keep_dev_message(&self, message: &DevMessage) -> Result<(), StoreError> {
        let key = keys::dev_inbox(&message.phone);
        let json = serde_json::to_string(message)
            .map_err(|e| StoreError::Protocol(format!("dev message: {e}")))?;
        let mut connection = self.connections.get();
        let pipeline = redis::pipe()
            .atomic()
            .rpush(&key, json)
            .ignore()
            .ltrim(&key, -(DEV_INBOX_CAPACITY as isize), -1)
            .ignore()
            .pexpire(&key, duration_ms(DEV_INBOX_TTL) as i64)
            .ignore()
            .to_owned();
        self.bounded(pipeline.query_async::<()>(&mut connection))
            .await
    }

    async fn dev_messages(&self, destination: &Destination) -> Result<Vec<DevMessage>, StoreError> {
        let mut connection = self.connections.get();
        let command = redis::cmd("LRANGE")
            .arg(keys::dev_inbox(destination.key()))
            .arg(0)
            .arg(-1)
            .to_owned();
        let raw: Vec<String> = self.bounded(command.query_async(&mut connection)).await?;
        raw.iter()
            .map(|json| {
                serde_json::from_str(json)
                    .map_err(|e| StoreError::Protocol(format!("dev message: {e}")))
            })
            .collect()
    }
}
