//! The OTP use cases: send a code by SMS, verify a code. This is where the store, the quotas,
//! the SMS sender and the key's life-cycle log lines meet.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::config::{AbuseSettings, OtpSettings};
use crate::domain::{Code, Phone, PhoneParser, Purpose};
use crate::error::{ApiError, retry_after_secs};
use crate::sms::{SmsMessage, SmsSender};
use crate::stats::{Event, Stats};
use crate::store::{
    Budget, Delivery, DeliveryKind, IssueOutcome, IssueParams, OutboxMessage, QuotaDecision,
    QuotaRule, QuotaScope, QuotaToken, Store, VerifyOutcome, VerifyParams,
};

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(86_400);

/// Recent phone inputs remembered with their parse (about 100 bytes each).
const PHONE_CACHE_CAPACITY: usize = 16_384;

pub struct OtpService {
    store: Arc<dyn Store>,
    sender: Arc<dyn SmsSender>,
    settings: OtpSettings,
    phones: PhoneParser,
    allowed_regions: Vec<crate::domain::Region>,
    issue_params: IssueParams,
    verify_params: VerifyParams,
    /// Quotas outside the phone's hash tag, reserved after the issue: (scope kind, rules).
    ip_quota: Vec<QuotaRule>,
    global_quota: Vec<QuotaRule>,
    stats: Arc<Stats>,
    /// Dev mode: keep every delivered SMS in the store's outbox.
    record_outbox: bool,
}

/// What a successful send tells the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendReceipt {
    pub expires_in: Duration,
    pub resend_after: Duration,
}

/// The quota event reserved for one send, released if its SMS does not go out.
struct Reservations {
    scopes: Vec<QuotaScope>,
    token: QuotaToken,
}

impl OtpService {
    pub fn new(
        store: Arc<dyn Store>,
        sender: Arc<dyn SmsSender>,
        settings: OtpSettings,
        abuse: &AbuseSettings,
        stats: Arc<Stats>,
        record_outbox: bool,
    ) -> Self {
        let issue_params = IssueParams {
            ttl: settings.code_ttl,
            cooldown: settings.resend_cooldown,
            policy: settings.resend,
            phone_quota: [
                QuotaRule::new(abuse.sends_per_phone_hour, HOUR),
                QuotaRule::new(abuse.sends_per_phone_day, DAY),
            ]
            .into_iter()
            .flatten()
            .collect(),
        };
        let verify_params = VerifyParams {
            max_attempts: settings.max_attempts,
            phone_failures: QuotaRule::new(abuse.failed_verifies_per_phone_day, DAY),
        };
        Self {
            store,
            sender,
            phones: PhoneParser::new(settings.default_region, PHONE_CACHE_CAPACITY),
            allowed_regions: abuse.allowed_regions.clone(),
            issue_params,
            verify_params,
            ip_quota: QuotaRule::new(abuse.sends_per_ip_hour, HOUR)
                .into_iter()
                .collect(),
            global_quota: QuotaRule::new(abuse.sends_global_minute, MINUTE)
                .into_iter()
                .collect(),
            settings,
            stats,
            record_outbox,
        }
    }

    pub fn settings(&self) -> &OtpSettings {
        &self.settings
    }

    /// Reads a phone as this service accepts it: valid, and from an allowed region.
    pub fn parse_phone(&self, raw: &str) -> Result<Phone, ApiError> {
        let phone = self.phones.parse(raw).ok_or(ApiError::InvalidPhone)?;
        let allowed = self.allowed_regions.is_empty()
            || phone
                .region()
                .is_some_and(|region| self.allowed_regions.contains(&region));
        if allowed {
            Ok(phone)
        } else {
            Err(ApiError::InvalidPhone)
        }
    }

    /// Issues a code (or re-delivers the pending one) within the phone's quota, reserves the
    /// client's and the global SMS budget, and sends it. If anything after the issue fails,
    /// the issue is undone, as long as the store still holds exactly what it wrote.
    pub async fn send(
        &self,
        phone: &Phone,
        purpose: &Purpose,
        client_ip: IpAddr,
    ) -> Result<SendReceipt, ApiError> {
        let candidate = Code::generate(self.settings.code_length);
        let delivery = match self
            .store
            .issue_code(phone, purpose, candidate, &self.issue_params)
            .await?
        {
            IssueOutcome::Deliver(delivery) => delivery,
            IssueOutcome::Cooldown { retry_after } => {
                self.stats.record(Event::DedupCooldown);
                tracing::info!(%phone, %purpose, retry_after_ms = retry_after.as_millis() as u64, "send refused: cooldown running");
                return Err(ApiError::ResendCooldown {
                    retry_after_secs: retry_after_secs(retry_after),
                });
            }
            IssueOutcome::QuotaExceeded { retry_after } => {
                self.stats.record(Event::QuotaPhone);
                tracing::warn!(%phone, %purpose, quota = "phone", "send refused: quota exceeded");
                return Err(ApiError::QuotaExceeded {
                    retry_after_secs: retry_after_secs(retry_after),
                });
            }
        };

        let reservations = match self.reserve_budgets(client_ip).await {
            Ok(reservations) => reservations,
            Err(error) => {
                self.undo(phone, purpose, &delivery, &error).await;
                return Err(error);
            }
        };

        let deliveries = delivery.undo.deliveries;
        match delivery.kind {
            DeliveryKind::Created => tracing::info!(%phone, %purpose, "code created"),
            DeliveryKind::Redelivered => {
                tracing::info!(%phone, %purpose, deliveries, "code redelivered")
            }
            DeliveryKind::Rotated => tracing::info!(%phone, %purpose, deliveries, "code rotated"),
        }

        let message = SmsMessage {
            phone,
            purpose,
            code: &delivery.code,
            expires_in: self.settings.code_ttl,
            // The request's locale is not passed yet: the SMS settings' default locale.
            locale: None,
        };
        if let Err(sms_error) = self.sender.send(&message).await {
            self.stats.record(Event::SmsFailed);
            let error = ApiError::SmsDelivery(sms_error);
            self.undo(phone, purpose, &delivery, &error).await;
            self.release(reservations).await;
            return Err(error);
        }
        self.stats.record(Event::SmsSent);
        tracing::info!(%phone, %purpose, "SMS delivered");

        if self.record_outbox {
            self.record(phone, purpose, &delivery.code).await;
        }
        Ok(SendReceipt {
            expires_in: self.settings.code_ttl,
            resend_after: self.settings.resend_cooldown,
        })
    }

