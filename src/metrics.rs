//! Prometheus metrics (`GET /metrics`): HTTP requests by route, method and status with latency
//! histograms, plus the counters `stats` feeds and the Redis latency and errors the store
//! records. One recorder per process, rendered by the `metrics-exporter-prometheus` crate.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::Method;
use actix_web::middleware::Next;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Latency buckets (seconds): from well under a millisecond to the slowest SMS gateway.
const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// The process's recorder, installed on first use (several apps in one test process share it).
pub fn handle() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), &BUCKETS)
                .map(PrometheusBuilder::build_recorder)
                .unwrap_or_else(|_| PrometheusBuilder::new().build_recorder());
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("another metrics recorder is installed: /metrics shows nothing");
            }
            // Histograms keep their samples until upkeep folds them in.
            let upkeep = handle.clone();
            std::thread::Builder::new()
                .name("metrics-upkeep".to_owned())
                .spawn(move || {
                    loop {
                        std::thread::sleep(Duration::from_secs(5));
                        upkeep.run_upkeep();
                    }
                })
                .ok();
            handle
        })
        .clone()
}

fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::PATCH => "PATCH",
        _ => "other",
    }
}

/// Middleware: counts every request by route pattern (never the raw path, whose ids would
/// explode the label set), method and status, and times it.
pub async fn track_requests(
    request: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let started = Instant::now();
    let route = request
        .match_pattern()
        .unwrap_or_else(|| "unmatched".to_owned());
    let method = method_label(request.method());
    let response = next.call(request).await?;
    let status = response.status().as_u16().to_string();
    metrics::counter!(
        "vcode_http_requests_total",
        "route" => route.clone(),
        "method" => method,
        "status" => status
    )
    .increment(1);
    metrics::histogram!(
        "vcode_http_request_duration_seconds",
        "route" => route,
        "method" => method
    )
    .record(started.elapsed().as_secs_f64());
    Ok(response)
}
