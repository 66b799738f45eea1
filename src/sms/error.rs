//! Why an SMS was not delivered, classified once by the sender that saw the provider's answer:
//! the router decides on failover from it, the OTP use case maps it to the API's answer.

use std::fmt;
use std::time::Duration;

/// What a failure means for the send, and so for the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SmsErrorKind {
    /// The number cannot receive this SMS (malformed, not a mobile, unsupported destination,
    /// blocked). Final: no provider is tried after it; the client is told `400`/`40001`.
    InvalidNumber,
    /// The provider refused the request for a reason only the operator can fix: template or
    /// sign name not approved, credentials, balance, permissions, our own settings. Final; the
    /// client sees `502`/`50200` and the log has an error line saying what to fix.
    Rejected,
    /// The provider's own limit refused it: on this number (per 30 s, hour, day, same
    /// content) or on the account (daily volume, request rate), HTTP 429 included. Final:
    /// another provider would get around a limit that is there against abuse; the client is
    /// told `429`/`42902` with [`SmsError::retry_after`].
    Throttled,
    /// The provider did not take the message (5xx, an outage, no connection): the next
    /// provider of the route may try the same code; `502`/`50200` when none is left.
    Retryable,
    /// The request reached the provider but no answer came (timeout, connection cut): it may
    /// have been delivered, so no other provider is tried (at most one SMS per send), and the
    /// OTP use case keeps the code as sent (`200`, `delivery` `unconfirmed`).
    Unconfirmed,
}

impl SmsErrorKind {
    /// Whether the router may try the route's next provider with the same code.
    pub fn allows_failover(self) -> bool {
        self == SmsErrorKind::Retryable
    }

    /// The `result` label of `vcode_sms_total` for an attempt that failed this way.
    pub fn metric_label(self) -> &'static str {
        match self {
            SmsErrorKind::InvalidNumber => "invalid_number",
            SmsErrorKind::Rejected => "rejected",
            SmsErrorKind::Throttled => "throttled",
            SmsErrorKind::Retryable => "retryable",
            SmsErrorKind::Unconfirmed => "unconfirmed",
        }
    }
}

/// One failed delivery attempt. Its text never holds a secret, a code or a full phone number:
/// it carries the provider's own error code and message, which name none of them.
#[derive(Debug, Clone)]
pub struct SmsError {
    provider: &'static str,
    kind: SmsErrorKind,
    /// The provider's error code (`isv.BUSINESS_LIMIT_CONTROL`, `21211`, …) or our own word
    /// for a transport failure (`timeout`, `connect`, `http_503`).
    code: String,
    detail: String,
    /// How long the provider's limit holds; set for `Throttled` only.
    retry_after: Option<Duration>,
}

impl SmsError {
    pub fn new(
        provider: &'static str,
        kind: SmsErrorKind,
        code: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            provider,
            kind,
            code: code.into(),
            detail: detail.into(),
            retry_after: None,
        }
    }

    /// The provider's limit refused the message for `retry_after`.
    pub fn throttled(
        provider: &'static str,
        code: impl Into<String>,
        detail: impl Into<String>,
        retry_after: Duration,
    ) -> Self {
        Self {
            retry_after: Some(retry_after),
            ..Self::new(provider, SmsErrorKind::Throttled, code, detail)
        }
    }

    /// No answer within `timeout` after the request went out.
    pub fn timeout(provider: &'static str, timeout: Duration) -> Self {
        Self::new(
            provider,
            SmsErrorKind::Unconfirmed,
            "timeout",
            format!("no answer within {timeout:?}"),
        )
    }

    /// A failure of our own settings found at send time (no template for a purpose, say).
    pub fn misconfigured(provider: &'static str, detail: impl Into<String>) -> Self {
        Self::new(provider, SmsErrorKind::Rejected, "vcode_settings", detail)
    }

    pub fn kind(&self) -> SmsErrorKind {
        self.kind
    }

    /// The provider that failed (`aliyun`, `tencent`, `twilio`, `webhook`, `log`).
    pub fn provider(&self) -> &'static str {
        self.provider
    }

    /// The provider's error code, or ours for transport failures.
    pub fn code(&self) -> &str {
        &self.code
    }

    /// How long a `Throttled` refusal holds (the provider's `Retry-After`, or its code's
    /// window); `None` for other kinds.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

impl fmt::Display for SmsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SMS provider {} failed ({:?}): {}: {}",
            self.provider, self.kind, self.code, self.detail
        )
    }
}

impl std::error::Error for SmsError {}
