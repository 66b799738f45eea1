//! The proof-of-work gate through HTTP, with payloads made by an independent ALTCHA
//! implementation (the PyPI `altcha` library, `tests/pow/altcha_client.py`): the challenge
//! route, single use, refusals, the send gate's combinations (`gate.rs`), and the store role
//! on both stores (`store.rs`).

mod gate;
mod store;

use std::process::Stdio;
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use vcode::Settings;

use crate::support::app::Answer;
use crate::support::{Backend, TestApp, spawn_app_with, spawn_second_instance};

/// What CI and developers run once so that the tests can solve challenges.
const INSTALL: &str = "python3 -m pip install -r tests/pow/requirements.txt";

/// The exit status of the client when the library is missing.
const LIBRARY_MISSING: i32 = 3;

/// Generates one multi-threaded test per store (embedded, one Redis node, PostgreSQL) for each listed
/// `async fn name(Backend)`: a proof's single use is one store call, the same on every topology.
macro_rules! on_memory_and_redis {
    ($($name:ident),* $(,)?) => {
        on_stores!(memory => Memory, redis => Redis, postgres => Postgres; [$($name),*]);
    };
}
use on_memory_and_redis;

/// Challenges a debug build and the Python client solve in milliseconds.
pub(crate) fn easy_pow(settings: &mut Settings) {
    settings.pow.cost = 10;
    settings.pow.max_counter = 50;
}

async fn spawn_pow_app(backend: Backend, customise: impl FnOnce(&mut Settings)) -> TestApp {
    spawn_app_with(backend, |settings| {
        easy_pow(settings);
        customise(settings);
    })
    .await
}

/// Runs the independent ALTCHA client; fails loudly, with the install command, if it cannot.
async fn altcha_client(command: &str, input: &str) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/pow/altcha_client.py");
    let mut child = tokio::process::Command::new("python3")
        .arg(script)
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| {
            panic!("the proof-of-work tests need python3 ({error}), then: {INSTALL}")
        });
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin.write_all(input.as_bytes()).await.expect("stdin");
    drop(stdin);
    let output = child.wait_with_output().await.expect("the client ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.code() == Some(LIBRARY_MISSING) {
        panic!("the proof-of-work tests need the PyPI altcha library: {INSTALL}\n{stderr}");
    }
    assert!(
        output.status.success(),
        "altcha_client.py {command}: {stderr}"
    );
    String::from_utf8(output.stdout)
        .expect("base64 is ASCII")
        .trim()
        .to_owned()
}

/// A challenge, as the widget fetches it: status, `Cache-Control` and the raw JSON.
async fn fetch_challenge(app: &TestApp) -> (u16, String, Value) {
    let response = app
        .client
        .get(app.url("/api/v1/pow/challenge"))
        .send()
        .await
        .expect("an answer");
    let status = response.status().as_u16();
    let cache_control = response
        .headers()
        .get("cache-control")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response.json().await.expect("JSON");
    (status, cache_control, body)
}

/// A payload for a fresh challenge of `app`, solved by the independent client.
pub(crate) async fn solved_payload(app: &TestApp) -> String {
    let (status, _, challenge) = fetch_challenge(app).await;
    assert_eq!(status, 200, "{challenge}");
    altcha_client("solve", &challenge.to_string()).await
}

async fn verify(app: &TestApp, payload: &str) -> Answer {
    app.post_json("/api/v1/pow/verify", &json!({ "payload": payload }))
        .await
}

fn assert_verified(answer: &Answer) {
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(
        answer.body["data"],
        json!({ "verified": true }),
        "{answer:?}"
    );
}

fn assert_refused(answer: &Answer, why: &str) {
    assert_eq!(
        (answer.status, answer.code()),
        (400, 40021),
        "{why}: {answer:?}"
    );
}

fn decode(payload: &str) -> Value {
    let json = base64::engine::general_purpose::STANDARD
        .decode(payload)
        .expect("base64");
    serde_json::from_slice(&json).expect("JSON")
}

fn encode(payload: &Value) -> String {
    base64::engine::general_purpose::STANDARD.encode(payload.to_string())
}

