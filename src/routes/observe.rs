//! The public listener's one middleware: what the HTTP layer tells operators about each request
//! (its span for the logs, its metrics: route pattern, method, status, duration), and what a
//! request must pass before its handler (the API key, then the body within its limits).

use std::borrow::Cow;
use std::time::Instant;

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{Error, HttpRequest};
use tracing::{Instrument, Span};

use super::BodyLimits;

/// The public listener's one middleware: runs the request in its span (method, route, request
/// id, the socket peer, the status and the name of the caller's API key, never the key; unlike
/// tracing-actix-web's default span it never records `X-Forwarded-For`, which any client can
/// forge); checks the API key (`api_key::authorize_first`), then reads the body within its
/// limits (`hardening::bounded_body`), answering a refusal of either at once, before the
/// handler; adds the default headers (`hardening::add_default_headers`) to every answer; and
/// counts and times it by route pattern, method and status. One layer where there were five
/// (tracing-actix-web's, which also wrapped every answer's body to enter the span again, the
/// default headers', the metrics', the API key's and the body's): each layer of `from_fn` is a
/// boxed future and a service call on every request.
pub async fn front_door<B: MessageBody + 'static>(
    limits: BodyLimits,
    mut request: ServiceRequest,
    next: Next<B>,
) -> Result<ServiceResponse<EitherBody<B>>, Error> {
    let started = Instant::now();
    let span = request_span(&request);
    let outcome = async {
        // The key before the body: a caller without one never holds a request open for the
        // body's deadline.
        let admitted = match super::api_key::authorize_first(&request) {
            Ok(()) => super::hardening::bounded_body(limits, &mut request).await,
            Err(refusal) => Err(refusal),
        };
        match admitted {
            Ok(()) => next
                .call(request)
                .await
                .map(ServiceResponse::map_into_left_body),
            Err(refusal) => Ok(request.error_response(refusal).map_into_right_body()),
        }
    }
    .instrument(span.clone())
    .await;
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
/// only their scope), the others' from the router: a resource's name where it has one (the
/// routes' resources are named by their path), else its pattern.
fn route_pattern(request: &HttpRequest) -> Option<Cow<'_, str>> {
    if let Some(pattern) = super::twilio::route_pattern(request.match_info().as_str()) {
        return Some(Cow::Borrowed(pattern));
    }
    match request.match_name() {
        Some(name) => Some(Cow::Borrowed(name)),
        None => request.match_pattern().map(Cow::Owned),
    }
}
