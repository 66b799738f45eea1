//! The fused steps role: a send's issue together with the fraud guard's step of it (its
//! prefix's block read, refusing it before anything is written). [`StepByStep`] takes it as
//! plain roles' steps one after the other (written once, here); a backend whose keys meet (the
//! embedded store, one Redis node, PostgreSQL) plays the role itself, in one atomic step and
//! one round trip, and falls back on [`issue_then_admit`] where they do not (a Redis Cluster).

use std::sync::{Arc, OnceLock};

use async_trait::async_trait;

use super::{
    Admission, Budgets, CodeCandidate, CodeStore, FraudSend, FraudStore, IssueOutcome, IssueParams,
    PrefixBlock, QuotaStore, StoreError, VerifyParams,
};
use crate::domain::traffic::{HalfLives, RecordLife};
use crate::domain::{Client, CodeDigest, CodeDigests, Destination, Purpose, VerificationId};

/// The fraud guard's step of one send, as `FusedSteps::issue_guarded` takes it: the send, and
/// whether a blocked prefix is refused.
#[derive(Clone, Copy, Debug)]
pub struct GuardStep<'a> {
    pub send: FraudSend<'a>,
    pub enforce: bool,
    /// The send's levels (issue 39), which a store may count in the same step (Redis on one
    /// node: `Admission::Admitted::levels`); the guard counts them itself otherwise.
    pub levels: Option<LevelStep<'a>>,
}

/// A send's levels as a store counts them within its guard step: a send, at `now_ms`.
#[derive(Clone, Copy, Debug)]
pub struct LevelStep<'a> {
    pub scopes: &'a [String],
    pub now_ms: u64,
    pub half_lives: HalfLives,
    pub record_life: RecordLife,
}

/// What `FusedSteps::issue_guarded` did.
#[derive(Debug)]
pub enum GuardedIssue {
    /// The prefix is blocked: nothing was issued, reserved or written.
    Refused(PrefixBlock),
    /// The issue's outcome and, when it delivers, the send as the guard counted it
    /// (`Admission::Admitted`); a send that does not deliver is not counted.
    Issued {
        outcome: IssueOutcome,
        admission: Option<Admission>,
    },
}

/// One verify, as the codes role takes it (`CodeStore::verify`).
#[derive(Clone, Copy, Debug)]
pub struct VerifyStep<'a> {
    pub destination: &'a Destination,
    pub purpose: &'a Purpose,
    /// The verification id it names (`CodeStore::verify_by_id`); `None`: by destination
    /// (`CodeStore::verify_code`).
    pub id: Option<&'a VerificationId>,
    /// The submitted code's digest under each key in use.
    pub candidates: &'a Candidates<'a>,
    pub client: Client,
    pub params: VerifyParams,
}

/// The submitted code's digest under each key in use, made when first asked for: a store that
/// finds no pending code never needs them (an HMAC per key, the largest item of a verify's
/// miss on the embedded store). The remote stores ask at once: the digests are arguments.
pub enum Candidates<'a> {
    Known(&'a [CodeDigest]),
    Lazy {
        made: OnceLock<CodeDigests>,
        make: &'a (dyn Fn() -> CodeDigests + Sync),
    },
}

impl<'a> Candidates<'a> {
    pub fn known(digests: &'a [CodeDigest]) -> Self {
        Self::Known(digests)
    }

    pub fn lazy(make: &'a (dyn Fn() -> CodeDigests + Sync)) -> Self {
        Self::Lazy {
            made: OnceLock::new(),
            make,
        }
    }

    pub fn digests(&self) -> &[CodeDigest] {
        match self {
            Self::Known(digests) => digests,
            Self::Lazy { made, make } => made.get_or_init(make),
        }
    }
}

impl std::fmt::Debug for Candidates<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the digests: they stand for the code.
        f.write_str("Candidates")
    }
}

/// The steps that cross roles: the codes' and the fraud guard's.
#[async_trait]
pub trait FusedSteps: Send + Sync + 'static {
    /// `CodeStore::issue_code` with the fraud guard's step of the send
    /// (`FraudStore::admit_send`): refused before anything is issued when the prefix is
    /// blocked and `guard.enforce` (nothing issued, reserved or written), and with the send's
    /// levels counted in the same step where the store can (`GuardStep::levels`) only if the
    /// issue delivers. An error leaves nothing issued.
    async fn issue_guarded(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        candidate: CodeCandidate,
        params: &IssueParams,
        budgets: Budgets<'_>,
        guard: GuardStep<'_>,
    ) -> Result<GuardedIssue, StoreError>;
}

/// The fused steps as plain roles' steps one after another: for roles that do not share a
/// backend (the postmortem's legacy codes beside a real store's fraud counts).
pub struct StepByStep {
    pub codes: Arc<dyn CodeStore>,
    pub fraud: Arc<dyn FraudStore>,
    pub quotas: Arc<dyn QuotaStore>,
}

#[async_trait]
impl FusedSteps for StepByStep {
    async fn issue_guarded(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        candidate: CodeCandidate,
        params: &IssueParams,
        budgets: Budgets<'_>,
        guard: GuardStep<'_>,
    ) -> Result<GuardedIssue, StoreError> {
        let roles = (&*self.codes, &*self.fraud, &*self.quotas);
        issue_then_admit(
            roles,
            destination,
            purpose,
            candidate,
            params,
            budgets,
            guard,
        )
        .await
    }
}

/// The issue, then (if it delivers) the guard's step; a refusal or an error of that step
/// undoes the issue (and the budgets it reserved), so that the answer means what a fused
/// step's would.
pub async fn issue_then_admit(
    (codes, fraud, quotas): (&dyn CodeStore, &dyn FraudStore, &dyn QuotaStore),
    destination: &Destination,
    purpose: &Purpose,
    candidate: CodeCandidate,
    params: &IssueParams,
    budgets: Budgets<'_>,
    guard: GuardStep<'_>,
) -> Result<GuardedIssue, StoreError> {
    let outcome = codes
        .issue_code(destination, purpose, candidate, params, budgets)
        .await?;
    let IssueOutcome::Send(delivery) = &outcome else {
        return Ok(GuardedIssue::Issued {
            outcome,
            admission: None,
        });
    };
    let admitted = fraud.admit_send(&guard.send, guard.enforce).await;
    let block = match admitted {
        Ok(admission @ Admission::Admitted { .. }) => {
            return Ok(GuardedIssue::Issued {
                outcome,
                admission: Some(admission),
            });
        }
        Ok(Admission::Refused(block)) => Ok(block),
        Err(error) => Err(error),
    };
    // Refused or unknown: the issue is taken back, as if the step had been one.
    if let Err(error) = codes.undo_issue(destination, purpose, &delivery.undo).await {
        tracing::error!(%destination, %purpose, %error, "the guard's step failed and the issue could not be undone");
    }
    if delivery.budgets_reserved {
        let scopes: Vec<_> = budgets.budgets.iter().map(|budget| budget.scope).collect();
        if let Err(error) = quotas.release_quota(&scopes, budgets.token).await {
            tracing::warn!(%error, "quota event not released; it expires with its window");
        }
    }
    block.map(GuardedIssue::Refused)
}
