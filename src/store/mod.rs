//! What the use cases keep, as narrow roles (codes, quotas, captchas, idempotency records,
//! verifications, the providers' delivery receipts, stats, dev outbox, health, used
//! proof-of-work challenges, the fraud guard's counts, the event outbox, the Twilio-compatible
//! API's Services and send logs), and the backends that play them:
//! `memory` (embedded, one process), `redis` and `postgres` (shared by any number of
//! instances). Every operation that reads, compares and writes is one atomic step in each.

pub mod deadline;
mod events;
mod memory;
pub mod postgres;
pub mod redis;
mod tls;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;

use crate::domain::traffic::{Reason, Tally, Window};
use crate::domain::{
    CaptchaId, Client, CodeDigest, Destination, Purpose, SealedCode, VerificationId,
};

pub use self::events::{
    ClaimedEvent, EventKind, EventStore, FailedEvent, OutboxStatus, Settlement, StoredEvent,
};
pub use self::memory::MemoryStore;
pub use self::postgres::PostgresStore;
pub use self::redis::RedisStore;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store unreachable: {0}")]
    Unavailable(String),
    #[error("store did not answer within {0:?}")]
    Timeout(Duration),
    #[error("unexpected reply from the store: {0}")]
    Protocol(String),
}

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
    pub phone_quota: Vec<QuotaRule>,
    /// Whether the code names its latest send's verification, which a verify by destination
    /// then ends and emits the events of (`VCODE_VERIFY_BY` `phone` or `either`). By id alone
    /// nothing reads it, and Redis keeps a pending code 32 bytes smaller without it.
    pub names_latest_send: bool,
}

/// "At most `limit` events in any `window`", kept as a sliding-window log of event times, so
/// the limit holds for every window, not just aligned ones: no burst at a window's edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaRule {
    pub limit: u32,
    pub window: Duration,
}

impl QuotaRule {
    /// The rule, or none when `limit` is 0 (off).
    pub fn new(limit: u32, window: Duration) -> Option<Self> {
        (limit > 0).then_some(Self { limit, window })
    }
}

/// Identifies one event in a quota log, so that an event whose SMS was never sent can be taken
/// back out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaToken(pub u64);

impl QuotaToken {
    pub fn generate() -> Self {
        Self(rand::random())
    }
}

/// Quota logs that are not per phone (per-phone logs share the phone's hash tag and are
/// checked inside the code scripts). All of them live together (one Redis hash tag, one lock
/// in memory), so one send's budgets are reserved in one atomic step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuotaScope {
    /// SMS sends of one client (address or IPv6 network).
    ClientIp(std::net::IpAddr),
    /// Captchas created by one client.
    CaptchaClient(std::net::IpAddr),
    Global,
    /// Code emails to one recipient domain: the first 8 bytes of the domain's SHA-256 (a
    /// fixed-size name keeps the scope `Copy`; [`QuotaScope::email_domain`]).
    EmailDomain(u64),
    /// Sends of one end user a tenant named by its own key (`Client::EndUser`'s digest): the
    /// per-client budget, as `ClientIp` is a browser's.
    EndUser(u64),
    /// Sends of one tenant (an API-key caller or a Twilio account): its own budget, in place
    /// of its server address's.
    Tenant(u64),
    /// Starts counted in one Bucket of a Twilio Service's Rate Limit for one value: a keyed
    /// digest of (Bucket, value).
    Bucket(u64),
}

impl QuotaScope {
    /// The per-client budget's scope of `client`.
    pub fn client(client: Client) -> Self {
        match client {
            Client::Address(address) => Self::ClientIp(address),
            Client::EndUser(digest) => Self::EndUser(digest),
        }
    }

    /// The scope of the code emails to `domain` (lower-case A-labels, as `EmailAddress` keeps
    /// it).
    pub fn email_domain(domain: &str) -> Self {
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(domain.as_bytes());
        let mut first = [0; 8];
        first.copy_from_slice(&digest[..8]);
        Self::EmailDomain(u64::from_be_bytes(first))
    }
}

