//! The PostgreSQL store's captchas role: image captchas, taken in one step. One statement each.

use std::time::Duration;

use async_trait::async_trait;
use tokio_postgres::types::Type;

use super::{PostgresStore, as_bigint, column, millis};
use crate::domain::CaptchaId;
use crate::store::{CaptchaStore, StoreError, StoredCaptcha};

#[async_trait]
impl CaptchaStore for PostgresStore {
    async fn put_captcha(
        &self,
        id: &CaptchaId,
        captcha: &StoredCaptcha,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        // At once: it also gives a captcha back after a failed send.
        self.query_at_once(
            "INSERT INTO vcode_captchas (id, seed, expires_at_ms)
             VALUES ($1, $2, vcode_now_ms() + $3)
             ON CONFLICT (id) DO UPDATE
               SET seed = excluded.seed, expires_at_ms = excluded.expires_at_ms",
            &[&id.as_str(), &as_bigint(captcha.seed), &millis(ttl)],
            &[Type::TEXT, Type::INT8, Type::INT8],
        )
        .await
        .map(drop)
    }

    async fn captcha(&self, id: &CaptchaId) -> Result<Option<StoredCaptcha>, StoreError> {
        let rows = self
            .query(
                "SELECT seed FROM vcode_captchas WHERE id = $1 AND expires_at_ms > vcode_now_ms()",
                &[&id.as_str()],
            )
            .await?;
        rows.first()
            .map(|row| {
                Ok(StoredCaptcha {
                    seed: column::<i64>(row, 0)? as u64,
                })
            })
            .transpose()
    }

    async fn take_captcha(&self, id: &CaptchaId) -> Result<Option<StoredCaptcha>, StoreError> {
        // A DELETE takes the row lock: of concurrent takers exactly one gets the row. Nothing
        // is taken once the caller has given up (`in_time` false).
        let row = self
            .query_one(
                "WITH clock AS (SELECT vcode_now_ms() AS now_ms),
                 taken AS (
                   DELETE FROM vcode_captchas WHERE id = $1
                     AND (SELECT now_ms FROM clock) <= $2
                   RETURNING seed, expires_at_ms)
                 SELECT clock.now_ms <= $2, taken.seed,
                        taken.expires_at_ms > clock.now_ms
                 FROM clock LEFT JOIN taken ON true",
                &[&id.as_str(), &self.give_up_at_ms()],
            )
            .await?;
        let in_time: bool = column(&row, 0)?;
        if !in_time {
            return Err(self.ran_too_late());
        }
        let seed: Option<i64> = column(&row, 1)?;
        let alive: Option<bool> = column(&row, 2)?;
        Ok(seed
            .filter(|_| alive == Some(true))
            .map(|seed| StoredCaptcha { seed: seed as u64 }))
    }
}
