//! The Redis store's fused steps: on one node, the guard's step and the conversion inside the
//! issue's and the verify's scripts; on a Cluster (other slots), one after the other.

use async_trait::async_trait;

use super::*;
use crate::store::{
    CodeStore, Conversion, FraudStore, FusedSteps, GuardStep, GuardedIssue, VerifyStep,
    issue_then_admit, verify_then_convert,
};

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

    /// The conversion in the verify's script on one node; after it on a Cluster.
    async fn verify_converting(
        &self,
        step: VerifyStep<'_>,
        conversion: Option<Conversion<'_>>,
    ) -> Result<VerifyOutcome, StoreError> {
        if !self.connections.one_node() {
            return verify_then_convert(self, self, step, conversion).await;
        }
        self.run_verify(step, conversion).await
    }
}
