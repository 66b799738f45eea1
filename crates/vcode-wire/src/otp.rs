//! One-time codes: the bodies of `otp/send` and `otp/verify`, their answers, and the data of
//! the errors that carry some.

use serde::{Deserialize, Serialize};

/// `POST /api/v1/otp/send`. Only the destination is required: `phone` (by SMS) or `email` (by
/// mail), exactly one of them (40000 otherwise); the gate fields are needed only when the
/// service gates sends (`VCODE_SEND_GATE`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SendRequest {
    /// E.164, or national in the service's default region. Not with `email`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(examples("+8613800138000", "13800138000")))]
    pub phone: Option<String>,
    /// An email address (`local@domain`, at most 254 characters; no display name, comment,
    /// quotes or line breaks: 40008): the code goes by mail. Not with `phone`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(max_length = 1024, examples("user@example.com"))
    )]
    pub email: Option<String>,
    /// One of the service's purposes; `login` when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^[a-z0-9_-]{1,32}$", examples("login"))
    )]
    pub purpose: Option<String>,
    /// The SMS template's language (BCP 47).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(examples("zh-CN", "en")))]
    pub locale: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captcha_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captcha_answer: Option<String>,
    /// An ALTCHA proof-of-work payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub altcha: Option<String>,
    /// API-key callers only (40000 otherwise): the address of the end user the caller asks
    /// for, metered by the per-client limits as a browser's address is (IPv6 by its /64). Not
    /// with `end_user_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(examples("203.0.113.7", "2001:db8::1")))]
    pub end_user_ip: Option<String>,
    /// API-key callers only (40000 otherwise): the caller's own key for its end user (an
    /// account id, a session), 1 to 255 visible ASCII characters, metered as `end_user_ip` is
    /// and kept only as a keyed digest. Not with `end_user_ip`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 255,
            pattern = "^[\\x21-\\x7e]+$",
            examples("user-42")
        )
    )]
    pub end_user_id: Option<String>,
}

impl SendRequest {
    /// A send for `phone` with every optional field left out.
    pub fn new(phone: impl Into<String>) -> Self {
        Self {
            phone: Some(phone.into()),
            ..Self::default()
        }
    }

    /// A send by mail to `email` with every optional field left out.
    pub fn email(email: impl Into<String>) -> Self {
        Self {
            email: Some(email.into()),
            ..Self::default()
        }
    }
}

/// `POST /api/v1/otp/verify`: the code and the `verification_id` its send answered (by phone
/// instead where the service allows it, `VCODE_VERIFY_BY`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VerifyRequest {
    /// What `otp/send` answered; required unless the service verifies by phone (40006).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^[A-Za-z0-9_-]{22}$", examples("q3Vd0m9YyTnJkqW8cXoB4A"))
    )]
    pub verification_id: Option<String>,
    /// Required when verifying by phone; with a `verification_id`, it must be the
    /// verification's if given (40007).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(examples("+8613800138000")))]
    pub phone: Option<String>,
    /// `phone`'s counterpart for a code sent by mail: required when verifying an address
    /// without an id; with a `verification_id`, it must be the verification's if given
    /// (40007). Not with `phone`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(max_length = 1024, examples("user@example.com"))
    )]
    pub email: Option<String>,
    /// The digits of the SMS (`VCODE_CODE_LENGTH` of them, 6 by default).
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^[0-9]{4,10}$", examples("123456"))
    )]
    pub code: String,
    /// By phone, `login` when left out; with a `verification_id`, it must be the
    /// verification's if given (40007).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^[a-z0-9_-]{1,32}$", examples("login"))
    )]
    pub purpose: Option<String>,
    /// The token's `aud` claim: who the token is for (the backend that will check it), 1 to
    /// 256 visible ASCII characters. Left out: the token has no `aud`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 256,
            pattern = "^[\\x21-\\x7e]+$",
            examples("https://backend.example")
        )
    )]
    pub audience: Option<String>,
    /// API-key callers only (40000 otherwise): the address of the end user the caller asks
    /// for, metered by the per-client limits as a browser's address is (IPv6 by its /64). Not
    /// with `end_user_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(examples("203.0.113.7", "2001:db8::1")))]
    pub end_user_ip: Option<String>,
    /// API-key callers only (40000 otherwise): the caller's own key for its end user (an
    /// account id, a session), 1 to 255 visible ASCII characters, metered as `end_user_ip` is
    /// and kept only as a keyed digest. Not with `end_user_ip`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 255,
            pattern = "^[\\x21-\\x7e]+$",
            examples("user-42")
        )
    )]
    pub end_user_id: Option<String>,
}

