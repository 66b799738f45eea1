//! The Redis store's fused steps: on one node, the guard's step (its prefix's block read) inside
//! the issue's script; on a Cluster, whose guard keys are on another slot than the phone's, the
//! issue and then the guard's step (`issue_then_admit`).

use async_trait::async_trait;

use super::*;
use crate::store::{CodeStore, FraudStore, FusedSteps, GuardStep, GuardedIssue, issue_then_admit};

#[async_trait]
impl FusedSteps for RedisStore {
    /// In `issue.lua` on one node; one after the other on a Cluster, where the guard's keys
    /// are on other slots than the phone's.
    async fn issue_guarded(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        candidate: CodeCandidate,
        params: &IssueParams,
        budgets: Budgets<'_>,
        guard: GuardStep<'_>,
    ) -> Result<GuardedIssue, StoreError> {
        if !self.connections.one_node() {
            let roles = (self as &dyn CodeStore, self as &dyn FraudStore, self as _);
            return issue_then_admit(
                roles,
                destination,
                purpose,
                candidate,
                params,
                budgets,
                guard,
            )
            .await;
        }
        self.run_issue(
            destination,
            purpose,
            candidate,
            params,
            budgets,
            Some(guard),
        )
        .await
    }
}
