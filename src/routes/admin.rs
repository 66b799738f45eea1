//! Operator routes: `GET /metrics` (Prometheus text) and `GET /api/v1/stats?days=N` (daily
//! counters, only when `VCODE_ADMIN_TOKEN` is set), and the gate that puts every operator
//! route behind that bearer token when it is set.

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{CONTENT_TYPE, HOST, ORIGIN};
use actix_web::middleware::Next;
use actix_web::{HttpRequest, HttpResponse, web};
use secrecy::ExposeSecret;
use serde::Deserialize;

use super::ApiError;
use super::AppState;
use super::envelope;
use crate::domain::secret::same_secret;
use crate::stats::RETENTION_DAYS;
use vcode_wire::paths;

/// With `VCODE_ADMIN_TOKEN` set, every request to the operator listener carries it as
/// `Authorization: Bearer` (what Prometheus sends with `authorization: credentials_file`), or
/// gets `401` with `WWW-Authenticate: Bearer` before any route runs: the metrics tell traffic,
/// provider failures and API key names, and a listener off loopback is allowed only with a
/// token (`Settings::validate`). Unknown paths too, so that no path is told to exist. The one
/// exception is the console page and its static files (`console::is_open_file`). A request
/// another site's page made is refused the same way, token or not ([`from_another_site`]), and
/// without a token, a request that names another host than loopback ([`names_loopback`]).
pub async fn require_admin_token<B: MessageBody + 'static>(
    request: ServiceRequest,
    next: Next<B>,
) -> Result<ServiceResponse<EitherBody<B>>, actix_web::Error> {
    // The console page and its files are static: a browser loads them without a header, and
    // their script then asks for the token for every fetch of data.
    let token = request
        .app_data::<web::Data<AppState>>()
        .and_then(|state| state.admin_token.as_ref());
    let refused = !super::console::is_open_file(request.path())
        && (from_another_site(request.request())
            || match token {
                Some(token) => !bearer_matches(request.request(), token.expose_secret()),
                None => !names_loopback(request.request()),
            });
    if refused {
        return Ok(request
            .error_response(ApiError::Unauthorized)
            .map_into_right_body());
    }
    next.call(request)
        .await
        .map(ServiceResponse::map_into_left_body)
}

pub fn metrics_config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::get_resource(paths::METRICS).route(super::get().to(metrics)));
}

pub fn stats_config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::get_resource(paths::STATS).route(super::get().to(stats)));
}

async fn metrics() -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((
            CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ))
        .body(crate::metrics::render())
}

#[derive(Deserialize)]
struct StatsQuery {
    days: Option<u32>,
}

async fn stats(
    request: HttpRequest,
    state: web::Data<AppState>,
    query: web::Query<StatsQuery>,
) -> Result<HttpResponse, ApiError> {
    let Some(token) = state.admin_token.as_ref() else {
        return Err(ApiError::NotFound);
    };
    // `require_admin_token` has checked it already; checked again so that the route is never
    // open should it be mounted without the gate.
    if !bearer_matches(&request, token.expose_secret()) {
        // With `WWW-Authenticate: Bearer` (error.rs).
        return Err(ApiError::Unauthorized);
    }
    let days = query.days.unwrap_or(1);
    if !(1..=RETENTION_DAYS).contains(&days) {
        return Err(ApiError::Malformed(format!(
            "days must be from 1 to {RETENTION_DAYS}"
        )));
    }
    let report = state.stats.report(days).await?;
    Ok(envelope::ok(report))
}

/// Whether a page of another site made the browser send this request: `Sec-Fetch-Site` says so,
/// or (from a browser without it) an `Origin` other than the listener's own. Refused on every
/// operator route, token or not: without a token the listener is open on loopback, and any page
/// the operator visits could otherwise make their browser post to it (a lift has no body, so
/// CORS lets it through unasked). Prometheus and curl send neither header; the console's own
/// requests are same-origin.
fn from_another_site(request: &HttpRequest) -> bool {
    let headers = request.headers();
    if let Some(site) = headers.get("sec-fetch-site") {
        return !matches!(site.as_bytes(), b"same-origin" | b"none");
    }
    let Some(origin) = headers.get(ORIGIN) else {
        return false;
    };
    let host = headers.get(HOST).map(|host| host.as_bytes());
    let origin_host = origin
        .to_str()
        .ok()
        .and_then(|origin| origin.split_once("://"))
        .map(|(_, host)| host.as_bytes());
    origin_host.is_none() || origin_host != host
}

/// Whether the request's `Host` names this machine's loopback (`localhost`, `*.localhost`, a
/// loopback address), or is absent (no browser omits it). Without a token the listener is open
/// on loopback, and a page of another site whose name the attacker re-points at 127.0.0.1 (DNS
/// rebinding) is same-origin to the browser, so its requests pass [`from_another_site`]: their
/// `Host` is still the attacker's name, so they are refused here.
fn names_loopback(request: &HttpRequest) -> bool {
    let Some(host) = request.headers().get(HOST) else {
        return true;
    };
    let Ok(host) = host.to_str() else {
        return false;
    };
    // `name[:port]`, `v4[:port]` or `[v6][:port]`.
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map_or(rest, |(address, _)| address),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| address.is_loopback())
}

/// `Authorization: Bearer <token>`, compared in time independent of its content and length.
fn bearer_matches(request: &HttpRequest, token: &str) -> bool {
    let presented = super::bearer_token(request).unwrap_or_default();
    same_secret(presented.as_bytes(), token.as_bytes())
}
