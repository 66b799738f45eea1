//! `/metrics` against a scripted sequence. A test binary of its own: the metrics recorder is
//! global to a process, so no other test's requests may be counted in.

#[allow(dead_code, unused_imports)]
#[path = "api/support/mod.rs"]
mod support;

use std::collections::HashMap;

use serde_json::json;
use support::{Backend, random_phone, spawn_app, spawn_app_with, wrong_code};

/// Samples by metric name and sorted `key=value` label pairs.
fn parse(text: &str) -> HashMap<(String, String), f64> {
    let lines = text.lines().map(|line| Ok(line.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("valid Prometheus text");
    scrape
        .samples
        .into_iter()
        .filter_map(|sample| {
            let value = match sample.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                // A histogram counts as its +Inf bucket: every observation.
                prometheus_parse::Value::Histogram(buckets) => {
                    buckets
                        .iter()
                        .find(|bucket| bucket.less_than.is_infinite())?
                        .count
                }
                prometheus_parse::Value::Summary(_) => return None,
            };
            let mut labels: Vec<String> = sample
                .labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            labels.sort();
            Some(((sample.metric, labels.join(",")), value))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_count_a_scripted_sequence() {
    let app = spawn_app(Backend::Memory).await;
    let phone = random_phone();
    assert_eq!(app.send(&phone).await.status, 200);
    assert_eq!(app.send(&phone).await.code(), 42900);
    let code = app.last_code(&phone).await;
    let wrong = wrong_code(&code);
    assert_eq!(app.verify(&phone, wrong).await.code(), 40010);
    assert_eq!(app.verify(&phone, &code).await.status, 200);
    assert_eq!(app.get("/no/such/route").await.status, 404);
    app.post_json("/api/v1/captcha", &json!(null)).await;

    let response = app
        .client
        .get(app.admin_url("/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    let samples = parse(&response.text().await.unwrap());
    let value =
        |name: &str, labels: &str| samples.get(&(name.to_owned(), labels.to_owned())).copied();

    let requests = "vcode_http_requests_total";
    assert_eq!(
        value(requests, "method=POST,route=/api/v1/otp/send,status=200"),
        Some(1.0)
    );
    assert_eq!(
        value(requests, "method=POST,route=/api/v1/otp/send,status=429"),
        Some(1.0)
    );
    assert_eq!(
        value(requests, "method=POST,route=/api/v1/otp/verify,status=400"),
        Some(1.0)
    );
    assert_eq!(
        value(requests, "method=POST,route=/api/v1/otp/verify,status=200"),
        Some(1.0)
    );
    assert_eq!(
        value(requests, "method=GET,route=unmatched,status=404"),
        Some(1.0)
    );
    assert_eq!(
        value("vcode_otp_send_requests_total", "route=otp_send"),
        Some(2.0)
    );
    assert_eq!(
        value("vcode_sms_total", "provider=log,result=sent"),
        Some(1.0)
    );
    assert_eq!(value("vcode_otp_dedup_total", "by=cooldown"), Some(1.0));
    assert_eq!(value("vcode_otp_verify_total", "outcome=ok"), Some(1.0));
    assert_eq!(value("vcode_otp_verify_total", "outcome=wrong"), Some(1.0));
    assert_eq!(value("vcode_captcha_total", "outcome=created"), Some(1.0));
    let latency = "vcode_http_request_duration_seconds";
    assert_eq!(
        value(latency, "method=POST,route=/api/v1/otp/send"),
        Some(2.0)
    );
    assert_eq!(
        value(latency, "method=POST,route=/api/v1/otp/verify"),
        Some(2.0)
    );

    // The fraud guard: refusals by reason, SMS to monitored countries by region.
    let guarded = spawn_app_with(Backend::Memory, |s| {
        s.abuse.monitored_regions = vcode::settings::Regions::parse("US").unwrap();
    })
    .await;
    assert_eq!(guarded.send("+12025550143").await.status, 200);
    assert_eq!(guarded.send("+979123456789").await.code(), 40004);
    assert_eq!(guarded.send("+447400123456").await.code(), 40005);
    let text = guarded
        .client
        .get(guarded.admin_url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let samples = parse(&text);
    let value =
        |name: &str, labels: &str| samples.get(&(name.to_owned(), labels.to_owned())).copied();
    assert_eq!(value("vcode_sms_monitored_total", "region=US"), Some(1.0));
    let refusals = "vcode_destination_refusals_total";
    assert_eq!(value(refusals, "reason=number_type"), Some(1.0));
    assert_eq!(value(refusals, "reason=region"), Some(1.0));
}
