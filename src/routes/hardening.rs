//! What every HTTP answer and request body goes through before a handler: a body must arrive
//! whole within its deadline and size (a stalled or oversized body is cut off before anyone
//! waits on it — an `Expect: 100-continue` with a too large `Content-Length` is refused before
//! the body is sent), and every answer carries `nosniff` and, unless a route says otherwise,
//! `Cache-Control: no-store`.

use std::time::Duration;

use actix_web::HttpMessage;
use actix_web::dev::ServiceRequest;
use actix_web::http::header::{
    CACHE_CONTROL, CONTENT_LENGTH, HeaderMap, HeaderValue, X_CONTENT_TYPE_OPTIONS,
};
use actix_web::middleware::DefaultHeaders;
use actix_web::web::{Bytes, BytesMut};
use futures_util::StreamExt;

use super::ApiError;

/// The body limits every request is held to.
#[derive(Clone, Copy, Debug)]
pub struct BodyLimits {
    pub max_bytes: usize,
    pub deadline: Duration,
}

impl BodyLimits {
    /// The limit of a request to `path`.
    fn max_bytes_for(&self, path: &str) -> usize {
        if path.starts_with(super::receipts::PREFIX) {
            self.max_bytes.max(super::receipts::RECEIPT_MAX_BYTES)
        } else {
            self.max_bytes
        }
    }
}

/// `X-Content-Type-Options: nosniff` on every answer; `Cache-Control: no-store` where the
/// route set none (codes, captchas, tokens and errors must never sit in a cache). The operator
/// routes' middleware; the public ones add them in `observe::front_door` (one layer fewer).
pub fn default_headers() -> DefaultHeaders {
    DefaultHeaders::new()
        .add((X_CONTENT_TYPE_OPTIONS, NOSNIFF))
        .add((CACHE_CONTROL, NO_STORE))
}

const NOSNIFF: HeaderValue = HeaderValue::from_static("nosniff");
const NO_STORE: HeaderValue = HeaderValue::from_static("no-store");

/// What [`default_headers`] adds, added to `headers` where they are not set (`nosniff` is the
/// header's one value: it is set without asking first).
pub fn add_default_headers(headers: &mut HeaderMap) {
    headers.insert(X_CONTENT_TYPE_OPTIONS, NOSNIFF);
    if !headers.contains_key(CACHE_CONTROL) {
        headers.insert(CACHE_CONTROL, NO_STORE);
    }
}

/// Reads the whole body within `limits` before the handler runs, so no handler and no worker
/// waits on a client that stalls; refuses at once a declared length over the limit (413).
/// `observe::front_door` answers a refusal (an answer, not an error: its headers are added).
pub(super) async fn bounded_body(
    limits: BodyLimits,
    request: &mut ServiceRequest,
) -> Result<(), ApiError> {
    let max_bytes = limits.max_bytes_for(request.path());
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|value: &HeaderValue| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > max_bytes as u64) {
        return Err(ApiError::PayloadTooLarge);
    }
    if declared == Some(0) {
        return Ok(());
    }
    let mut payload = request.take_payload();
    let read = async {
        // A body of one chunk (most: it came with the headers) is kept as it came, uncopied.
        let mut first: Option<Bytes> = None;
        let mut rest = BytesMut::new();
        while let Some(chunk) = payload.next().await {
            let chunk = chunk.map_err(|_| ApiError::Malformed("unreadable body".to_owned()))?;
            let read = first.as_ref().map_or(0, Bytes::len) + rest.len();
            if read + chunk.len() > max_bytes {
                return Err(ApiError::PayloadTooLarge);
            }
            match first {
                None => first = Some(chunk),
                Some(_) => rest.extend_from_slice(&chunk),
            }
        }
        Ok::<Bytes, ApiError>(match first {
            None => Bytes::new(),
            Some(first) if rest.is_empty() => first,
            Some(first) => [first, rest.freeze()].concat().into(),
        })
    };
    let mut read = std::pin::pin!(read);
    // A body that has all arrived is read without arming the deadline's timer (a timer entry
    // made and dropped on every request); only one still coming is raced against it.
    let body = match futures_util::FutureExt::now_or_never(read.as_mut()) {
        Some(body) => body?,
        None => tokio::time::timeout(limits.deadline, read)
            .await
            .map_err(|_| ApiError::BodyTimeout)??,
    };
    request.set_payload(body.into());
    Ok(())
}
