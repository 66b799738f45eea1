//! The one error type of the HTTP API: the single place where the use cases' errors become
//! stable codes, messages and HTTP statuses. Causes of server-side failures go to the log; the
//! client sees a stable code and message.

use std::sync::{LazyLock, OnceLock};

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;

use super::envelope::{Envelope, Reply};
use crate::captcha::CaptchaError;
use crate::domain::InvalidEmail;
use crate::email::EmailError;
use crate::fraud::{FraudError, SafeListError};
use crate::idempotency::IdempotencyError;
use crate::otp::{DestinationRefusal, OtpError, ReceiptError, messages};
use crate::pow::PowError;
use crate::sms::SmsError;
use crate::store::StoreError;
use vcode_wire::{ErrorCode, RetryAfterData, WrongCodeData};

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("malformed request: {0}")]
    Malformed(String),
    #[error("{m}", m = messages::INVALID_PHONE)]
    InvalidPhone,
    /// The message names the rule the address broke, never the address.
    #[error("{m}: {0}", m = messages::INVALID_EMAIL)]
    InvalidEmail(InvalidEmail),
    #[error("{m}", m = messages::INVALID_CODE)]
    InvalidCode,
    #[error("{m}", m = messages::INVALID_PURPOSE)]
    InvalidPurpose,
    #[error("no SMS is sent to this type of number")]
    NumberTypeRefused,
    #[error("no SMS is sent to this number's country")]
    RegionRefused,
    #[error("{m}", m = messages::WRONG_CODE)]
    WrongCode { remaining_attempts: u32 },
    #[error("wrong or missing captcha")]
    WrongCaptcha,
    #[error("proof of work missing, wrong, expired or used")]
    PowFailed,
    #[error("missing or wrong bearer token")]
    Unauthorized,
    /// A delivery receipt whose signature or token is wrong or missing: 40100 too, without a
    /// `WWW-Authenticate` (no bearer token would do).
    #[error("the receipt's signature or token is wrong or missing")]
    ReceiptRefused,
    #[error("not found")]
    NotFound,
    #[error("method not allowed")]
    MethodNotAllowed,
    #[error("{m}", m = messages::CODE_EXPIRED)]
    CodeExpired,
    #[error("{m}", m = messages::VERIFICATION_ID_REQUIRED)]
    VerificationIdRequired,
    #[error("{m}", m = messages::VERIFICATION_MISMATCH)]
    VerificationMismatch,
    #[error("{m}", m = messages::VERIFICATION_NOT_FOUND)]
    VerificationNotFound,
    #[error("{m}", m = messages::VERIFICATION_CANCELED)]
    VerificationCanceled,
    #[error("request body not received in time")]
    BodyTimeout,
    #[error("request body too large")]
    PayloadTooLarge,
    #[error("a request with this Idempotency-Key is still in progress")]
    IdempotencyInProgress,
    #[error("this Idempotency-Key was used with a different request")]
    IdempotencyMismatch,
    #[error("{m}; retry later", m = messages::RESEND_COOLDOWN)]
    ResendCooldown { retry_after_secs: u64 },
    #[error("{m}", m = messages::TOO_MANY_ATTEMPTS)]
    TooManyAttempts,
    #[error("{m}", m = messages::QUOTA_EXCEEDED)]
    QuotaExceeded { retry_after_secs: u64 },
    #[error("{m}; retry later", m = messages::SUSPENDED)]
    DestinationSuspended { retry_after_secs: u64 },
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
    #[error("SMS delivery failed")]
    SmsDelivery(#[source] SmsError),
    #[error("email delivery failed")]
    EmailDelivery(#[source] EmailError),
    #[error("store unavailable")]
    StoreUnavailable(#[source] StoreError),
}

/// An error's `data`: `null` unless its code carries some. Serialized as it stands, where a
/// `serde_json::Value` would be built first and then walked.
#[derive(Serialize)]
#[serde(untagged)]
enum ErrorData {
    None,
    WrongCode(WrongCodeData),
    RetryAfter(RetryAfterData),
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Protocol(_) => Self::Internal(error.into()),
            StoreError::Unavailable(_) | StoreError::Timeout(_) => Self::StoreUnavailable(error),
        }
    }
}

