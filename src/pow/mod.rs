//! The proof-of-work gate (ALTCHA PoW v2, with the `altcha` crate): signed challenges that
//! take a browser a few seconds to solve, and the check of a solved one, accepted once — the
//! challenge is recorded in the store until it expires, so a replay on any instance sharing
//! the store is refused. See `docs/pow.md`.

mod settings;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use altcha::{
    Challenge, CreateChallengeOptions, Payload, VerifySolutionOptions, create_challenge,
    verify_solution,
};
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::stats::{Event, Stats};
use crate::store::{PowReplayStore, StoreError};

pub use self::settings::{PowAlgorithm, PowSettings};

/// How long a solved challenge stays recorded past its expiry: instances whose clocks differ
/// by up to this much still refuse its replay.
const CLOCK_SKEW_MARGIN: Duration = Duration::from_secs(60);

/// The largest payload read: a widget's payload is about 700 bytes.
const MAX_PAYLOAD_LEN: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum PowError {
    /// Missing, malformed, foreign, tampered, wrong, expired or used: the client is told only
    /// that it was refused; the log says why.
    #[error("proof of work refused: {0}")]
    Refused(Refusal),
    #[error("proof-of-work challenge not created")]
    Challenge(#[source] altcha::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a payload was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("no payload")]
    Missing,
    #[error("not a base64 ALTCHA v2 payload")]
    Malformed,
    #[error("challenge expired")]
    Expired,
    /// Not signed with this service's key: made elsewhere, or altered.
    #[error("challenge not signed by this service")]
    BadSignature,
    #[error("wrong solution")]
    WrongSolution,
    #[error("challenge already used")]
    AlreadyUsed,
}

/// A challenge accepted and recorded as used, which [`PowService::give_back`] can free again.
#[derive(Debug)]
pub struct SolvedPow {
    digest: String,
}

pub struct PowService {
    replays: Arc<dyn PowReplayStore>,
    settings: PowSettings,
    /// Signs a challenge's parameters (the `signature` the client sends back).
    signature_secret: String,
    /// Signs the expected derived key (`keySignature`), so a verify is one HMAC, not one
    /// key derivation.
    key_signature_secret: String,
    stats: Arc<Stats>,
}

impl PowService {
    /// `key` signs the challenges: the same key on every instance sharing the store, or a
    /// challenge from one instance is refused by another. Two secrets are derived from it, one
    /// per use.
    pub fn new(
        replays: Arc<dyn PowReplayStore>,
        settings: PowSettings,
        key: &[u8],
        stats: Arc<Stats>,
    ) -> Self {
        Self {
            replays,
            settings,
            signature_secret: derive_secret(key, b"vcode pow: challenge signature"),
            key_signature_secret: derive_secret(key, b"vcode pow: derived-key signature"),
            stats,
        }
    }

    pub fn settings(&self) -> &PowSettings {
        &self.settings
    }

    /// A new signed challenge, as the widget expects it. Creating one derives its key once
    /// (the cost of one solving step), off the async workers.
    pub async fn challenge(self: &Arc<Self>) -> Result<Challenge, PowError> {
        let service = Arc::clone(self);
        match tokio::task::spawn_blocking(move || service.create_challenge()).await {
            Ok(result) => result,
            Err(join_error) => std::panic::resume_unwind(join_error.into_panic()),
        }
    }

    /// Deterministic mode: the server picks the counter the solver must reach, so every
    /// challenge costs between half and all of `max_counter` derivations.
    fn create_challenge(&self) -> Result<Challenge, PowError> {
        let max = self.settings.max_counter;
        let counter = rand::random_range(max / 2..=max);
        let expires_at = unix_now()
            .saturating_add(self.settings.ttl)
            .as_secs()
            .try_into()
            .unwrap_or(i64::MAX);
        let challenge = create_challenge(CreateChallengeOptions {
            algorithm: self.settings.algorithm.as_str().to_owned(),
            cost: self.settings.cost,
            counter: Some(counter),
            expires_at: Some(expires_at),
            hmac_signature_secret: Some(self.signature_secret.clone()),
            hmac_key_signature_secret: Some(self.key_signature_secret.clone()),
            ..CreateChallengeOptions::default()
        })
        .map_err(PowError::Challenge)?;
        tracing::debug!(counter, "proof-of-work challenge created");
        self.stats.record(Event::PowChallenge);
        Ok(challenge)
    }

    /// Checks a solved challenge (the base64 payload the widget produces) and records it, so
    /// that it is accepted once. Nothing is recorded for a refused payload.
    pub async fn verify(&self, payload: Option<&str>) -> Result<SolvedPow, PowError> {
        match self.check(payload).await {
            Ok(solved) => {
                tracing::info!("proof of work accepted");
                self.stats.record(Event::PowSolved);
                Ok(solved)
            }
            Err(PowError::Refused(refusal)) => {
                tracing::info!(%refusal, "proof of work refused");
                self.stats.record(Event::PowRefused);
                Err(PowError::Refused(refusal))
            }
            Err(error) => Err(error),
        }
    }

    /// Accepts a solved challenge once more: what it bought failed on the server side before
    /// any SMS went out (the client's retry must not have to solve again). A give-back that
    /// cannot reach the store is logged, and the challenge stays used.
    pub async fn give_back(&self, solved: SolvedPow) {
        match self.replays.forget_solved_pow(&solved.digest).await {
            Ok(()) => tracing::info!("proof of work given back: the send failed before any SMS"),
            Err(error) => {
                tracing::warn!(%error, "proof of work not given back: the store did not answer");
            }
        }
    }

    async fn check(&self, payload: Option<&str>) -> Result<SolvedPow, PowError> {
        let payload = payload
            .map(str::trim)
            .filter(|payload| !payload.is_empty())
            .ok_or(PowError::Refused(Refusal::Missing))?;
        let payload = decode(payload).ok_or(PowError::Refused(Refusal::Malformed))?;
        let challenge = &payload.challenge;
        // Every challenge this service signs expires; one without an expiry is not ours.
        let expires_at = challenge
            .parameters
            .expires_at
            .and_then(|secs| u64::try_from(secs).ok())
            .filter(|secs| *secs > 0)
            .ok_or(PowError::Refused(Refusal::BadSignature))?;
        let result = verify_solution(VerifySolutionOptions {
            hmac_key_signature_secret: Some(self.key_signature_secret.clone()),
            ..VerifySolutionOptions::new(challenge, &payload.solution, &self.signature_secret)
        })
        // Only unreadable hex in a signed challenge gets here: not one of ours.
        .map_err(|_| PowError::Refused(Refusal::Malformed))?;
        if result.expired {
            return Err(PowError::Refused(Refusal::Expired));
        }
        if result.invalid_signature != Some(false) {
            return Err(PowError::Refused(Refusal::BadSignature));
        }
        if !result.verified {
            return Err(PowError::Refused(Refusal::WrongSolution));
        }
        // The signature is verified, so it names exactly one challenge this service issued.
        let signature = challenge.signature.as_deref().unwrap_or_default();
        let keep = Duration::from_secs(expires_at)
            .saturating_sub(unix_now())
            .saturating_add(CLOCK_SKEW_MARGIN);
        let digest = challenge_digest(signature);
        if self.replays.record_solved_pow(&digest, keep).await? {
            Ok(SolvedPow { digest })
        } else {
            Err(PowError::Refused(Refusal::AlreadyUsed))
        }
    }
}

/// A random key for one process: enough for one instance, refused by any other.
pub fn random_key() -> [u8; 32] {
    rand::random()
}

/// A secret for one use of `key`, as the hex the `altcha` crate takes.
fn derive_secret(key: &[u8], purpose: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(purpose);
    hex(&mac.finalize().into_bytes())
}

/// The store's name for a challenge: 128 bits of the digest of its signature.
fn challenge_digest(signature: &str) -> String {
    hex(&Sha256::digest(signature.as_bytes())[..16])
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The widget's payload: base64 (standard alphabet, as `btoa` writes it) of the JSON
/// `{"challenge": {"parameters", "signature"}, "solution": {"counter", "derivedKey"}}`.
fn decode(payload: &str) -> Option<Payload> {
    if payload.len() > MAX_PAYLOAD_LEN {
        return None;
    }
    let json = base64::engine::general_purpose::STANDARD
        .decode(payload)
        .ok()?;
    serde_json::from_slice(&json).ok()
}

fn unix_now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