/// The scope's log name, the same in every store (`ip:203.0.113.7`, `domain:<16 hex>`, …).
impl std::fmt::Display for QuotaScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ClientIp(ip) => write!(f, "ip:{ip}"),
            Self::CaptchaClient(ip) => write!(f, "captcha:{ip}"),
            Self::Global => f.write_str("global"),
            Self::EmailDomain(domain) => write!(f, "domain:{domain:016x}"),
            Self::EndUser(digest) => write!(f, "user:{digest:016x}"),
            Self::Tenant(digest) => write!(f, "tenant:{digest:016x}"),
            Self::Bucket(digest) => write!(f, "bucket:{digest:016x}"),
        }
    }
}

/// A budget one send draws on besides its phone's: a quota log and its rules.
#[derive(Clone, Copy, Debug)]
pub struct Budget<'a> {
    pub scope: QuotaScope,
    pub rules: &'a [QuotaRule],
}

/// The budgets one send draws on besides its phone's, and the event it records in each.
#[derive(Clone, Copy, Debug)]
pub struct Budgets<'a> {
    pub budgets: &'a [Budget<'a>],
    pub token: QuotaToken,
}

impl Budgets<'_> {
    /// A send that draws on no budget but its phone's.
    pub fn none() -> Budgets<'static> {
        Budgets {
            budgets: &[],
            token: QuotaToken(0),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuotaDecision {
    Granted,
    /// Nothing was recorded: `scope` is the first budget without room, and every budget has
    /// room again after `retry_after`.
    Exceeded {
        scope: QuotaScope,
        retry_after: Duration,
    },
}

#[derive(Debug)]
pub enum IssueOutcome {
    /// A code to deliver now; the store already holds it.
    Deliver(Delivery),
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
pub enum DeliveryKind {
    /// No code was pending: this one is new.
    Created,
    /// The pending code, delivered again (`ResendPolicy::Reuse`).
    Redelivered,
    /// A new code replaced the pending one (`ResendPolicy::Rotate`).
    Rotated,
}

impl DeliveryKind {
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

/// What is known of the SMS of an accepted send: what the provider answered the send, then
/// what its delivery receipts said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    #[default]
    Sent,
    /// The request reached the provider and no answer came: the SMS may arrive.
    Unconfirmed,
    /// A receipt: the handset got it.
    Delivered,
    /// A receipt: it will not arrive (the provider's error code says why).
    Undelivered,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sent => "sent",
            Self::Unconfirmed => "unconfirmed",
            Self::Delivered => "delivered",
            Self::Undelivered => "undelivered",
        }
    }

    /// How far along it is: a receipt moves a delivery only forward (a late `sent` after
    /// `delivered` changes nothing), and the first final word stays.
    pub fn rank(self) -> u8 {
        match self {
            Self::Unconfirmed => 0,
            Self::Sent => 1,
            Self::Delivered | Self::Undelivered => 2,
        }
    }
}

#[derive(Debug)]
pub struct Delivery {
    /// For `Redelivered`: the pending code, sealed (the issuer knows its own candidate).
    pub sealed: Option<SealedCode>,
    pub kind: DeliveryKind,
    /// Whether the send's budgets were reserved in the same step (one event each, under
    /// `Budgets::token`); if not, the caller reserves them.
    pub budgets_reserved: bool,
    /// How to undo this issue if the SMS cannot be delivered.
    pub undo: IssueUndo,
}

impl Delivery {
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
    pub phone_failures: Option<QuotaRule>,
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

/// One delivery receipt, as the store applies it: the provider's message, and what became of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Receipt<'a> {
    pub provider: &'a str,
    pub message_id: &'a str,
    /// `Sent`, `Delivered` or `Undelivered` (a receipt never says `Unconfirmed`).
    pub delivery: DeliveryStatus,
    /// The provider's error code, for `Undelivered`.
    pub error_code: Option<&'a str>,
}