/// The TOTP use cases' errors (`/api/v1/totp`): a lock and the client's wrong codes are
/// 42902 with `Retry-After`, as a verify's quota.
impl From<crate::totp::TotpError> for ApiError {
    fn from(error: crate::totp::TotpError) -> Self {
        use crate::totp::TotpError;
        match error {
            TotpError::Invalid(setting) => Self::Malformed(format!(
                "invalid {setting:?} (friendly_name and issuer 1 to 64 characters, algorithm \
                 sha1, sha256 or sha512, digits 6 to 8, period 20 to 60, skew 0 or 1; an identity \
                 1 to 64 of letters, digits and -_.@+)"
            )),
            TotpError::InvalidCode => Self::InvalidCode,
            TotpError::EntityNotFound
            | TotpError::FactorNotFound
            | TotpError::ChallengeNotFound => Self::NotFound,
            error @ (TotpError::NotVerified | TotpError::TooManyFactors) => {
                Self::Malformed(error.to_string())
            }
            TotpError::WrongCode { remaining_attempts } => Self::WrongCode { remaining_attempts },
            TotpError::Locked { retry_after } | TotpError::QuotaExceeded { retry_after } => {
                Self::QuotaExceeded {
                    retry_after_secs: retry_after_secs(retry_after),
                }
            }
            TotpError::Busy => Self::QuotaExceeded {
                retry_after_secs: 1,
            },
            TotpError::Store(error) => error.into(),
            TotpError::Internal(cause) => Self::Internal(anyhow::anyhow!(cause)),
        }
    }
}

impl From<OtpError> for ApiError {
    fn from(error: OtpError) -> Self {
        match error {
            OtpError::InvalidPhone => Self::InvalidPhone,
            OtpError::InvalidEmail(reason) => Self::InvalidEmail(reason),
            error @ (OtpError::OneDestination | OtpError::EmailOff) => {
                Self::Malformed(error.to_string())
            }
            OtpError::EmailDelivery(error) => Self::EmailDelivery(error),
            OtpError::InvalidPurpose => Self::InvalidPurpose,
            OtpError::DestinationRefused(
                DestinationRefusal::NumberType(_) | DestinationRefusal::NonGeographic(_),
            ) => Self::NumberTypeRefused,
            OtpError::DestinationRefused(DestinationRefusal::Region(_)) => Self::RegionRefused,
            OtpError::InvalidLocale => {
                Self::Malformed("locale must be a BCP 47 tag such as zh-CN or en".to_owned())
            }
            OtpError::UndeliverablePhone(_) => Self::InvalidPhone,
            OtpError::InvalidCode => Self::InvalidCode,
            OtpError::InvalidAudience => {
                Self::Malformed(format!("audience: {}", crate::token::CLAIM_TEXT_RULE))
            }
            OtpError::WrongCode { remaining_attempts } => Self::WrongCode { remaining_attempts },
            OtpError::TooManyAttempts => Self::TooManyAttempts,
            OtpError::CodeExpired => Self::CodeExpired,
            OtpError::VerificationIdRequired => Self::VerificationIdRequired,
            OtpError::VerificationMismatch => Self::VerificationMismatch,
            OtpError::VerificationNotFound => Self::VerificationNotFound,
            OtpError::VerificationCanceled => Self::VerificationCanceled,
            OtpError::ResendCooldown { retry_after } => Self::ResendCooldown {
                retry_after_secs: retry_after_secs(retry_after),
            },
            OtpError::QuotaExceeded { retry_after }
            | OtpError::SmsThrottled { retry_after, .. } => Self::QuotaExceeded {
                retry_after_secs: retry_after_secs(retry_after),
            },
            OtpError::FraudRefused { retry_after } => Self::DestinationSuspended {
                retry_after_secs: retry_after_secs(retry_after),
            },
            OtpError::Gate(error) => error.into(),
            OtpError::PowGate(error) => error.into(),
            OtpError::Idempotency(error) => error.into(),
            OtpError::SmsDelivery(error) => Self::SmsDelivery(error),
            // /api/v1 sends no send log: never reached.
            error @ (OtpError::Unsealable | OtpError::SendLogExists) => {
                Self::Internal(error.into())
            }
            OtpError::Store(error) => error.into(),
            OtpError::Token(error) => Self::Internal(error.into()),
        }
    }
}