#[tokio::test]
async fn the_challenge_is_the_widgets_json_uncached() {
    let app = spawn_pow_app(Backend::Memory, |_| {}).await;
    let (status, cache_control, challenge) = fetch_challenge(&app).await;
    assert_eq!(status, 200);
    assert_eq!(cache_control, "no-store");
    // No envelope: the widget reads `parameters` and `signature` at the top level.
    assert!(challenge.get("code").is_none(), "{challenge}");
    let parameters = &challenge["parameters"];
    assert_eq!(parameters["algorithm"], "PBKDF2/SHA-256");
    assert_eq!(parameters["cost"], 10);
    for field in ["nonce", "salt", "keyPrefix", "keySignature"] {
        assert!(parameters[field].is_string(), "{field}: {challenge}");
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let expires_in = parameters["expiresAt"].as_i64().expect("an expiry") - now;
    assert!((298..=300).contains(&expires_in), "{expires_in}");
    assert_eq!(challenge["signature"].as_str().map(str::len), Some(64));
    let (_, _, another) = fetch_challenge(&app).await;
    assert_ne!(another["parameters"]["nonce"], parameters["nonce"]);
}

/// A HEAD would make a challenge (a key derivation, a counted challenge) only to drop it: it is
/// refused before any is made.
#[tokio::test]
async fn head_makes_no_challenge() {
    const TOKEN: &str = "pow-admin-token-0123456789";
    let app = spawn_pow_app(Backend::Memory, |s| s.admin_token = Some(TOKEN.into())).await;
    let challenges_made = || async {
        let request = app
            .client
            .get(app.admin_url(&format!("{}?days=1", vcode_wire::paths::STATS)))
            .bearer_auth(TOKEN);
        let report = app.request(request).await;
        assert_eq!(report.status, 200, "{report:?}");
        report.body["data"]["totals"]["pow_challenges"].clone()
    };
    let head = app
        .client
        .head(app.url("/api/v1/pow/challenge"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(head.status(), 405);
    assert_eq!(head.headers()["allow"], "GET");
    assert_eq!(challenges_made().await, 0);
    // The count does see a challenge made.
    assert_eq!(fetch_challenge(&app).await.0, 200);
    assert_eq!(challenges_made().await, 1);
}

async fn an_independently_solved_payload_is_accepted_once(backend: Backend) {
    let app = spawn_pow_app(backend, |_| {}).await;
    let payload = solved_payload(&app).await;
    assert_verified(&verify(&app, &payload).await);
    assert_refused(&verify(&app, &payload).await, "replay");
    assert_verified(&verify(&app, &solved_payload(&app).await).await);
}

async fn fifty_parallel_verifies_of_one_payload_succeed_once(backend: Backend) {
    let app = spawn_pow_app(backend, |_| {}).await;
    let payload = solved_payload(&app).await;
    let bodies = vec![json!({ "payload": payload }); 50];
    let tally = post_at_once(&app.url("/api/v1/pow/verify"), bodies).await;
    assert_eq!(tally.get(&(200, 200)), Some(&1), "{tally:?}");
    assert_eq!(tally.get(&(400, 40021)), Some(&49), "{tally:?}");
}

/// Posts every body at once, each on its own connection; counts the answers by (HTTP status,
/// envelope code).
async fn post_at_once(
    url: &str,
    bodies: Vec<Value>,
) -> std::collections::HashMap<(u16, i64), usize> {
    let requests = bodies.into_iter().map(|body| {
        let url = url.to_owned();
        tokio::spawn(async move {
            let client = reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .build()
                .expect("client");
            let response = client.post(url).json(&body).send().await.expect("answer");
            let status = response.status().as_u16();
            let envelope: Value = response.json().await.expect("envelope");
            (status, envelope["code"].as_i64().unwrap_or_default())
        })
    });
    let mut tally = std::collections::HashMap::new();
    for answer in futures::future::join_all(requests).await {
        *tally.entry(answer.expect("task")).or_default() += 1;
    }
    tally
}

on_memory_and_redis!(
    an_independently_solved_payload_is_accepted_once,
    fifty_parallel_verifies_of_one_payload_succeed_once,
);

#[tokio::test]
async fn missing_malformed_foreign_and_tampered_payloads_are_refused() {
    let app = spawn_pow_app(Backend::Memory, |_| {}).await;
    let missing = app.post_json("/api/v1/pow/verify", &json!({})).await;
    assert_refused(&missing, "no payload");
    assert_refused(&verify(&app, "").await, "empty");
    assert_refused(&verify(&app, "bm90IGpzb24=").await, "not JSON");
    let widget_test_mode = encode(&json!({"challenge": null, "solution": null, "test": true}));
    assert_refused(&verify(&app, &widget_test_mode).await, "widget test mode");

    let foreign = altcha_client("foreign", "").await;
    assert_verified_shape(&foreign);
    assert_refused(&verify(&app, &foreign).await, "signed by another key");

    let genuine = solved_payload(&app).await;
    let original = decode(&genuine);
    let tampered = [
        ("/challenge/parameters/cost", json!(1)),
        ("/challenge/parameters/keyPrefix", json!("00")),
        ("/challenge/parameters/expiresAt", json!(4_102_444_800u64)),
        ("/challenge/parameters/keySignature", json!("00")),
        ("/challenge/signature", json!("00".repeat(32))),
        ("/solution/derivedKey", json!("00".repeat(32))),
        ("/solution/counter", json!("one")),
    ];
    for (pointer, value) in tampered {
        let mut payload = original.clone();
        *payload.pointer_mut(pointer).expect(pointer) = value;
        assert_refused(&verify(&app, &encode(&payload)).await, pointer);
    }
    let mut unsigned = original.clone();
    unsigned["challenge"]
        .as_object_mut()
        .unwrap()
        .remove("signature");
    assert_refused(&verify(&app, &encode(&unsigned)).await, "no signature");
    // Refusals recorded nothing: the genuine payload still opens once.
    assert_verified(&verify(&app, &genuine).await);
    assert_refused(&verify(&app, &genuine).await, "replay");
}

/// The foreign payload is a well-formed ALTCHA v2 payload: refused for its key, not its form.
fn assert_verified_shape(payload: &str) {
    let payload = decode(payload);
    assert!(payload["challenge"]["parameters"]["keyPrefix"].is_string());
    assert!(payload["challenge"]["signature"].is_string());
    assert!(payload["solution"]["derivedKey"].is_string());
}

#[tokio::test]
async fn an_expired_challenge_is_refused() {
    let app = spawn_pow_app(Backend::Memory, |s| s.pow.ttl = Duration::from_secs(1)).await;
    let payload = solved_payload(&app).await;
    let expires_at = decode(&payload)["challenge"]["parameters"]["expiresAt"]
        .as_u64()
        .unwrap();
    // Expired once the clock passes `expiresAt` (whole seconds).
    let expired_at = std::time::UNIX_EPOCH + Duration::from_secs(expires_at + 1);
    if let Ok(wait) = expired_at.duration_since(std::time::SystemTime::now()) {
        tokio::time::sleep(wait + Duration::from_millis(50)).await;
    }
    assert_refused(&verify(&app, &payload).await, "expired");
}

async fn one_use_across_instances_sharing_a_store_and_their_key(backend: Backend) {
    let first = spawn_pow_app(backend, |_| {}).await;
    let second = spawn_second_instance(&first, easy_pow).await;
    let payload = solved_payload(&first).await;
    assert_verified(&verify(&second, &payload).await);
    assert_refused(
        &verify(&first, &payload).await,
        "used on the other instance",
    );

    // An instance with another key refuses what the others signed.
    let stranger = spawn_second_instance(&first, |s| {
        easy_pow(s);
        // Challenges are signed with a key derived from the secret key.
        s.secret_key = Some(std::sync::Arc::new(vcode::keyring::SecretKey::random()));
    })
    .await;
    assert_refused(
        &verify(&stranger, &solved_payload(&first).await).await,
        "other key",
    );
}

on_stores!(
    shared_redis => Redis, shared_postgres => Postgres;
    [one_use_across_instances_sharing_a_store_and_their_key]
);
