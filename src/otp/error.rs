//! Everything an OTP use case can answer besides success, in the domain's words; the routes
//! map each to the API's envelope in one place.

use std::time::Duration;

use super::Refusal;
use crate::captcha::CaptchaError;
use crate::fraud::FraudError;
use crate::idempotency::IdempotencyError;
use crate::pow::PowError;
use crate::sms::SmsError;
use crate::store::StoreError;
use crate::token::TokenError;

#[derive(Debug, thiserror::Error)]
pub enum OtpError {
    #[error("invalid phone number")]
    InvalidPhone,
    /// No SMS goes to this number: its type (premium rate, toll-free…), its non-geographic
    /// calling code (`VCODE_ALLOWED_NUMBER_TYPES`) or its country (the geo permissions).
    #[error("no SMS to this number: {0}")]
    DestinationRefused(Refusal),
    #[error("invalid locale")]
    InvalidLocale,
    /// The SMS provider says this number cannot receive messages.
    #[error("invalid phone number")]
    UndeliverablePhone(#[source] SmsError),
    #[error("invalid purpose")]
    InvalidPurpose,
    #[error("invalid code format")]
    InvalidCode,
    /// The token audience asked for is not 1 to 256 visible ASCII characters.
    #[error("invalid audience")]
    InvalidAudience,
    #[error("wrong code")]
    WrongCode { remaining_attempts: u32 },
    #[error("too many failed attempts; the code was destroyed")]
    TooManyAttempts,
    #[error("code expired or not found")]
    CodeExpired,
    #[error("a code was sent recently")]
    ResendCooldown { retry_after: Duration },
    #[error("quota exceeded")]
    QuotaExceeded { retry_after: Duration },
    /// The fraud guard suspended or held back the destination's prefix.
    #[error("sends to this destination are suspended")]
    FraudRefused { retry_after: Duration },
    /// The send gate refused: no solved captcha.
    #[error(transparent)]
    Gate(#[from] CaptchaError),
    /// The send gate refused: no solved proof-of-work challenge.
    #[error(transparent)]
    PowGate(#[from] PowError),
    #[error(transparent)]
    Idempotency(#[from] IdempotencyError),
    /// The pending code was sealed under a key no longer configured: it cannot be sent again.
    #[error("the pending code cannot be opened with the configured keys")]
    Unsealable,
    #[error("SMS delivery failed")]
    SmsDelivery(#[source] SmsError),
    /// The SMS provider's own limit on this number or account refused the message; answered
    /// as a quota, for as long as the provider says.
    #[error("quota exceeded")]
    SmsThrottled {
        retry_after: Duration,
        #[source]
        source: SmsError,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The code was consumed but its token could not be signed (a bug: the keys are checked
    /// at start-up).
    #[error(transparent)]
    Token(#[from] TokenError),
}

impl From<FraudError> for OtpError {
    fn from(error: FraudError) -> Self {
        match error {
            FraudError::Refused { retry_after } => Self::FraudRefused { retry_after },
            FraudError::Store(error) => Self::Store(error),
        }
    }
}
