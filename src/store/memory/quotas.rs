//! The embedded store's quotas role: budgets shared by many destinations (quota logs), reserved and
//! released.

use async_trait::async_trait;

use super::*;
use crate::store::QuotaStore;

#[async_trait]
impl QuotaStore for MemoryStore {
    async fn reserve_quota(
        &self,
        budgets: &[Budget<'_>],
        token: QuotaToken,
    ) -> Result<QuotaDecision, StoreError> {
        let now = self.now_ms();
        // Every budget log is behind this one lock.
        let mut logs = lock(&self.budgets);
        let (mut refused, mut wait_ms) = (None, 0);
        for budget in budgets {
            let wait = logs
                .get_mut(&budget.scope)
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
            logs.entry(budget.scope)
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
        let mut logs = lock(&self.budgets);
        for scope in scopes {
            if let Some(log) = logs.get_mut(scope) {
                log.remove(token);
            }
        }
        Ok(())
    }
}
