//! Everything an OTP use case can answer besides success, in the domain's words; the routes
//! map each to the API's envelope in one place.

use std::time::Duration;

use super::DestinationRefusal;
use crate::captcha::CaptchaError;
use crate::domain::InvalidEmail;
use crate::email::EmailError;
use crate::fraud::FraudError;
use crate::idempotency::IdempotencyError;
use crate::pow::PowError;
use crate::sms::SmsError;
use crate::store::StoreError;
use crate::token::TokenError;

/// What the API says of these errors, written once: the use cases' `Display` and the HTTP
/// envelope's messages (`routes::error`, which adds "retry later" where the answer carries a
/// `retry_after`) both read them.
pub mod messages {
    pub const INVALID_PHONE: &str = "invalid phone number";
    pub const INVALID_EMAIL: &str = "invalid email address";
    pub const INVALID_PURPOSE: &str = "invalid purpose";
    pub const INVALID_CODE: &str = "invalid code format";
    pub const WRONG_CODE: &str = "wrong code";
    pub const TOO_MANY_ATTEMPTS: &str = "too many failed attempts; the code was destroyed";
    pub const CODE_EXPIRED: &str = "code expired or not found";
    pub const VERIFICATION_ID_REQUIRED: &str = "verification_id is required";
    pub const VERIFICATION_MISMATCH: &str = "the phone or purpose does not match the verification";
    pub const VERIFICATION_NOT_FOUND: &str = "no such verification";
    pub const VERIFICATION_CANCELED: &str = "the verification was canceled";
    pub const RESEND_COOLDOWN: &str = "a code was sent recently";
    pub const QUOTA_EXCEEDED: &str = "quota exceeded";
    pub const SUSPENDED: &str = "sends to this destination are suspended";
}

#[derive(Debug, thiserror::Error)]
pub enum OtpError {
    #[error("{m}", m = messages::INVALID_PHONE)]
    InvalidPhone,
    /// The address broke a rule of `EmailAddress::parse` (the reason says which).
    #[error("{m}: {0}", m = messages::INVALID_EMAIL)]
    InvalidEmail(InvalidEmail),
    /// A send or verify named both a phone and an email address, or (where it needs one)
    /// neither.
    #[error("give exactly one of phone and email")]
    OneDestination,
    /// An email destination where the service has no relay (`VCODE_EMAIL_SMTP_URL` unset).
    #[error("this service sends no email")]
    EmailOff,
    /// No SMS goes to this number: its type (premium rate, toll-free…), its non-geographic
    /// calling code (`VCODE_ALLOWED_NUMBER_TYPES`) or its country (the geo permissions).
    #[error("no SMS to this number: {0}")]
    DestinationRefused(DestinationRefusal),
    #[error("invalid locale")]
    InvalidLocale,
    /// The SMS provider says this number cannot receive messages.
    #[error("{m}", m = messages::INVALID_PHONE)]
    UndeliverablePhone(#[source] SmsError),
    #[error("{m}", m = messages::INVALID_PURPOSE)]
    InvalidPurpose,
    #[error("{m}", m = messages::INVALID_CODE)]
    InvalidCode,
    /// The token audience asked for is not 1 to 256 visible ASCII characters.
    #[error("invalid audience")]
    InvalidAudience,
    #[error("{m}", m = messages::WRONG_CODE)]
    WrongCode { remaining_attempts: u32 },
    #[error("{m}", m = messages::TOO_MANY_ATTEMPTS)]
    TooManyAttempts,
    #[error("{m}", m = messages::CODE_EXPIRED)]
    CodeExpired,
    /// A verify without the `verification_id` where the service verifies by id.
    #[error("{m}", m = messages::VERIFICATION_ID_REQUIRED)]
    VerificationIdRequired,
    /// The phone or purpose of a verify by id is not the verification's.
    #[error("{m}", m = messages::VERIFICATION_MISMATCH)]
    VerificationMismatch,
    /// No such verification (unknown, malformed, or its record has expired).
    #[error("{m}", m = messages::VERIFICATION_NOT_FOUND)]
    VerificationNotFound,
    /// The verification was canceled: its id no longer verifies.
    #[error("{m}", m = messages::VERIFICATION_CANCELED)]
    VerificationCanceled,
    #[error("{m}", m = messages::RESEND_COOLDOWN)]
    ResendCooldown { retry_after: Duration },
    #[error("{m}", m = messages::QUOTA_EXCEEDED)]
    QuotaExceeded { retry_after: Duration },
    /// The fraud guard suspended or held back the destination's prefix.
    #[error("{m}", m = messages::SUSPENDED)]
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
    /// The relay refused or could not take the mail (a `5xx` but for the recipient, no
    /// connection, a `4xx`, a timeout before the message went): the send was rolled back.
    #[error("email delivery failed")]
    EmailDelivery(#[source] EmailError),
    /// The SMS provider's own limit on this number or account refused the message; answered
    /// as a quota, for as long as the provider says.
    #[error("{m}", m = messages::QUOTA_EXCEEDED)]
    SmsThrottled {
        retry_after: Duration,
        #[source]
        source: SmsError,
    },
    /// A Twilio-compatible first start's send log (`ServiceProfile::send_log`) was there already:
    /// nothing was sent, and the start takes its log's way (never an answer of its own).
    #[error("the send log was written by another start")]
    SendLogExists,
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The code was consumed but its token could not be signed (a bug: the keys are checked
    /// at start-up).
    #[error(transparent)]
    Token(#[from] TokenError),
}

impl OtpError {
    /// Whether the service failed (its store, its SMS provider, its keys), not the request:
    /// what the API answers with a 5xx. Such a failure keeps nothing a retry would trip on.
    pub fn is_service_failure(&self) -> bool {
        match self {
            Self::InvalidPhone
            | Self::InvalidEmail(_)
            | Self::OneDestination
            | Self::EmailOff
            | Self::DestinationRefused(_)
            | Self::InvalidLocale
            | Self::UndeliverablePhone(_)
            | Self::InvalidPurpose
            | Self::InvalidCode
            | Self::InvalidAudience
            | Self::WrongCode { .. }
            | Self::TooManyAttempts
            | Self::CodeExpired
            | Self::ResendCooldown { .. }
            | Self::QuotaExceeded { .. }
            | Self::FraudRefused { .. }
            | Self::SmsThrottled { .. }
            | Self::VerificationIdRequired
            | Self::VerificationMismatch
            | Self::VerificationNotFound
            | Self::VerificationCanceled
            | Self::SendLogExists => false,
            Self::Gate(error) => match error {
                CaptchaError::Wrong
                | CaptchaError::NotFound
                | CaptchaError::QuotaExceeded { .. } => false,
                CaptchaError::Render(_) | CaptchaError::Store(_) => true,
            },
            Self::PowGate(error) => match error {
                PowError::Refused(_) => false,
                PowError::Challenge(_) | PowError::Store(_) => true,
            },
            Self::Idempotency(error) => match error {
                IdempotencyError::InProgress | IdempotencyError::Mismatch => false,
                IdempotencyError::Store(_) => true,
            },
            Self::Unsealable
            | Self::SmsDelivery(_)
            | Self::EmailDelivery(_)
            | Self::Store(_)
            | Self::Token(_) => true,
        }
    }
}

impl From<FraudError> for OtpError {
    fn from(error: FraudError) -> Self {
        match error {
            FraudError::Refused { retry_after } => Self::FraudRefused { retry_after },
            FraudError::Store(error) => Self::Store(error),
        }
    }
}
