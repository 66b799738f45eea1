//! The HTTP layer: routes, one file per area, each with its own `config`; the envelope; the
//! one mapping of the use cases' errors to the API's codes (`error.rs`); the state handlers
//! share (`state.rs`). Nothing below this module knows HTTP. This file holds what the routes
//! share: extractor settings whose errors answer with the envelope, and the JSON 404/405.

mod admin;
mod captcha;
mod dev;
mod envelope;
mod error;
mod health;
mod otp;
mod pow;
mod state;

use actix_web::error::{JsonPayloadError, PathError, PayloadError, QueryPayloadError};
use actix_web::http::header::AUTHORIZATION;
use actix_web::{HttpRequest, HttpResponse, Resource, web};

use std::net::{IpAddr, Ipv4Addr};

pub use self::error::ApiError;
pub use self::state::AppState;

/// Routes for every mode; `dev_mode` adds the dev routes, `stats` the stats route.
pub fn config(cfg: &mut web::ServiceConfig, max_body_bytes: usize, dev_mode: bool, stats: bool) {
    cfg.app_data(json_config(max_body_bytes))
        .app_data(web::PayloadConfig::new(max_body_bytes))
        .app_data(web::PathConfig::default().error_handler(path_error))
        .app_data(web::QueryConfig::default().error_handler(query_error))
        .configure(health::config)
        .configure(admin::metrics_config)
        .service(web::scope("/api/v1").configure(|api| {
            otp::config(api);
            captcha::config(api);
            pow::config(api);
            if stats {
                admin::stats_config(api);
            }
            if dev_mode {
                api.service(web::scope("/dev").configure(dev::config));
            }
        }));
}

/// The client's address: the socket peer, or what trusted proxies say it is.
fn client_ip(request: &HttpRequest, state: &AppState) -> IpAddr {
    let peer = request
        .peer_addr()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |address| address.ip());
    let forwarded: Vec<&str> = request
        .headers()
        .get_all("x-forwarded-for")
        .filter_map(|value| value.to_str().ok())
        .collect();
    state.trusted_proxies.client_ip(peer, forwarded.into_iter())
}

/// The token of `Authorization: Bearer <token>`; the scheme is case-insensitive (RFC 9110).
fn bearer_token(request: &HttpRequest) -> Option<&str> {
    let value = request.headers().get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start())
        .filter(|token| !token.is_empty())
}

/// The JSON answer for a path no route matches.
pub async fn not_found() -> Result<HttpResponse, ApiError> {
    Err(ApiError::NotFound)
}

async fn method_not_allowed() -> Result<HttpResponse, ApiError> {
    Err(ApiError::MethodNotAllowed)
}

/// A resource whose wrong-method answer is the envelope too.
fn resource(path: &str) -> Resource {
    web::resource(path).default_service(web::to(method_not_allowed))
}

fn json_config(limit: usize) -> web::JsonConfig {
    web::JsonConfig::default()
        .limit(limit)
        .error_handler(|error, _req: &HttpRequest| json_error(error).into())
}

fn json_error(error: JsonPayloadError) -> ApiError {
    match error {
        JsonPayloadError::OverflowKnownLength { .. }
        | JsonPayloadError::Overflow { .. }
        | JsonPayloadError::Payload(PayloadError::Overflow) => ApiError::PayloadTooLarge,
        JsonPayloadError::ContentType => {
            ApiError::Malformed("expected Content-Type: application/json".to_owned())
        }
        JsonPayloadError::Deserialize(error) => ApiError::Malformed(error.to_string()),
        other => ApiError::Malformed(other.to_string()),
    }
}

fn path_error(error: PathError, _req: &HttpRequest) -> actix_web::Error {
    ApiError::Malformed(error.to_string()).into()
}

fn query_error(error: QueryPayloadError, _req: &HttpRequest) -> actix_web::Error {
    ApiError::Malformed(error.to_string()).into()
}
