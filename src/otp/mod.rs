//! The OTP use cases: send a code to a destination, a phone by SMS or an email address by
//! mail (behind the send gate, the quotas and an optional idempotency key), verify a code,
//! take the providers' delivery receipts (`receipts`), and (dev mode) read the outbox. This is
//! where the store roles, the SMS and email senders, the daily stats and the code's life-cycle
//! log lines meet. One send and one verify serve both channels: they take a `Destination`,
//! and only the delivery itself differs.

mod caller;
mod deliver;
mod destinations;
mod error;
mod receipts;
mod send;
mod settings;
mod verification;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use crate::captcha::{CaptchaService, SolvedCaptcha};
use crate::domain::{
    Client, Code, Destination, EmailAddress, Phone, PhoneParser, Purpose, SendBudget,
    VerificationId,
};
use crate::email::EmailSender;
use crate::fraud::FraudGuard;
use crate::idempotency::Idempotency;
use crate::keyring::Keyring;
use crate::pow::{PowService, SolvedPow};
use crate::sms::SmsSender;
use crate::stats::{Event, Stats};
use crate::store::{
    Candidates, CodeStore, DevInboxStore, DevMessage, FusedSteps, IssueParams, QuotaRule,
    QuotaStore, ReceiptStore, Stores, VerifyOutcome, VerifyParams, VerifyStep,
};
use crate::token::{Audience, TokenIssuer};

use self::caller::CallerLimits;
pub use self::caller::{Caller, EndUser, MAX_END_USER_KEY, TenantId};
pub use self::destinations::{
    DestinationRefusal, Destinations, GeoPermission, GeoPermissions, NumberTypes, Regions,
};
pub use self::error::{OtpError, messages};
pub use self::receipts::{
    Applied, DeliveryRates, MAX_RATE_HOURS, ProviderCountryRate, ReceiptError, ReceiptSecrets,
    ReceiptService,
};
pub use self::send::{
    DeliveryStatus, MeteredBucket, NewVerificationId, SendCommand, SendReceipt, ServiceProfile,
};
pub use self::settings::{AbuseSettings, OtpSettings, TestNumbers, VerifyBy};
pub use self::verification::{Owner, VerificationView, VerifyCommand};
pub use crate::store::VerificationStatus;

use self::send::{DAY, HOUR, MINUTE};

/// Recent phone inputs remembered with their parse (about 100 bytes each).
const PHONE_CACHE_CAPACITY: usize = 16_384;

/// What `otp/send` requires before any code or SMS exists.
#[derive(Clone, Default)]
pub struct SendGate {
    /// A solved image captcha, consumed by the send.
    pub captcha: Option<Arc<CaptchaService>>,
    /// A solved proof-of-work challenge (`altcha`), consumed by the send.
    pub pow: Option<Arc<PowService>>,
}

/// The proofs one send consumed at the gate.
#[derive(Default)]
struct GatePasses {
    pow: Option<SolvedPow>,
    captcha: Option<SolvedCaptcha>,
}

impl SendGate {
    /// The part of the gate a tenant asked for by carrying its user's proofs.
    fn carried(&self, pow: bool, captcha: bool) -> Self {
        Self {
            captcha: self.captcha.clone().filter(|_| captcha),
            pow: self.pow.clone().filter(|_| pow),
        }
    }

    /// Checks and consumes the proofs the gate requires: the proof of work first, as it costs
    /// a refusal nothing; then the captcha. One solved proof buys one send attempt. A captcha
    /// that fails on the server side gives the proof of work back.
    async fn pass(
        &self,
        altcha: Option<&str>,
        captcha: (Option<&str>, Option<&str>),
    ) -> Result<GatePasses, OtpError> {
        let mut passes = GatePasses::default();
        if let Some(pow) = &self.pow {
            passes.pow = Some(pow.verify(altcha).await?);
        }
        if let Some(service) = &self.captcha {
            match service.verify(captcha.0, captcha.1).await {
                Ok(solved) => passes.captcha = Some(solved),
                Err(error) => {
                    let error = OtpError::from(error);
                    self.give_back_after(&error, passes).await;
                    return Err(error);
                }
            }
        }
        Ok(passes)
    }

