//! The other roles of the PostgreSQL store: budgets, captchas, idempotency records, daily stats,
//! the dev outbox and health. Each is one statement.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use tokio_postgres::types::Type;

use super::{PostgresStore, as_bigint, column, millis, ms_duration, rule_arrays};
use crate::domain::{CaptchaId, Destination};
use crate::store::{
    Budget, CaptchaStore, HealthCheck, IdempotencyStore, OUTBOX_CAPACITY, OUTBOX_TTL,
    OutboxMessage, OutboxStore, QuotaDecision, QuotaScope, QuotaStore, QuotaToken, StatsStore,
    StoreError, StoredCaptcha,
};

/// The quota log of a scope (per-phone logs are named inside the functions).
fn scope_log(scope: QuotaScope) -> String {
    scope.to_string()
}

/// Stats are kept 7 days after their day ends, as on Redis.
const STATS_RETENTION: Duration = Duration::from_secs(8 * 86_400);

#[async_trait]
impl QuotaStore for PostgresStore {
    async fn reserve_quota(
        &self,
        budgets: &[Budget<'_>],
        token: QuotaToken,
    ) -> Result<QuotaDecision, StoreError> {
        let logs: Vec<String> = budgets.iter().map(|b| scope_log(b.scope)).collect();
        let counts: Vec<i32> = budgets.iter().map(|b| b.rules.len() as i32).collect();
        let rules: Vec<_> = budgets
            .iter()
            .flat_map(|b| b.rules.iter().copied())
            .collect();
        let (limits, windows) = rule_arrays(&rules);
        let row = self
            .query_one(
                "SELECT * FROM vcode_reserve_quota($1, $2, $3, $4, $5, $6)",
                &[
                    &logs,
                    &counts,
                    &limits,
                    &windows,
                    &as_bigint(token.0),
                    &self.give_up_at_ms(),
                ],
            )
            .await?;
        let refused: i32 = column(&row, 0)?;
        if refused < 0 {
            return Err(self.ran_too_late());
        }
        Ok(
            match usize::try_from(refused - 1)
                .ok()
                .and_then(|index| budgets.get(index))
            {
                None => QuotaDecision::Granted,
                Some(budget) => QuotaDecision::Exceeded {
                    scope: budget.scope,
                    retry_after: ms_duration(column(&row, 1)?),
                },
            },
        )
    }

    async fn release_quota(
        &self,
        scopes: &[QuotaScope],
        token: QuotaToken,
    ) -> Result<(), StoreError> {
        let logs: Vec<String> = scopes.iter().map(|scope| scope_log(*scope)).collect();
        self.query_at_once(
            "DELETE FROM vcode_quota_events WHERE log = ANY ($1) AND token = $2",
            &[&logs, &as_bigint(token.0)],
            &[Type::TEXT_ARRAY, Type::INT8],
        )
        .await
        .map(drop)
    }
}

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

#[async_trait]
impl StatsStore for PostgresStore {
    async fn add_stats(
        &self,
        date: &str,
        counts: &[(&'static str, u64)],
    ) -> Result<(), StoreError> {
        let fields: Vec<&str> = counts.iter().map(|(field, _)| *field).collect();
        let amounts: Vec<i64> = counts.iter().map(|(_, n)| *n as i64).collect();
        self.query(
            "INSERT INTO vcode_stats AS s (day, field, count, expires_at_ms)
             SELECT $1, field, amount, vcode_now_ms() + $4
             FROM unnest($2::text[], $3::bigint[]) AS t (field, amount)
             ON CONFLICT (day, field) DO UPDATE
               SET count = s.count + excluded.count, expires_at_ms = excluded.expires_at_ms",
            &[&date, &fields, &amounts, &millis(STATS_RETENTION)],
        )
        .await
        .map(drop)
    }

    async fn stats(&self, dates: &[String]) -> Result<Vec<HashMap<String, u64>>, StoreError> {
        let rows = self
            .query(
                "SELECT day, field, count FROM vcode_stats
                 WHERE day = ANY ($1) AND expires_at_ms > vcode_now_ms()",
                &[&dates],
            )
            .await?;
        let mut days: Vec<HashMap<String, u64>> = vec![HashMap::new(); dates.len()];
        for row in &rows {
            let day: String = column(row, 0)?;
            let count: i64 = column(row, 2)?;
            if let Some(index) = dates.iter().position(|date| *date == day) {
                days[index].insert(column(row, 1)?, count as u64);
            }
        }
        Ok(days)
    }
}

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

#[async_trait]
impl HealthCheck for PostgresStore {
    async fn ping(&self) -> Result<(), StoreError> {
        // The schema's own function: a database without vcode's schema is not ready.
        self.query("SELECT vcode_now_ms()", &[]).await.map(drop)
    }
}
