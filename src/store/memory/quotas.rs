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
        // Every budget's shard locked at once: the checks and the records are one step.
        let mut logs = self
            .budgets
            .lock_all(budgets.iter().map(|budget| &budget.scope));
        let (mut refused, mut wait_ms) = (None, 0);
        for budget in budgets {
            let wait = logs
                .map(&budget.scope)
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
            logs.map(&budget.scope)
                .entry(budget.scope)
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
        let mut logs = self.budgets.lock_all(scopes);
        for scope in scopes {
            if let Some(log) = logs.map(scope).get_mut(scope) {
                log.remove(token);
            }
        }
        Ok(())
    }
}
