//! The PostgreSQL store's quotas role: budgets shared by many destinations (quota logs), reserved
//! and released. One statement each.

use async_trait::async_trait;
use tokio_postgres::types::Type;

use super::{PostgresStore, as_bigint, column, ms_duration, rule_arrays};
use crate::store::{Budget, QuotaDecision, QuotaScope, QuotaStore, QuotaToken, StoreError};

/// The quota log of a scope (per-phone logs are named inside the functions).
fn scope_log(scope: QuotaScope) -> String {
    scope.to_string()
}

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
