//! What the HTTP layer tells operators about each request: its span (for the logs) and its
//! metrics (route pattern, method, status, duration).

use std::borrow::Cow;
use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{Error, HttpMessage, HttpRequest};
use tracing::Span;
use tracing_actix_web::{RequestId, RootSpanBuilder};

/// Middleware: counts and times every request by route pattern, method and status.
pub async fn track_requests(
    request: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let started = Instant::now();
    let response = next.call(request).await?;
    // Asked once routed: the router then finds the pattern by index; before, it would match the
    // path against every pattern again.
    let route = route_pattern(response.request());
    crate::metrics::observe_http_request(
        route.as_deref().unwrap_or("unmatched"),
        response.request().method().as_str(),
        response.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    Ok(response)
}

/// The route pattern of `request`: the Twilio-compatible paths' by hand (the router knows
/// only their scope), the others' from the router.
fn route_pattern(request: &HttpRequest) -> Option<Cow<'static, str>> {
    match super::twilio::route_pattern(request.match_info().as_str()) {
        Some(pattern) => Some(Cow::Borrowed(pattern)),
        None => request.match_pattern().map(Cow::Owned),
    }
}

/// The request span: method, route, request id, the socket peer, the status and the name of
/// the caller's API key (never the key). Unlike the
/// default span it never records `X-Forwarded-For`, which any client can forge.
pub struct RequestSpan;

impl RootSpanBuilder for RequestSpan {
    fn on_request_start(request: &ServiceRequest) -> Span {
        let request_id = request.extensions().get::<RequestId>().copied();
        tracing::info_span!(
            "request",
            method = %request.method(),
            route = route_pattern(request.request()).as_deref().unwrap_or("(none)"),
            request_id = request_id.map(tracing::field::display),
            peer = request.peer_addr().map(|a| tracing::field::display(a.ip())),
            status = tracing::field::Empty,
            api_key = tracing::field::Empty,
        )
    }

    fn on_request_end<B: MessageBody>(span: Span, outcome: &Result<ServiceResponse<B>, Error>) {
        let status = match outcome {
            Ok(response) => response.status(),
            Err(error) => error.as_response_error().status_code(),
        };
        span.record("status", status.as_u16());
    }
}