    /// Gives the consumed proofs back when the send failed on the server side (`error`) or
    /// the fraud guard refused it (its step is taken with the issue, after the gate), so that
    /// the client's retry needs no new ones. Only for a send whose SMS did not go out and
    /// cannot have: a proof buys at most one SMS. One after the other: on a stalled store each
    /// waits in the connection the one before left there (a new connection would not open).
    async fn give_back_after(&self, error: &OtpError, passes: GatePasses) {
        if !error.is_service_failure() && !matches!(error, OtpError::FraudRefused { .. }) {
            return;
        }
        if let (Some(service), Some(solved)) = (&self.pow, passes.pow) {
            service.give_back(solved).await;
        }
        if let (Some(service), Some(solved)) = (&self.captcha, passes.captcha) {
            service.give_back(solved).await;
        }
    }
}

pub struct OtpService {
    codes: Arc<dyn CodeStore>,
    /// The send's issue with the guard's step.
    fused: Arc<dyn FusedSteps>,
    quotas: Arc<dyn QuotaStore>,
    dev_inbox: Arc<dyn DevInboxStore>,
    sender: Arc<dyn SmsSender>,
    /// Sends email codes; `None` where the service has no relay (email destinations refused).
    mailer: Option<Arc<dyn EmailSender>>,
    settings: OtpSettings,
    phones: PhoneParser,
    /// Which numbers an SMS may go to: number types and geo permissions.
    destinations: Destinations,
    issue_params: IssueParams,
    /// `issue_params` with the per-address budget in place of the per-phone one.
    email_issue_params: IssueParams,
    verify_params: VerifyParams,
    /// Budgets outside the phone's hash tag, reserved after the issue: who asks (the client's,
    /// a tenant's own) and the global one.
    callers: CallerLimits,
    global_quota: Vec<QuotaRule>,
    /// Code emails per recipient domain, reserved with the client's and global budgets.
    email_domain_quota: Vec<QuotaRule>,
    gate: SendGate,
    /// Phones (E.164) whose sends store this fixed code and send no SMS.
    test_numbers: HashMap<String, Code>,
    /// Judges each send's levels and refuses a blocked range; counts conversions in them.
    fraud: Arc<FraudGuard>,
    idempotency: Idempotency,
    /// Codes are kept as keyed digests (and sealed for a resend), never in clear; a phone's
    /// verification ids say where they lead under it.
    keyring: Arc<Keyring>,
    /// The configured purposes by their tag in a phone's verification id.
    purpose_tags: Vec<([u8; 3], Purpose)>,
    /// Signs the token a successful verify answers.
    tokens: Arc<TokenIssuer>,
    stats: Arc<Stats>,
    /// Dev mode: keep every message sent in the store's dev inbox.
    keep_dev_messages: bool,
    /// Where a send records its provider's message, when delivery receipts are on.
    receipts: Option<Arc<dyn ReceiptStore>>,
}

/// What an `OtpService` works with, built once at start-up.
pub struct OtpDependencies {
    pub stores: Stores,
    pub keyring: Arc<Keyring>,
    pub tokens: Arc<TokenIssuer>,
    pub sender: Arc<dyn SmsSender>,
    /// The email channel's sender (`VCODE_EMAIL_SMTP_URL`, or the log-only one in dev mode).
    pub mailer: Option<Arc<dyn EmailSender>>,
    pub gate: SendGate,
    pub fraud: Arc<FraudGuard>,
    pub stats: Arc<Stats>,
    /// Delivery receipts are on (`VCODE_SMS_RECEIPTS_URL`): each send records the provider's
    /// message, so that its receipts find the verification.
    pub track_deliveries: bool,
    /// The tenants whose credential entries set a send budget of their own.
    pub tenant_budgets: Vec<(TenantId, SendBudget)>,
}

