//! `send`: the gate, the idempotency key, the issue in the store with the fraud guard's step,
//! the client's and global budgets, and the SMS or the email (the only step that differs by
//! channel); anything that fails after the issue rolls it
//! back, as long as the store still holds exactly what this send wrote, and a server-side
//! failure or the guard's refusal gives the gate's proofs back. An SMS in doubt (the provider
//! never answered) is no failure: it may arrive, so its code, cooldown and quota stay. With
//! delivery receipts on, a confirmed SMS's provider message is recorded with its verification
//! (a failure there costs only its receipts).

use std::borrow::Cow;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{
    Caller, DestinationRefusal, GatePasses, GeoPermission, OtpError, OtpService, TenantId,
};
use crate::domain::{Code, CodeLength, Destination, Locale, Phone, Purpose, VerificationId};
use crate::fraud::{Admitted, SendTicket};
use crate::idempotency::{IdempotencyKey, fingerprint};
use crate::sms::templates::TenantWording;
use crate::stats::Event;
use crate::store::deadline;
use crate::store::{
    Budget, Budgets, CodeCandidate, GuardedIssue, IssueOutcome, IssueParams, IssuedCode,
    NewSendLog, QuotaDecision, QuotaRule, QuotaScope, QuotaToken, ResendPolicy, SendMark,
};

pub(super) const MINUTE: Duration = Duration::from_secs(60);
pub(super) const HOUR: Duration = Duration::from_secs(3600);
pub(super) const DAY: Duration = Duration::from_secs(86_400);

/// One send to perform, as the client asked for it (the routes build it from the HTTP body,
/// the client address and the `Idempotency-Key`).
#[derive(Debug, Clone)]
pub struct SendCommand {
    /// The destination: a phone or an email address, exactly one of the two.
    pub phone: Option<String>,
    pub email: Option<String>,
    pub purpose: Option<String>,
    pub captcha_id: Option<String>,
    pub captcha_answer: Option<String>,
    /// BCP 47; the SMS template's language (the settings' default when absent).
    pub locale: Option<String>,
    /// A solved ALTCHA challenge: the base64 payload the widget produces.
    pub altcha: Option<String>,
    /// Who asks: a browser's address, or a tenant and the end user it names.
    pub caller: Caller,
    pub idempotency_key: Option<IdempotencyKey>,
    /// Set by a compatibility API (a Twilio Verify Service): its codes instead of `purpose`'s.
    /// Boxed: the command lives in the send's future, which the route boxes and copies, and
    /// a send without a profile should not pay for its size.
    pub profile: Option<Box<ServiceProfile>>,
    /// The new verification's id, chosen by a caller that records it before the send (a
    /// Twilio Verify start writes its send log first) with `OtpService::new_verification_id`;
    /// a new one when `None`.
    pub verification: Option<NewVerificationId>,
}

/// A new send's verification id, and whether it says where it leads (a phone's, made under
/// the keyring: a store need not index it).
#[derive(Clone, Debug)]
pub struct NewVerificationId {
    pub id: VerificationId,
    pub says_where: bool,
}

/// What a Twilio Verify Service sets for the codes it sends: they are kept apart under a
/// purpose of its own (not one of `VCODE_PURPOSES`), with their own length, lifetime and
/// wording, and are verified by id only. (The Service's account is the send's tenant: its
/// `Caller`.)
#[derive(Debug, Clone)]
pub struct ServiceProfile {
    pub purpose: Purpose,
    pub code_length: CodeLength,
    /// Its codes' lifetime, if not the settings' (`code_ttl`).
    pub code_ttl: Option<Duration>,
    /// What its SMS say, if not the purpose's texts (its mail takes only its name).
    pub wording: Option<TenantWording>,
    /// A Twilio-compatible first start's send log, for the issue to create with the code
    /// (where the store does: [`OtpService::writes_send_logs`]); if one is there already, the
    /// send answers `OtpError::SendLogExists` having changed nothing.
    pub send_log: Option<NewSendLog>,
    /// The Service's Rate Limit Buckets this send counts in (its start's `RateLimits`).
    pub buckets: Vec<MeteredBucket>,
}

/// One Bucket of a Service's Rate Limit, for the value a start named: a budget of the send,
/// kept under a keyed digest of (Bucket, value) so that no value is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeteredBucket {
    /// The Bucket's SID.
    pub bucket: String,
    /// What the start named for its Rate Limit (an address, an account id…).
    pub value: String,
    pub rule: QuotaRule,
}

