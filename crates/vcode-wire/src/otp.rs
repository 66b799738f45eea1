//! One-time codes: the bodies of `otp/send` and `otp/verify`, their answers, and the data of
//! the errors that carry some.

use serde::{Deserialize, Serialize};

/// `POST /api/v1/otp/send`. Only `phone` is required; the gate fields are needed only when the
/// service gates sends (`VCODE_SEND_GATE`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendRequest {
    /// E.164, or national in the service's default region.
    pub phone: String,
    /// One of the service's purposes; `login` when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    /// The SMS template's language.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locale: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captcha_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captcha_answer: Option<String>,
    /// An ALTCHA proof-of-work payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub altcha: Option<String>,
}

impl SendRequest {
    /// A send for `phone` with every optional field left out.
    pub fn new(phone: impl Into<String>) -> Self {
        Self {
            phone: phone.into(),
            ..Self::default()
        }
    }
}

/// `POST /api/v1/otp/verify`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyRequest {
    pub phone: String,
    pub code: String,
    /// `login` when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    /// The token's `aud` claim: who the token is for (the backend that will check it), 1 to
    /// 256 visible ASCII characters. Left out: the token has no `aud`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
}

impl VerifyRequest {
    /// A verify of `code` for `phone` and the default purpose.
    pub fn new(phone: impl Into<String>, code: impl Into<String>) -> Self {
        Self {
            phone: phone.into(),
            code: code.into(),
            purpose: None,
            audience: None,
        }
    }
}

/// A send's answer: the code was stored and its SMS delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendData {
    /// Seconds until the code expires.
    pub expires_in: u64,
    /// Seconds until another send may deliver an SMS (the resend cooldown).
    pub resend_after: u64,
}

/// A verify's answer: the code matched and is gone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyData {
    pub verified: bool,
    /// A signed token (JWT) a backend can check without calling the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// The data of 40010 (wrong code).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrongCodeData {
    /// Failed attempts the code survives; the next failure beyond them destroys it (42901).
    pub remaining_attempts: u32,
}

/// The data of 42900 (resend cooldown) and 42902 (quota), also sent as `Retry-After`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryAfterData {
    /// Whole seconds, rounded up: a client that waits this long is never early.
    pub retry_after: u64,
}