/// A tenant's send rules: its own budget's windows where it sets them, else the defaults.
fn tenant_rules(abuse: &AbuseSettings, budget: SendBudget) -> Vec<QuotaRule> {
    [
        QuotaRule::new(budget.per_hour.unwrap_or(abuse.sends_per_tenant_hour), HOUR),
        QuotaRule::new(budget.per_day.unwrap_or(abuse.sends_per_tenant_day), DAY),
    ]
    .into_iter()
    .flatten()
    .collect()
}

impl OtpService {
    /// `keep_dev_messages`: dev mode, where the SMS delivered are kept for the dev routes.
    pub fn new(
        dependencies: OtpDependencies,
        settings: OtpSettings,
        abuse: &AbuseSettings,
        keep_dev_messages: bool,
    ) -> Self {
        let OtpDependencies {
            stores,
            keyring,
            tokens,
            sender,
            mailer,
            gate,
            fraud,
            stats,
            track_deliveries,
            tenant_budgets,
        } = dependencies;
        let issue_params = IssueParams {
            ttl: settings.code_ttl,
            retention: settings.verification_retention,
            cooldown: settings.resend_cooldown,
            policy: settings.resend,
            destination_quota: [
                QuotaRule::new(abuse.sends_per_phone_hour, HOUR),
                QuotaRule::new(abuse.sends_per_phone_day, DAY),
            ]
            .into_iter()
            .flatten()
            .collect(),
            names_latest_send: settings.verify_by != VerifyBy::Id,
        };
        // An address's own budget takes the place of a phone's, in the same atomic step.
        let email_issue_params = IssueParams {
            destination_quota: [
                QuotaRule::new(abuse.sends_per_email_hour, HOUR),
                QuotaRule::new(abuse.sends_per_email_day, DAY),
            ]
            .into_iter()
            .flatten()
            .collect(),
            ..issue_params.clone()
        };
        let verify_params = VerifyParams {
            max_attempts: settings.max_attempts,
            destination_failures: QuotaRule::new(abuse.failed_verifies_per_phone_day, DAY),
            client_failures: QuotaRule::new(abuse.failed_verifies_per_client_day, DAY),
        };
        Self {
            codes: stores.codes.clone(),
            fused: stores.fused.clone(),
            quotas: stores.quotas.clone(),
            dev_inbox: stores.dev_inbox.clone(),
            sender,
            mailer,
            phones: PhoneParser::new(settings.default_region, PHONE_CACHE_CAPACITY),
            destinations: abuse.destinations(settings.default_region),
            issue_params,
            email_issue_params,
            verify_params,
            callers: CallerLimits {
                client: QuotaRule::new(abuse.sends_per_ip_hour, HOUR)
                    .into_iter()
                    .collect(),
                tenant: tenant_rules(abuse, SendBudget::default()),
                tenant_budgets: tenant_budgets
                    .into_iter()
                    .map(|(tenant, budget)| (tenant, tenant_rules(abuse, budget)))
                    .collect(),
                ipv6_prefix: abuse.client_ipv6_prefix,
                keyring: keyring.clone(),
            },
            global_quota: QuotaRule::new(abuse.sends_global_minute, MINUTE)
                .into_iter()
                .collect(),
            email_domain_quota: [
                QuotaRule::new(abuse.sends_per_email_domain_hour, HOUR),
                QuotaRule::new(abuse.sends_per_email_domain_day, DAY),
            ]
            .into_iter()
            .flatten()
            .collect(),

            gate,
            // Checked at start-up (`Settings::validate`): every entry reads.
            test_numbers: settings
                .test_numbers()
                .unwrap_or_default()
                .into_iter()
                .map(|(phone, code)| (phone.as_e164().to_owned(), code))
                .collect(),
            fraud,
            keyring,
            purpose_tags: settings
                .purposes
                .iter()
                .map(|purpose| {
                    (
                        crate::keyring::purpose_tag(purpose.as_str()),
                        purpose.clone(),
                    )
                })
                .collect(),
            tokens,
            idempotency: Idempotency::new(
                stores.idempotency.clone(),
                abuse.idempotency_ttl,
                abuse.idempotency_wait,
            ),
            settings,
            stats,
            keep_dev_messages,
            receipts: track_deliveries.then(|| stores.receipts.clone()),
        }
    }

