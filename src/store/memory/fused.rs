//! The embedded store's fused steps: the issue and the guard's step under one lock
//! (`issue_now`, codes.rs).

use async_trait::async_trait;

use super::*;
use crate::store::{FusedSteps, GuardStep, GuardedIssue};

#[async_trait]
impl FusedSteps for MemoryStore {
    /// The issue and the guard's step under one lock (`issue_now`).
    async fn issue_guarded(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        candidate: CodeCandidate,
        params: &IssueParams,
        budgets: Budgets<'_>,
        guard: GuardStep<'_>,
    ) -> Result<GuardedIssue, StoreError> {
        self.issue_now(
            destination,
            purpose,
            candidate,
            params,
            budgets,
            Some(&guard),
        )
    }
}