impl Receipt<'_> {
    /// The event a receipt that changes the delivery emits (none for a `Sent`), and its detail
    /// (`provider`, `message_id`, `error_code`): `vcode_receipt` (migration 0007) spells the same.
    pub fn event(&self) -> Option<(EventKind, String)> {
        let kind = match self.delivery {
            DeliveryStatus::Delivered => EventKind::Delivered,
            DeliveryStatus::Undelivered => EventKind::Undelivered,
            DeliveryStatus::Sent | DeliveryStatus::Unconfirmed => return None,
        };
        let mut detail = format!("provider={};message_id={}", self.provider, self.message_id);
        if let Some(code) = self.error_code.filter(|_| kind == EventKind::Undelivered) {
            detail.push_str(";error_code=");
            detail.push_str(code);
        }
        Some((kind, detail))
    }
}

/// What a receipt changed: everything the `verification.delivered` / `.undelivered` event
/// carries. Times are unix milliseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveryTransition {
    pub verification: VerificationId,
    pub target: VerificationTarget,
    pub provider: String,
    pub message_id: String,
    pub previous: DeliveryStatus,
    pub delivery: DeliveryStatus,
    pub error_code: Option<String>,
    /// When the send created the verification.
    pub created_at_ms: u64,
    /// The fraud guard's mark of the message's send (its minute and token), if the guard
    /// counted it: an `undelivered` receipt takes the send out of the guard's judged sends.
    pub guarded: Option<SendMark>,
    /// When the store applied the receipt.
    pub changed_at_ms: u64,
}

/// What one receipt did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReceiptOutcome {
    /// No send recorded this message, or its verification has been forgotten.
    Unknown,
    /// Known, and nothing changed: a repeat, or older news than the delivery holds.
    Unchanged,
    Changed(DeliveryTransition),
}

/// A captcha as stored: the seed its picture and (under the service's key) its answer are
/// drawn from, so every fetch of one id shows the same picture. No answer is stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredCaptcha {
    pub seed: u64,
}

/// One SMS as the dev outbox shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct OutboxMessage {
    pub phone: String,
    pub purpose: String,
    pub code: String,
    pub sent_at_ms: u64,
}

/// How many messages the dev outbox keeps per phone, and for how long.
pub const OUTBOX_CAPACITY: usize = 100;
pub const OUTBOX_TTL: Duration = Duration::from_secs(3600);

/// Pending codes: issue, roll back, verify, inspect. Every read-compare-write is one step.
#[async_trait]
pub trait CodeStore: Send + Sync + 'static {
    /// Stores `candidate` as the pending code for (destination, purpose), or applies the resend
    /// policy to the code already pending, or refuses while the cooldown runs. One atomic step.
    /// A backend that holds the budgets' logs beside the phone's (one Redis node) reserves
    /// `budgets` in that same step, so that a send costs one round trip and a refusal by any
    /// limit changes nothing anywhere; the others leave them to the caller
    /// (`Delivery::budgets_reserved`).
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
    async fn verification(
        &self,
        id: &VerificationId,
    ) -> Result<Option<VerificationRecord>, StoreError>;

    /// Cancels a pending verification (an ended one stays as it is) and returns it. The code
    /// stays pending for its other ids: one requester never ends another's verification.
    async fn cancel_verification(
        &self,
        id: &VerificationId,
    ) -> Result<Option<VerificationRecord>, StoreError>;

    /// Records that the SMS of the send that answered `id` is unconfirmed (the issue wrote
    /// `sent`, the common case, so that a confirmed send costs no second write).
    async fn mark_unconfirmed(
        &self,
        destination: &Destination,
        id: &VerificationId,
    ) -> Result<(), StoreError>;

    /// `issue_code` with the fraud guard's step of the send (`FraudStore::admit_send`) in the
    /// same atomic step, where the guard's keys meet the phone's (one Redis node): refused
    /// before anything when its prefix is blocked and `guard.enforce`, else counted only if
    /// the issue delivers. A backend that keeps them apart issues alone (`GuardedIssue::Apart`)
    /// and the caller takes the guard's step after the issue.
    async fn issue_guarded(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        candidate: CodeCandidate,
        params: &IssueParams,
        budgets: Budgets<'_>,
        guard: GuardStep<'_>,
    ) -> Result<GuardedIssue, StoreError> {
        let _ = guard;
        self.issue_code(destination, purpose, candidate, params, budgets)
            .await
            .map(GuardedIssue::Apart)
    }

    /// `verify_by_id` (with `id`) or `verify_code`, counting a match as the conversion of the
    /// send `conversion` names (`FraudStore::count_conversion`) in the same atomic step where
    /// the guard's keys meet the phone's (one Redis node). The flag says whether the store
    /// took the conversion; if not, the caller counts it (when there is one).
    #[allow(clippy::too_many_arguments)]
    async fn verify_converting(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        id: Option<&VerificationId>,
        candidates: &[CodeDigest],
        client: Client,
        params: VerifyParams,
        conversion: Option<Conversion<'_>>,
    ) -> Result<(VerifyOutcome, bool), StoreError> {
        let _ = conversion;
        let outcome = match id {
            Some(id) => {
                self.verify_by_id(destination, purpose, id, candidates, client, params)
                    .await?
            }
            None => {
                self.verify_code(destination, purpose, candidates, client, params)
                    .await?
            }
        };
        Ok((outcome, false))
    }
}

