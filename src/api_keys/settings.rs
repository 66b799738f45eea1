//! `VCODE_REQUIRE_API_KEY`: the operations that need an API key. The keys themselves are a
//! secret (`VCODE_API_KEYS` or `VCODE_API_KEYS_FILE`), read in `config::secrets`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::config::text::{list, parse_text, show_text};

/// An operation a key can be required for. Captcha and proof-of-work routes are not among
/// them: a browser calls those (an `<img>` cannot send a header), and a key shipped to
/// browsers is no secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Send,
    /// `otp/verify`, and canceling a verification.
    Verify,
    /// Reading a verification (`GET /otp/verifications/{id}`).
    Status,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Send => "send",
            Self::Verify => "verify",
            Self::Status => "status",
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct ApiKeySettings {
    /// `send`, `verify`, `status`, several (comma-separated) or `none` (the default).
    #[serde(rename = "VCODE_REQUIRE_API_KEY", with = "operations")]
    pub required: Vec<Operation>,
}

mod operations {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Operation>, D::Error> {
        parse_text(d, |raw| {
            if raw.trim().eq_ignore_ascii_case("none") {
                return Ok(Vec::new());
            }
            let mut operations = list(raw, |item| {
                [Operation::Send, Operation::Verify, Operation::Status]
                    .into_iter()
                    .find(|operation| operation.as_str().eq_ignore_ascii_case(item))
                    .ok_or(format!(
                        "{item:?}: expected none, or send, verify and status (comma-separated)"
                    ))
            })?;
            operations.dedup();
            Ok(operations)
        })
    }

    pub fn serialize<S: Serializer>(operations: &[Operation], s: S) -> Result<S::Ok, S::Error> {
        let names: Vec<&str> = operations
            .iter()
            .map(|operation| operation.as_str())
            .collect();
        if names.is_empty() {
            show_text("none", s)
        } else {
            show_text(names.join(","), s)
        }
    }
}
