//! The other roles of the embedded store: budgets, captchas, idempotency records, daily stats, the dev
//! outbox and health.

use async_trait::async_trait;

use super::*;
use crate::store::{
    CaptchaStore, HealthCheck, IdempotencyStore, OutboxStore, QuotaStore, StatsStore,
};

#[async_trait]
impl QuotaStore for MemoryStore {
    async fn reserve_quota(
        &self,
        budgets: &[Budget<'_>],
        token: QuotaToken,
    ) -> Result<QuotaDecision, StoreError> {
        let now = self.now_ms();
        // One shard: every budget log is behind this one lock.
        let mut logs = self.budgets.lock("");
        let (mut refused, mut wait_ms) = (None, 0);
        for budget in budgets {
            let key = scope_key(budget.scope);
            let wait = logs
                .get_mut(key.as_str())
                .map_or(0, |log| log.wait(now, budget.rules));
            if wait > 0 {
                refused.get_or_insert(budget.scope);
                wait_ms = wait_ms.max(wait);
            }
        }
        if let Some(scope) = refused {
            return Ok(QuotaDecision::Exceeded {
                scope,
                retry_after: Duration::from_millis(wait_ms),
            });
        }
        for budget in budgets {
            let key = scope_key(budget.scope);
            logs.entry(key.into_boxed_str())
                .or_default()
                .record(now, budget.rules, token);
        }
        Ok(QuotaDecision::Granted)
    }

    async fn release_quota(
        &self,
        scopes: &[QuotaScope],
        token: QuotaToken,
    ) -> Result<(), StoreError> {
        let mut logs = self.budgets.lock("");
        for scope in scopes {
            if let Some(log) = logs.get_mut(scope_key(*scope).as_str()) {
                log.remove(token);
            }
        }
        Ok(())
    }
}

#[async_trait]
impl CaptchaStore for MemoryStore {
    async fn put_captcha(
        &self,
        id: &CaptchaId,
        captcha: &StoredCaptcha,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let entry = CaptchaEntry {
            captcha: captcha.clone(),
            expires_at_ms: self.now_ms().saturating_add(duration_ms(ttl)),
        };
        self.captchas
            .lock(id.as_str())
            .insert(id.as_str().into(), entry);
        Ok(())
    }

    async fn captcha(&self, id: &CaptchaId) -> Result<Option<StoredCaptcha>, StoreError> {
        let now = self.now_ms();
        Ok(self
            .captchas
            .lock(id.as_str())
            .get(id.as_str())
            .filter(|entry| entry.expires_at_ms > now)
            .map(|entry| entry.captcha.clone()))
    }

    async fn take_captcha(&self, id: &CaptchaId) -> Result<Option<StoredCaptcha>, StoreError> {
        let now = self.now_ms();
        Ok(self
            .captchas
            .lock(id.as_str())
            .remove(id.as_str())
            .filter(|entry| entry.expires_at_ms > now)
            .map(|entry| entry.captcha))
    }
}

#[async_trait]
impl IdempotencyStore for MemoryStore {
    async fn begin_idempotent(
        &self,
        key: &str,
        running: &[u8],
        lease: Duration,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let now = self.now_ms();
        let mut shard = self.idempotency.lock(key);
        if let Some(entry) = shard.get(key).filter(|entry| entry.expires_at_ms > now) {
            return Ok(Some(entry.record.to_vec()));
        }
        let entry = IdempotencyEntry {
            record: running.into(),
            expires_at_ms: now.saturating_add(duration_ms(lease)),
        };
        shard.insert(key.into(), entry);
        Ok(None)
    }

    async fn finish_idempotent(
        &self,
        key: &str,
        done: &[u8],
        retention: Duration,
    ) -> Result<(), StoreError> {
        let entry = IdempotencyEntry {
            record: done.into(),
            expires_at_ms: self.now_ms().saturating_add(duration_ms(retention)),
        };
        self.idempotency.lock(key).insert(key.into(), entry);
        Ok(())
    }

    async fn abandon_idempotent(&self, key: &str, running: &[u8]) -> Result<(), StoreError> {
        let mut shard = self.idempotency.lock(key);
        if shard
            .get(key)
            .is_some_and(|entry| *entry.record == *running)
        {
            shard.remove(key);
        }
        Ok(())
    }
}

#[async_trait]
impl StatsStore for MemoryStore {
    async fn add_stats(
        &self,
        date: &str,
        counts: &[(&'static str, u64)],
    ) -> Result<(), StoreError> {
        let mut stats = lock(&self.stats);
        let day = stats.entry(date.to_owned()).or_default();
        for (field, n) in counts {
            *day.entry((*field).to_owned()).or_default() += n;
        }
        // Dates sort as strings: drop the oldest beyond the retention (plus today).
        while stats.len() > 8 {
            stats.pop_first();
        }
        Ok(())
    }

    async fn stats(&self, dates: &[String]) -> Result<Vec<HashMap<String, u64>>, StoreError> {
        let stats = lock(&self.stats);
        Ok(dates
            .iter()
            .map(|date| stats.get(date).cloned().unwrap_or_default())
            .collect())
    }
}

#[async_trait]
impl OutboxStore for MemoryStore {
    async fn push_outbox(&self, message: &OutboxMessage) -> Result<(), StoreError> {
        let expires_at_ms = self.now_ms().saturating_add(duration_ms(OUTBOX_TTL));
        let mut outboxes = self.outboxes.lock(&message.phone);
        let outbox = outboxes.entry(message.phone.as_str().into()).or_default();
        if outbox.messages.len() == OUTBOX_CAPACITY {
            outbox.messages.pop_front();
        }
        outbox.messages.push_back(message.clone());
        outbox.expires_at_ms = expires_at_ms;
        Ok(())
    }

    async fn outbox(&self, destination: &Destination) -> Result<Vec<OutboxMessage>, StoreError> {
        let now = self.now_ms();
        Ok(self
            .outboxes
            .lock(destination.key())
            .get(destination.key())
            .filter(|outbox| outbox.expires_at_ms > now)
            .map(|outbox| outbox.messages.iter().cloned().collect())
            .unwrap_or_default())
    }
}

#[async_trait]
impl HealthCheck for MemoryStore {
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
}