/// The fraud guard's step of one send, as `CodeStore::issue_guarded` takes it: the send, the
/// window it is judged over, whether a blocked prefix is refused, and how long its
/// attribution waits for a verify.
#[derive(Clone, Copy, Debug)]
pub struct GuardStep<'a> {
    pub send: FraudSend<'a>,
    pub window: &'a Window,
    pub enforce: bool,
    pub attribution_ttl: Duration,
}

impl GuardStep<'_> {
    /// The mark the step counts its send under, unless the store chooses another (see
    /// `Admission::Admitted::mark`): the window's minute and the send's token.
    pub fn mark(&self) -> SendMark {
        SendMark {
            minute: self.window.minute,
            token: self.send.token,
        }
    }
}

/// What `CodeStore::issue_guarded` did.
// One per send, moved once from the store to the guard: boxing the tallies would cost an
// allocation on every send for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum GuardedIssue {
    /// The guard's step is the caller's: the issue alone.
    Apart(IssueOutcome),
    /// The prefix is blocked: nothing was issued, reserved or counted but the refusal.
    Refused(PrefixBlock),
    /// Taken together: the issue's outcome and, when it delivers, the send as the guard
    /// counted it (`Admission::Admitted`); a send that does not deliver is not counted.
    Together {
        outcome: IssueOutcome,
        admission: Option<Admission>,
    },
}

/// A verified code's send, for the guard to count as converted: see
/// `FraudStore::count_conversion`.
#[derive(Clone, Copy, Debug)]
pub struct Conversion<'a> {
    pub attribution: &'a str,
    pub prefix: &'a str,
    pub country: &'a str,
    pub since_minute: u64,
}

/// Delivery receipts: which provider message carried which send's SMS, and what the
/// providers later reported of it.
#[async_trait]
pub trait ReceiptStore: Send + Sync + 'static {
    /// Records that `provider`'s message `message_id` carries the SMS of the send that answered
    /// `id` (to `phone`, for `purpose`), for `keep` (as long as the verification is kept), and
    /// the fraud guard's mark of that send if the guard counted it (`guarded`), which the
    /// message's transition hands back.
    #[allow(clippy::too_many_arguments)]
    async fn record_message(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        id: &VerificationId,
        provider: &str,
        message_id: &str,
        guarded: Option<SendMark>,
        keep: Duration,
    ) -> Result<(), StoreError>;

    /// Moves the delivery of the message's verification to the receipt's, if that is further
    /// along ([`DeliveryStatus::rank`]); keeps the error code with it. One atomic step: of a
    /// receipt delivered twice, or of two racing, only one changes anything. A change to
    /// `Delivered` or `Undelivered` counts, in that same step, in the hour's
    /// [`DeliveryCount`] of the provider and the phone's country.
    async fn apply_receipt(&self, receipt: &Receipt<'_>) -> Result<ReceiptOutcome, StoreError>;

    /// The delivery counts of the hours from `from_hour` (unix hours) on, shared by every
    /// instance on the store; kept [`DELIVERY_COUNTS_KEPT_HOURS`].
    async fn delivery_counts(&self, from_hour: u64) -> Result<Vec<DeliveryCount>, StoreError>;
}