    pub fn settings(&self) -> &OtpSettings {
        &self.settings
    }

    /// Reads a phone: valid (whether an SMS may go to it is `send`'s question).
    pub fn parse_phone(&self, raw: &str) -> Result<Phone, OtpError> {
        self.phones.parse(raw).ok_or(OtpError::InvalidPhone)
    }

    /// Reads the one destination a request names: `phone` or `email`, exactly one of them.
    /// An address is refused where the service sends no email.
    pub fn parse_destination(
        &self,
        phone: Option<&str>,
        email: Option<&str>,
    ) -> Result<Destination, OtpError> {
        match (phone, email) {
            (Some(phone), None) => self.parse_phone(phone).map(Destination::Phone),
            (None, Some(email)) => {
                let address = EmailAddress::parse(email).map_err(OtpError::InvalidEmail)?;
                if self.mailer.is_none() {
                    return Err(OtpError::EmailOff);
                }
                Ok(address.into())
            }
            _ => Err(OtpError::OneDestination),
        }
    }

    /// Which numbers an SMS may go to.
    pub fn destinations(&self) -> &Destinations {
        &self.destinations
    }

    /// One of the configured purposes; none given is `login` (or the first configured).
    fn parse_purpose(&self, raw: Option<&str>) -> Result<Purpose, OtpError> {
        let purposes = &self.settings.purposes;
        let Some(raw) = raw else {
            let login = Purpose::default();
            return Ok(if purposes.contains(&login) || purposes.is_empty() {
                login
            } else {
                purposes[0].clone()
            });
        };
        purposes
            .iter()
            .find(|purpose| purpose.as_str() == raw)
            .cloned()
            .ok_or(OtpError::InvalidPurpose)
    }

