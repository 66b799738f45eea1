//! What the proof-of-work gate is configured with (`VCODE_POW_*`, `VCODE_SEND_GATE`).

use std::fmt;
use std::time::Duration;

use crate::redact::REDACTED;

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

/// `Debug` hides the key.
#[derive(Clone)]
pub struct PowSettings {
    pub algorithm: PowAlgorithm,
    /// Iterations (or hashes) per solving step (`VCODE_POW_COST`).
    pub cost: u32,
    /// The difficulty (`VCODE_POW_MAX_COUNTER`): a challenge takes from half of this to this
    /// many steps to solve.
    pub max_counter: u32,
    /// How long a challenge can be solved and used (`VCODE_POW_TTL_SECS`).
    pub ttl: Duration,
    /// Signs challenges (`VCODE_POW_HMAC_KEY`); unset, each process draws its own.
    pub hmac_key: Option<String>,
    /// `otp/send` needs a solved challenge first (`VCODE_SEND_GATE` with `pow`).
    pub send_requires_pow: bool,
}

impl PowSettings {
    /// The shortest `VCODE_POW_HMAC_KEY` accepted.
    pub const MIN_KEY_LEN: usize = 32;
}

impl Default for PowSettings {
    fn default() -> Self {
        Self {
            algorithm: PowAlgorithm::Pbkdf2Sha256,
            cost: 5_000,
            max_counter: 5_000,
            ttl: Duration::from_secs(300),
            hmac_key: None,
            send_requires_pow: false,
        }
    }
}

impl fmt::Debug for PowSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            algorithm,
            cost,
            max_counter,
            ttl,
            hmac_key,
            send_requires_pow,
        } = self;
        f.debug_struct("PowSettings")
            .field("algorithm", &algorithm.as_str())
            .field("cost", cost)
            .field("max_counter", max_counter)
            .field("ttl", ttl)
            .field("hmac_key", &hmac_key.as_ref().map(|_| REDACTED))
            .field("send_requires_pow", send_requires_pow)
            .finish()
    }
}