/// Receipts' final words on the SMS of one provider to one country in one hour: the delivery
/// rate's counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeliveryCount {
    /// Unix hour (unix ms / 3,600,000).
    pub hour: u64,
    pub provider: String,
    /// The phone's country (`GB`; `001` non-geographic), [`crate::domain::Phone::country`].
    pub country: String,
    pub delivered: u64,
    pub undelivered: u64,
}

/// How long the delivery counts are kept, in hours (eight days: a week and the day it began).
pub const DELIVERY_COUNTS_KEPT_HOURS: u64 = 8 * 24;

/// The unix hour of `unix_ms`.
pub fn unix_hour(unix_ms: u64) -> u64 {
    unix_ms / 3_600_000
}

/// Adds `delivery` (a final word) to `count`.
pub fn add_delivery(count: &mut DeliveryCount, delivery: DeliveryStatus) {
    match delivery {
        DeliveryStatus::Delivered => count.delivered += 1,
        DeliveryStatus::Undelivered => count.undelivered += 1,
        DeliveryStatus::Sent | DeliveryStatus::Unconfirmed => {}
    }
}

/// Budgets shared by many phones: per client address and global.
#[async_trait]
pub trait QuotaStore: Send + Sync + 'static {
    /// Records one event (`token`) in every budget's log if each of their rules has room, in
    /// one atomic step; otherwise records nothing.
    async fn reserve_quota(
        &self,
        budgets: &[Budget<'_>],
        token: QuotaToken,
    ) -> Result<QuotaDecision, StoreError>;

    /// Takes a reserved event back out of the `scopes` logs (its SMS was not sent).
    async fn release_quota(
        &self,
        scopes: &[QuotaScope],
        token: QuotaToken,
    ) -> Result<(), StoreError>;
}

/// Image captchas: stored until solved, tried or expired.
#[async_trait]
pub trait CaptchaStore: Send + Sync + 'static {
    /// Stores a new captcha under `id` for `ttl`.
    async fn put_captcha(
        &self,
        id: &CaptchaId,
        captcha: &StoredCaptcha,
        ttl: Duration,
    ) -> Result<(), StoreError>;

    /// The captcha, left in place (to draw its picture, and for the dev route).
    async fn captcha(&self, id: &CaptchaId) -> Result<Option<StoredCaptcha>, StoreError>;

    /// Removes and returns the captcha in one step: of concurrent takers only one gets it. A
    /// take that reaches a shared store after its caller gave up waiting takes nothing (the
    /// caller answered a failure, and its retry must find the captcha).
    async fn take_captcha(&self, id: &CaptchaId) -> Result<Option<StoredCaptcha>, StoreError>;
}

/// `Idempotency-Key` records. The store keeps them as opaque bytes: what a record means is
/// the use case's business.
#[async_trait]
pub trait IdempotencyStore: Send + Sync + 'static {
    /// Claims `key` with `running` for `lease` (returns `None`), or returns the record the key
    /// already holds. One step, so of concurrent first requests exactly one runs. A claim that
    /// reaches a shared store after its caller gave up waiting claims nothing.
    async fn begin_idempotent(
        &self,
        key: &str,
        running: &[u8],
        lease: Duration,
    ) -> Result<Option<Vec<u8>>, StoreError>;

    /// Replaces the running record with the finished one, kept for `retention`.
    async fn finish_idempotent(
        &self,
        key: &str,
        done: &[u8],
        retention: Duration,
    ) -> Result<(), StoreError>;

    /// Frees `key` if it still holds `running`, so that a retry runs again.
    async fn abandon_idempotent(&self, key: &str, running: &[u8]) -> Result<(), StoreError>;
}

