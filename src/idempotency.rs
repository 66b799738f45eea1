//! `Idempotency-Key` on `otp/send`: the first request with a key runs; a repeat with the same
//! body gets the stored answer (status and body) without a new code or SMS; a repeat with
//! another body gets 422; a repeat while the first still runs waits for its answer (bounded,
//! then 409). Server-side failures (5xx) are not kept, so a client's retry runs again.

use std::time::Duration;

use actix_web::HttpRequest;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::envelope::Reply;
use crate::error::ApiError;
use crate::store::Store;

pub const HEADER: &str = "idempotency-key";

/// How long a running first request keeps its key before a repeat may take over (a crashed
/// instance must not block a key for its whole retention).
const LEASE: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(25);

/// The key as stored: a digest, so any header value makes a short, safe store key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// The request's key, if it sent one: 1 to 255 visible ASCII characters.
    pub fn from_request(request: &HttpRequest) -> Result<Option<Self>, ApiError> {
        let Some(value) = request.headers().get(HEADER) else {
            return Ok(None);
        };
        let raw = value.as_bytes();
        let valid = (1..=255).contains(&raw.len()) && raw.iter().all(u8::is_ascii_graphic);
        if !valid {
            return Err(ApiError::Malformed(
                "Idempotency-Key must be 1 to 255 visible ASCII characters".to_owned(),
            ));
        }
        Ok(Some(Self(hex_digest(raw))))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A digest of the request a key was first used with.
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

/// What the store holds under a key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum IdempotencyRecord {
    Running {
        fingerprint: String,
    },
    Done {
        fingerprint: String,
        response: Reply,
    },
}

impl IdempotencyRecord {
    fn fingerprint(&self) -> &str {
        match self {
            Self::Running { fingerprint } | Self::Done { fingerprint, .. } => fingerprint,
        }
    }
}

/// Runs `handler` at most once per key and fingerprint within `retention`, and answers repeats
/// with its stored reply; says whether the reply is a repeat's.
pub async fn once<F, Fut>(
    store: &dyn Store,
    key: &IdempotencyKey,
    fingerprint: &str,
    retention: Duration,
    wait: Duration,
    handler: F,
) -> Result<(Reply, bool), ApiError>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Reply>,
{
    let deadline = tokio::time::Instant::now() + wait;
    let running = IdempotencyRecord::Running {
        fingerprint: fingerprint.to_owned(),
    };
    loop {
        match store.begin_idempotent(key, &running, LEASE).await? {
            None => break,
            Some(record) if record.fingerprint() != fingerprint => {
                return Err(ApiError::IdempotencyMismatch);
            }
            Some(IdempotencyRecord::Done { response, .. }) => return Ok((response, true)),
            Some(IdempotencyRecord::Running { .. }) => {
                if tokio::time::Instant::now() >= deadline {
                    return Err(ApiError::IdempotencyInProgress);
                }
                tokio::time::sleep(POLL).await;
            }
        }
    }

    let reply = handler().await;
    let outcome = if reply.status >= 500 {
        store.abandon_idempotent(key, &running).await
    } else {
        let done = IdempotencyRecord::Done {
            fingerprint: fingerprint.to_owned(),
            response: reply.clone(),
        };
        store.finish_idempotent(key, &done, retention).await
    };
    if let Err(error) = outcome {
        // The answer itself stands; only a repeat of this key loses its protection.
        tracing::warn!(%error, "idempotency record not saved");
    }
    Ok((reply, false))
}
