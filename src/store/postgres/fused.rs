//! The PostgreSQL store's fused steps: the issue, the guard's step and the send's levels in one
//! statement (`vcode_issue_guarded_levels`); the verify, then its conversion.

use async_trait::async_trait;
use tokio_postgres::types::ToSql;

use super::codes::{ISSUE_GUARDED, ISSUE_GUARDED_LEVELS, IssueArgs, issue_outcome};
use super::fraud::{self, AdmitArgs};
use super::levels::{LEVELS_COLUMN, LevelArgs, counts_of};
use super::{PostgresStore, column, rule_arrays};
use crate::domain::{Destination, Purpose};
use crate::store::{
    Admission, Budgets, CodeCandidate, Conversion, FusedSteps, GuardStep, GuardedIssue,
    IssueOutcome, IssueParams, QuotaToken, StoreError, VerifyOutcome, VerifyStep,
    verify_then_convert,
};

#[async_trait]
impl FusedSteps for PostgresStore {
    /// The issue, the guard's step and, when the guard asks, the send's levels in one
    /// statement (`vcode_issue_guarded_levels`, else `vcode_issue_guarded`): one transaction,
    /// one commit.
    async fn issue_guarded(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        candidate: CodeCandidate,
        params: &IssueParams,
        _budgets: Budgets<'_>,
        guard: GuardStep<'_>,
    ) -> Result<GuardedIssue, StoreError> {
        let quota_token = QuotaToken::generate();
        let (limits, windows) = rule_arrays(&params.destination_quota);
        let args = IssueArgs::of(
            destination,
            purpose,
            &candidate,
            (params, quota_token, self.give_up_at_ms()),
            (&limits, &windows),
        );
        let admit = AdmitArgs::of(&guard);
        let levels = guard.levels.as_ref().map(LevelArgs::of);
        let mut all: [&(dyn ToSql + Sync); 30] = [&0; 30];
        all[..13].copy_from_slice(&args.params());
        all[13..24].copy_from_slice(&admit.params());
        let row = match &levels {
            Some(levels) => {
                all[24..].copy_from_slice(&levels.params());
                self.query_one_sharded(ISSUE_GUARDED_LEVELS, &all, &admit.token)
                    .await?
            }
            None => {
                self.query_one_sharded(ISSUE_GUARDED, &all[..24], &admit.token)
                    .await?
            }
        };
        match column::<i32>(&row, 0)? {
            -2 => return Err(self.ran_too_late()),
            -4 => return Ok(GuardedIssue::Refused(fraud::refusal_at(&row, 10)?)),
            _ => {}
        }
        let outcome = issue_outcome(&row, candidate, quota_token)?;
        let admission = match outcome {
            IssueOutcome::Send(_) => {
                let mut admission = fraud::admitted_at(&row, 10, admit.mark())?;
                // The levels' counts after the send, when its statement counted them.
                if levels.is_some()
                    && let Admission::Admitted { levels, .. } = &mut admission
                {
                    *levels = Some(counts_of(&column::<Vec<f64>>(&row, LEVELS_COLUMN)?)?);
                }
                Some(admission)
            }
            _ => None,
        };
        Ok(GuardedIssue::Issued { outcome, admission })
    }

    /// The verify's statement, then the conversion's (each its own transaction: the guard's
    /// counts are sharded apart from the phone's lock).
    async fn verify_converting(
        &self,
        step: VerifyStep<'_>,
        conversion: Option<Conversion<'_>>,
    ) -> Result<VerifyOutcome, StoreError> {
        verify_then_convert(self, self, step, conversion).await
    }
}