/// Daily counters.
#[async_trait]
pub trait StatsStore: Send + Sync + 'static {
    /// Adds `counts` to the daily counters of `date` (`YYYY-MM-DD`), kept for 7 days.
    async fn add_stats(&self, date: &str, counts: &[(&'static str, u64)])
    -> Result<(), StoreError>;

    /// The daily counters of each date, in order (empty for a day without any).
    async fn stats(
        &self,
        dates: &[String],
    ) -> Result<Vec<std::collections::HashMap<String, u64>>, StoreError>;
}

/// Dev mode only: the SMS "sent", so that tests read them as a user would.
#[async_trait]
pub trait OutboxStore: Send + Sync + 'static {
    /// Remembers a delivered SMS.
    async fn push_outbox(&self, message: &OutboxMessage) -> Result<(), StoreError>;

    /// The SMS delivered to `phone`, oldest first.
    async fn outbox(&self, destination: &Destination) -> Result<Vec<OutboxMessage>, StoreError>;
}

/// Solved proof-of-work challenges, remembered until they expire, so that each is accepted
/// once, by every instance sharing the store.
#[async_trait]
pub trait PowReplayStore: Send + Sync + 'static {
    /// Records the challenge `digest` for `ttl` unless it is recorded already, in one atomic
    /// step; true if it was new. Of concurrent recorders of one digest exactly one gets true. A
    /// record that reaches a shared store after its caller gave up waiting records nothing.
    async fn record_solved_pow(&self, digest: &str, ttl: Duration) -> Result<bool, StoreError>;

    /// Forgets a recorded challenge, so that it is accepted once more: the send it was
    /// recorded for failed on the server side before any SMS went out.
    async fn forget_solved_pow(&self, digest: &str) -> Result<(), StoreError>;
}

/// One send as the fraud guard counts it: its destination prefix and country, the pending code
/// it is for (`attribution`: E.164 and purpose, so that the verify of that code converts it),
/// a token of its own (so that giving it back never touches another send's mark), and the
/// caller's clock.
#[derive(Clone, Copy, Debug)]
pub struct FraudSend<'a> {
    pub prefix: &'a str,
    pub country: &'a str,
    pub attribution: &'a str,
    pub token: u64,
    pub now_ms: u64,
}

/// What an attribution holds: the minute of the last send of its code, and that send's token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendMark {
    pub minute: u64,
    pub token: u64,
}

/// A prefix's suspension or hold, as the store keeps it (also once over: its strikes are
/// remembered).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct PrefixBlock {
    pub prefix: String,
    pub country: String,
    #[serde(with = "reason_text")]
    pub reason: Reason,
    pub since_ms: u64,
    pub until_ms: u64,
    /// Suspensions within the strike memory, this one included (a hold adds none).
    pub strikes: u32,
    /// When the last suspension began (0: never suspended).
    pub struck_ms: u64,
    /// The prefix's judged sends and conversions when it was blocked.
    pub sends: u64,
    pub conversions: u64,
    /// When an operator last lifted a block of it (0: never).
    #[serde(default)]
    pub lifted_ms: u64,
}

impl PrefixBlock {
    pub fn is_active(&self, now_ms: u64) -> bool {
        self.until_ms > now_ms
    }
}

mod reason_text {
    use super::Reason;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(reason: &Reason, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(reason.as_str())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Reason, D::Error> {
        let raw = String::deserialize(d)?;
        Reason::parse(&raw).ok_or_else(|| serde::de::Error::custom("unknown reason"))
    }
}

/// What the guard's one step did with a send.
#[derive(Clone, Debug, PartialEq)]
pub enum Admission {
    /// The prefix is blocked: nothing was counted but a refusal.
    Refused(PrefixBlock),
    /// Counted: the prefix's and the service's counts over the window, this send included,
    /// the prefix's block record if it has one (active only when not enforced), the
    /// mark the attribution held before (to restore on release), and the mark the send was
    /// counted under, which its release, its conversion (through the attribution) and its
    /// receipt then name: the step's minute and token, unless the store chose where to count
    /// it (PostgreSQL sets the token's low bits to a shard no other send of the instance is
    /// writing).
    Admitted {
        prefix: Tally,
        service: Tally,
        block: Option<PrefixBlock>,
        previous: Option<SendMark>,
        mark: SendMark,
    },
}

/// One minute of one scope's counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MinuteCounts {
    pub minute: u64,
    pub sends: u64,
    pub conversions: u64,
    /// Sends the guard refused (service scope only).
    pub refused: u64,
    /// Sends a receipt called undelivered (`FraudStore::count_undelivered`): counted in
    /// `sends` too.
    pub undelivered: u64,
}

