//! Authenticator apps on `/api/v1/totp` against implementations no one here wrote: PyPI
//! `pyotp` reads every URI vcode hands out (`pyotp.parse_uri`) and computes the codes typed
//! here, PyPI `zxing-cpp` reads the QR code PNG back to the same URI (tests/totp). On every
//! store: enrolment, confirmation, the token, codes at the skew's edges, a replay, a lock, a
//! deleted factor, another key's identity, and concurrent checks of one code (one passes).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use vcode::api_keys::{ApiKeySettings, ApiKeys, Operation};

use crate::support::{Backend, TestApp, spawn_app_with};

const KEY: &str = "vck_totp_test_key_one_0123456789abcdefghij";
const OTHER_KEY: &str = "vck_totp_test_key_two_0123456789abcdefghij";

async fn app(backend: Backend) -> TestApp {
    let entries = format!(
        "shop:{}\nother:{}",
        hex::encode(Sha256::digest(KEY)),
        hex::encode(Sha256::digest(OTHER_KEY))
    );
    spawn_app_with(backend, |s| {
        s.api_key = ApiKeySettings {
            required: vec![Operation::Verify],
        };
        s.api_keys = Some(ApiKeys::parse(&entries).unwrap());
    })
    .await
}

async fn call(
    app: &TestApp,
    method: reqwest::Method,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> (u16, Option<String>, Value) {
    let mut request = app.client.request(method, app.url(path)).bearer_auth(key);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let answer = app.request(request).await;
    (answer.status, answer.retry_after, answer.body)
}

async fn post(app: &TestApp, path: &str, key: &str, body: Value) -> (u16, Option<String>, Value) {
    call(app, reqwest::Method::POST, path, key, Some(body)).await
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// What pyotp and zxing-cpp make of an enrolment: its URI parsed, its QR code read, and the
/// codes at `now + offset`.
fn authenticator(uri: &str, png_base64: &str, now: u64, offsets: &[i64]) -> Value {
    let png = base64::engine::general_purpose::STANDARD
        .decode(png_base64)
        .unwrap();
    let file = std::env::temp_dir().join(format!("vcode-totp-{}.png", rand::random::<u64>()));
    std::fs::write(&file, png).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/totp/authenticator.py");
    let output = std::process::Command::new("python3")
        .arg(script)
        .arg(&file)
        .arg(uri)
        .arg(now.to_string())
        .args(offsets.iter().map(i64::to_string))
        .output()
        .expect("python3 runs");
    let _ = std::fs::remove_file(&file);
    assert!(
        output.status.success(),
        "authenticator.py (pip install -r tests/totp/requirements.txt):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Waits until a 30 s step has at least 12 s left, so that codes computed now stay in their
/// step while the test types them.
async fn early_in_a_step() -> u64 {
    while unix_now() % 30 > 18 {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    unix_now()
}

fn path(identity: &str, tail: &str) -> String {
    format!("/api/v1/totp/{identity}{tail}")
}

async fn enrol(app: &TestApp, identity: &str, body: Value) -> Value {
    let (status, _, answer) = post(app, &path(identity, "/factors"), KEY, body).await;
    assert_eq!(status, 200, "{answer}");
    answer["data"].clone()
}

async fn authenticator_apps_enrol_confirm_and_verify(backend: Backend) {
    let app = app(backend).await;
    let identity = "user-42@example.com";
    // An issuer with a colon would make the label ambiguous: refused.
    let (status, _, answer) = post(
        &app,
        &path(identity, "/factors"),
        KEY,
        json!({"issuer": "Acme: Ops"}),
    )
    .await;
    assert_eq!(
        (status, answer["code"].as_i64()),
        (400, Some(40000)),
        "{answer}"
    );
    let data = enrol(
        &app,
        identity,
        json!({"friendly_name": "Alice's phone: work", "issuer": "Acme Co"}),
    )
    .await;
    let factor = data["factor"]["factor_id"].as_str().unwrap().to_owned();
    assert!(factor.starts_with("YF") && factor.len() == 34, "{factor}");
    assert_eq!(data["factor"]["status"], "unverified");
    let uri = data["uri"].as_str().unwrap();
    let secret = data["secret"].as_str().unwrap();
    assert!(
        secret.len() >= 32,
        "160 bits are 32 base32 digits: {secret}"
    );

    // pyotp reads the URI as an app does; the QR code holds the same URI.
    let now = early_in_a_step().await;
    let read = authenticator(
        uri,
        data["qr_png"].as_str().unwrap(),
        now,
        &[-60, -30, 0, 30, 60],
    );
    assert_eq!(read["secret"], secret);
    assert_eq!(read["issuer"], "Acme Co");
    assert_eq!(read["name"], "Alice's phone: work");
    assert_eq!(
        (read["digits"].as_u64(), read["period"].as_u64()),
        (Some(6), Some(30))
    );
    assert_eq!(read["algorithm"], "sha1");
    assert_eq!(read["qr"], json!([uri]));
    let code = |offset: &str| read["codes"][offset].as_str().unwrap().to_owned();

    // Not verified yet: no check; the first right code confirms.
    let verify = path(identity, "/verify");
    let (status, _, answer) = post(
        &app,
        &verify,
        KEY,
        json!({"factor_id": factor, "code": code("0")}),
    )
    .await;
    assert_eq!(
        (status, answer["code"].as_i64()),
        (400, Some(40000)),
        "{answer}"
    );
    let confirm = path(identity, &format!("/factors/{factor}/confirm"));
    let (status, _, answer) = post(&app, &confirm, KEY, json!({"code": code("-30")})).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["data"]["status"], "verified");

    // Codes two steps away are refused; one step each way and now are accepted, each once,
    // in order (a step before one accepted is spent).
    for outside in ["-60", "60"] {
        let (status, _, answer) = post(
            &app,
            &verify,
            KEY,
            json!({"factor_id": factor, "code": code(outside)}),
        )
        .await;
        assert_eq!(
            (status, answer["code"].as_i64()),
            (400, Some(40010)),
            "{outside}: {answer}"
        );
    }
    let (status, _, answer) = post(
        &app,
        &verify,
        KEY,
        json!({"factor_id": factor, "code": code("-30")}),
    )
    .await;
    assert_eq!(
        answer["code"].as_i64(),
        Some(40010),
        "the confirming code is spent: {status} {answer}"
    );
    let (status, _, answer) = post(
        &app,
        &verify,
        KEY,
        json!({"factor_id": factor, "code": code("0"), "audience": "shop"}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let token = answer["data"]["token"].as_str().unwrap();
    let claims: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(claims["channel"], "totp");
    assert_eq!(claims["sub"], identity);
    assert_eq!(claims["vid"], factor.as_str());
    assert_eq!(claims["purpose"], "login");
    assert_eq!(claims["aud"], "shop");
    let (status, _, answer) = post(
        &app,
        &verify,
        KEY,
        json!({"factor_id": factor, "code": code("0")}),
    )
    .await;
    assert_eq!(
        (status, answer["code"].as_i64()),
        (400, Some(40010)),
        "a replay: {answer}"
    );
    let (status, _, answer) = post(
        &app,
        &verify,
        KEY,
        json!({"factor_id": factor, "code": code("30")}),
    )
    .await;
    assert_eq!(status, 200, "the next step, early: {answer}");

    // Another key's identity of the same name is another.
    let (status, _, _) = post(
        &app,
        &verify,
        OTHER_KEY,
        json!({"factor_id": factor, "code": code("0")}),
    )
    .await;
    assert_eq!(status, 404);
    let (status, _, answer) = call(
        &app,
        reqwest::Method::GET,
        &path(identity, "/factors"),
        KEY,
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(answer["data"]["factors"].as_array().unwrap().len(), 1);
    assert!(
        !answer.to_string().contains(secret),
        "the secret is shown once"
    );
    // No key: refused.
    let answer = app
        .request(app.client.get(app.url(&path(identity, "/factors"))))
        .await;
    assert_eq!(answer.status, 401);

    // Deleted: its codes no longer verify.
    let (status, _, _) = call(
        &app,
        reqwest::Method::DELETE,
        &path(identity, &format!("/factors/{factor}")),
        KEY,
        None,
    )
    .await;
    assert_eq!(status, 200);
    let (status, _, _) = post(
        &app,
        &verify,
        KEY,
        json!({"factor_id": factor, "code": code("30")}),
    )
    .await;
    assert_eq!(status, 404);
}

async fn five_wrong_codes_lock_a_factor(backend: Backend) {
    let app = app(backend).await;
    let data = enrol(
        &app,
        "locked-user",
        json!({"digits": 8, "algorithm": "sha256"}),
    )
    .await;
    let factor = data["factor"]["factor_id"].as_str().unwrap().to_owned();
    let now = early_in_a_step().await;
    let read = authenticator(
        data["uri"].as_str().unwrap(),
        data["qr_png"].as_str().unwrap(),
        now,
        &[0, 30],
    );
    assert_eq!(
        (read["digits"].as_u64(), read["algorithm"].as_str()),
        (Some(8), Some("sha256"))
    );
    let confirm = path("locked-user", &format!("/factors/{factor}/confirm"));
    let right = read["codes"]["0"].as_str().unwrap().to_owned();
    let (status, _, _) = post(&app, &confirm, KEY, json!({"code": right})).await;
    assert_eq!(status, 200);
    let wrong = if read["codes"]["30"] == "00000000" {
        "11111111"
    } else {
        "00000000"
    };
    let verify = path("locked-user", "/verify");
    for left in (1..5).rev() {
        let (status, _, answer) = post(
            &app,
            &verify,
            KEY,
            json!({"factor_id": factor, "code": wrong}),
        )
        .await;
        assert_eq!(status, 400, "{answer}");
        assert_eq!(
            answer["data"]["remaining_attempts"].as_u64(),
            Some(left),
            "{answer}"
        );
    }
    let (status, retry_after, answer) = post(
        &app,
        &verify,
        KEY,
        json!({"factor_id": factor, "code": wrong}),
    )
    .await;
    assert_eq!(
        (status, answer["code"].as_i64()),
        (429, Some(42902)),
        "{answer}"
    );
    let retry: u64 = retry_after.unwrap().parse().unwrap();
    assert!((290..=300).contains(&retry), "{retry}");
    let next = read["codes"]["30"].as_str().unwrap();
    let (status, retry_after, _) = post(
        &app,
        &verify,
        KEY,
        json!({"factor_id": factor, "code": next}),
    )
    .await;
    assert_eq!(status, 429, "locked: even the right code is refused");
    assert!(retry_after.is_some());
}

/// Eight checks of one right code at once: exactly one passes, on every store.
async fn a_code_is_accepted_once_under_concurrency(backend: Backend) {
    let app = app(backend).await;
    let data = enrol(&app, "racer", json!({})).await;
    let factor = data["factor"]["factor_id"].as_str().unwrap().to_owned();
    let now = early_in_a_step().await;
    let read = authenticator(
        data["uri"].as_str().unwrap(),
        data["qr_png"].as_str().unwrap(),
        now,
        &[-30, 0],
    );
    let confirm = path("racer", &format!("/factors/{factor}/confirm"));
    let (status, _, _) = post(&app, &confirm, KEY, json!({"code": read["codes"]["-30"]})).await;
    assert_eq!(status, 200);
    let verify = path("racer", "/verify");
    let body = json!({"factor_id": factor, "code": read["codes"]["0"]});
    let answers =
        futures::future::join_all((0..8).map(|_| post(&app, &verify, KEY, body.clone()))).await;
    let passed = answers
        .iter()
        .filter(|(status, _, _)| *status == 200)
        .count();
    assert_eq!(passed, 1, "{answers:?}");
    // The others are replays: wrong codes, which lock the factor at the fifth.
    assert!(
        answers.iter().all(|(status, _, answer)| *status == 200
            || [Some(40010), Some(42902)].contains(&answer["code"].as_i64())),
        "{answers:?}"
    );
}

/// A factor's life as an application's webhook receives it (the official Standard Webhooks
/// library verifies each): created, verified, a failed and an approved check, deleted, in
/// order, never with the secret or a code.
async fn a_factor_s_events_arrive_in_order_without_secret_or_code(backend: Backend) {
    use crate::support::event_receiver::{Receiver, events_to, new_secret};
    let secret = new_secret();
    let Some(receiver) = Receiver::start(&secret, "a_factor_s_events_arrive") else {
        return;
    };
    let entries = format!("shop:{}", hex::encode(Sha256::digest(KEY)));
    let events = events_to(&receiver.url, &[&secret]);
    let app = spawn_app_with(backend, |s| {
        s.api_key = ApiKeySettings {
            required: vec![Operation::Verify],
        };
        s.api_keys = Some(ApiKeys::parse(&entries).unwrap());
        s.events = events;
    })
    .await;
    let data = enrol(&app, "evented", json!({})).await;
    let factor = data["factor"]["factor_id"].as_str().unwrap().to_owned();
    let totp_secret = data["secret"].as_str().unwrap().to_owned();
    let now = early_in_a_step().await;
    let read = authenticator(
        data["uri"].as_str().unwrap(),
        data["qr_png"].as_str().unwrap(),
        now,
        &[0, 30],
    );
    let (right, next) = (
        read["codes"]["0"].as_str().unwrap().to_owned(),
        read["codes"]["30"].as_str().unwrap().to_owned(),
    );
    let wrong = if right == "000000" || next == "000000" {
        "999999"
    } else {
        "000000"
    };
    let confirm = path("evented", &format!("/factors/{factor}/confirm"));
    assert_eq!(
        post(&app, &confirm, KEY, json!({"code": right})).await.0,
        200
    );
    let verify = path("evented", "/verify");
    let body = |code: &str| json!({"factor_id": factor, "code": code});
    assert_eq!(post(&app, &verify, KEY, body(wrong)).await.0, 400);
    assert_eq!(post(&app, &verify, KEY, body(&next)).await.0, 200);
    let delete = path("evented", &format!("/factors/{factor}"));
    assert_eq!(
        call(&app, reqwest::Method::DELETE, &delete, KEY, None)
            .await
            .0,
        200
    );

    let expected = [
        "factor.created",
        "factor.verified",
        "challenge.failed",
        "challenge.approved",
        "factor.deleted",
    ];
    let mut received = Vec::new();
    for _ in 0..200 {
        received = receiver
            .deliveries()
            .await
            .into_iter()
            .filter(|hook| hook.accepted())
            .filter(|hook| {
                hook.data
                    .as_ref()
                    .and_then(|data| data["factor_id"].as_str())
                    == Some(&factor)
            })
            .collect();
        if received.len() >= expected.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let kinds: Vec<&str> = received
        .iter()
        .filter_map(|hook| hook.kind.as_deref())
        .collect();
    assert_eq!(kinds, expected, "{received:#?}");
    for hook in &received {
        let data = hook.data.as_ref().unwrap();
        assert_eq!(
            (data["identity"].as_str(), data["api_key"].as_str()),
            (Some("evented"), Some("shop"))
        );
        for never in [totp_secret.as_str(), &right, &next, wrong] {
            assert!(!hook.raw.contains(never), "{never} in {}", hook.raw);
        }
    }
    assert_eq!(received[2].data.as_ref().unwrap()["reason"], "wrong_code");
}

/// A secret at rest is sealed (neither its base32 nor its bytes in the store), and a key
/// rotation keeps factors working: an instance with the new key alone cannot open a secret
/// sealed under the old one; with the old one as previous it checks the code and seals the
/// secret again, after which the new key alone opens it.
async fn secrets_are_sealed_and_survive_a_key_rotation(backend: Backend) {
    use std::sync::Arc;

    use vcode::keyring::SecretKey;

    use crate::support::codes::TEST_SECRET_KEY;
    use crate::support::spawn_second_instance;

    let before = app(backend).await;
    let data = enrol(&before, "rotated", json!({})).await;
    let factor = data["factor"]["factor_id"].as_str().unwrap().to_owned();
    let secret = data["secret"].as_str().unwrap().to_owned();
    let now = early_in_a_step().await;
    let read = authenticator(
        data["uri"].as_str().unwrap(),
        data["qr_png"].as_str().unwrap(),
        now,
        &[0, 30],
    );
    let confirm = path("rotated", &format!("/factors/{factor}/confirm"));
    assert_eq!(
        post(&before, &confirm, KEY, json!({"code": read["codes"]["0"]}))
            .await
            .0,
        200
    );
    let stored = || async {
        before
            .store
            .factors
            .totp_record("key:shop", "rotated", &factor)
            .await
            .unwrap()
            .unwrap()
            .body
    };
    let sealed_under_a = stored().await;
    let secret_bytes = data_encoding_base32(&secret);
    assert!(!sealed_under_a.contains(&secret), "{sealed_under_a}");
    assert!(!sealed_under_a.contains(&hex::encode(&secret_bytes)));
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&secret_bytes);
    assert!(!sealed_under_a.contains(&b64[..20]));

    let key_b = Arc::new(SecretKey::parse(&hex::encode(rand::random::<[u8; 32]>())).unwrap());
    let entries = format!(
        "shop:{}\nother:{}",
        hex::encode(Sha256::digest(KEY)),
        hex::encode(Sha256::digest(OTHER_KEY))
    );
    let with_keys = |s: &mut vcode::Settings, previous: bool| {
        s.api_key = ApiKeySettings {
            required: vec![Operation::Verify],
        };
        s.api_keys = Some(ApiKeys::parse(&entries).unwrap());
        s.secret_key = Some(key_b.clone());
        s.secret_key_previous =
            previous.then(|| Arc::new(SecretKey::parse(TEST_SECRET_KEY).unwrap()));
    };
    let verify = path("rotated", "/verify");
    let wrong = if read["codes"]["30"] == "000000" {
        "111111"
    } else {
        "000000"
    };
    let new_only = spawn_second_instance(&before, |s| with_keys(s, false)).await;
    let (status, _, answer) = post(
        &new_only,
        &verify,
        KEY,
        json!({"factor_id": factor, "code": wrong}),
    )
    .await;
    assert_eq!(status, 500, "sealed under the old key: {answer}");
    let rotated = spawn_second_instance(&before, |s| with_keys(s, true)).await;
    let (status, _, answer) = post(
        &rotated,
        &verify,
        KEY,
        json!({"factor_id": factor, "code": read["codes"]["30"]}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_ne!(
        stored().await,
        sealed_under_a,
        "sealed again under the new key"
    );
    let (status, _, answer) = post(
        &new_only,
        &verify,
        KEY,
        json!({"factor_id": factor, "code": wrong}),
    )
    .await;
    assert_eq!(
        (status, answer["code"].as_i64()),
        (400, Some(40010)),
        "the new key alone opens it now: {answer}"
    );
}

/// The demo page's authenticator-app card in headless Chromium (tests/browser/totp_flow.py):
/// set up, the QR code the page shows read by zxing-cpp, confirmed and signed in with pyotp's
/// codes, a wrong code shown as a sentence, the token's `channel` `totp`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_demo_enrols_and_checks_an_authenticator_app_in_chromium() {
    if let Some(why) = crate::browser::missing_browser() {
        assert!(
            std::env::var_os("TEST_REQUIRE_SDK").is_none(),
            "TEST_REQUIRE_SDK is set but the browser cannot run: {why}"
        );
        eprintln!("\n*** SKIPPED the demo's authenticator app in a browser: {why}\n");
        return;
    }
    let app = spawn_app_with(Backend::Memory, |settings| settings.dev_mode = true).await;
    let manifest = env!("CARGO_MANIFEST_DIR");
    let run = tokio::process::Command::new("python3")
        .arg(format!("{manifest}/tests/browser/totp_flow.py"))
        .args(["--url", &app.address])
        .args([
            "--screenshots",
            &format!("{manifest}/target/demo-screenshots"),
        ])
        .env("SE_OFFLINE", "true")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(90), run)
        .await
        .expect("the browser finishes in time")
        .expect("python3 runs");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success() && report.contains("totp flow passed"),
        "a step failed:\n{report}"
    );
}

/// Base32 (RFC 4648, unpadded) as authenticator apps read it.
fn data_encoding_base32(text: &str) -> Vec<u8> {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let (mut bits, mut value, mut out) = (0u32, 0u32, Vec::new());
    for c in text.bytes() {
        let index = alphabet.iter().position(|&a| a == c).unwrap() as u32;
        value = (value << 5) | index;
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((value >> bits) as u8);
            value &= (1 << bits) - 1;
        }
    }
    out
}

mod rotation {
    on_stores!(
        redis => Redis, postgres => Postgres;
        [secrets_are_sealed_and_survive_a_key_rotation]
    );
    use super::secrets_are_sealed_and_survive_a_key_rotation;
}

on_every_store!(
    a_factor_s_events_arrive_in_order_without_secret_or_code,
    authenticator_apps_enrol_confirm_and_verify,
    five_wrong_codes_lock_a_factor,
    a_code_is_accepted_once_under_concurrency,
);
