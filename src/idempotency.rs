//! Idempotency keys: the first run of an operation under a key runs; a repeat with the same
//! request gets the kept result without running again; a repeat with another request is refused;
//! a repeat while the first still runs waits for its result (bounded). Only results worth
//! keeping are kept (for a send: one that stored a code or sent an SMS); anything else frees
//! the key, so the client's retry runs again. A key freed while the store does not answer is
//! freed again and again in the background until the store does, within the lease; and a
//! claim the store runs after its caller gave up claims nothing. Keys are per API-key caller:
//! one caller's key is never another's record. The store sees the records as opaque bytes.

use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::api_keys::ApiKeyName;
use crate::store::{IdempotencyStore, StoreError};

/// How long a running first request keeps its key before a repeat may take over (a crashed
/// instance must not block a key for its whole retention).
const LEASE: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(25);
/// How often a key whose release could not reach the store is released again.
const RELEASE_RETRY: Duration = Duration::from_millis(250);

/// A client's key as stored: a digest, so any header value makes a short, safe store key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// The key from its raw value (1 to 255 visible ASCII characters) as `caller` uses it: the
    /// name of the API key the request presented, `None` where the operation needs no key.
    /// Callers do not share keys: another caller's same key is a record of its own, so no
    /// caller reads (or blocks) another's answers by guessing its keys.
    pub fn parse(raw: &[u8], caller: Option<&ApiKeyName>) -> Option<Self> {
        let valid = (1..=255).contains(&raw.len()) && raw.iter().all(u8::is_ascii_graphic);
        if !valid {
            return None;
        }
        Some(Self(match caller {
            // Without a caller, the digest keys had before callers were told apart.
            None => hex_digest(raw),
            // A NUL is in neither a name nor a key: `name\0key` never equals another caller's
            // (or a caller-less) input.
            Some(name) => hex_digest(&[name.as_str().as_bytes(), b"\0", raw].concat()),
        }))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A digest of the (normalised) request a key was first used with.
pub fn fingerprint(request: &impl Serialize) -> String {
    hex_digest(&serde_json::to_vec(request).unwrap_or_default())
}

fn hex_digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[derive(Debug, thiserror::Error)]
pub enum IdempotencyError {
    #[error("a request with this key is still running")]
    InProgress,
    #[error("this key was used with a different request")]
    Mismatch,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What the store holds under a key.
#[derive(Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
enum Record<R> {
    Running {
        fingerprint: String,
        /// Random per first request: a late release of a failed one never frees the record
        /// of its retry (same key, same fingerprint).
        #[serde(default)]
        attempt: u64,
    },
    Done {
        fingerprint: String,
        result: R,
    },
}

impl<R> Record<R> {
    fn fingerprint(&self) -> &str {
        match self {
            Self::Running { fingerprint, .. } | Self::Done { fingerprint, .. } => fingerprint,
        }
    }
}

/// The result of `Idempotency::once`, and whether it was a repeat's kept result.
#[derive(Debug)]
pub struct Once<R> {
    pub result: R,
    pub replayed: bool,
}

pub struct Idempotency {
    store: Arc<dyn IdempotencyStore>,
    /// How long a kept result answers repeats.
    retention: Duration,
    /// How long a repeat waits for a first request that still runs.
    wait: Duration,
}

impl Idempotency {
    pub fn new(store: Arc<dyn IdempotencyStore>, retention: Duration, wait: Duration) -> Self {
        Self {
            store,
            retention,
            wait,
        }
    }

    /// Runs `operation` at most once per key and fingerprint within the retention, and answers
    /// repeats with its kept result. An error is never kept: the key is freed for a retry.
    pub async fn once<R, E, F, Fut>(
        &self,
        key: &IdempotencyKey,
        fingerprint: &str,
        operation: F,
    ) -> Result<Once<R>, E>
    where
        R: Serialize + DeserializeOwned,
        E: From<IdempotencyError>,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<R, E>>,
    {
        let deadline = tokio::time::Instant::now() + self.wait;
        let running = encode(&Record::<R>::Running {
            fingerprint: fingerprint.to_owned(),
            attempt: rand::random(),
        })?;
        loop {
            let held = self
                .store
                .begin_idempotent(key.as_str(), &running, LEASE)
                .await
                .map_err(IdempotencyError::from)?;
            let Some(held) = held else { break };
            let record: Record<R> = serde_json::from_slice(&held).map_err(|e| {
                IdempotencyError::Store(StoreError::Protocol(format!("idempotency record: {e}")))
            })?;
            if record.fingerprint() != fingerprint {
                return Err(IdempotencyError::Mismatch.into());
            }
            match record {
                Record::Done { result, .. } => {
                    return Ok(Once {
                        result,
                        replayed: true,
                    });
                }
                Record::Running { .. } if tokio::time::Instant::now() >= deadline => {
                    return Err(IdempotencyError::InProgress.into());
                }
                Record::Running { .. } => tokio::time::sleep(POLL).await,
            }
        }

        let leased_until = tokio::time::Instant::now() + LEASE;
        let outcome = operation().await;
        let saved = match &outcome {
            Ok(result) => {
                let done = Record::Done {
                    fingerprint: fingerprint.to_owned(),
                    result,
                };
                match encode(&done) {
                    Ok(done) => self
                        .store
                        .finish_idempotent(key.as_str(), &done, self.retention)
                        .await
                        .map_err(IdempotencyError::from),
                    Err(error) => Err(error),
                }
            }
            Err(_) => {
                let released = self.store.abandon_idempotent(key.as_str(), &running).await;
                if let Err(error) = &released {
                    tracing::warn!(%error, "idempotency key not released: retrying until the store answers");
                    self.release_later(key, running, leased_until);
                }
                released.map_err(IdempotencyError::from)
            }
        };
        if let Err(error) = saved {
            // The answer itself stands; only a repeat of this key loses its protection.
            tracing::warn!(%error, "idempotency record not saved");
        }
        outcome.map(|result| Once {
            result,
            replayed: false,
        })
    }
}

impl Idempotency {
    /// Releases the key of a failed first request in the background, until the store answers
    /// or the lease has run out (the record is gone by itself then): a retry must not meet a
    /// running record for the whole lease because the store was down when its first request
    /// failed. Only this attempt's record is released, however late.
    fn release_later(
        &self,
        key: &IdempotencyKey,
        running: Vec<u8>,
        leased_until: tokio::time::Instant,
    ) {
        let (store, key) = (self.store.clone(), key.clone());
        tokio::spawn(async move {
            while tokio::time::Instant::now() + RELEASE_RETRY < leased_until {
                tokio::time::sleep(RELEASE_RETRY).await;
                if store
                    .abandon_idempotent(key.as_str(), &running)
                    .await
                    .is_ok()
                {
                    tracing::info!("idempotency key released once the store answered");
                    return;
                }
            }
        });
    }
}

fn encode<R: Serialize>(record: &Record<R>) -> Result<Vec<u8>, IdempotencyError> {
    serde_json::to_vec(record).map_err(|e| {
        IdempotencyError::Store(StoreError::Protocol(format!("idempotency record: {e}")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_visible_ascii_of_bounded_length() {
        assert!(IdempotencyKey::parse(b"signup-7d1c9e", None).is_some());
        assert!(IdempotencyKey::parse(b"", None).is_none());
        assert!(IdempotencyKey::parse(b"has space", None).is_none());
        assert!(IdempotencyKey::parse(&[b'k'; 256], None).is_none());
        assert_eq!(
            IdempotencyKey::parse(&[b'k'; 255], None)
                .unwrap()
                .as_str()
                .len(),
            32
        );
    }

    #[test]
    fn each_caller_has_its_own_keys() {
        let (billing, shop) = (ApiKeyName::named("billing"), ApiKeyName::named("shop"));
        let key = |raw: &[u8], caller| IdempotencyKey::parse(raw, caller).unwrap();
        assert_ne!(
            key(b"order-1", Some(&billing)),
            key(b"order-1", Some(&shop))
        );
        assert_ne!(key(b"order-1", Some(&billing)), key(b"order-1", None));
        assert_eq!(key(b"order-1", Some(&shop)), key(b"order-1", Some(&shop)));
        // Not a plain concatenation: caller "bill" with key "ing-1" is not "billing" with "-1".
        let bill = ApiKeyName::named("bill");
        assert_ne!(key(b"ing-1", Some(&bill)), key(b"-1", Some(&billing)));
        assert!(IdempotencyKey::parse(b"has space", Some(&shop)).is_none());
    }
}