/// The counts of a span of minutes, per minute (minutes without any left out), for the
/// service, each country and each prefix (with its country).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FraudTraffic {
    pub service: Vec<MinuteCounts>,
    pub countries: Vec<(String, Vec<MinuteCounts>)>,
    pub prefixes: Vec<(String, String, Vec<MinuteCounts>)>,
}

/// The fraud guard's counts, per minute, per destination prefix, per country and for the
/// service, and the prefixes' blocks: shared by every instance. Its keys are apart from the
/// codes' (on a Cluster, another slot than the phone's): a send's and a verify's steps are
/// their own, unless the code store takes them in its own (`CodeStore::issue_guarded`,
/// `CodeStore::verify_converting`).
#[async_trait]
pub trait FraudStore: Send + Sync + 'static {
    /// The guard's one step per send: refuses it if its prefix is blocked and `enforce` (and
    /// counts the refusal); else counts it (prefix, country, service, in `window.minute`),
    /// marks `attribution` with its minute and token for `attribution_ttl`, and answers the counts
    /// over `window` and the mark it counted the send under (`Admission::Admitted::mark`).
    /// Atomic: concurrent sends are each counted once.
    async fn admit_send(
        &self,
        send: &FraudSend<'_>,
        window: &Window,
        enforce: bool,
        attribution_ttl: Duration,
    ) -> Result<Admission, StoreError>;

    /// Takes an admitted send back out (its SMS did not go out): uncounts it where its
    /// admission counted it (`mark`, the admission's: its minute and token, not the send's
    /// own token), gives the attribution back its `previous` mark if it still holds this
    /// send's (a concurrent send of the same code may have marked it since), and counts a
    /// refusal if `refused`.
    async fn release_send(
        &self,
        send: &FraudSend<'_>,
        mark: SendMark,
        previous: Option<SendMark>,
        refused: bool,
    ) -> Result<(), StoreError>;

    /// A verified code: takes the attribution's minute and, if it is `since_minute` or later
    /// (no attribution is older than a code lives), counts a conversion in that minute
    /// (prefix, country, service). Once per send. Returns the minute converted.
    async fn count_conversion(
        &self,
        attribution: &str,
        prefix: &str,
        country: &str,
        since_minute: u64,
    ) -> Result<Option<u64>, StoreError>;

    /// Records `block` unless the prefix has an active one at `now_ms`; true if recorded.
    async fn block_prefix(&self, block: &PrefixBlock, now_ms: u64) -> Result<bool, StoreError>;

    /// Every block record, active or not.
    async fn prefix_blocks(&self) -> Result<Vec<PrefixBlock>, StoreError>;

    /// Ends the prefix's active block now and notes the lift (its strikes stay); false if
    /// none was active.
    async fn lift_block(&self, prefix: &str, now_ms: u64) -> Result<bool, StoreError>;

    /// A receipt said the send marked `mark` never arrived: moves it, in its minute, from the
    /// sends the judgement reads to the undelivered (prefix, country, service), in the shard
    /// of its token where the store shards. A minute with no send left to move (forgotten
    /// past retention) is left alone. Once per send: the receipt's transition happens once.
    async fn count_undelivered(
        &self,
        prefix: &str,
        country: &str,
        mark: SendMark,
    ) -> Result<(), StoreError>;

    /// The counts of the minutes `from..=to`.
    async fn fraud_traffic(&self, from: u64, to: u64) -> Result<FraudTraffic, StoreError>;
}

