//! The PostgreSQL store's dev outbox role: the dev outbox (dev mode only). One statement each.

use async_trait::async_trait;

use super::{PostgresStore, column, millis};
use crate::domain::Destination;
use crate::store::{OUTBOX_CAPACITY, OUTBOX_TTL, OutboxMessage, OutboxStore, StoreError};

#[async_trait]
impl OutboxStore for PostgresStore {
    async fn push_outbox(&self, message: &OutboxMessage) -> Result<(), StoreError> {
        let json = serde_json::to_string(message)
            .map_err(|e| StoreError::Protocol(format!("outbox message: {e}")))?;
        self.query(
            "SELECT vcode_push_outbox($1, $2, $3, $4)",
            &[
                &message.phone,
                &json,
                &(OUTBOX_CAPACITY as i32),
                &millis(OUTBOX_TTL),
            ],
        )
        .await
        .map(drop)
    }

    async fn outbox(&self, destination: &Destination) -> Result<Vec<OutboxMessage>, StoreError> {
        let rows = self
            .query(
                "SELECT message FROM vcode_outbox
                 WHERE phone = $1 AND expires_at_ms > vcode_now_ms() ORDER BY id",
                &[&destination.key()],
            )
            .await?;
        rows.iter()
            .map(|row| {
                let json: String = column(row, 0)?;
                serde_json::from_str(&json)
                    .map_err(|e| StoreError::Protocol(format!("outbox message: {e}")))
            })
            .collect()
    }
}