pub use crate::store::DeliveryStatus;

/// What a successful send tells the client (and what an idempotency key keeps).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendReceipt {
    pub expires_in: Duration,
    pub resend_after: Duration,
    /// Records kept before the field existed were all confirmed sends.
    #[serde(default)]
    pub delivery: DeliveryStatus,
    /// This send's own id: what verifies the code it delivered. Absent only from a record
    /// kept before ids existed.
    #[serde(default)]
    pub verification_id: Option<VerificationId>,
}

/// The request as normalised: what makes two requests under one key "the same request".
#[derive(Serialize)]
struct Fingerprint<'a> {
    /// The destination's key (E.164 or the folded address): named `phone` so that SMS sends
    /// keep the fingerprints they had before email.
    phone: &'a str,
    purpose: &'a str,
    captcha_id: Option<&'a str>,
    captcha_answer: Option<&'a str>,
    // Left out when absent, so requests without it keep the fingerprints they had before.
    #[serde(skip_serializing_if = "Option::is_none")]
    altcha: Option<&'a str>,
}

/// One issued code on its way out: what its message says, and the issue it undoes if the
/// message does not go out.
#[derive(Clone, Copy)]
pub(super) struct Outgoing<'a> {
    pub destination: &'a Destination,
    pub purpose: &'a Purpose,
    pub locale: Option<&'a Locale>,
    /// The Twilio Service's wording and code lifetime, for its sends.
    pub profile: Option<&'a ServiceProfile>,
    pub delivery: &'a IssuedCode,
    /// The fraud guard's mark of the send, if it counted it (an `undelivered` receipt names it).
    pub guarded: Option<SendMark>,
}

/// The quota event reserved for one send, released if its SMS does not go out.
pub(super) struct Reservations {
    scopes: Vec<QuotaScope>,
    token: QuotaToken,
}

/// The send log a Service's send hands its issue, where the store creates it.
fn send_log_of(profile: Option<&ServiceProfile>) -> Option<Box<NewSendLog>> {
    profile
        .and_then(|profile| profile.send_log.clone())
        .map(Box::new)
}

impl OtpService {
    /// Sends a code (or re-delivers the pending one). With an idempotency key, a repeat of a
    /// send that delivered gets the same receipt and causes nothing.
    pub async fn send(&self, command: SendCommand) -> Result<SendReceipt, OtpError> {
        self.stats.record(Event::SendRequest);
        let destination =
            self.parse_destination(command.phone.as_deref(), command.email.as_deref())?;
        self.send_parsed(command, destination).await
    }

    /// [`send`](Self::send) to the destination its caller read already from `command`'s
    /// phone or email ([`parse_phone`](Self::parse_phone), [`parse_destination`](Self::parse_destination)):
    /// a Twilio start reads the phone before the send, which need not read it again.
    /// A send that found its send log there already is no request of its own: its caller
    /// sends again without the log, and that send counts.
    pub async fn send_to(
        &self,
        command: SendCommand,
        destination: Destination,
    ) -> Result<SendReceipt, OtpError> {
        let sent = self.send_parsed(command, destination).await;
        if !matches!(sent, Err(OtpError::SendLogExists)) {
            self.stats.record(Event::SendRequest);
        }
        sent
    }

    /// Whether a send creates its Service's send log (`ServiceProfile::send_log`) in the issue's own
    /// step: if not, its caller writes the log first and passes none.
    pub fn writes_send_logs(&self) -> bool {
        self.codes.writes_send_logs()
    }

    async fn send_parsed(
        &self,
        command: SendCommand,
        destination: Destination,
    ) -> Result<SendReceipt, OtpError> {
        // A test number is no destination: no SMS goes to it. Number types and geo
        // permissions are the SMS channel's: no email is refused or monitored by them.
        let monitored = match &destination {
            Destination::Phone(phone) => {
                !self.test_numbers.contains_key(phone.as_e164())
                    && self.check_destination(phone)? == GeoPermission::Monitor
            }
            Destination::Email(_) => false,
        };
        let purpose = match &command.profile {
            Some(profile) => profile.purpose.clone(),
            None => self.parse_purpose(command.purpose.as_deref())?,
        };
        let locale = match command.locale.as_deref() {
            Some(raw) => Some(Locale::parse(raw).ok_or(OtpError::InvalidLocale)?),
            None => None,
        };
        let Some(key) = &command.idempotency_key else {
            return self
                .send_gated(&command, &destination, &purpose, locale.as_ref(), monitored)
                .await;
        };
        let fingerprint = fingerprint(&Fingerprint {
            phone: destination.key(),
            purpose: purpose.as_str(),
            captcha_id: command.captcha_id.as_deref(),
            captcha_answer: command.captcha_answer.as_deref(),
            altcha: command.altcha.as_deref(),
        });
        // Boxed: inline, this rarer path's state (the idempotency step around a whole send)
        // made every send's future a kilobyte larger, copied whole when the route boxes it.
        let once = Box::pin(self.idempotency.once(key, &fingerprint, || {
            self.send_gated(&command, &destination, &purpose, locale.as_ref(), monitored)
        }))
        .await?;
        if once.replayed {
            self.stats.record(Event::DedupIdempotency);
            tracing::info!(%destination, %purpose, "send deduplicated: idempotency key repeat answered from the store");
        }
        Ok(once.result)
    }