    /// Checks a code in one atomic step, by verification id or by destination (phone or email,
    /// `VCODE_VERIFY_BY`): it is consumed on a match, counted otherwise (per id or per code,
    /// per destination and per (destination, client); `client` as the routes group it). A
    /// match answers a signed token naming the destination (`sub`, with its `channel`), the
    /// purpose, `audience` and the id (the audience is checked before the code is touched: a
    /// bad one consumes nothing).
    pub async fn verify(&self, command: VerifyCommand<'_>) -> Result<String, OtpError> {
        let length = command
            .profile
            .as_ref()
            .map_or(self.settings.code_length, |profile| profile.code_length);
        let code = Code::parse(command.code, length).ok_or(OtpError::InvalidCode)?;
        let audience = command
            .audience
            .map(|raw| Audience::parse(raw).ok_or(OtpError::InvalidAudience))
            .transpose()?;
        let verify_by = match command.profile {
            Some(_) => VerifyBy::Id,
            None => self.settings.verify_by,
        };
        let by_id = match (verify_by, command.verification_id) {
            (VerifyBy::Phone, _) => None,
            (VerifyBy::Id | VerifyBy::Either, Some(id)) => Some(id),
            (VerifyBy::Id, None) => return Err(OtpError::VerificationIdRequired),
            (VerifyBy::Either, None) => None,
        };
        let (destination, purpose, id) = match by_id {
            Some(raw) => {
                let (destination, purpose, id) = self.verification_target(raw, &command).await?;
                (destination, purpose, Some(id))
            }
            None => {
                let destination = match (command.phone, command.email) {
                    // As before email existed: a verify by phone without one.
                    (None, None) => return Err(OtpError::InvalidPhone),
                    (phone, email) => self.parse_destination(phone, email)?,
                };
                let purpose = self.parse_purpose(command.purpose)?;
                (destination, purpose, None)
            }
        };
        let make_candidates = || {
            self.keyring
                .code_digests(destination.key(), purpose.as_str(), &code)
        };
        let candidates = Candidates::lazy(&make_candidates);
        let (client, params) = self.verify_limits(&command.caller);
        let step = VerifyStep {
            destination: &destination,
            purpose: &purpose,
            id: id.as_ref(),
            candidates: &candidates,
            client,
            params,
        };
        let outcome = self.codes.verify(step).await?;
        let by = if id.is_some() { "id" } else { "destination" };
        match outcome {
            VerifyOutcome::Verified => {
                self.stats.record(Event::VerifyOk);
                tracing::info!(%destination, %purpose, by, "code verified");
                self.fraud.converted(&destination);
                Ok(self.tokens.issue_for(
                    destination.key(),
                    destination.channel(),
                    purpose.as_str(),
                    audience.as_ref(),
                    id.as_ref().map(VerificationId::as_str),
                )?)
            }
            VerifyOutcome::Mismatch { remaining_attempts } => {
                self.stats.record(Event::VerifyWrong);
                tracing::info!(%destination, %purpose, by, remaining_attempts, "wrong code");
                Err(OtpError::WrongCode { remaining_attempts })
            }
            VerifyOutcome::Destroyed => {
                self.stats.record(Event::VerifyLocked);
                match id {
                    Some(_) => {
                        tracing::warn!(%destination, %purpose, "wrong code: the verification's attempts are spent; its code stays for its other ids")
                    }
                    None => {
                        tracing::warn!(%destination, %purpose, "wrong code: attempt limit reached, code destroyed")
                    }
                }
                Err(OtpError::TooManyAttempts)
            }
            VerifyOutcome::CodeExpired => {
                self.stats.record(Event::VerifyExpired);
                tracing::debug!(%destination, %purpose, by, "verify: no pending code");
                if let Some(id) = &id
                    && self.forgotten(id, &destination, &purpose).await?
                {
                    return Err(OtpError::VerificationNotFound);
                }
                Err(OtpError::CodeExpired)
            }
            VerifyOutcome::Canceled => {
                self.stats.record(Event::VerifyExpired);
                tracing::debug!(%destination, %purpose, "verify: the verification was canceled");
                Err(OtpError::VerificationCanceled)
            }
            VerifyOutcome::QuotaExceeded { retry_after } => {
                self.stats.record(Event::QuotaFailures);
                tracing::warn!(%destination, %purpose, quota = "destination_failures", "verify refused: quota exceeded");
                Err(OtpError::QuotaExceeded { retry_after })
            }
        }
    }

    /// The client the per-client limits count for `caller` (`None`: a tenant that names no
    /// end user), for the other verifies (`crate::totp`).
    pub fn client_of(&self, caller: &Caller) -> Option<Client> {
        self.callers.client(caller)
    }

    /// The client a verify by `caller` counts its failures for, and the limits it works under.
    /// A tenant that names no end user is no client: its server's address is never charged,
    /// so that no guesser typing into the tenant's app locks anyone out; its verifications'
    /// own attempts and the destination's ceiling still hold (the unspecified address stands
    /// in for the client, whose log a verify without its rule never touches).
    fn verify_limits(&self, caller: &Caller) -> (Client, VerifyParams) {
        match self.callers.client(caller) {
            Some(client) => (client, self.verify_params),
            None => (
                Client::Address(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
                VerifyParams {
                    client_failures: None,
                    ..self.verify_params
                },
            ),
        }
    }

    /// Dev mode: the messages delivered to `phone` or `email` (exactly one), oldest first.
    pub async fn dev_messages(
        &self,
        phone: Option<&str>,
        email: Option<&str>,
    ) -> Result<Vec<DevMessage>, OtpError> {
        let destination = self.parse_destination(phone, email)?;
        Ok(self.dev_inbox.dev_messages(&destination).await?)
    }
}