/// A record of the Twilio-compatible API (src/twilio_compat) as the store keeps it: text the
/// compat layer owns, and its revision (1 when created, one more at each write), so that a
/// write based on a read is a compare-and-set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Revised {
    pub revision: u64,
    pub body: String,
}

/// The Twilio-compatible API's own state: each account's Services, and the send log of each
/// (Service, destination) verification (a phone's or an email address's, by its `key`). Every write is a compare-and-set on one record, one atomic
/// step; the codes themselves are the `CodeStore`'s, whose issue creates a first start's log
/// where the backend can (`CodeStore::writes_send_logs`).
#[async_trait]
pub trait TwilioStore: Send + Sync + 'static {
    /// The account's Services, in no particular order.
    async fn twilio_services(&self, account: &str) -> Result<Vec<(String, Revised)>, StoreError>;

    /// One of the account's Services (another account's is `None`).
    async fn twilio_service(&self, account: &str, sid: &str)
    -> Result<Option<Revised>, StoreError>;

    /// Writes the Service if its revision is still `expected` (`None`: only if it does not
    /// exist); true if written.
    async fn put_twilio_service(
        &self,
        account: &str,
        sid: &str,
        expected: Option<u64>,
        body: &str,
    ) -> Result<bool, StoreError>;

    /// Removes the Service; true if it existed.
    async fn delete_twilio_service(&self, account: &str, sid: &str) -> Result<bool, StoreError>;

    /// The send log of (Service, destination), while it lives.
    async fn twilio_sends(
        &self,
        service: &str,
        destination: &Destination,
    ) -> Result<Option<Revised>, StoreError>;

    /// Writes the send log if its revision is still `expected` (`None`: only if there is none),
    /// to live `ttl` from now; true if written.
    async fn put_twilio_sends(
        &self,
        service: &str,
        destination: &Destination,
        expected: Option<u64>,
        body: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError>;
}

/// Whether the store answers (for `/readyz`).
#[async_trait]
pub trait HealthCheck: Send + Sync + 'static {
    async fn ping(&self) -> Result<(), StoreError>;
}

/// A backend that plays every role (the embedded store, Redis, PostgreSQL).
pub trait Store:
    CodeStore
    + QuotaStore
    + CaptchaStore
    + IdempotencyStore
    + StatsStore
    + OutboxStore
    + HealthCheck
    + PowReplayStore
    + FraudStore
    + EventStore
    + TwilioStore
    + ReceiptStore
{
}

impl<T> Store for T where
    T: CodeStore
        + QuotaStore
        + CaptchaStore
        + IdempotencyStore
        + StatsStore
        + OutboxStore
        + HealthCheck
        + PowReplayStore
        + FraudStore
        + EventStore
        + TwilioStore
        + ReceiptStore
{
}

/// One store per role, as the use cases take them. Usually every role is one backend; a
/// wrapper may swap one (the postmortem reproduction swaps the codes).
#[derive(Clone)]
pub struct Stores {
    pub codes: Arc<dyn CodeStore>,
    pub quotas: Arc<dyn QuotaStore>,
    pub captchas: Arc<dyn CaptchaStore>,
    pub idempotency: Arc<dyn IdempotencyStore>,
    pub stats: Arc<dyn StatsStore>,
    pub outbox: Arc<dyn OutboxStore>,
    pub health: Arc<dyn HealthCheck>,
    pub pow_replays: Arc<dyn PowReplayStore>,
    pub fraud: Arc<dyn FraudStore>,
    pub events: Arc<dyn EventStore>,
    pub twilio: Arc<dyn TwilioStore>,
    pub receipts: Arc<dyn ReceiptStore>,
}

impl Stores {
    /// Every role played by `backend`.
    pub fn of<S: Store>(backend: Arc<S>) -> Self {
        Self {
            codes: backend.clone(),
            quotas: backend.clone(),
            captchas: backend.clone(),
            idempotency: backend.clone(),
            stats: backend.clone(),
            outbox: backend.clone(),
            pow_replays: backend.clone(),
            fraud: backend.clone(),
            events: backend.clone(),
            twilio: backend.clone(),
            receipts: backend.clone(),
            health: backend,
        }
    }
}
