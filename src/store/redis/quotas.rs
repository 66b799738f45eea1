//! The Redis store's quotas role: budgets shared by many destinations (quota logs), reserved and
//! released.

use async_trait::async_trait;

use super::*;
use crate::store::QuotaStore;

#[async_trait]
impl QuotaStore for RedisStore {
    async fn reserve_quota(
        &self,
        budgets: &[Budget<'_>],
        token: QuotaToken,
    ) -> Result<QuotaDecision, StoreError> {
        let mut invocation = Invocation::of(&SCRIPTS.reserve_quota);
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
