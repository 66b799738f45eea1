//! Delivery receipts as the providers post them: Twilio's `StatusCallback` (a form signed with
//! `X-Twilio-Signature`), Aliyun's `SmsReport` and Tencent's status callback (JSON arrays,
//! unsigned: their URL carries a secret token), and the webhook gateway's own receipt (signed
//! as vcode signs its requests). Each module authenticates and parses one of them into
//! [`Report`]s; what a report does to a verification is the use case's business.

pub mod aliyun;
pub mod tencent;
pub mod twilio;
pub mod webhook;

use subtle::ConstantTimeEq;

/// What a provider said of one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reported {
    /// Accepted, queued or on its way: no final word yet.
    Sent,
    Delivered,
    Undelivered,
}

/// One receipt of one message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The provider's id of the message, as its send answered it.
    pub message_id: String,
    pub reported: Reported,
    /// The provider's error code, for `Undelivered`.
    pub error_code: Option<String>,
}

/// Why a receipt was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    /// Wrong or missing signature or token: nothing was read.
    #[error("the receipt's signature or token is wrong or missing")]
    Unauthenticated,
    #[error("malformed receipt: {0}")]
    Malformed(&'static str),
}

/// The longest message id kept; no provider's comes near.
const MAX_MESSAGE_ID: usize = 128;

/// A message id as the stores key it: 1 to 128 visible ASCII characters, no braces (a Redis
/// hash tag) and no spaces.
pub fn message_id(raw: &str) -> Result<String, ReportError> {
    let fits = (1..=MAX_MESSAGE_ID).contains(&raw.len())
        && raw
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'{' && b != b'}');
    fits.then(|| raw.to_owned())
        .ok_or(ReportError::Malformed("message id"))
}

/// An error code as kept: short visible text, or none.
fn error_code(raw: Option<&str>) -> Option<String> {
    raw.map(str::trim)
        .filter(|code| !code.is_empty())
        .map(|code| code.chars().filter(|c| !c.is_control()).take(64).collect())
}

/// Whether `given` is `expected`, in time independent of where they differ.
pub fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    given.ct_eq(expected).into()
}
