//! Every delivery attempt of one provider, seen once: timed and counted in the metrics
//! (`vcode_sms_total{provider,result}`, `vcode_sms_duration_seconds{provider}`), logged with
//! the masked phone and the provider's message id, and handed to an [`SmsObserver`] (the
//! daily stats' hook).

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;

use super::{SmsError, SmsErrorKind, SmsMessage, SmsReceipt, SmsSender};

/// The `result` label of a delivered attempt.
pub const DELIVERED: &str = "sent";

/// One attempt's outcome, as the daily stats count it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmsAttempt {
    /// `log`, `webhook`, `aliyun`, `tencent` or `twilio`.
    pub provider: &'static str,
    /// `None` when delivered.
    pub failure: Option<SmsErrorKind>,
}

impl SmsAttempt {
    pub fn delivered(&self) -> bool {
        self.failure.is_none()
    }

    /// The daily counter this attempt adds to: `sms_<provider>_sent` or
    /// `sms_<provider>_failed` (every failure kind; the metrics tell them apart).
    pub fn stats_event_name(&self) -> &'static str {
        match (self.provider, self.delivered()) {
            ("log", true) => "sms_log_sent",
            ("log", false) => "sms_log_failed",
            ("webhook", true) => "sms_webhook_sent",
            ("webhook", false) => "sms_webhook_failed",
            ("aliyun", true) => "sms_aliyun_sent",
            ("aliyun", false) => "sms_aliyun_failed",
            ("tencent", true) => "sms_tencent_sent",
            ("tencent", false) => "sms_tencent_failed",
            ("twilio", true) => "sms_twilio_sent",
            ("twilio", false) => "sms_twilio_failed",
            (_, true) => "sms_other_sent",
            (_, false) => "sms_other_failed",
        }
    }
}

/// Told of every attempt, after the metrics; must not block (it runs on the send's task).
pub trait SmsObserver: Send + Sync + 'static {
    fn attempt(&self, attempt: SmsAttempt);
}

/// Observes nothing: until the daily stats take the hook.
pub struct NoObserver;

impl SmsObserver for NoObserver {
    fn attempt(&self, _attempt: SmsAttempt) {}
}

/// A provider's sender with its attempts observed.
pub struct Observed {
    inner: Box<dyn SmsSender>,
    provider: &'static str,
    observer: Arc<dyn SmsObserver>,
}

impl Observed {
    pub fn new(
        provider: &'static str,
        inner: Box<dyn SmsSender>,
        observer: Arc<dyn SmsObserver>,
    ) -> Self {
        Self {
            inner,
            provider,
            observer,
        }
    }
}

#[async_trait]
impl SmsSender for Observed {
    async fn send(&self, message: &SmsMessage<'_>) -> Result<SmsReceipt, SmsError> {
        let started = Instant::now();
        let result = self.inner.send(message).await;
        let seconds = started.elapsed().as_secs_f64();
        let provider = self.provider;
        let (phone, purpose) = (message.phone, message.purpose);
        let failure = result.as_ref().err().map(SmsError::kind);
        let label = failure.map_or(DELIVERED, SmsErrorKind::metric_label);
        crate::metrics::observe_sms_attempt(provider, label, seconds);
        match &result {
            // The send logs its one line at `info` with this receipt (`otp::send`).
            Ok(receipt) => tracing::debug!(
                provider, %phone, %purpose,
                message_id = receipt.message_id.as_deref().unwrap_or("-"),
                "SMS accepted by the provider"
            ),
            Err(error) => match error.kind() {
                SmsErrorKind::InvalidNumber => tracing::info!(
                    provider, %phone, %purpose, code = error.code(), %error,
                    "SMS refused: the provider says the number cannot receive it"
                ),
                SmsErrorKind::Rejected => tracing::error!(
                    provider, %phone, %purpose, code = error.code(), %error,
                    "SMS refused by the provider: operator action needed (template, sign name, \
                     credentials, balance or permissions; see the provider's code)"
                ),
                SmsErrorKind::Throttled => tracing::warn!(
                    provider, %phone, %purpose, code = error.code(), %error,
                    retry_after_s = error.retry_after().unwrap_or_default().as_secs(),
                    "SMS refused by the provider's rate or volume limit (this number or the \
                     account); not tried elsewhere"
                ),
                SmsErrorKind::Retryable => tracing::warn!(
                    provider, %phone, %purpose, code = error.code(), %error,
                    "SMS not taken by the provider (unavailable or unreachable)"
                ),
                SmsErrorKind::Unconfirmed => tracing::warn!(
                    provider, %phone, %purpose, code = error.code(), %error,
                    "SMS outcome unknown: the provider did not answer; not tried elsewhere"
                ),
            },
        }
        self.observer.attempt(SmsAttempt { provider, failure });
        result
    }
}