    /// Whether an SMS may go to `phone` (its type, its country), and whether it is monitored;
    /// a refusal is counted and logged.
    fn check_destination(&self, phone: &Phone) -> Result<GeoPermission, OtpError> {
        self.destinations.check(phone).map_err(|refusal| {
            let event = match refusal {
                DestinationRefusal::NumberType(_) | DestinationRefusal::NonGeographic(_) => {
                    Event::RefusedNumberType
                }
                DestinationRefusal::Region(_) => Event::RefusedRegion,
            };
            self.stats.record(event);
            tracing::warn!(
                %phone,
                number_type = phone.number_type().as_str(),
                region = phone.region().as_ref().map_or("none", |r| r.as_str()),
                refused = event.name(),
                "send refused: no SMS to this number"
            );
            OtpError::DestinationRefused(refusal)
        })
    }

    /// The fraud guard's ticket first (no store step): its step is taken with the issue (in
    /// the issue's own atomic step where the store can, right after it elsewhere), so that
    /// only a send that issues a code is counted; a refusal gives the gate's proofs back. A
    /// test number gets no SMS: nothing for the guard to judge or count.
    async fn send_gated(
        &self,
        command: &SendCommand,
        destination: &Destination,
        purpose: &Purpose,
        locale: Option<&Locale>,
        monitored: bool,
    ) -> Result<SendReceipt, OtpError> {
        let ticket = if self.test_numbers.contains_key(destination.key()) {
            None
        } else {
            let tenant = command.caller.tenant().map(TenantId::as_str);
            // A spend cap reached refuses before anything is taken (no store step).
            self.fraud.check_spend(destination, tenant)?;
            self.fraud.ticket(destination, tenant)
        };
        let started = std::time::Instant::now();
        deadline::from(
            started,
            self.gate_and_send(command, destination, purpose, locale, monitored, ticket),
        )
        .await
    }

    async fn gate_and_send(
        &self,
        command: &SendCommand,
        destination: &Destination,
        purpose: &Purpose,
        locale: Option<&Locale>,
        monitored: bool,
        ticket: Option<SendTicket>,
    ) -> Result<SendReceipt, OtpError> {
        // The gate proves a person in a browser. A tenant is a server that authenticated
        // itself: the gate is its to ask for, by relaying its user's proofs (those it carries
        // are checked and consumed), and a Twilio Service's never is.
        let carried;
        let gate = match (&command.caller, &command.profile) {
            (_, Some(_)) => None,
            (Caller::Browser(_), None) => Some(&self.gate),
            (Caller::Tenant { .. }, None) => {
                carried = self.gate.carried(
                    command.altcha.is_some(),
                    command.captcha_id.is_some() || command.captcha_answer.is_some(),
                );
                Some(&carried)
            }
        };
        let passes = match gate {
            None => GatePasses::default(),
            Some(gate) => {
                gate.pass(
                    command.altcha.as_deref(),
                    (
                        command.captcha_id.as_deref(),
                        command.captcha_answer.as_deref(),
                    ),
                )
                .await?
            }
        };
        // An error here means no SMS went out nor may have (an unconfirmed one is a success),
        // so a server-side failure gives the gate's proofs back for the retry.
        let sent = match self.test_numbers.get(destination.key()) {
            Some(code) => {
                self.issue_test_code(command, destination, purpose, code)
                    .await
            }
            None => {
                self.issue_and_deliver(command, destination, purpose, locale, ticket)
                    .await
            }
        };
        match sent {
            Ok(receipt) => {
                if monitored && let Destination::Phone(phone) = destination {
                    self.monitored_sms(phone, purpose);
                }
                Ok(receipt)
            }
            Err(error) => {
                self.gate.give_back_after(&error, passes).await;
                Err(error)
            }
        }
    }

