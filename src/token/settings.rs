//! What verification tokens are configured with (`VCODE_TOKEN_*`). The signing keys are a
//! secret (`VCODE_TOKEN_KEY` or `VCODE_TOKEN_KEY_FILE`), read in `config::secrets`.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::claim_text;
use crate::config::text::{Secs, parse_text, show_text};

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default)]
pub struct TokenSettings {
    /// The `iss` claim: who vouches for the phone (a backend checks it).
    #[serde(rename = "VCODE_TOKEN_ISSUER", with = "issuer")]
    pub issuer: String,
    /// How long a token is valid after the verify (`exp` − `iat`).
    #[serde(rename = "VCODE_TOKEN_TTL_SECS", with = "Secs::<10, 86_400>")]
    pub ttl: Duration,
}

impl Default for TokenSettings {
    fn default() -> Self {
        Self {
            issuer: "vcode".to_owned(),
            ttl: Duration::from_secs(300),
        }
    }
}

mod issuer {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        parse_text(d, |raw| {
            claim_text(raw)
                .map(str::to_owned)
                .ok_or_else(|| super::super::CLAIM_TEXT_RULE.to_owned())
        })
    }

    pub fn serialize<S: Serializer>(issuer: &str, s: S) -> Result<S::Ok, S::Error> {
        show_text(issuer, s)
    }
}
