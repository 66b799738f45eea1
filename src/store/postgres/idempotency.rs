//! The PostgreSQL store's idempotency role: `Idempotency-Key` records. One statement each.

use std::time::Duration;

use async_trait::async_trait;
use tokio_postgres::types::Type;

use super::{PostgresStore, column, millis};
use crate::store::{IdempotencyStore, StoreError};

#[async_trait]
impl IdempotencyStore for PostgresStore {
    async fn begin_idempotent(
        &self,
        key: &str,
        running: &[u8],
        lease: Duration,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        // No row: the function was not called, as the caller had given up by then.
        let rows = self
            .query(
                "SELECT vcode_begin_idempotent($1, $2, $3) WHERE vcode_now_ms() <= $4",
                &[&key, &running, &millis(lease), &self.give_up_at_ms()],
            )
            .await?;
        match rows.first() {
            Some(row) => column(row, 0),
            None => Err(self.ran_too_late()),
        }
    }

    async fn finish_idempotent(
        &self,
        key: &str,
        done: &[u8],
        retention: Duration,
    ) -> Result<(), StoreError> {
        self.query(
            "INSERT INTO vcode_idempotency (key, record, expires_at_ms)
             VALUES ($1, $2, vcode_now_ms() + $3)
             ON CONFLICT (key) DO UPDATE
               SET record = excluded.record, expires_at_ms = excluded.expires_at_ms",
            &[&key, &done, &millis(retention)],
        )
        .await
        .map(drop)
    }

    async fn abandon_idempotent(&self, key: &str, running: &[u8]) -> Result<(), StoreError> {
        self.query_at_once(
            "DELETE FROM vcode_idempotency WHERE key = $1 AND record = $2",
            &[&key, &running],
            &[Type::TEXT, Type::BYTEA],
        )
        .await
        .map(drop)
    }
}
