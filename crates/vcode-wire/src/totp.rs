//! Authenticator apps (TOTP factors) on `/api/v1/totp/{identity}/…`: enrol, confirm, verify,
//! list and remove an identity's factors. API-key callers only.

use serde::{Deserialize, Serialize};

/// `POST /api/v1/totp/{identity}/factors`: a new factor. Every field may be left out.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TotpEnrolRequest {
    /// The name the authenticator app shows for the account (default: the identity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub friendly_name: Option<String>,
    /// The name the app shows above it (default: `vcode`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// `sha1` (the default, what every app reads), `sha256` or `sha512`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    /// 6 (default) to 8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digits: Option<u8>,
    /// Seconds a code lasts: 20 to 60, 30 by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<u64>,
    /// Steps accepted each way around now: 0 or 1 (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skew: Option<u8>,
}

/// A factor as shown (never its secret but in the enrolment's answer).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TotpFactorData {
    /// `YF` and 32 hex digits.
    pub factor_id: String,
    pub identity: String,
    pub friendly_name: String,
    /// `unverified` until its first right code, then `verified`.
    pub status: String,
    pub algorithm: String,
    pub digits: u8,
    pub period: u64,
    pub skew: u8,
    /// Unix seconds.
    pub created_at: u64,
}

/// The enrolment's answer: the factor, and once only its secret, URI and QR code.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TotpEnrolData {
    pub factor: TotpFactorData,
    /// The secret in unpadded base32 (160 bits), for typing into an app.
    pub secret: String,
    /// `otpauth://totp/<issuer>:<name>?secret=…&issuer=…&algorithm=…&digits=…&period=…`.
    pub uri: String,
    /// A QR code of `uri`: a PNG, base64.
    pub qr_png: String,
}

/// The identity's factors.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TotpFactorsData {
    pub factors: Vec<TotpFactorData>,
}

/// `POST /api/v1/totp/{identity}/factors/{factor_id}/confirm`: the factor's first code.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TotpConfirmRequest {
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^[0-9]{6,8}$", examples("123456"))
    )]
    pub code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_user_ip: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_user_id: Option<String>,
}

/// `POST /api/v1/totp/{identity}/verify`: a code of a verified factor; answers
/// [`crate::VerifyData`] with the token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TotpVerifyRequest {
    pub factor_id: String,
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^[0-9]{6,8}$", examples("123456"))
    )]
    pub code: String,
    /// The token's `purpose`: one of the configured purposes (`login` by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// The end user's address: its wrong codes count as a verify's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_user_ip: Option<String>,
    /// Or the tenant's own key for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_user_id: Option<String>,
}
