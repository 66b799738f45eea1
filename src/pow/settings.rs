//! What the proof-of-work gate is configured with (`VCODE_POW_*`). Each field's serde name is
//! its variable; the defaults are the `Default` impl. Challenges are signed with a key derived
//! from `VCODE_SECRET_KEY`, which every instance sharing a store has.

use std::time::Duration;

use secrecy::ExposeSecret;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::Digest;

use crate::config::secret::Secret;

use crate::config::text::{Secs, Whole, parse_text, show_text};

/// The key derivation a solver repeats; both are what the widget solves with WebCrypto.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PowAlgorithm {
    /// `cost` PBKDF2-HMAC-SHA-256 iterations per step.
    #[default]
    Pbkdf2Sha256,
    /// `cost` chained SHA-256 hashes per step.
    Sha256,
}

impl PowAlgorithm {
    /// The name in the protocol and in `VCODE_POW_ALGORITHM`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pbkdf2Sha256 => "PBKDF2/SHA-256",
            Self::Sha256 => "SHA-256",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        [Self::Pbkdf2Sha256, Self::Sha256]
            .into_iter()
            .find(|algorithm| algorithm.as_str().eq_ignore_ascii_case(raw))
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default)]
pub struct PowSettings {
    #[serde(rename = "VCODE_POW_ALGORITHM", with = "algorithm")]
    pub algorithm: PowAlgorithm,
    /// Iterations (or hashes) per solving step.
    #[serde(rename = "VCODE_POW_COST", with = "Whole::<1, 1_000_000>")]
    pub cost: u32,
    /// The difficulty: a challenge takes from half of this to this many steps to solve.
    #[serde(rename = "VCODE_POW_MAX_COUNTER", with = "Whole::<2, 100_000_000>")]
    pub max_counter: u32,
    /// How long a challenge can be solved and used.
    #[serde(rename = "VCODE_POW_TTL_SECS", with = "Secs::<10, 3600>")]
    pub ttl: Duration,
    /// `otp/send` needs a solved challenge first (`VCODE_SEND_GATE` with `pow`).
    #[serde(skip)]
    pub send_requires_pow: bool,
    /// `VCODE_POW_HMAC_KEY[_FILE]`: signs the challenges instead of the key derived from
    /// `VCODE_SECRET_KEY`, so that the two can be rotated apart.
    #[serde(skip)]
    pub hmac_key: Option<Secret>,
}

impl PowSettings {
    /// The key challenges are signed with: the configured one's SHA-256, else `derived`.
    pub fn signing_key(&self, derived: [u8; 32]) -> [u8; 32] {
        self.hmac_key.as_ref().map_or(derived, |key| {
            sha2::Sha256::digest(key.expose_secret().as_bytes()).into()
        })
    }
}

impl Default for PowSettings {
    fn default() -> Self {
        Self {
            algorithm: PowAlgorithm::Pbkdf2Sha256,
            cost: 5_000,
            max_counter: 5_000,
            ttl: Duration::from_secs(300),
            send_requires_pow: false,
            hmac_key: None,
        }
    }
}

mod algorithm {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PowAlgorithm, D::Error> {
        parse_text(d, |raw| {
            PowAlgorithm::parse(raw).ok_or_else(|| "expected PBKDF2/SHA-256 or SHA-256".to_owned())
        })
    }

    pub fn serialize<S: Serializer>(algorithm: &PowAlgorithm, s: S) -> Result<S::Ok, S::Error> {
        show_text(algorithm.as_str(), s)
    }
}
