//! The codes role: pending codes and the verifications their sends start. Issue (with the
//! resend policy and the cooldown), undo, verify by destination or by id, read and cancel:
//! every read-compare-write is one atomic step.

use std::time::Duration;

use async_trait::async_trait;

use super::{Budgets, DeliveryStatus, QuotaRule, QuotaScope, QuotaToken, StoreError, VerifyStep};
use crate::domain::{Client, CodeDigest, Destination, Purpose, SealedCode, VerificationId};

/// What a send does to a code that is still pending once its cooldown has passed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ResendPolicy {
    /// Deliver the pending code again and restart its TTL.
    #[default]
    Reuse,
    /// Replace the pending code with a new one.
    Rotate,
}

#[derive(Clone, Debug)]
pub struct IssueParams {
    pub ttl: Duration,
    /// How long a verification's record outlives its code's TTL, so that its status can still
    /// be read (`approved`, `expired`…).
    pub retention: Duration,
    pub cooldown: Duration,
    pub policy: ResendPolicy,
    /// Limits on sends per destination (all purposes): per phone, or per email address (its
    /// folded form, the destination's key), checked in the same step as the issue.
    pub destination_quota: Vec<QuotaRule>,
    /// Whether the code names its latest send's verification, which a verify by destination
    /// then ends and emits the events of (`VCODE_VERIFY_BY` `phone` or `either`). By id alone
    /// nothing reads it, and Redis keeps a pending code 32 bytes smaller without it.
    pub names_latest_send: bool,
}

#[derive(Debug)]
pub enum IssueOutcome {
    /// A code to deliver now; the store already holds it.
    Send(IssuedCode),
    /// A code is pending and its cooldown is running: nothing changed.
    Cooldown { retry_after: Duration },
    /// The phone's SMS quota is used up: nothing changed.
    QuotaExceeded { retry_after: Duration },
    /// A budget reserved in the same step had no room (`scope` the first without): nothing
    /// changed. Every budget has room again after `retry_after`.
    BudgetExceeded {
        scope: QuotaScope,
        retry_after: Duration,
    },
    /// The candidate's send log (`CodeCandidate::send_log`) is there already (another start
    /// wrote it): nothing changed.
    SendLogExists,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IssueKind {
    /// No code was pending: this one is new.
    Created,
    /// The pending code, delivered again (`ResendPolicy::Reuse`).
    Redelivered,
    /// A new code replaced the pending one (`ResendPolicy::Rotate`).
    Rotated,
}

impl IssueKind {
    /// How the log names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Redelivered => "redelivered",
            Self::Rotated => "rotated",
        }
    }
}

/// A new code as the store keeps it: its keyed digest, and (for `ResendPolicy::Reuse`) the code
/// sealed, so that a resend can deliver the same code. Never the code itself.
#[derive(Clone, Debug)]
pub struct CodeCandidate {
    pub digest: CodeDigest,
    pub sealed: Option<SealedCode>,
    /// The id this send answers. The store binds it to the code the send delivers (the
    /// candidate, or the pending code it re-sends), with its own attempt budget.
    pub verification: VerificationId,
    /// The id says where it leads (`Keyring::locate_id`), so a store that indexes ids to
    /// their targets (Redis) need not index this one.
    pub says_where: bool,
    /// A Twilio-compatible start's send log, created by the issue in its own step if none is
    /// there, and only by a store that does (`CodeStore::writes_send_logs`). Boxed: a send
    /// without one should not carry its size.
    pub send_log: Option<Box<NewSendLog>>,
}

/// A Twilio-compatible first start's send log of (Service, destination), as
/// `TwilioStore::put_twilio_sends` with no revision would write it (revision 1, only if there
/// is none), for the issue to create with its code: the start is then one step where it was
/// two (the log's, then the issue's).
#[derive(Clone, Debug)]
pub struct NewSendLog {
    /// The Service's SID.
    pub service: String,
    pub body: String,
    /// How long it lives from the issue.
    pub ttl: Duration,
}

#[derive(Debug)]
pub struct IssuedCode {
    /// For `Redelivered`: the pending code, sealed (the issuer knows its own candidate).
    pub sealed: Option<SealedCode>,
    pub kind: IssueKind,
    /// Whether the send's budgets were reserved in the same step (one event each, under
    /// `Budgets::token`); if not, the caller reserves them.
    pub budgets_reserved: bool,
    /// How to undo this issue if the SMS cannot be delivered.
    pub undo: IssueUndo,
}

