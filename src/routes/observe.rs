//! What the HTTP layer tells operators about each request: its span (for the logs) and its
//! metrics (route pattern, method, status, duration), in one middleware.

use std::borrow::Cow;
use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{Error, HttpRequest};
use tracing::{Instrument, Span};

/// Middleware: runs the request in its span (method, route, request id, the socket peer, the
/// status and the name of the caller's API key, never the key; unlike tracing-actix-web's
/// default span it never records `X-Forwarded-For`, which any client can forge), adds the
/// default headers (`hardening::add_default_headers`), then counts and times it by route
/// pattern, method and status. One layer where there were three (this, tracing-actix-web's,
/// which also wrapped every answer's body to enter the span again, and the default headers').
pub async fn observe_requests(
    request: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let started = Instant::now();
    let span = request_span(&request);
    let outcome = next.call(request).instrument(span.clone()).await;
    let status = match &outcome {
        Ok(response) => response.status(),
        Err(error) => error.as_response_error().status_code(),
    };
    span.record("status", status.as_u16());
    let mut response = outcome?;
    super::hardening::add_default_headers(response.headers_mut());
    // Asked once routed: the router then finds the pattern by index; before, it would match the
    // path against every pattern again.
    let route = route_pattern(response.request());
    crate::metrics::observe_http_request(
        route.as_deref().unwrap_or("unmatched"),
        response.request().method().as_str(),
        status.as_u16(),
        started.elapsed().as_secs_f64(),
    );
    Ok(response)
}

/// The request's span.
fn request_span(request: &ServiceRequest) -> Span {
    tracing::info_span!(
        "request",
        method = %request.method(),
        route = route_pattern(request.request()).as_deref().unwrap_or("(none)"),
        request_id = %uuid::Uuid::new_v4(),
        peer = request.peer_addr().map(|a| tracing::field::display(a.ip())),
        status = tracing::field::Empty,
        api_key = tracing::field::Empty,
    )
}

/// The route pattern of `request`: the Twilio-compatible paths' by hand (the router knows
/// only their scope), the others' from the router.
fn route_pattern(request: &HttpRequest) -> Option<Cow<'static, str>> {
    match super::twilio::route_pattern(request.match_info().as_str()) {
        Some(pattern) => Some(Cow::Borrowed(pattern)),
        None => request.match_pattern().map(Cow::Owned),
    }
}