impl From<ReceiptError> for ApiError {
    fn from(error: ReceiptError) -> Self {
        match error {
            ReceiptError::Unauthenticated => Self::ReceiptRefused,
            ReceiptError::Malformed(what) => Self::Malformed(format!("malformed receipt: {what}")),
            ReceiptError::Store(error) => error.into(),
        }
    }
}

impl From<FraudError> for ApiError {
    fn from(error: FraudError) -> Self {
        match error {
            FraudError::Refused { retry_after } => Self::DestinationSuspended {
                retry_after_secs: retry_after_secs(retry_after),
            },
            FraudError::Store(error) => error.into(),
        }
    }
}

impl From<SafeListError> for ApiError {
    fn from(error: SafeListError) -> Self {
        match error {
            error @ (SafeListError::Invalid(_)
            | SafeListError::Configured(_)
            | SafeListError::Full(_)) => Self::Malformed(error.to_string()),
            SafeListError::Store(error) => error.into(),
        }
    }
}

impl From<CaptchaError> for ApiError {
    fn from(error: CaptchaError) -> Self {
        match error {
            CaptchaError::Wrong => Self::WrongCaptcha,
            CaptchaError::NotFound => Self::NotFound,
            CaptchaError::Render(cause) => Self::Internal(anyhow::anyhow!(cause)),
            CaptchaError::QuotaExceeded { retry_after } => Self::QuotaExceeded {
                retry_after_secs: retry_after_secs(retry_after),
            },
            CaptchaError::Store(error) => error.into(),
        }
    }
}

impl From<PowError> for ApiError {
    fn from(error: PowError) -> Self {
        match error {
            PowError::Refused(_) => Self::PowFailed,
            PowError::Challenge(cause) => Self::Internal(cause.into()),
            PowError::Store(error) => error.into(),
        }
    }
}

impl From<IdempotencyError> for ApiError {
    fn from(error: IdempotencyError) -> Self {
        match error {
            IdempotencyError::InProgress => Self::IdempotencyInProgress,
            IdempotencyError::Mismatch => Self::IdempotencyMismatch,
            IdempotencyError::Store(error) => error.into(),
        }
    }
}

impl ApiError {
    /// The stable five-digit code; its first three digits are the HTTP status.
    pub fn code(&self) -> u32 {
        self.error_code().code()
    }