    /// The send's verification id, and whether it says where it leads: the one the command
    /// chose (a Twilio-compatible start's), or a new one.
    fn verification_id_of(
        &self,
        command: &SendCommand,
        destination: &Destination,
        purpose: &Purpose,
    ) -> (VerificationId, bool) {
        let NewVerificationId { id, says_where } = match &command.verification {
            Some(chosen) => chosen.clone(),
            None => self.new_verification_id(destination, purpose),
        };
        (id, says_where)
    }

    /// Issues a code within the phone's quota and the client's and the global SMS budget, and
    /// the fraud guard's step, and sends it; undoes the issue (and releases the budgets and
    /// the guard's count) if anything after it fails, an unconfirmed SMS excepted.
    async fn issue_and_deliver(
        &self,
        command: &SendCommand,
        destination: &Destination,
        purpose: &Purpose,
        locale: Option<&Locale>,
        mut ticket: Option<SendTicket>,
    ) -> Result<SendReceipt, OtpError> {
        let profile = command.profile.as_deref();
        let caller = &command.caller;
        let length = profile.map_or(self.settings.code_length, |profile| profile.code_length);
        let code = Code::generate(length);
        let (e164, purpose_name) = (destination.key(), purpose.as_str());
        let digest = self.keyring.code_digest(e164, purpose_name, &code);
        let (verification, says_where) = self.verification_id_of(command, destination, purpose);
        let candidate = || CodeCandidate {
            // Only a resend of the same code needs it back.
            sealed: (self.issue_params.policy == ResendPolicy::Reuse)
                .then(|| self.keyring.seal_code(&digest, &code)),
            digest,
            verification: verification.clone(),
            says_where,
            send_log: send_log_of(profile),
        };
        let budgets = self.budgets(caller, destination, profile);
        let budgets = Budgets {
            budgets: &budgets,
            token: QuotaToken::generate(),
        };
        // Within what the gate's steps left of one timeout: a store stalled between them
        // never makes the send wait twice.
        let params = self.issue_params_for(destination, profile);
        // A prefix's block refuses its sends in the store's step; a destination that verified
        // before is not refused by it (issue 39): its issue is taken again, not enforced.
        let issued = loop {
            let issued = deadline::shared(async {
                let params = params.as_ref();
                match &ticket {
                    Some(ticket) => {
                        let step = self.fraud.step(ticket);
                        let fused = &self.fused;
                        fused
                            .issue_guarded(destination, purpose, candidate(), params, budgets, step)
                            .await
                    }
                    None => self
                        .codes
                        .issue_code(destination, purpose, candidate(), params, budgets)
                        .await
                        .map(|outcome| GuardedIssue::Issued {
                            outcome,
                            admission: None,
                        }),
                }
            })
            .await?;
            let pardoned = match (&issued, ticket.as_mut()) {
                (GuardedIssue::Refused(_), Some(ticket)) => {
                    self.fraud.pardon_returning(destination, ticket).await
                }
                _ => false,
            };
            if !pardoned {
                break issued;
            }
        };
        let (outcome, admission) = match issued {
            GuardedIssue::Issued { outcome, admission } => (outcome, admission),
            GuardedIssue::Refused(block) => {
                // Only a guarded issue is refused.
                let ticket = ticket
                    .as_ref()
                    .expect("a refusal comes of the guard's step");
                return Err(self.fraud.refused_by(destination, ticket, &block).into());
            }
        };
        let delivery = match outcome {
            IssueOutcome::Send(delivery) => delivery,
            IssueOutcome::Cooldown { retry_after } => {
                self.stats.record(Event::DedupCooldown);
                tracing::info!(%destination, %purpose, retry_after_ms = retry_after.as_millis() as u64, "send refused: cooldown running");
                return Err(OtpError::ResendCooldown { retry_after });
            }
            IssueOutcome::QuotaExceeded { retry_after } => {
                self.stats.record(Event::QuotaPhone);
                tracing::warn!(%destination, %purpose, quota = "phone", "send refused: quota exceeded");
                return Err(OtpError::QuotaExceeded { retry_after });
            }
            IssueOutcome::BudgetExceeded { scope, retry_after } => {
                return Err(self.budget_refused(scope, retry_after, caller));
            }
            IssueOutcome::SendLogExists => return Err(OtpError::SendLogExists),
        };
        let reserved = Reservations {
            scopes: budgets.budgets.iter().map(|budget| budget.scope).collect(),
            token: budgets.token,
        };
        // Only a send that issues is the guard's: judged on the counts the issue's step took.
        // A refusal undoes the issue and what it reserved.
        let admitted = match (ticket, admission) {
            (Some(ticket), Some(admission)) => {
                // Boxed: inline, this step would grow the send's future (which the route
                // spawns, and tokio moves) by kilobytes, costing more to copy than it does.
                match Box::pin(self.fraud.judge(destination, ticket, admission)).await {
                    Ok(admitted) => Some(admitted),
                    Err(error) => {
                        let error = OtpError::from(error);
                        self.undo(destination, purpose, &delivery, &error).await;
                        if delivery.budgets_reserved {
                            self.release(reserved).await;
                        }
                        return Err(error);
                    }
                }
            }
            _ => None,
        };
        let out = Outgoing {
            destination,
            purpose,
            locale,
            profile,
            delivery: &delivery,
            guarded: admitted.as_ref().map(Admitted::mark),
        };
        let sent = self.deliver(&out, caller, code, (budgets, reserved)).await;
        self.fraud.settle(admitted, destination, sent.is_ok());
        sent.map(|status| SendReceipt {
            expires_in: params.ttl,
            resend_after: self.settings.resend_cooldown,
            delivery: status,
            verification_id: Some(verification),
        })
    }

