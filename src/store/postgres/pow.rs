//! The PostgreSQL store's used proof-of-work challenges: one row per digest in
//! `vcode_pow_replays`, inserted (or an expired one replaced) by one statement, so that of
//! concurrent recorders of one digest on any instance exactly one finds it new; nothing is
//! written once its caller has given up.

use std::time::Duration;

use async_trait::async_trait;
use tokio_postgres::types::Type;

use super::{PostgresStore, column, millis};
use crate::store::{PowReplayStore, StoreError};

#[async_trait]
impl PowReplayStore for PostgresStore {
    async fn record_solved_pow(&self, digest: &str, ttl: Duration) -> Result<bool, StoreError> {
        // A row comes back only when inserted or when it replaced an expired record; the first
        // column says whether the caller was still waiting (nothing is written otherwise).
        let row = self
            .query_one(
                "WITH clock AS (SELECT vcode_now_ms() AS now_ms),
                 recorded AS (
                   INSERT INTO vcode_pow_replays AS r (digest, expires_at_ms)
                   SELECT $1, now_ms + $2 FROM clock WHERE now_ms <= $3
                   ON CONFLICT (digest) DO UPDATE SET expires_at_ms = excluded.expires_at_ms
                     WHERE r.expires_at_ms <= vcode_now_ms()
                   RETURNING 1)
                 SELECT clock.now_ms <= $3, EXISTS (SELECT 1 FROM recorded) FROM clock",
                &[&digest, &millis(ttl), &self.give_up_at_ms()],
            )
            .await?;
        let in_time: bool = column(&row, 0)?;
        if !in_time {
            return Err(self.ran_too_late());
        }
        column(&row, 1)
    }

    async fn forget_solved_pow(&self, digest: &str) -> Result<(), StoreError> {
        self.query_at_once(
            "DELETE FROM vcode_pow_replays WHERE digest = $1",
            &[&digest],
            &[Type::TEXT],
        )
        .await
        .map(drop)
    }
}
