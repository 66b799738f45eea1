//! `Authorization: Bearer <key>` on the operations `VCODE_REQUIRE_API_KEY` lists: extractors
//! listed first in a handler's arguments, so an unauthorised request is answered 401 before
//! its body is read. The caller's name goes to the request span and the metrics.

use std::future::{Ready, ready};

use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, web};

use super::{ApiError, AppState};
use crate::api_keys::{ApiKeyName, Operation};

/// Whether the request may run `operation`: `Some(name)` of the key it presented where one is
/// required, `None` where the operation is open; 401 (`WWW-Authenticate: Bearer`) if not.
fn authorize(request: &HttpRequest, operation: Operation) -> Result<Option<ApiKeyName>, ApiError> {
    let Some(state) = request.app_data::<web::Data<AppState>>() else {
        return Err(ApiError::Internal(anyhow::anyhow!("no application state")));
    };
    match state
        .api_keys
        .check(operation, super::bearer_token(request))
    {
        Ok(None) => Ok(None),
        Ok(Some(name)) => {
            tracing::Span::current().record("api_key", name.as_str());
            crate::metrics::count_api_key(Some(name.as_str()), operation.as_str());
            Ok(Some(name.clone()))
        }
        Err(_) => {
            crate::metrics::count_api_key(None, operation.as_str());
            Err(ApiError::Unauthorized)
        }
    }
}

/// A caller allowed to send (with a key if sends require one): the key's name, if any.
pub struct MaySend(pub Option<ApiKeyName>);

impl FromRequest for MaySend {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(request: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(authorize(request, Operation::Send).map(Self))
    }
}

/// A caller allowed to verify (with a key if verifies require one).
pub struct MayVerify;

impl FromRequest for MayVerify {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(request: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(authorize(request, Operation::Verify).map(|_| Self))
    }
}
