//! `Authorization: Bearer <key>` on the operations `VCODE_REQUIRE_API_KEY` lists. Checked before
//! the body is read ([`authorize_first`]), a refusal answers 401 before a byte of it is awaited, so
//! a caller without a key never holds a request open for the body timeout; the extractors the
//! handlers list first hand the caller it let through to the handler (and check themselves
//! should a request reach them unchecked). The caller's name goes to the request span and the
//! metrics.

use std::future::{Ready, ready};

use actix_web::dev::{Payload, ServiceRequest};
use actix_web::http::Method;
use actix_web::{FromRequest, HttpMessage, HttpRequest, web};
use vcode_wire::paths;

use super::{ApiError, AppState};
use crate::api_keys::{ApiKeyName, Operation};

/// Whether the request may run `operation`: `Some(name)` of the key it presented where one is
/// required, `None` where the operation is open; 401 (`WWW-Authenticate: Bearer`) if not.
/// A presented key is compared only while its address is not held for failing too often
/// (429 with `Retry-After` then); a wrong or missing key counts against the address.
pub(super) fn authorize(
    request: &HttpRequest,
    operation: Operation,
) -> Result<Option<ApiKeyName>, ApiError> {
    let Some(state) = request.app_data::<web::Data<AppState>>() else {
        return Err(ApiError::Internal(anyhow::anyhow!("no application state")));
    };
    let presented = super::bearer_token(request);
    if !state.api_keys.checks(operation, presented) {
        return Ok(None);
    }
    let address = super::client_ip(request, state)?;
    if let Some(wait) = state.credential_failures.held(address) {
        crate::metrics::count_api_key(None, operation.as_str());
        return Err(ApiError::QuotaExceeded {
            retry_after_secs: wait.as_secs().max(1),
        });
    }
    match state.api_keys.check(operation, presented) {
        Ok(None) => Ok(None),
        Ok(Some(name)) => {
            tracing::Span::current().record("api_key", name.as_str());
            crate::metrics::count_api_key(Some(name.as_str()), operation.as_str());
            Ok(Some(name.clone()))
        }
        Err(_) => {
            state.credential_failures.failed(address);
            crate::metrics::count_api_key(None, operation.as_str());
            Err(ApiError::Unauthorized)
        }
    }
}

/// The operation a request is for, as far as keys go: the routes' own method and path (the
/// path as the router reads it, percent-decoding included).
fn operation_of(request: &ServiceRequest) -> Option<Operation> {
    if request.method() != Method::POST {
        return None;
    }
    match request.match_info().as_str() {
        paths::OTP_SEND => Some(Operation::Send),
        paths::OTP_VERIFY => Some(Operation::Verify),
        _ => None,
    }
}

/// The caller [`authorize_first`] let through, kept for the handler.
struct Authorized {
    operation: Operation,
    caller: ApiKeyName,
}

/// Checks the key of a request for an operation that needs one before its body is read
/// (`observe::front_door` answers the refusal at once: 401 if it is missing or wrong).
pub(super) fn authorize_first(request: &ServiceRequest) -> Result<(), ApiError> {
    if let Some(operation) = operation_of(request) {
        // Kept only when named: an open operation is as cheap to check again as to look up.
        if let Some(caller) = authorize(request.request(), operation)? {
            request
                .extensions_mut()
                .insert(Authorized { operation, caller });
        }
    }
    Ok(())
}

/// The caller of `operation`: the one [`authorize_first`] let through, or checked now.
fn caller(request: &HttpRequest, operation: Operation) -> Result<Option<ApiKeyName>, ApiError> {
    let extensions = request.extensions();
    match extensions.get::<Authorized>() {
        Some(authorized) if authorized.operation == operation => {
            Ok(Some(authorized.caller.clone()))
        }
        _ => {
            drop(extensions);
            authorize(request, operation)
        }
    }
}

/// A caller allowed to send (with a key if sends require one): the key's name, if any.
pub struct MaySend(pub Option<ApiKeyName>);

impl FromRequest for MaySend {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(request: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(caller(request, Operation::Send).map(Self))
    }
}

/// A caller allowed to read a verification (with a key if `status` requires one).
pub struct MayReadStatus;

impl FromRequest for MayReadStatus {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(request: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(caller(request, Operation::Status).map(|_| Self))
    }
}

/// A caller allowed to verify, or to cancel a verification (with a key if verifies require
/// one): the key's name, if any.
pub struct MayVerify(pub Option<ApiKeyName>);

impl FromRequest for MayVerify {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(request: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(caller(request, Operation::Verify).map(Self))
    }
}