impl IssuedCode {
    /// The digest of the code this delivery sends: beside it, `sealed` opens.
    pub fn digest(&self) -> &CodeDigest {
        &self.undo.digest
    }
}

/// The state an issue wrote and the state it replaced. A roll-back applies only while the store
/// still holds exactly what this issue wrote, so it never removes a later send's code.
#[derive(Clone, Debug)]
pub struct IssueUndo {
    /// The send's verification, removed with the issue: its id was never handed out.
    pub(crate) verification: VerificationId,
    pub(crate) quota_token: QuotaToken,
    pub(crate) digest: CodeDigest,
    pub(crate) sent_at_ms: u64,
    pub(crate) deliveries: u32,
    pub(crate) previous: Option<PreviousIssue>,
}

#[derive(Clone, Debug)]
pub(crate) struct PreviousIssue {
    pub(crate) digest: CodeDigest,
    pub(crate) sealed: Option<SealedCode>,
    pub(crate) sent_at_ms: u64,
    pub(crate) expires_at_ms: u64,
    /// The send the code named as its latest before (verifies by phone end its verification),
    /// for the undo to name again: the embedded store's. Redis keeps it in the new send's
    /// verification record (`undo_issue.lua`); PostgreSQL finds the latest send by query.
    pub(crate) latest_send: Option<VerificationId>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerifyOutcome {
    /// The code matched and is gone.
    Verified,
    /// Wrong code; it stays pending with this many attempts left.
    Mismatch { remaining_attempts: u32 },
    /// Wrong code and the attempt limit is reached: by phone, the code was destroyed; by id,
    /// that id is spent (also the answer to every later try with it).
    Destroyed,
    /// No code is pending (never sent, expired, used or destroyed); by id: the code the id was
    /// sent with is no longer pending (verified, replaced, expired) or the id has expired.
    CodeExpired,
    /// By id: the verification was canceled.
    Canceled,
    /// The phone's failed-verify quota is used up: nothing was compared.
    QuotaExceeded { retry_after: Duration },
}

/// Limits a verify works under.
#[derive(Clone, Copy, Debug)]
pub struct VerifyParams {
    pub max_attempts: u32,
    /// Failed verifies per phone across all its codes, purposes and clients: a ceiling no one
    /// client reaches alone.
    pub destination_failures: Option<QuotaRule>,
    /// Failed verifies per (phone, client): stops a guesser without locking the owner out.
    pub client_failures: Option<QuotaRule>,
}

/// A pending code as the store holds it (for tests, the dev routes and operations).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingCode {
    pub digest: CodeDigest,
    pub sealed: Option<SealedCode>,
    pub failed_attempts: u32,
    pub deliveries: u32,
}

/// Where a verification id leads: the (phone, purpose) it was sent for. Written once by the send
/// and never changed, so it can be read before the atomic step on the phone's records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerificationTarget {
    pub phone_e164: String,
    pub purpose: String,
}

impl VerificationTarget {
    /// The target of a verification sent to `destination` for `purpose`.
    pub fn of(destination: &Destination, purpose: &Purpose) -> Self {
        Self {
            phone_e164: destination.key().to_owned(),
            purpose: purpose.as_str().to_owned(),
        }
    }
}

/// A verification's life-cycle, as `GET /otp/verifications/{id}` answers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerificationStatus {
    /// Its code is pending and it may still verify it.
    Pending,
    /// Its code was verified under this id.
    Approved,
    Canceled,
    /// Its code is no longer pending (expired, replaced by `rotate`, verified under another id
    /// or by phone), or its own TTL has passed.
    Expired,
    /// Its attempts are spent.
    MaxAttemptsReached,
}

impl VerificationStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Canceled => "canceled",
            Self::Expired => "expired",
            Self::MaxAttemptsReached => "max_attempts_reached",
        }
    }
}

/// A verification as the store holds it. Times are unix milliseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerificationRecord {
    pub target: VerificationTarget,
    pub status: VerificationStatus,
    pub delivery: DeliveryStatus,
    pub failed_attempts: u32,
    pub created_at_ms: u64,
    /// When its code expired (or will) as this send left it: the id verifies until then.
    pub expires_at_ms: u64,
    /// The provider's error code an `undelivered` receipt gave.
    pub delivery_error: Option<String>,
}

