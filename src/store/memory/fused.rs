//! The embedded store's fused steps: the issue and the guard's step under one lock
//! (`issue_now`, codes.rs); the verify, then its conversion.

use async_trait::async_trait;

use super::*;
use crate::store::{Conversion, FusedSteps, GuardStep, GuardedIssue, VerifyStep};

#[async_trait]
impl FusedSteps for MemoryStore {
    /// The issue and the guard's step under one lock (`issue_now`).
    async fn issue_guarded(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        candidate: CodeCandidate,
        params: &IssueParams,
        _budgets: Budgets<'_>,
        guard: GuardStep<'_>,
    ) -> Result<GuardedIssue, StoreError> {
        self.issue_now(destination, purpose, candidate, params, Some(&guard))
    }

    async fn verify_converting(
        &self,
        step: VerifyStep<'_>,
        conversion: Option<Conversion<'_>>,
    ) -> Result<VerifyOutcome, StoreError> {
        // The verify answered at once, not through `CodeStore::verify`'s boxed futures (two
        // allocations on every verify); only a match awaits, for its conversion.
        let VerifyStep {
            destination,
            purpose,
            id,
            candidates,
            client,
            params,
        } = step;
        let outcome = match id {
            Some(id) => {
                let candidates = candidates.digests();
                self.verify_id(destination, purpose, id, candidates, client, params)
            }
            None => self.verify_code_now(destination, purpose, candidates, client, params),
        };
        crate::store::convert_if_verified(self, outcome, conversion).await;
        Ok(outcome)
    }
}
