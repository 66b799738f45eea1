//! Captchas: the answer of a creation, the body of a verify, and the `verified` answer that the
//! captcha and proof-of-work verifies share.

use serde::{Deserialize, Serialize};

/// `POST /api/v1/captcha`'s answer. The fields are in the order the service has always written
/// them (alphabetical).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CaptchaCreated {
    pub captcha_id: String,
    /// Seconds until the captcha expires.
    pub expires_in: u64,
    /// Where the picture is: [`crate::paths::captcha_image`] of the id.
    pub image_url: String,
}

/// `POST /api/v1/captcha/verify`. Both fields may be left out: a missing id or answer is a
/// wrong captcha (40020), not a malformed request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CaptchaVerifyRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captcha_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

impl CaptchaVerifyRequest {
    pub fn new(captcha_id: impl Into<String>, answer: impl Into<String>) -> Self {
        Self {
            captcha_id: Some(captcha_id.into()),
            answer: Some(answer.into()),
        }
    }
}

/// The answer of a captcha or proof-of-work verify that passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Verified {
    pub verified: bool,
}
