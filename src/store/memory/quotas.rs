//! The embedded store's quotas role: budgets shared by many destinations (quota logs), reserved and
//! released.

use async_trait::async_trait;

use super::*;
use crate::store::QuotaStore;

/// The budgets' logs, their shards locked together (the checks and the records are one step).
pub(super) type LockedBudgets<'a> = LockedShards<'a, QuotaLog, QuotaScope>;

impl MemoryStore {
    /// Locks the shards of every budget's log at once, in index order.
    pub(super) fn lock_budgets(&self, budgets: &[Budget<'_>]) -> LockedBudgets<'_> {
        self.budgets
            .lock_all(budgets.iter().map(|budget| &budget.scope))
    }
}

/// The first budget without room for one more send at `now`, and the ms until every one has
/// room; `None` if all have.
pub(super) fn budgets_exceeded(
    logs: &mut LockedBudgets<'_>,
    budgets: &[Budget<'_>],
    now: u64,
) -> Option<(QuotaScope, Duration)> {
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
    refused.map(|scope| (scope, Duration::from_millis(wait_ms)))
}

/// Counts one send in every budget, under `token`.
pub(super) fn record_budgets(
    logs: &mut LockedBudgets<'_>,
    budgets: &[Budget<'_>],
    now: u64,
    token: QuotaToken,
) {
    for budget in budgets {
        logs.map(&budget.scope)
            .entry(budget.scope)
            .or_default()
            .record(now, budget.rules, token);
    }
}

#[async_trait]
impl QuotaStore for MemoryStore {
    async fn reserve_quota(
        &self,
        budgets: &[Budget<'_>],
        token: QuotaToken,
    ) -> Result<QuotaDecision, StoreError> {
        let now = self.now_ms();
        let mut logs = self.lock_budgets(budgets);
        if let Some((scope, retry_after)) = budgets_exceeded(&mut logs, budgets, now) {
            return Ok(QuotaDecision::Exceeded { scope, retry_after });
        }
        record_budgets(&mut logs, budgets, now, token);
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
