//! What the Twilio-compatible API answers besides success, as Twilio's error codes: the
//! compat layer's own refusals, and the OTP use cases' errors in Twilio's words (one mapping,
//! `From<OtpError>`). The routes give each its HTTP status and Twilio's body.

use std::time::Duration;

use crate::domain::Channel;
use crate::otp::OtpError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum TwilioError {
    /// 20003: no or wrong credentials.
    #[error("Authenticate")]
    Unauthenticated,
    /// 20404: no such resource for this account (another account's is not found either).
    #[error("The requested resource {0} was not found")]
    NotFound(String),
    /// 60200: a parameter is missing or invalid.
    #[error("Invalid parameter: {0}")]
    InvalidParameter(&'static str),
    /// 20403: as many resources of a kind as their parent may have (an account's Services,
    /// `VCODE_QUOTA_TWILIO_SERVICES`; a Service's Rate Limits; a Rate Limit's Buckets). Twilio
    /// documents no Verify code of its own for these limits.
    #[error("The maximum of {1} {0} is reached")]
    TooManyResources(&'static str, usize),
    /// 60202: the verification's check attempts are spent.
    #[error("Max check attempts reached")]
    MaxCheckAttempts,
    /// 60203: the verification was sent as often as it may be.
    #[error("Max send attempts reached")]
    MaxSendAttempts,
    /// 60205: the Service skips landlines and `To` is one.
    #[error("SMS is not supported by landline phone number")]
    Landline,
    /// 60217: `Channel=email` where this server has no mail relay (`VCODE_EMAIL_SMTP_URL`
    /// unset): Twilio's answer to a Service without an email integration.
    #[error("Invalid Service configuration: this server sends no email")]
    EmailNotConfigured,
    /// 60223: a channel Twilio has and vcode does not (yet).
    #[error("Delivery channel disabled: {0}")]
    ChannelDisabled(String),
    /// 60410: the fraud guard refused the destination (Twilio's Fraud Guard code).
    #[error("Verification delivery attempt blocked")]
    Blocked { retry_after: Duration },
    /// 60605: vcode's geo permissions or number types refuse the destination.
    #[error("Verification delivery attempt blocked: geo permissions")]
    DestinationRefused,
    /// 20429: a quota, the resend cooldown or the provider's rate.
    #[error("Too Many Requests")]
    TooManyRequests { retry_after: Duration },
    /// 30008 (Twilio's "unknown error" of a message): the SMS provider or the mail relay
    /// failed, and the send was undone. Twilio documents no Verify code of its own for an
    /// email its relay refused; the one delivery failure code serves both channels.
    #[error("The {} could not be delivered", delivery_noun(*.0))]
    Delivery(Channel),
    /// 20503: the store or another dependency did not answer.
    #[error("Service Unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// 20500: anything else on the server's side.
    #[error("Internal Server Error")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl TwilioError {
    /// Twilio's code for it.
    pub fn code(&self) -> u32 {
        match self {
            Self::Unauthenticated => 20003,
            Self::NotFound(_) => 20404,
            Self::InvalidParameter(_) => 60200,
            Self::TooManyResources(..) => 20403,
            Self::MaxCheckAttempts => 60202,
            Self::MaxSendAttempts => 60203,
            Self::Landline => 60205,
            Self::EmailNotConfigured => 60217,
            Self::ChannelDisabled(_) => 60223,
            Self::Blocked { .. } => 60410,
            Self::DestinationRefused => 60605,
            Self::TooManyRequests { .. } => 20429,
            Self::Delivery(_) => 30008,
            Self::Unavailable(_) => 20503,
            Self::Internal(_) => 20500,
        }
    }
}

impl From<StoreError> for TwilioError {
    fn from(error: StoreError) -> Self {
        Self::Unavailable(error.into())
    }
}

/// The use cases' errors where the Twilio paths can meet them; a verification that is not
/// (or no longer) there is Twilio's 20404, as Twilio forgets ended verifications.
impl From<OtpError> for TwilioError {
    fn from(error: OtpError) -> Self {
        match error {
            OtpError::InvalidPhone
            | OtpError::UndeliverablePhone(_)
            | OtpError::InvalidEmail(_) => Self::InvalidParameter("To"),
            OtpError::EmailOff => Self::EmailNotConfigured,
            OtpError::InvalidLocale => Self::InvalidParameter("Locale"),
            OtpError::InvalidCode => Self::InvalidParameter("Code"),
            OtpError::DestinationRefused(_) => Self::DestinationRefused,
            OtpError::TooManyAttempts => Self::MaxCheckAttempts,
            OtpError::CodeExpired
            | OtpError::VerificationMismatch
            | OtpError::VerificationNotFound
            | OtpError::VerificationCanceled
            | OtpError::VerificationIdRequired => Self::NotFound("VerificationCheck".to_owned()),
            OtpError::ResendCooldown { retry_after }
            | OtpError::QuotaExceeded { retry_after }
            | OtpError::SmsThrottled { retry_after, .. } => Self::TooManyRequests { retry_after },
            OtpError::FraudRefused { retry_after } => Self::Blocked { retry_after },
            OtpError::SmsDelivery(_) => Self::Delivery(Channel::Sms),
            OtpError::EmailDelivery(_) => Self::Delivery(Channel::Email),
            OtpError::Store(error) => error.into(),
            other if other.is_service_failure() => Self::Unavailable(other.into()),
            other => Self::Internal(other.into()),
        }
    }
}

/// The TOTP use cases' errors on Twilio's Entities, Factors and Challenges: a lock and a
/// client's wrong codes are 20429 with `Retry-After`.
impl From<crate::totp::TotpError> for TwilioError {
    fn from(error: crate::totp::TotpError) -> Self {
        use crate::totp::{Setting, TotpError};
        match error {
            TotpError::Invalid(setting) => Self::InvalidParameter(match setting {
                Setting::Identity => "Identity",
                Setting::FriendlyName => "FriendlyName",
                Setting::Algorithm => "Config.Alg",
                Setting::Digits => "Config.CodeLength",
                Setting::Step => "Config.TimeStep",
                Setting::Skew => "Config.Skew",
                Setting::Issuer => "Totp.Issuer",
            }),
            TotpError::InvalidCode | TotpError::WrongCode { .. } => {
                Self::InvalidParameter("AuthPayload")
            }
            TotpError::EntityNotFound => Self::NotFound("Entity".to_owned()),
            TotpError::FactorNotFound | TotpError::NotVerified => {
                Self::NotFound("Factor".to_owned())
            }
            TotpError::ChallengeNotFound => Self::NotFound("Challenge".to_owned()),
            TotpError::TooManyFactors => {
                Self::TooManyResources("Factors", crate::totp::MAX_FACTORS)
            }
            TotpError::Locked { retry_after } | TotpError::QuotaExceeded { retry_after } => {
                Self::TooManyRequests { retry_after }
            }
            TotpError::Busy => Self::TooManyRequests {
                retry_after: Duration::from_secs(1),
            },
            TotpError::Store(error) => error.into(),
            TotpError::Internal(cause) => Self::Internal(cause.into()),
        }
    }
}

fn delivery_noun(channel: Channel) -> &'static str {
    match channel {
        Channel::Sms => "SMS",
        Channel::Email => "email",
    }
}
