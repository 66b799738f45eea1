//! API keys on `otp/send` and `otp/verify` (`VCODE_REQUIRE_API_KEY`, `VCODE_API_KEYS`): missing,
//! wrong and right keys, the scheme's case, the key's name in the metrics, routes not listed
//! staying open, a refusal before the body is read, and callers that do not share
//! `Idempotency-Key`s. That a key never reaches the logs is tests/api_key_cli.rs (the binary).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::json;
use sha2::{Digest, Sha256};
use vcode::api_keys::{ApiKeySettings, ApiKeys, Operation};
use vcode_wire::{SendRequest, VerifyRequest, headers, paths};

use crate::support::app::Answer;
use crate::support::{Backend, TestApp, random_phone, spawn_app_with};

const KEY: &str = "vck_test-key-0123456789abcdefghijklmnopqrstu";
const OTHER_KEY: &str = "vck_other-key-0123456789abcdefghijklmnopqrs";

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
    let id = answer.verification_id();
    let code = app.last_code(&phone).await;
    assert_eq!(app.verify_id(&id, &code).await.code(), 40100);
    let verify = app
        .client
        .post(app.url(paths::OTP_VERIFY))
        .bearer_auth(KEY)
        .json(&VerifyRequest::with_id(&id, &code));
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
    let id = answer.verification_id();
    assert_eq!(app.verify_id(&id, &code).await.code(), 40100);
}

async fn without_the_setting_no_route_needs_a_key(backend: Backend) {
    let app = spawn_app_with(backend, |_| {}).await;
    let phone = random_phone();
    // A key presented where none is required is ignored.
    let (answer, _) = send_with(&app, Some("Bearer anything"), &phone).await;
    assert_eq!(answer.status, 200);
    let code = app.last_code(&phone).await;
    let verified = app.verify_id(&answer.verification_id(), &code).await;
    assert_eq!(verified.status, 200, "{verified:?}");
}

/// Two callers, "billing" (`KEY`) and "shop" (`OTHER_KEY`), keyed for sends.
async fn app_with_two_callers(backend: Backend) -> TestApp {
    let entries = format!(
        "billing:{},shop:{}",
        hex::encode(Sha256::digest(KEY)),
        hex::encode(Sha256::digest(OTHER_KEY))
    );
    spawn_app_with(backend, |s| {
        s.api_key = ApiKeySettings {
            required: vec![Operation::Send],
        };
        s.api_keys = Some(ApiKeys::parse(&entries).unwrap());
    })
    .await
}

/// `otp/send` as the caller of `key`, with this `Idempotency-Key`.
async fn send_as(app: &TestApp, key: &str, idempotency_key: &str, phone: &str) -> Answer {
    app.request(
        app.client
            .post(app.url(paths::OTP_SEND))
            .bearer_auth(key)
            .header(headers::IDEMPOTENCY_KEY, idempotency_key)
            .json(&SendRequest::new(phone)),
    )
    .await
}

async fn callers_do_not_share_idempotency_keys(backend: Backend) {
    let app = app_with_two_callers(backend).await;
    let (billed, shopped) = (random_phone(), random_phone());
    let billing = send_as(&app, KEY, "order-1", &billed).await;
    assert_eq!(billing.status, 200, "{billing:?}");
    // Billing's key with another body is no 422 for shop (nothing tells shop billing used it).
    let shop = send_as(&app, OTHER_KEY, "order-1", &shopped).await;
    assert_eq!(shop.status, 200, "{shop:?}");
    assert_eq!(app.inbox(&shopped).await.len(), 1);
    // Each caller's repeat still gets its own stored answer, without a second SMS.
    assert_eq!(
        send_as(&app, KEY, "order-1", &billed).await.body,
        billing.body
    );
    assert_eq!(
        send_as(&app, OTHER_KEY, "order-1", &shopped).await.body,
        shop.body
    );
    assert_eq!(app.inbox(&billed).await.len(), 1);
    assert_eq!(app.inbox(&shopped).await.len(), 1);

    // The same key and the same body from shop is shop's own request: it runs, and meets the
    // cooldown of billing's code, instead of being answered billing's 200.
    let phone = random_phone();
    let first = send_as(&app, KEY, "order-2", &phone).await;
    assert_eq!(first.status, 200, "{first:?}");
    let other = send_as(&app, OTHER_KEY, "order-2", &phone).await;
    assert_eq!((other.status, other.code()), (429, 42900), "{other:?}");
    assert_eq!(app.inbox(&phone).await.len(), 1);
}

/// A request whose head arrives and whose body stalls after a few bytes: the answer as read
/// (until a final status line, or `wait`) and how long it took.
fn stalled_body(
    address: &str,
    path: &str,
    authorization: Option<&str>,
    wait: Duration,
) -> (String, Duration) {
    let mut stream = TcpStream::connect(address).expect("the app listens");
    stream.set_read_timeout(Some(wait)).unwrap();
    let authorization = authorization
        .map(|value| format!("authorization: {value}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         content-length: 64\r\n{authorization}\r\n{{\"phone\":"
    );
    let started = Instant::now();
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let mut chunk = [0; 4096];
    while let Ok(read @ 1..) = stream.read(&mut chunk) {
        answer.extend_from_slice(&chunk[..read]);
        let text = String::from_utf8_lossy(&answer);
        if text.contains("\r\n\r\n") && text.contains("}") {
            break;
        }
    }
    (
        String::from_utf8_lossy(&answer).into_owned(),
        started.elapsed(),
    )
}

async fn a_missing_key_is_refused_before_the_body_is_read(backend: Backend) {
    let body_timeout = Duration::from_secs(3);
    let entry = format!("shop:{}", hex::encode(Sha256::digest(KEY)));
    let app = spawn_app_with(backend, |s| {
        s.api_key = ApiKeySettings {
            required: vec![Operation::Send, Operation::Verify],
        };
        s.api_keys = Some(ApiKeys::parse(&entry).unwrap());
        s.body_timeout = body_timeout;
    })
    .await;
    let address = app.address.trim_start_matches("http://").to_owned();
    let cases = [
        (paths::OTP_SEND, None),
        (paths::OTP_SEND, Some("Bearer vck_wrong")),
        // As the router reads it: `%73` is an `s`.
        ("/api/v1/otp/%73end", None),
        (paths::OTP_VERIFY, None),
    ];
    for (path, authorization) in cases {
        let (answer, took) = tokio::task::spawn_blocking({
            let address = address.clone();
            move || stalled_body(&address, path, authorization, Duration::from_secs(5))
        })
        .await
        .unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 401"),
            "{path} {authorization:?}: {answer}"
        );
        assert!(
            answer
                .to_ascii_lowercase()
                .contains("www-authenticate: bearer"),
            "{answer}"
        );
        assert!(answer.contains("40100"), "{answer}");
        assert!(
            took < Duration::from_millis(1500),
            "{path}: answered after {took:?}, not before the body"
        );
    }
    // With the right key the stalled body is waited for, up to its deadline: the refusals
    // above did not wait because they never read it.
    let bearer = format!("Bearer {KEY}");
    let (answer, took) = tokio::task::spawn_blocking(move || {
        stalled_body(
            &address,
            paths::OTP_SEND,
            Some(&bearer),
            Duration::from_secs(10),
        )
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        took >= body_timeout - Duration::from_millis(200),
        "{took:?}"
    );
}

on_every_store!(
    callers_do_not_share_idempotency_keys,
    a_missing_key_is_refused_before_the_body_is_read,
    a_key_is_required_where_listed_and_checked,
    operations_not_listed_stay_open,
    without_the_setting_no_route_needs_a_key,
);
