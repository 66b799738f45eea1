//! Delivery receipts as the providers post them: Twilio's `StatusCallback` (a form signed with
//! `X-Twilio-Signature`), Aliyun's `SmsReport` and Tencent's status callback (JSON arrays,
//! unsigned: their URL carries a secret token), and the webhook gateway's own receipt (signed
//! as vcode signs its requests). Each module authenticates and parses one of them into
//! [`Report`]s; what a report does to a verification is the use case's business.

pub mod aliyun;
pub mod tencent;
pub mod twilio;
pub mod webhook;

use std::fmt;

use secrecy::SecretString;
use subtle::ConstantTimeEq;

use crate::config::redact::REDACTED;

/// Whether receipts are on, where the providers post them, and the token of the unsigned ones.
#[derive(Clone, Default)]
pub struct ReceiptSettings {
    /// vcode's public URL as the providers reach it (`VCODE_SMS_RECEIPTS_URL`, no trailing
    /// `/`); receipts are on when it is set.
    pub public_url: Option<String>,
    /// What Aliyun's and Tencent's receipt URLs carry as `?token=` (`VCODE_SMS_RECEIPTS_TOKEN`).
    pub token: Option<SecretString>,
}

impl ReceiptSettings {
    pub fn enabled(&self) -> bool {
        self.public_url.is_some()
    }

    /// The public URL of the route at `path`, when receipts are on.
    pub fn url_of(&self, path: &str) -> Option<String> {
        self.public_url.as_ref().map(|base| [base, path].concat())
    }
}

impl fmt::Debug for ReceiptSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReceiptSettings")
            .field("public_url", &self.public_url)
            .field("token", &self.token.as_ref().map(|_| REDACTED))
            .finish()
    }
}

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
/// hash tag), no spaces and no `;` (it separates an event's detail).
pub fn message_id(raw: &str) -> Result<String, ReportError> {
    let fits = (1..=MAX_MESSAGE_ID).contains(&raw.len())
        && raw
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'{' | b'}' | b';'));
    fits.then(|| raw.to_owned())
        .ok_or(ReportError::Malformed("message id"))
}

/// An error code as kept: short visible text without `;` (an event's detail separator), or none.
fn error_code(raw: Option<&str>) -> Option<String> {
    raw.map(|code| {
        code.trim()
            .chars()
            .filter(|c| !c.is_control() && *c != ';')
            .take(64)
            .collect::<String>()
    })
    .filter(|code| !code.is_empty())
}

/// Whether `given` is `expected`, in time independent of where they differ.
pub fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    given.ct_eq(expected).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_codes_keep_no_detail_separator() {
        assert!(message_id("SM0123abcd").is_ok());
        assert!(message_id("SM01;error_code=0").is_err());
        assert!(message_id("{tag}").is_err());
        assert_eq!(error_code(Some(" 30;003 ")).as_deref(), Some("30003"));
        assert_eq!(error_code(Some(" ; ")), None);
        assert_eq!(error_code(None), None);
    }
}