impl VerifyRequest {
    /// A verify of `code` under the `verification_id` its send answered.
    pub fn with_id(verification_id: impl Into<String>, code: impl Into<String>) -> Self {
        Self {
            verification_id: Some(verification_id.into()),
            code: code.into(),
            ..Self::default()
        }
    }

    /// A verify of `code` for `phone` and the default purpose, without an id (for a service
    /// that verifies by phone).
    pub fn new(phone: impl Into<String>, code: impl Into<String>) -> Self {
        Self {
            phone: Some(phone.into()),
            code: code.into(),
            ..Self::default()
        }
    }
}

/// A send's answer: the code was stored and its SMS handed to the provider.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SendData {
    /// This send's own id (128 unguessable bits, URL-safe base64): `otp/verify` takes it with the
    /// code, and only guesses under it count against it. Every send answers a new one, also
    /// when it re-sends the pending code. Empty only from a service that predates ids.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(required = true, examples("q3Vd0m9YyTnJkqW8cXoB4A"))
    )]
    pub verification_id: String,
    /// Seconds until the code expires.
    pub expires_in: u64,
    /// Seconds until another send may deliver an SMS (the resend cooldown).
    pub resend_after: u64,
    /// Whether the provider confirmed it took the SMS. Either way the code is pending and
    /// verifies; read as `sent` from a service that predates the field.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub delivery: Delivery,
}

/// What the SMS provider said of a send's message (a send answers `sent` or `unconfirmed`; a
/// verification may show its receipts' `delivered` or `undelivered`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// The provider accepted the SMS.
    #[default]
    Sent,
    /// The request reached the provider but no answer came (a timeout, a cut connection): the
    /// SMS may still arrive, and its code verifies. Nothing was rolled back and no other
    /// provider was tried; after `resend_after` a send delivers the pending code again
    /// (`VCODE_RESEND=reuse`, the default).
    Unconfirmed,
    /// The provider's delivery receipt: the handset got it.
    Delivered,
    /// The provider's delivery receipt: it will not arrive (`delivery_error` says why).
    Undelivered,
}

/// Where a verification stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum VerificationStatus {
    /// Its code is pending and this id may verify it.
    Pending,
    /// Its code was verified under this id.
    Approved,
    /// Canceled: this id no longer verifies.
    Canceled,
    /// Its code is no longer pending (expired, replaced by a `rotate` resend, verified under
    /// another id or by phone), or the id's own time has passed.
    Expired,
    /// Its attempts are spent (42901); the code may still verify under its other ids.
    MaxAttemptsReached,
}

/// `GET /api/v1/otp/verifications/{id}` and its `cancel`: one send's verification.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VerificationData {
    pub verification_id: String,
    pub status: VerificationStatus,
    /// What the SMS provider said of this send's message: at the send, then in its delivery
    /// receipts.
    pub delivery: Delivery,
    /// The provider's error code, with `undelivered` (Twilio's `ErrorCode`, Aliyun's
    /// `err_code`, Tencent's `errmsg`, the gateway's `error_code`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(examples("30003")))]
    pub delivery_error: Option<String>,
    /// Wrong codes this id may still try (0 once it is no longer pending).
    pub remaining_attempts: u32,
    /// Unix seconds.
    pub created_at: u64,
    /// Unix seconds: the id verifies until then.
    pub expires_at: u64,
    /// Masked, as logs show it; absent for an email verification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(examples("+86138****8000")))]
    pub phone: Option<String>,
    /// Masked, as logs show it; absent for an SMS verification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(examples("u***@example.com")))]
    pub email: Option<String>,
    #[cfg_attr(feature = "openapi", schema(examples("login")))]
    pub purpose: String,
}

/// A verify's answer: the code matched and is gone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VerifyData {
    pub verified: bool,
    /// A signed token (JWT) a backend can check without calling the service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// The data of 40010 (wrong code).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WrongCodeData {
    /// Failed attempts the code survives; the next failure beyond them destroys it (42901).
    pub remaining_attempts: u32,
}

/// The data of 42900 (resend cooldown) and 42902 (a quota: vcode's own, or the SMS provider's
/// limit on the number or the account), also sent as `Retry-After`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RetryAfterData {
    /// Whole seconds, rounded up: a client that waits this long is never early.
    pub retry_after: u64,
}