    /// The issue's parameters: the settings', with a Service's own code lifetime.
    fn issue_params_for(
        &self,
        destination: &Destination,
        profile: Option<&ServiceProfile>,
    ) -> Cow<'_, IssueParams> {
        let channel = match destination {
            Destination::Phone(_) => &self.issue_params,
            Destination::Email(_) => &self.email_issue_params,
        };
        match profile.and_then(|profile| profile.code_ttl) {
            Some(ttl) => Cow::Owned(IssueParams {
                ttl,
                ..channel.clone()
            }),
            None => Cow::Borrowed(channel),
        }
    }

    /// A send to a test number: its fixed code becomes the pending code through the same
    /// atomic issue (digested and sealed, same cooldown, TTL and attempts), on no quota or
    /// budget, and no SMS goes out.
    async fn issue_test_code(
        &self,
        command: &SendCommand,
        destination: &Destination,
        purpose: &Purpose,
        code: &Code,
    ) -> Result<SendReceipt, OtpError> {
        let digest = self
            .keyring
            .code_digest(destination.key(), purpose.as_str(), code);
        let (verification, says_where) = self.verification_id_of(command, destination, purpose);
        let candidate = CodeCandidate {
            sealed: (self.issue_params.policy == ResendPolicy::Reuse)
                .then(|| self.keyring.seal_code(&digest, code)),
            digest,
            says_where,
            verification: verification.clone(),
            send_log: send_log_of(command.profile.as_deref()),
        };
        let params = IssueParams {
            destination_quota: Vec::new(),
            ..self
                .issue_params_for(destination, command.profile.as_deref())
                .into_owned()
        };
        match self
            .codes
            .issue_code(destination, purpose, candidate, &params, Budgets::none())
            .await?
        {
            IssueOutcome::Send(delivery) => {
                self.stats.record(Event::TestNumberSend);
                tracing::info!(%destination, %purpose, delivery = delivery.kind.as_str(), "test number: fixed code stored, no SMS");
                Ok(SendReceipt {
                    expires_in: params.ttl,
                    resend_after: self.settings.resend_cooldown,
                    delivery: DeliveryStatus::Sent,
                    verification_id: Some(verification),
                })
            }
            IssueOutcome::Cooldown { retry_after } => {
                self.stats.record(Event::DedupCooldown);
                Err(OtpError::ResendCooldown { retry_after })
            }
            // Without quotas or budgets neither can refuse; answered as they would be.
            IssueOutcome::QuotaExceeded { retry_after }
            | IssueOutcome::BudgetExceeded { retry_after, .. } => {
                Err(OtpError::QuotaExceeded { retry_after })
            }
            IssueOutcome::SendLogExists => Err(OtpError::SendLogExists),
        }
    }

    /// An SMS delivered to a monitored country: counted per region and logged.
    fn monitored_sms(&self, phone: &Phone, purpose: &Purpose) {
        let region = phone.region();
        let region = region.as_ref().map_or("none", |r| r.as_str());
        self.stats.record(Event::SmsMonitored);
        crate::metrics::count_monitored_sms(region);
        tracing::info!(%phone, %purpose, region, "SMS to a monitored country");
    }

    /// The budgets a send by `caller` draws on besides its destination's: who asks (the
    /// client's, a tenant's own), the global one and the mail domain's, those that are on.
    fn budgets<'a>(
        &'a self,
        caller: &Caller,
        destination: &Destination,
        profile: Option<&'a ServiceProfile>,
    ) -> Vec<Budget<'a>> {
        let domain = match destination {
            Destination::Email(email) if !self.email_domain_quota.is_empty() => Some((
                QuotaScope::email_domain(email.address().domain()),
                &self.email_domain_quota,
            )),
            _ => None,
        };
        let shared = [(QuotaScope::Global, &self.global_quota)]
            .into_iter()
            .chain(domain)
            .filter(|(_, rules)| !rules.is_empty())
            .map(|(scope, rules)| Budget { scope, rules });
        let buckets = profile
            .into_iter()
            .flat_map(|profile| &profile.buckets)
            .map(|metered| Budget {
                scope: QuotaScope::Bucket(
                    self.keyring
                        .end_user_digest(&metered.bucket, &metered.value),
                ),
                rules: std::slice::from_ref(&metered.rule),
            });
        self.callers
            .budgets(caller)
            .chain(buckets)
            .chain(shared)
            .collect()
    }

    /// Reserves one SMS in every budget, in one atomic step, when the store could not do it in
    /// the issue's; on refusal nothing is taken.
    pub(super) async fn reserve_budgets(
        &self,
        budgets: Budgets<'_>,
        caller: &Caller,
    ) -> Result<(), OtpError> {
        if budgets.budgets.is_empty() {
            return Ok(());
        }
        match self
            .quotas
            .reserve_quota(budgets.budgets, budgets.token)
            .await?
        {
            QuotaDecision::Granted => Ok(()),
            QuotaDecision::Exceeded { scope, retry_after } => {
                Err(self.budget_refused(scope, retry_after, caller))
            }
        }
    }

    /// A send refused by the client's or the global budget: counted, logged, answered.
    fn budget_refused(
        &self,
        scope: QuotaScope,
        retry_after: Duration,
        caller: &Caller,
    ) -> OtpError {
        let event = match scope {
            QuotaScope::Global => Event::QuotaGlobal,
            QuotaScope::ClientIp(_) | QuotaScope::CaptchaClient(_) | QuotaScope::EndUser(_) => {
                Event::QuotaIp
            }
            // Not daily-stats events (their set is the stored stats' layout): the metric alone.
            QuotaScope::EmailDomain(_)
            | QuotaScope::Tenant(_)
            | QuotaScope::Bucket(_)
            | QuotaScope::TotpFailures(_) => {
                let quota = match scope {
                    QuotaScope::Tenant(_) => "profile",
                    QuotaScope::Bucket(_) => "rate_limit_bucket",
                    _ => "email_domain",
                };
                crate::metrics::count_event("vcode_quota_rejections", "quota", quota);
                tracing::warn!(%caller, quota, "send refused: quota exceeded");
                return OtpError::QuotaExceeded { retry_after };
            }
        };
        self.stats.record(event);
        tracing::warn!(%caller, quota = event.name(), "send refused: quota exceeded");
        OtpError::QuotaExceeded { retry_after }
    }

    pub(super) async fn release(&self, reservations: Reservations) {
        if reservations.scopes.is_empty() {
            return;
        }
        if let Err(error) = self
            .quotas
            .release_quota(&reservations.scopes, reservations.token)
            .await
        {
            tracing::warn!(%error, "quota event not released; it expires with its window");
        }
    }

    /// Rolls back an issue whose SMS will not go out, and says so in the log.
    pub(super) async fn undo(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        delivery: &IssuedCode,
        cause: &OtpError,
    ) {
        let cause =
            std::error::Error::source(cause).map_or_else(|| cause.to_string(), ToString::to_string);
        match self
            .codes
            .undo_issue(destination, purpose, &delivery.undo)
            .await
        {
            Ok(true) => {
                tracing::warn!(%destination, %purpose, %cause, "code rolled back: SMS not sent")
            }
            Ok(false) => tracing::warn!(
                %destination, %purpose, %cause,
                "SMS not sent; a later send changed the code, nothing rolled back"
            ),
            Err(store_error) => tracing::error!(
                %destination, %purpose, %cause, %store_error,
                "SMS not sent and the roll-back could not reach the store"
            ),
        }
    }
}
