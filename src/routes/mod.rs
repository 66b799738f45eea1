//! The HTTP layer: routes, one file per area, each with its own `config`; the envelope; the
//! one mapping of the use cases' errors to the API's codes (`error.rs`); the state handlers
//! share (`state.rs`). Nothing below this module knows HTTP. This file holds what the routes
//! share: extractor settings whose errors answer with the envelope, and the JSON 404/405.

mod admin;
mod api_key;
mod captcha;
mod console;
mod delivery;
mod dev;
mod envelope;
mod error;
mod events;
mod fraud;
mod hardening;
mod health;
mod json_body;
mod jwks;
mod observe;
mod openapi;
mod otp;
mod pages;
mod pow;
mod receipts;
mod state;
mod to_the_end;
mod totp;
mod twilio;

use actix_web::error::{JsonPayloadError, PathError, PayloadError, QueryPayloadError};
use actix_web::http::header::{ALLOW, AUTHORIZATION, HeaderValue, X_FORWARDED_FOR};
use actix_web::{HttpRequest, HttpResponse, Resource, ResponseError, guard, web};
use vcode_wire::paths;

use std::net::{IpAddr, Ipv4Addr};

pub use self::admin::require_admin_token;
pub use self::error::ApiError;
pub use self::hardening::{BodyLimits, default_headers};
pub use self::observe::front_door;
pub use self::pages::DemoSettings;
pub use self::state::AppState;

/// What the public listener serves beyond the API itself.
#[derive(Clone, Debug)]
pub struct PublicRoutes {
    pub max_body_bytes: usize,
    /// The dev routes (answering loopback peers only, never through a proxy).
    pub dev_mode: bool,
    /// The demo page.
    pub demo: Option<DemoSettings>,
    /// The operations that need an API key (`VCODE_REQUIRE_API_KEY`): described with the
    /// `apiKey` security requirement and 401.
    pub api_key_required: Vec<crate::api_keys::Operation>,
}

/// The public API: health, OTP, the token keys, captchas, proof of work, the description and
/// its docs page,
/// and (as `routes` says) the dev routes and the demo page. `openapi` is
/// [`PublicRoutes::openapi`]'s document, written once.
pub fn public(cfg: &mut web::ServiceConfig, routes: &PublicRoutes, openapi: web::Bytes) {
    extractors(cfg, routes.max_body_bytes);
    // The Twilio-compatible scope first: the router tries resources in order, and one static
    // prefix costs `/api/v1`'s requests next to nothing, where the dozen resources before it
    // (guards, a regex for each `{…}`) cost every Twilio request more than its form.
    cfg.configure(twilio::config)
        .configure(health::config)
        .configure(otp::config)
        .configure(totp::config)
        .configure(jwks::config)
        .configure(captcha::config)
        .configure(pow::config)
        .configure(receipts::config)
        .configure(|cfg| pages::config(cfg, openapi, routes.demo));
    if routes.demo.is_some() {
        cfg.configure(totp::demo_config);
    }
    if routes.dev_mode {
        cfg.configure(dev::config);
    }
}

impl PublicRoutes {
    /// The OpenAPI 3.1 description of what [`public`] serves with these settings.
    pub fn openapi(&self) -> serde_json::Value {
        self.api().document()
    }

    fn api(&self) -> openapi::Api {
        let mut api = openapi::Api::default();
        openapi::register_error_data(&mut api);
        health::describe(&mut api);
        otp::describe(&mut api, &self.api_key_required);
        totp::describe(&mut api);
        jwks::describe(&mut api);
        captcha::describe(&mut api);
        pow::describe(&mut api);
        receipts::describe(&mut api);
        pages::describe(&mut api, self.demo.is_some());
        if self.demo.is_some() {
            totp::describe_demo(&mut api);
        }
        if self.dev_mode {
            dev::describe(&mut api);
        }
        api
    }
}

/// The operator listener (`VCODE_ADMIN_BIND`): `/metrics`, the console and its SMS prices, the
/// fraud guard's routes, the event outbox's, and `/api/v1/stats` when a token is set (which [`require_admin_token`]
/// then asks of every route but the console's static files).
pub fn operator(cfg: &mut web::ServiceConfig, stats: bool) {
    extractors(cfg, 256);
    let openapi = web::Bytes::from(operator_openapi().to_string());
    cfg.configure(admin::metrics_config)
        .configure(console::config)
        .configure(fraud::config)
        .configure(events::config)
        .configure(delivery::config)
        .service(get_resource(paths::ADMIN_OPENAPI).route(get().to(move || {
            let openapi = openapi.clone();
            async move {
                HttpResponse::Ok()
                    .content_type("application/json")
                    .body(openapi)
            }
        })));
    if stats {
        cfg.configure(admin::stats_config);
    }
}