    /// The stable code, as the wire contract names it.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            Self::Malformed(_) => ErrorCode::Malformed,
            Self::InvalidPhone => ErrorCode::InvalidPhone,
            Self::InvalidEmail(_) => ErrorCode::InvalidEmail,
            Self::InvalidCode => ErrorCode::InvalidCode,
            Self::InvalidPurpose => ErrorCode::InvalidPurpose,
            Self::NumberTypeRefused => ErrorCode::NumberTypeRefused,
            Self::RegionRefused => ErrorCode::RegionRefused,
            Self::WrongCode { .. } => ErrorCode::WrongCode,
            Self::WrongCaptcha => ErrorCode::WrongCaptcha,
            Self::PowFailed => ErrorCode::PowRejected,
            Self::Unauthorized | Self::ReceiptRefused => ErrorCode::Unauthorized,
            Self::NotFound => ErrorCode::NotFound,
            Self::MethodNotAllowed => ErrorCode::MethodNotAllowed,
            Self::CodeExpired => ErrorCode::CodeExpired,
            Self::VerificationIdRequired => ErrorCode::VerificationIdRequired,
            Self::VerificationMismatch => ErrorCode::VerificationMismatch,
            Self::VerificationNotFound => ErrorCode::VerificationNotFound,
            // Gone, as an expired code: the answer a verify of a canceled id gets.
            Self::VerificationCanceled => ErrorCode::CodeExpired,
            Self::IdempotencyInProgress => ErrorCode::IdempotencyInProgress,
            Self::BodyTimeout => ErrorCode::BodyTimeout,
            Self::PayloadTooLarge => ErrorCode::PayloadTooLarge,
            Self::IdempotencyMismatch => ErrorCode::IdempotencyMismatch,
            Self::ResendCooldown { .. } => ErrorCode::ResendCooldown,
            Self::TooManyAttempts => ErrorCode::TooManyAttempts,
            Self::QuotaExceeded { .. } => ErrorCode::QuotaExceeded,
            Self::DestinationSuspended { .. } => ErrorCode::DestinationSuspended,
            Self::Internal(_) => ErrorCode::Internal,
            Self::SmsDelivery(_) => ErrorCode::SmsDelivery,
            Self::EmailDelivery(_) => ErrorCode::EmailDelivery,
            Self::StoreUnavailable(_) => ErrorCode::StoreUnavailable,
        }
    }

    fn data(&self) -> ErrorData {
        match self {
            Self::WrongCode { remaining_attempts } => ErrorData::WrongCode(WrongCodeData {
                remaining_attempts: *remaining_attempts,
            }),
            Self::ResendCooldown { retry_after_secs }
            | Self::QuotaExceeded { retry_after_secs }
            | Self::DestinationSuspended { retry_after_secs } => {
                ErrorData::RetryAfter(RetryAfterData {
                    retry_after: *retry_after_secs,
                })
            }
            _ => ErrorData::None,
        }
    }

    fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Self::ResendCooldown { retry_after_secs }
            | Self::QuotaExceeded { retry_after_secs }
            | Self::DestinationSuspended { retry_after_secs } => Some(*retry_after_secs),
            _ => None,
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16((self.code() / 100) as u16)
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = match self.fixed_body() {
            Some(body) => HttpResponse::build(self.status_code())
                .insert_header((
                    actix_web::http::header::CONTENT_TYPE,
                    actix_web::http::header::HeaderValue::from_static("application/json"),
                ))
                .body(body),
            None => self.reply().into_response(),
        };
        if matches!(self, Self::Unauthorized) {
            // RFC 6750: a 401 names the scheme it wants.
            response.headers_mut().insert(
                actix_web::http::header::WWW_AUTHENTICATE,
                actix_web::http::header::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

/// How many remaining attempts a wrong code's answer is kept serialised for.
const FIXED_WRONG_CODES: usize = 16;

impl ApiError {
    /// The body of an answer that never varies (a fixed message and data, a client's error),
    /// serialised once: a verify's misses are most of what a guesser sends.
    fn fixed_body(&self) -> Option<&'static str> {
        macro_rules! once {
            ($error:expr) => {{
                static BODY: LazyLock<String> = LazyLock::new(|| $error.reply().body);
                Some(BODY.as_str())
            }};
        }
        static WRONG_CODES: [OnceLock<String>; FIXED_WRONG_CODES] =
            [const { OnceLock::new() }; FIXED_WRONG_CODES];
        match self {
            Self::CodeExpired => once!(ApiError::CodeExpired),
            Self::VerificationNotFound => once!(ApiError::VerificationNotFound),
            Self::VerificationCanceled => once!(ApiError::VerificationCanceled),
            Self::VerificationMismatch => once!(ApiError::VerificationMismatch),
            Self::VerificationIdRequired => once!(ApiError::VerificationIdRequired),
            Self::TooManyAttempts => once!(ApiError::TooManyAttempts),
            Self::InvalidCode => once!(ApiError::InvalidCode),
            Self::InvalidPhone => once!(ApiError::InvalidPhone),
            Self::InvalidPurpose => once!(ApiError::InvalidPurpose),
            Self::NotFound => once!(ApiError::NotFound),
            Self::WrongCode { remaining_attempts } => {
                let cell = WRONG_CODES.get(*remaining_attempts as usize)?;
                Some(cell.get_or_init(|| self.reply().body).as_str())
            }
            _ => None,
        }
    }

    /// The answer to send, as plain data; logs the cause of a server-side failure.
    pub fn reply(&self) -> Reply {
        if self.status_code().is_server_error() {
            // The chain of causes is for operators only.
            let cause = std::error::Error::source(self).map(|source| {
                let mut chain = source.to_string();
                let mut next = source.source();
                while let Some(inner) = next {
                    chain.push_str(": ");
                    chain.push_str(&inner.to_string());
                    next = inner.source();
                }
                chain
            });
            tracing::error!(code = self.code(), cause = cause.as_deref(), "{self}");
        }
        let envelope = Envelope {
            code: self.code(),
            message: self.to_string(),
            data: self.data(),
        };
        Reply {
            status: self.status_code().as_u16(),
            body: serde_json::to_string(&envelope).unwrap_or_default(),
            retry_after: self.retry_after_secs(),
        }
    }
}

/// Whole seconds for `Retry-After`, rounded up so a client that waits that long is never early.
pub fn retry_after_secs(wait: std::time::Duration) -> u64 {
    wait.as_millis().div_ceil(1000).max(1) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::email::EmailErrorKind;
    use std::time::Duration;

    #[test]
    fn an_answer_serialised_once_is_the_one_it_would_serialise() {
        let fixed = [
            ApiError::CodeExpired,
            ApiError::VerificationNotFound,
            ApiError::VerificationCanceled,
            ApiError::VerificationMismatch,
            ApiError::VerificationIdRequired,
            ApiError::TooManyAttempts,
            ApiError::InvalidCode,
            ApiError::InvalidPhone,
            ApiError::InvalidPurpose,
            ApiError::NotFound,
            ApiError::WrongCode {
                remaining_attempts: 0,
            },
            ApiError::WrongCode {
                remaining_attempts: 4,
            },
            ApiError::WrongCode {
                remaining_attempts: 0,
            },
        ];
        for error in fixed {
            assert_eq!(
                error.fixed_body(),
                Some(error.reply().body.as_str()),
                "{error:?}"
            );
        }
        // Past the kept ones, and whatever carries its own words or data: serialised each time.
        for error in [
            ApiError::WrongCode {
                remaining_attempts: FIXED_WRONG_CODES as u32,
            },
            ApiError::Malformed("x".into()),
            ApiError::QuotaExceeded {
                retry_after_secs: 1,
            },
        ] {
            assert_eq!(error.fixed_body(), None, "{error:?}");
        }
    }

    #[test]
    fn every_code_starts_with_its_http_status() {
        let errors = [
            ApiError::Malformed("x".into()),
            ApiError::InvalidPhone,
            ApiError::InvalidEmail(InvalidEmail::NotOneAt),
            ApiError::InvalidCode,
            ApiError::InvalidPurpose,
            ApiError::NumberTypeRefused,
            ApiError::RegionRefused,
            ApiError::WrongCode {
                remaining_attempts: 1,
            },
            ApiError::WrongCaptcha,
            ApiError::PowFailed,
            ApiError::Unauthorized,
            ApiError::ReceiptRefused,
            ApiError::NotFound,
            ApiError::MethodNotAllowed,
            ApiError::CodeExpired,
            ApiError::VerificationIdRequired,
            ApiError::VerificationMismatch,
            ApiError::VerificationNotFound,
            ApiError::VerificationCanceled,
            ApiError::PayloadTooLarge,
            ApiError::BodyTimeout,
            ApiError::IdempotencyInProgress,
            ApiError::IdempotencyMismatch,
            ApiError::ResendCooldown {
                retry_after_secs: 1,
            },
            ApiError::TooManyAttempts,
            ApiError::QuotaExceeded {
                retry_after_secs: 1,
            },
            ApiError::DestinationSuspended {
                retry_after_secs: 1,
            },
            ApiError::Internal(anyhow::anyhow!("x")),
            ApiError::EmailDelivery(EmailError::new(EmailErrorKind::Refused, "smtp_550", "x")),
            ApiError::StoreUnavailable(StoreError::Timeout(Duration::from_secs(1))),
        ];
        for error in errors {
            assert_eq!(
                u32::from(error.status_code().as_u16()),
                error.code() / 100,
                "{error:?}"
            );
        }
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(59_001)), 60);
        assert_eq!(retry_after_secs(Duration::from_secs(60)), 60);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
    }
}
