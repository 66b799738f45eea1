//! The OTP use cases: send a code by SMS, verify a code. This is where the store, the SMS
//! sender and the key's life-cycle log lines meet.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::config::OtpSettings;
use crate::domain::{Code, Phone, Purpose};
use crate::error::{ApiError, retry_after_secs};
use crate::sms::{SmsMessage, SmsSender};
use crate::store::{DeliveryKind, IssueOutcome, IssueParams, OutboxMessage, Store, VerifyOutcome};

pub struct OtpService {
    store: Arc<dyn Store>,
    sender: Arc<dyn SmsSender>,
    settings: OtpSettings,
    /// Dev mode: keep every delivered SMS in the store's outbox.
    record_outbox: bool,
}

/// What a successful send tells the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendReceipt {
    pub expires_in: Duration,
    pub resend_after: Duration,
}

impl OtpService {
    pub fn new(
        store: Arc<dyn Store>,
        sender: Arc<dyn SmsSender>,
        settings: OtpSettings,
        record_outbox: bool,
    ) -> Self {
        Self {
            store,
            sender,
            settings,
            record_outbox,
        }
    }

    pub fn settings(&self) -> &OtpSettings {
        &self.settings
    }

    /// Issues a code (or re-delivers the pending one) and sends it. If the SMS fails, the issue
    /// is undone, as long as the store still holds exactly what it wrote.
    pub async fn send(&self, phone: &Phone, purpose: &Purpose) -> Result<SendReceipt, ApiError> {
        let params = IssueParams {
            ttl: self.settings.code_ttl,
            cooldown: self.settings.resend_cooldown,
            policy: self.settings.resend,
        };
        let candidate = Code::generate(self.settings.code_length);
        let delivery = match self
            .store
            .issue_code(phone, purpose, candidate, params)
            .await?
        {
            IssueOutcome::Deliver(delivery) => delivery,
            IssueOutcome::Cooldown { retry_after } => {
                tracing::info!(%phone, %purpose, retry_after_ms = retry_after.as_millis() as u64, "send refused: cooldown running");
                return Err(ApiError::ResendCooldown {
                    retry_after_secs: retry_after_secs(retry_after),
                });
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
        };
        if let Err(sms_error) = self.sender.send(&message).await {
            match self.store.undo_issue(phone, purpose, &delivery.undo).await {
                Ok(true) => {
                    tracing::warn!(%phone, %purpose, error = %sms_error, "SMS failed: code rolled back")
                }
                Ok(false) => tracing::warn!(
                    %phone, %purpose, error = %sms_error,
                    "SMS failed: a later send changed the code, nothing rolled back"
                ),
                Err(store_error) => tracing::error!(
                    %phone, %purpose, error = %sms_error, %store_error,
                    "SMS failed and the roll-back could not reach the store"
                ),
            }
            return Err(ApiError::SmsDelivery(sms_error));
        }
        tracing::info!(%phone, %purpose, "SMS delivered");

        if self.record_outbox {
            self.record(phone, purpose, &delivery.code).await;
        }
        Ok(SendReceipt {
            expires_in: self.settings.code_ttl,
            resend_after: self.settings.resend_cooldown,
        })
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
            .verify_code(phone, purpose, code, self.settings.max_attempts)
            .await?;
        match outcome {
            VerifyOutcome::Verified => {
                tracing::info!(%phone, %purpose, "code verified");
                Ok(())
            }
            VerifyOutcome::Mismatch { remaining_attempts } => {
                tracing::info!(%phone, %purpose, remaining_attempts, "wrong code");
                Err(ApiError::WrongCode { remaining_attempts })
            }
            VerifyOutcome::Destroyed => {
                tracing::warn!(%phone, %purpose, "wrong code: attempt limit reached, code destroyed");
                Err(ApiError::TooManyAttempts)
            }
            VerifyOutcome::Missing => {
                tracing::info!(%phone, %purpose, "verify: no pending code");
                Err(ApiError::CodeExpired)
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