/// The OpenAPI 3.1 description of the operator routes that have one (the event outbox's, the
/// delivery rate's and the fraud guard's safe list).
pub fn operator_openapi() -> serde_json::Value {
    let mut api = openapi::Api::default();
    openapi::register_error_data(&mut api);
    events::describe(&mut api);
    delivery::describe(&mut api);
    fraud::describe(&mut api);
    api.get(
        paths::ADMIN_OPENAPI,
        "meta",
        "This description (OpenAPI 3.1)",
    )
    .ok_content(
        "application/json",
        serde_json::json!({"type": "object"}),
        "the description",
    );
    api.document()
}

/// Extractor settings whose errors answer with the envelope.
fn extractors(cfg: &mut web::ServiceConfig, max_body_bytes: usize) {
    cfg.app_data(json_config(max_body_bytes))
        .app_data(web::PayloadConfig::new(max_body_bytes))
        .app_data(web::PathConfig::default().error_handler(path_error))
        .app_data(web::QueryConfig::default().error_handler(query_error));
}

/// A GET route that answers HEAD too (same headers, no body).
fn get() -> actix_web::Route {
    web::route().guard(guard::Any(guard::Get()).or(guard::Head()))
}

/// The client as every per-client limit counts it: the socket peer, or what trusted proxies say
/// it is; an IPv6 address as its network (`VCODE_CLIENT_IPV6_PREFIX`). A request whose trusted
/// proxies do not say who the client is ([`crate::client_ip::UnknownClient`]) is malformed.
fn client_ip(request: &HttpRequest, state: &AppState) -> Result<IpAddr, ApiError> {
    let peer = request
        .peer_addr()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |address| address.ip());
    let proxies = &state.trusted_proxies;
    // The headers are read only from a trusted proxy: a direct peer's say nothing (and most
    // requests then skip the lookup).
    let client = if proxies.trusts(peer) {
        let forwarded_for: Vec<&[u8]> = request
            .headers()
            .get_all(X_FORWARDED_FOR)
            .map(HeaderValue::as_bytes)
            .collect();
        proxies.client_ip(peer, forwarded_for.into_iter())
    } else {
        proxies.client_ip(peer, std::iter::empty())
    }
    .map_err(|_| ApiError::Malformed("X-Forwarded-For names no client address".to_owned()))?;
    Ok(crate::client_ip::client_group(
        client,
        state.client_ipv6_prefix,
    ))
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

/// The envelope's 405, with the `Allow` header RFC 9110 requires.
fn method_not_allowed(allow: &'static str) -> HttpResponse {
    let mut response = ApiError::MethodNotAllowed.error_response();
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    response
}

/// A GET route (HEAD too, see [`get`]) whose wrong-method answer is the envelope too.
fn get_resource(path: &str) -> Resource {
    resource(path, "GET, HEAD")
}

/// A GET route that does not answer HEAD (405 with `Allow: GET`): for a route whose every GET
/// makes something new, which a HEAD would make only to throw away.
fn get_only_resource(path: &str) -> Resource {
    resource(path, "GET")
}

/// A POST route whose wrong-method answer is the envelope too.
fn post_resource(path: &str) -> Resource {
    resource(path, "POST")
}

/// Named by its path: the request's span and metrics read the route's pattern as its name, which
/// the router finds by the matched resource's index (the pattern itself it would rebuild into a
/// new `String` on every request).
fn resource(path: &str, allow: &'static str) -> Resource {
    web::resource(path)
        .name(path)
        .default_service(web::to(move || async move { method_not_allowed(allow) }))
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
        JsonPayloadError::Deserialize(error) => ApiError::Malformed(describe_json_error(&error)),
        _ => ApiError::Malformed("unreadable body".to_owned()),
    }
}

/// What was wrong with a JSON body, naming at most a field, never a value the client sent
/// (serde's own messages quote values, which an error must not echo).
fn describe_json_error(error: &serde_json::Error) -> String {
    use serde_json::error::Category;
    match error.classify() {
        Category::Syntax | Category::Eof | Category::Io => "the body is not valid JSON".to_owned(),
        Category::Data => {
            let message = error.to_string();
            let field = |prefix: &str| {
                message
                    .strip_prefix(prefix)
                    .and_then(|rest| rest.split('`').next())
                    .filter(|name| name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
                    .map(str::to_owned)
            };
            match field("missing field `") {
                Some(name) => format!("missing field `{name}`"),
                None => "a field is missing or of the wrong type".to_owned(),
            }
        }
    }
}

fn path_error(_error: PathError, _req: &HttpRequest) -> actix_web::Error {
    ApiError::Malformed("malformed path".to_owned()).into()
}

fn query_error(_error: QueryPayloadError, _req: &HttpRequest) -> actix_web::Error {
    ApiError::Malformed("missing or malformed query parameters".to_owned()).into()
}
