//! API keys on `otp/send` and `otp/verify` (`VCODE_REQUIRE_API_KEY`, `VCODE_API_KEYS`): missing,
//! wrong and right keys, the scheme's case, the key's name in the metrics, and routes not
//! listed staying open. That a key never reaches the logs is tests/api_key_cli.rs (the binary).

use serde_json::json;
use sha2::{Digest, Sha256};
use vcode::api_keys::{ApiKeySettings, ApiKeys, Operation};
use vcode_wire::{SendRequest, VerifyRequest, paths};

use crate::support::app::Answer;
use crate::support::{Backend, TestApp, random_phone, spawn_app_with};

const KEY: &str = "vck_test-key-0123456789abcdefghijklmnopqrstu";

/// An app requiring a key for `required`, knowing `KEY` under `name`.
async fn app_requiring(backend: Backend, required: Vec<Operation>, name: &str) -> TestApp {
    let entry = format!("{name}:{}", hex::encode(Sha256::digest(KEY)));
    spawn_app_with(backend, |s| {
        s.api_key = ApiKeySettings { required };
        s.api_keys = Some(ApiKeys::parse(&entry).unwrap());
    })
    .await
}

/// `otp/send` with this `Authorization` header value (None: without one).
async fn send_with(
    app: &TestApp,
    authorization: Option<&str>,
    phone: &str,
) -> (Answer, Option<String>) {
    let mut request = app
        .client
        .post(app.url(paths::OTP_SEND))
        .json(&SendRequest::new(phone));
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let response = request.send().await.expect("the app answers");
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|value| value.to_str().unwrap().to_owned());
    let status = response.status().as_u16();
    let body = response.json().await.expect("a JSON envelope");
    (
        Answer {
            status,
            retry_after: None,
            body,
        },
        challenge,
    )
}

async fn a_key_is_required_where_listed_and_checked(backend: Backend) {
    let name = format!("shop-{}", &random_phone()[6..]);
    let app = app_requiring(backend, vec![Operation::Send, Operation::Verify], &name).await;
    let phone = random_phone();
    let bearer = format!("Bearer {KEY}");
    for authorization in [
        None,
        Some("Bearer wrong-key"),
        Some(KEY),
        Some("Basic dXNlcjpwdw=="),
        Some("Bearer "),
    ] {
        let (answer, challenge) = send_with(&app, authorization, &phone).await;
        assert_eq!(
            (answer.status, answer.code()),
            (401, 40100),
            "{authorization:?}: {answer:?}"
        );
        assert_eq!(challenge.as_deref(), Some("Bearer"));
    }
    // Refused before the body is read: a malformed body without a key is still a 401.
    let garbage = app
        .client
        .post(app.url(paths::OTP_VERIFY))
        .body("{not json")
        .header("content-type", "application/json");
    assert_eq!(app.request(garbage).await.code(), 40100);
    // The scheme is case-insensitive (RFC 9110); the key is not.
    for authorization in [
        bearer.clone(),
        format!("bearer {KEY}"),
        format!("BEARER {KEY}"),
    ] {
        let phone = random_phone();
        let (answer, _) = send_with(&app, Some(&authorization), &phone).await;
        assert_eq!(answer.status, 200, "{authorization}: {answer:?}");
    }
    let (answer, _) = send_with(
        &app,
        Some(&format!("Bearer {}", KEY.to_uppercase())),
        &random_phone(),
    )
    .await;
    assert_eq!(answer.status, 401);
    // Verify needs it too.
    let (answer, _) = send_with(&app, Some(&bearer), &phone).await;
    assert_eq!(answer.status, 200);
    let code = app.last_code(&phone).await;
    assert_eq!(app.verify(&phone, &code).await.code(), 40100);
    let verify = app
        .client
        .post(app.url(paths::OTP_VERIFY))
        .bearer_auth(KEY)
        .json(&VerifyRequest::new(&phone, &code));
    assert_eq!(app.request(verify).await.status, 200);

    // The metrics count by the key's name, and never show the key.
    let metrics = app
        .client
        .get(app.admin_url(paths::METRICS))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let accepted = |operation: &str| {
        format!("vcode_api_key_requests_total{{api_key=\"{name}\",operation=\"{operation}\"}}")
    };
    let count = |line: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with(line))
            .and_then(|l| l.rsplit(' ').next())
            .map(|n| n.parse::<f64>().unwrap())
    };
    assert_eq!(count(&accepted("send")), Some(4.0), "{metrics}");
    assert_eq!(count(&accepted("verify")), Some(1.0), "{metrics}");
    assert!(count("vcode_api_key_refusals_total{operation=\"send\"}").unwrap() >= 6.0);
    assert!(!metrics.contains(KEY));
}

async fn operations_not_listed_stay_open(backend: Backend) {
    let app = app_requiring(backend, vec![Operation::Verify], "verifier").await;
    let phone = random_phone();
    let (answer, _) = send_with(&app, None, &phone).await;
    assert_eq!(answer.status, 200, "send is not listed: {answer:?}");
    assert_eq!(app.post_json(paths::CAPTCHA, &json!({})).await.status, 200);
    assert_eq!(app.get(paths::HEALTHZ).await.status, 200);
    assert_eq!(app.get(paths::JWKS).await.status, 200);
    let code = app.last_code(&phone).await;
    assert_eq!(app.verify(&phone, &code).await.code(), 40100);
}

async fn without_the_setting_no_route_needs_a_key(backend: Backend) {
    let app = spawn_app_with(backend, |_| {}).await;
    let phone = random_phone();
    // A key presented where none is required is ignored.
    let (answer, _) = send_with(&app, Some("Bearer anything"), &phone).await;
    assert_eq!(answer.status, 200);
    let code = app.last_code(&phone).await;
    assert_eq!(app.verify(&phone, &code).await.status, 200);
}

on_every_store!(
    a_key_is_required_where_listed_and_checked,
    operations_not_listed_stay_open,
    without_the_setting_no_route_needs_a_key,
);
