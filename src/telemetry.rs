//! Log set-up (`RUST_LOG` filters, `VCODE_LOG_FORMAT=json` for machines) and the per-request
//! span every log line of a request is nested in.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::{Error, HttpMessage};
use tracing::Span;
use tracing_actix_web::{RequestId, RootSpanBuilder};
use tracing_subscriber::EnvFilter;

pub fn init(json: bool) {
    // tracing-actix-web adds a WARN line for every 4xx answer; vcode logs outcomes itself (and
    // the causes of 5xx answers in `ApiError::reply`), so it stays quiet unless asked for by name.
    let directives = std::env::var("RUST_LOG").unwrap_or_else(|_| "info".to_owned());
    let directives = if directives.contains("tracing_actix_web") {
        directives
    } else {
        format!("{directives},tracing_actix_web=off")
    };
    let filter = EnvFilter::try_new(&directives).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    // A second call (several apps in one test process) keeps the first subscriber.
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// The request span: method, route, request id, the socket peer and the status. Unlike the
/// default span it never records `X-Forwarded-For`, which any client can forge.
pub struct RequestSpan;

impl RootSpanBuilder for RequestSpan {
    fn on_request_start(request: &ServiceRequest) -> Span {
        let request_id = request.extensions().get::<RequestId>().copied();
        tracing::info_span!(
            "request",
            method = %request.method(),
            route = request.match_pattern().as_deref().unwrap_or("(none)"),
            request_id = request_id.map(tracing::field::display),
            peer = request.peer_addr().map(|a| tracing::field::display(a.ip())),
            status = tracing::field::Empty,
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