    /// Reserves one SMS in the client's and the global budget, in one atomic step; on refusal
    /// nothing is taken and the answer is 42902.
    async fn reserve_budgets(&self, client_ip: IpAddr) -> Result<Reservations, ApiError> {
        let budgets: Vec<Budget<'_>> = [
            (QuotaScope::ClientIp(client_ip), &self.ip_quota),
            (QuotaScope::Global, &self.global_quota),
        ]
        .into_iter()
        .filter(|(_, rules)| !rules.is_empty())
        .map(|(scope, rules)| Budget { scope, rules })
        .collect();
        let reservations = Reservations {
            scopes: budgets.iter().map(|budget| budget.scope).collect(),
            token: QuotaToken::generate(),
        };
        if budgets.is_empty() {
            return Ok(reservations);
        }
        match self
            .store
            .reserve_quota(&budgets, reservations.token)
            .await?
        {
            QuotaDecision::Granted => Ok(reservations),
            QuotaDecision::Exceeded { scope, retry_after } => {
                let event = match scope {
                    QuotaScope::ClientIp(_) => Event::QuotaIp,
                    QuotaScope::Global => Event::QuotaGlobal,
                };
                self.stats.record(event);
                tracing::warn!(%client_ip, quota = event.name(), "send refused: quota exceeded");
                Err(ApiError::QuotaExceeded {
                    retry_after_secs: retry_after_secs(retry_after),
                })
            }
        }
    }

    async fn release(&self, reservations: Reservations) {
        if reservations.scopes.is_empty() {
            return;
        }
        if let Err(error) = self
            .store
            .release_quota(&reservations.scopes, reservations.token)
            .await
        {
            tracing::warn!(%error, "quota event not released; it expires with its window");
        }
    }

    /// Rolls back an issue whose SMS will not go out, and says so in the log.
    async fn undo(&self, phone: &Phone, purpose: &Purpose, delivery: &Delivery, cause: &ApiError) {
        let cause =
            std::error::Error::source(cause).map_or_else(|| cause.to_string(), ToString::to_string);
        match self.store.undo_issue(phone, purpose, &delivery.undo).await {
            Ok(true) => tracing::warn!(%phone, %purpose, %cause, "code rolled back: SMS not sent"),
            Ok(false) => tracing::warn!(
                %phone, %purpose, %cause,
                "SMS not sent; a later send changed the code, nothing rolled back"
            ),
            Err(store_error) => tracing::error!(
                %phone, %purpose, %cause, %store_error,
                "SMS not sent and the roll-back could not reach the store"
            ),
        }
    }

    /// Checks `code` in one atomic step: it is consumed on a match, counted otherwise.
    pub async fn verify(
        &self,
        phone: &Phone,
        purpose: &Purpose,
        code: &Code,
    ) -> Result<(), ApiError> {
        let outcome = self
            .store
            .verify_code(phone, purpose, code, self.verify_params)
            .await?;
        match outcome {
            VerifyOutcome::Verified => {
                self.stats.record(Event::VerifyOk);
                tracing::info!(%phone, %purpose, "code verified");
                Ok(())
            }
            VerifyOutcome::Mismatch { remaining_attempts } => {
                self.stats.record(Event::VerifyWrong);
                tracing::info!(%phone, %purpose, remaining_attempts, "wrong code");
                Err(ApiError::WrongCode { remaining_attempts })
            }
            VerifyOutcome::Destroyed => {
                self.stats.record(Event::VerifyLocked);
                tracing::warn!(%phone, %purpose, "wrong code: attempt limit reached, code destroyed");
                Err(ApiError::TooManyAttempts)
            }
            VerifyOutcome::Missing => {
                self.stats.record(Event::VerifyExpired);
                tracing::debug!(%phone, %purpose, "verify: no pending code");
                Err(ApiError::CodeExpired)
            }
            VerifyOutcome::QuotaExceeded { retry_after } => {
                self.stats.record(Event::QuotaFailures);
                tracing::warn!(%phone, %purpose, quota = "phone_failures", "verify refused: quota exceeded");
                Err(ApiError::QuotaExceeded {
                    retry_after_secs: retry_after_secs(retry_after),
                })
            }
        }
    }

    async fn record(&self, phone: &Phone, purpose: &Purpose, code: &Code) {
        let sent_at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let message = OutboxMessage {
            phone: phone.as_e164().to_owned(),
            purpose: purpose.as_str().to_owned(),
            code: code.expose().to_owned(),
            sent_at_ms,
        };
        if let Err(error) = self.store.push_outbox(&message).await {
            tracing::warn!(%phone, %error, "dev outbox: message not recorded");
        }
    }
}
