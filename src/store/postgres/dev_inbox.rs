//! The PostgreSQL store's dev inbox role: the dev inbox (dev mode only). One statement each.

use async_trait::async_trait;

use super::{PostgresStore, column, millis};
use crate::domain::Destination;
use crate::store::{DEV_INBOX_CAPACITY, DEV_INBOX_TTL, DevInboxStore, DevMessage, StoreError};

#[async_trait]
impl DevInboxStore for PostgresStore {
    async fn keep_dev_message(&self, message: &DevMessage) -> Result<(), StoreError> {
        let json = serde_json::to_string(message)
            .map_err(|e| StoreError::Protocol(format!("dev message: {e}")))?;
        self.query(
            "SELECT vcode_keep_dev_message($1, $2, $3, $4)",
            &[
                &message.phone,
                &json,
                &(DEV_INBOX_CAPACITY as i32),
                &millis(DEV_INBOX_TTL),
            ],
        )
        .await
        .map(drop)
    }

    async fn dev_messages(&self, destination: &Destination) -> Result<Vec<DevMessage>, StoreError> {
        let rows = self
            .query(
                "SELECT message FROM vcode_dev_inbox
                 WHERE phone = $1 AND expires_at_ms > vcode_now_ms() ORDER BY id",
                &[&destination.key()],
            )
            .await?;
        rows.iter()
            .map(|row| {
                let json: String = column(row, 0)?;
                serde_json::from_str(&json)
                    .map_err(|e| StoreError::Protocol(format!("dev message: {e}")))
            })
            .collect()
    }
}
