//! Dev-mode routes (loopback only), which let tests and load tests act as a user who reads the
//! SMS or the picture: the outbox query and answer, and a captcha's answer.

use serde::{Deserialize, Serialize};

/// `GET /api/v1/dev/inbox?phone=` or `?email=` (exactly one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DevInboxQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
}

/// The outbox's answer: the messages "sent" to the phone, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DevInboxData {
    pub messages: Vec<DevMessage>,
}

/// One SMS as the outbox tells it. The fields are in the order the service has always written
/// them (alphabetical).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DevMessage {
    pub code: String,
    /// The destination as the stores key it: E.164, or for a mail the address folded to
    /// lower case (the field keeps its name from before email).
    pub phone: String,
    pub purpose: String,
    /// When the SMS went out, in milliseconds since the Unix epoch (the server's clock).
    pub sent_at_ms: u64,
}

/// `GET /api/v1/dev/captcha/{id}`'s answer; the captcha stays unused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CaptchaAnswer {
    pub answer: String,
}
