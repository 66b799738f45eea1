//! The other roles of the Redis store: budgets, captchas, idempotency records, daily stats, the dev
//! outbox and health.

use async_trait::async_trait;

use super::*;
use crate::store::{
    CaptchaStore, HealthCheck, IdempotencyStore, OutboxStore, QuotaStore, StatsStore,
};

#[async_trait]
impl QuotaStore for RedisStore {
    async fn reserve_quota(
        &self,
        budgets: &[Budget<'_>],
        token: QuotaToken,
    ) -> Result<QuotaDecision, StoreError> {
        let mut invocation = SCRIPTS.reserve_quota.prepare_invoke();
        invocation.arg(self.give_up_at_ms()).arg(token.0);
        add_budgets(&mut invocation, budgets);
        let mut connection = self.connections.get();
        let (refused, wait_ms): (i64, u64) = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        if refused < 0 {
            return Err(self.ran_too_late());
        }
        Ok(
            match (refused as usize)
                .checked_sub(1)
                .and_then(|index| budgets.get(index))
            {
                None => QuotaDecision::Granted,
                Some(budget) => QuotaDecision::Exceeded {
                    scope: budget.scope,
                    retry_after: Duration::from_millis(wait_ms),
                },
            },
        )
    }

    async fn release_quota(
        &self,
        scopes: &[QuotaScope],
        token: QuotaToken,
    ) -> Result<(), StoreError> {
        let mut pipeline = redis::pipe();
        for scope in scopes {
            pipeline
                .cmd("ZREM")
                .arg(keys::quota(*scope))
                .arg(token.0)
                .ignore();
        }
        let mut connection = self.connections.get();
        self.bounded(pipeline.query_async::<()>(&mut connection))
            .await
    }
}

#[async_trait]
impl CaptchaStore for RedisStore {
    async fn put_captcha(
        &self,
        id: &CaptchaId,
        captcha: &StoredCaptcha,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let mut connection = self.connections.get();
        let command = redis::cmd("SET")
            .arg(keys::captcha(id))
            .arg(encode_captcha(captcha))
            .arg("PX")
            .arg(duration_ms(ttl))
            .to_owned();
        self.bounded(command.query_async::<()>(&mut connection))
            .await
    }

    async fn captcha(&self, id: &CaptchaId) -> Result<Option<StoredCaptcha>, StoreError> {
        let mut connection = self.connections.get();
        let command = redis::cmd("GET").arg(keys::captcha(id)).to_owned();
        let raw: Option<String> = self.bounded(command.query_async(&mut connection)).await?;
        raw.map(|raw| decode_captcha(&raw)).transpose()
    }

    async fn take_captcha(&self, id: &CaptchaId) -> Result<Option<StoredCaptcha>, StoreError> {
        // GETDEL is atomic: of concurrent verifies exactly one receives the value.
        let mut invocation = SCRIPTS.take_captcha.key(keys::captcha(id));
        invocation.arg(self.give_up_at_ms());
        let mut connection = self.connections.get();
        let reply: Value = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        let raw =
            value_or_too_late(reply, "take_captcha.lua")?.map_err(|()| self.ran_too_late())?;
        raw.map(|raw| {
            std::str::from_utf8(&raw)
                .map_err(|_| StoreError::Protocol("captcha value not UTF-8".to_owned()))
                .and_then(decode_captcha)
        })
        .transpose()
    }
}

#[async_trait]
impl IdempotencyStore for RedisStore {
    async fn begin_idempotent(
        &self,
        key: &str,
        running: &[u8],
        lease: Duration,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        // SET NX GET: claims the key, or returns what holds it, in one command.
        let mut invocation = SCRIPTS.begin_idempotent.key(keys::idempotency(key));
        invocation
            .arg(running)
            .arg(duration_ms(lease))
            .arg(self.give_up_at_ms());
        let mut connection = self.connections.get();
        let reply: Value = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        value_or_too_late(reply, "begin_idempotent.lua")?.map_err(|()| self.ran_too_late())
    }

    async fn finish_idempotent(
        &self,
        key: &str,
        done: &[u8],
        retention: Duration,
    ) -> Result<(), StoreError> {
        let mut connection = self.connections.get();
        let command = redis::cmd("SET")
            .arg(keys::idempotency(key))
            .arg(done)
            .arg("PX")
            .arg(duration_ms(retention))
            .to_owned();
        self.bounded(command.query_async::<()>(&mut connection))
            .await
    }

    async fn abandon_idempotent(&self, key: &str, running: &[u8]) -> Result<(), StoreError> {
        let mut command = whole_script(ABANDON_IDEMPOTENT, &[keys::idempotency(key)]);
        command.arg(running);
        let mut connection = self.connections.get();
        self.bounded(command.query_async::<i64>(&mut connection))
            .await
            .map(drop)
    }
}

#[async_trait]
impl StatsStore for RedisStore {
    async fn add_stats(
        &self,
        date: &str,
        counts: &[(&'static str, u64)],
    ) -> Result<(), StoreError> {
        let key = keys::stats(date);
        let mut pipeline = redis::pipe();
        for (field, n) in counts {
            pipeline.hincr(&key, *field, *n).ignore();
        }
        // Kept 7 days after the day ends.
        pipeline.expire(&key, 8 * 86_400).ignore();
        let mut connection = self.connections.get();
        self.bounded(pipeline.query_async::<()>(&mut connection))
            .await
    }

    async fn stats(&self, dates: &[String]) -> Result<Vec<HashMap<String, u64>>, StoreError> {
        // One command per day, not one pipeline: the days' keys lie in different Cluster slots.
        let mut connection = self.connections.get();
        let days = async {
            let mut days = Vec::with_capacity(dates.len());
            for date in dates {
                let command = redis::cmd("HGETALL").arg(keys::stats(date)).to_owned();
                days.push(command.query_async(&mut connection).await?);
            }
            Ok(days)
        };
        self.bounded(days).await
    }
}

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
