//! The PostgreSQL store's fused steps: the issue, the guard's read of the prefix's block and,
//! when the guard asks, the send's levels, in one statement (`vcode_issue_guarded`,
//! `vcode_issue_guarded_levels`). A verify is the codes role's own (`CodeStore::verify`).

use async_trait::async_trait;
use tokio_postgres::types::ToSql;

use super::codes::{ISSUE_GUARDED, ISSUE_GUARDED_LEVELS, IssueArgs, issue_outcome};
use super::fraud::{self, BlockArgs};
use super::levels::{LevelArgs, counts_of};
use super::shards::SendToken;
use super::{PostgresStore, column, rule_arrays};
use crate::domain::{Destination, Purpose};
use crate::store::{
    Admission, Budgets, CodeCandidate, FusedSteps, GuardStep, GuardedIssue, IssueOutcome,
    IssueParams, QuotaToken, StoreError,
};

/// The issue's columns come first (ten), then the guard's block, then the levels.
const BLOCK_COLUMN: usize = 10;
/// Where `vcode_issue_guarded_levels` answers the send's levels (`o_levels`).
const LEVELS_COLUMN: usize = 11;

#[async_trait]
impl FusedSteps for PostgresStore {
    /// The issue, the guard's step and, when the guard asks, the send's levels in one
    /// statement: one transaction, one commit. A refused send writes nothing.
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
        let block = BlockArgs::of(&guard);
        let levels = guard.levels.as_ref().map(LevelArgs::of);
        let mut all: [&(dyn ToSql + Sync); 23] = [&0; 23];
        all[..13].copy_from_slice(&args.params());
        all[13..16].copy_from_slice(&block.params());
        let row = match &levels {
            Some(levels) => {
                // The levels' rows are sharded (migration 0015): the statement counts in a
                // shard no other statement of this instance is writing (shards.rs).
                let token = SendToken::new(rand::random());
                all[16] = &token;
                all[17..].copy_from_slice(&levels.params());
                self.query_one_sharded(ISSUE_GUARDED_LEVELS, &all, &token)
                    .await?
            }
            None => self.query_one(ISSUE_GUARDED, &all[..16]).await?,
        };
        match column::<i32>(&row, 0)? {
            -2 => return Err(self.ran_too_late()),
            -4 => {
                return Ok(GuardedIssue::Refused(fraud::refusal_at(
                    &row,
                    BLOCK_COLUMN,
                )?));
            }
            _ => {}
        }
        let outcome = issue_outcome(&row, candidate, quota_token)?;
        let admission = match outcome {
            IssueOutcome::Send(_) => {
                let mut admission = fraud::admitted_at(&row, BLOCK_COLUMN)?;
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
}