/// Pending codes: issue, roll back, verify, inspect. Every read-compare-write is one step.
#[async_trait]
pub trait CodeStore: Send + Sync + 'static {
    /// Stores `candidate` as the pending code for (destination, purpose), or applies the resend
    /// policy to the code already pending, or refuses while the cooldown runs. One atomic step.
    /// A backend that holds the budgets' logs beside the phone's (one Redis node) reserves
    /// `budgets` in that same step, so that a send costs one round trip and a refusal by any
    /// limit changes nothing anywhere; the others leave them to the caller
    /// (`IssuedCode::budgets_reserved`).
    async fn issue_code(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        candidate: CodeCandidate,
        params: &IssueParams,
        budgets: Budgets<'_>,
    ) -> Result<IssueOutcome, StoreError>;

    /// Whether `issue_code` and `issue_guarded` create a candidate's send log
    /// (`CodeCandidate::send_log`) in their own step, before anything else checking that none
    /// is there (`IssueOutcome::SendLogExists`), and writing it only if the issue delivers.
    /// The log is then the `TwilioStore`'s of the same backend. A store that does not ignores
    /// a candidate's log: its caller writes the log first, and passes none.
    fn writes_send_logs(&self) -> bool {
        false
    }

    /// Undoes an issue whose SMS was not sent: its phone-quota event always, the code and
    /// cooldown only if the store still holds what it wrote. Returns whether the code was
    /// rolled back.
    async fn undo_issue(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        undo: &IssueUndo,
    ) -> Result<bool, StoreError>;

    /// Compares the pending code's digest with `candidates` (the submitted code's digest under
    /// each key in use) and deletes it on a match; counts a failure otherwise (in the code, the
    /// phone's and the (destination, client)'s failure logs) and destroys the code at `max_attempts`
    /// failures. Refuses without comparing while either failure quota is used up. One atomic
    /// step.
    async fn verify_code(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        candidates: &[CodeDigest],
        client: Client,
        params: VerifyParams,
    ) -> Result<VerifyOutcome, StoreError>;

    /// The pending code, without changing anything.
    async fn pending_code(
        &self,
        destination: &Destination,
        purpose: &Purpose,
    ) -> Result<Option<PendingCode>, StoreError>;

    /// The (destination, purpose) a verification was sent for; `None` for an unknown or forgotten
    /// id. Never changes once written, so reading it outside the verify's atomic step is safe.
    async fn locate_verification(
        &self,
        id: &VerificationId,
    ) -> Result<Option<VerificationTarget>, StoreError>;

    /// `verify_code` under one verification id (whose target is `phone`, `purpose`): compares
    /// only while the id is pending and bound to the pending code. A match consumes the code
    /// (for every id) and approves this id; a mismatch counts in this id's attempts alone (and
    /// in the phone's and the (destination, client)'s failure logs) and spends the id at
    /// `max_attempts`: the code itself is never destroyed by guesses. One atomic step.
    async fn verify_by_id(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        id: &VerificationId,
        candidates: &[CodeDigest],
        client: Client,
        params: VerifyParams,
    ) -> Result<VerifyOutcome, StoreError>;

    /// The verification, its status worked out against the pending code; `None` when unknown.
    /// `located`: where the id leads, when the caller knows (a store that indexes ids to
    /// their targets need not read its index; an id that says where it leads has no entry).
    async fn verification(
        &self,
        id: &VerificationId,
        located: Option<&VerificationTarget>,
    ) -> Result<Option<VerificationRecord>, StoreError>;

    /// Cancels a pending verification (an ended one stays as it is) and returns it. The code
    /// stays pending for its other ids: one requester never ends another's verification.
    /// `located` as for `verification`.
    async fn cancel_verification(
        &self,
        id: &VerificationId,
        located: Option<&VerificationTarget>,
    ) -> Result<Option<VerificationRecord>, StoreError>;

    /// Records that the SMS of the send that answered `id` is unconfirmed (the issue wrote
    /// `sent`, the common case, so that a confirmed send costs no second write).
    async fn mark_unconfirmed(
        &self,
        destination: &Destination,
        id: &VerificationId,
    ) -> Result<(), StoreError>;

    /// `verify_by_id` (with `step.id`) or `verify_code`.
    async fn verify(&self, step: VerifyStep<'_>) -> Result<VerifyOutcome, StoreError> {
        let VerifyStep {
            destination,
            purpose,
            id,
            candidates,
            client,
            params,
        } = step;
        match id {
            Some(id) => {
                self.verify_by_id(
                    destination,
                    purpose,
                    id,
                    candidates.digests(),
                    client,
                    params,
                )
                .await
            }
            None => {
                self.verify_code(destination, purpose, candidates.digests(), client, params)
                    .await
            }
        }
    }
}
