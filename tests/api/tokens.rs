//! Verification tokens over HTTP, checked by an independent implementation: the backend recipe
//! of docs/tokens.md (PyJWT) fetches the live instance's JWKS and verifies what `otp/verify`
//! answered. Also: a bad audience consumes nothing, rotation keeps old tokens valid, and
//! instances sharing a store sign with the same key.

use std::io::Write;
use std::process::{Command, Stdio};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use vcode::Settings;
use vcode::token::parse_pem_keys;
use vcode_wire::{VerifyData, VerifyRequest, paths};

use crate::support::app::{Answer, verify_request};
use crate::support::{Backend, TestApp, random_phone, spawn_app_with, spawn_second_instance};

const ISSUER: &str = "https://vcode.test";
const AUDIENCE: &str = "https://shop.example/login";

/// The backend's check as docs/tokens.md shows it.
pub const RECIPE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tokens/verify_token.py");

fn with_issuer(settings: &mut Settings) {
    settings.token.issuer = ISSUER.to_owned();
}

/// What the documented recipe says of each token, checked against `app`'s JWKS.
fn recipe_checks(app: &TestApp, audience: &str, tokens: &[&str]) -> Vec<Value> {
    let mut child = Command::new("python3")
        .arg(RECIPE)
        .args([&app.url(paths::JWKS), ISSUER, audience])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("python3 runs {RECIPE}: {e}; install python3"));
    let mut stdin = child.stdin.take().expect("piped");
    for token in tokens {
        writeln!(stdin, "{token}").expect("python3 reads the tokens");
    }
    drop(stdin);
    let output = child.wait_with_output().expect("python3 ran");
    assert!(
        output.status.success(),
        "the recipe failed (pip install -r tests/tokens/requirements.txt): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("UTF-8")
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON line per token"))
        .collect()
}

async fn verify_with_audience(app: &TestApp, phone: &str, code: &str, audience: &str) -> Answer {
    let body = VerifyRequest {
        audience: Some(audience.to_owned()),
        ..verify_request(phone, code)
    };
    app.post_json(paths::OTP_VERIFY, &body).await
}

/// A verified phone's token (sent, then verified for `AUDIENCE`).
async fn token_of(app: &TestApp, phone: &str) -> String {
    assert_eq!(app.send(phone).await.status, 200);
    let code = app.last_code(phone).await;
    let answer = verify_with_audience(app, phone, &code, AUDIENCE).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.data::<VerifyData>().token.expect("a token")
}

fn header_kid(token: &str) -> String {
    let header = token.split('.').next().expect("a header");
    let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).unwrap()).unwrap();
    assert_eq!(header["alg"], "EdDSA");
    header["kid"].as_str().expect("a kid").to_owned()
}

async fn a_backend_verifies_the_token_with_the_published_keys(backend: Backend) {
    let app = spawn_app_with(backend, |s| {
        with_issuer(s);
        s.token.ttl = std::time::Duration::from_secs(120);
    })
    .await;
    let phone = random_phone();
    let token = token_of(&app, &phone).await;

    let jwks = app.client.get(app.url(paths::JWKS)).send().await.unwrap();
    assert_eq!(jwks.status(), 200);
    let cache = jwks.headers()["cache-control"].to_str().unwrap().to_owned();
    assert_eq!(cache, "public, max-age=300");
    let jwks: Value = jwks.json().await.unwrap();
    let key = &jwks["keys"][0];
    assert_eq!(
        (&key["kty"], &key["crv"], &key["alg"], &key["use"]),
        (
            &json!("OKP"),
            &json!("Ed25519"),
            &json!("EdDSA"),
            &json!("sig")
        )
    );
    assert_eq!(key["kid"], header_kid(&token));
    assert!(key.get("d").is_none(), "the private key is never published");

    // PyJWT: the claims, then the same token again (a replay), then a tampered one.
    let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
    let mut claims: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&parts[1]).unwrap()).unwrap();
    claims["sub"] = json!(random_phone());
    parts[1] = URL_SAFE_NO_PAD.encode(claims.to_string());
    let tampered = parts.join(".");
    let checked = recipe_checks(&app, AUDIENCE, &[&token, &token, &tampered]);
    let claims = &checked[0];
    assert_eq!(claims["iss"], ISSUER, "{checked:?}");
    assert_eq!(claims["sub"], phone.as_str());
    assert_eq!(claims["aud"], AUDIENCE);
    assert_eq!(claims["purpose"], "login");
    assert_eq!(
        claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap(),
        120
    );
    assert_eq!(
        URL_SAFE_NO_PAD
            .decode(claims["jti"].as_str().unwrap())
            .unwrap()
            .len(),
        16
    );
    assert!(
        checked[1]["error"]
            .as_str()
            .unwrap()
            .contains("already used"),
        "{checked:?}"
    );
    assert!(
        checked[2]["error"].as_str().unwrap().contains("Signature"),
        "{checked:?}"
    );
    // A backend expecting another audience refuses it.
    let elsewhere = recipe_checks(&app, "https://other.example", &[&token]);
    assert!(
        elsewhere[0]["error"].as_str().unwrap().contains("Audience"),
        "{elsewhere:?}"
    );
}

async fn a_bad_audience_is_refused_before_the_code_is_consumed(backend: Backend) {
    let app = spawn_app_with(backend, with_issuer).await;
    let phone = random_phone();
    assert_eq!(app.send(&phone).await.status, 200);
    let code = app.last_code(&phone).await;
    for bad in ["", "has space", "new\nline", "caf\u{e9}", &"a".repeat(257)] {
        let answer = verify_with_audience(&app, &phone, &code, bad).await;
        assert_eq!(
            (answer.status, answer.code()),
            (400, 40000),
            "{bad:?}: {answer:?}"
        );
    }
    // The code is still there, with every attempt left.
    let answer = verify_with_audience(&app, &phone, &code, &"a".repeat(256)).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    // Without an audience the token has none.
    let other = random_phone();
    assert_eq!(app.send(&other).await.status, 200);
    let code = app.last_code(&other).await;
    let token = app
        .verify(&other, &code)
        .await
        .data::<VerifyData>()
        .token
        .unwrap();
    let claims: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(token.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap();
    assert!(claims.get("aud").is_none(), "{claims}");
}

/// A PKCS#8 Ed25519 key as operators make one.
fn openssl_key() -> String {
    let output = Command::new("openssl")
        .args(["genpkey", "-algorithm", "ed25519"])
        .output()
        .expect("openssl generates a key");
    assert!(output.status.success());
    String::from_utf8(output.stdout).unwrap()
}

async fn a_rotated_key_file_signs_with_the_new_key_and_still_publishes_the_old(backend: Backend) {
    let (old, new) = (openssl_key(), openssl_key());
    let before = spawn_app_with(backend, |s| {
        with_issuer(s);
        s.token_keys = Some(parse_pem_keys(&old).unwrap().into());
    })
    .await;
    let old_token = token_of(&before, &random_phone()).await;
    let after = spawn_app_with(backend, |s| {
        with_issuer(s);
        s.token_keys = Some(parse_pem_keys(&format!("{new}{old}")).unwrap().into());
    })
    .await;
    let new_token = token_of(&after, &random_phone()).await;
    assert_ne!(header_kid(&old_token), header_kid(&new_token));
    let jwks: Value = after.get(paths::JWKS).await.body;
    let kids: Vec<&str> = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kid"].as_str().unwrap())
        .collect();
    assert_eq!(kids, [header_kid(&new_token), header_kid(&old_token)]);
    let checked = recipe_checks(&after, AUDIENCE, &[&old_token, &new_token]);
    assert!(
        checked.iter().all(|claims| claims.get("sub").is_some()),
        "{checked:?}"
    );
    // The instance before the rotation does not know the new key.
    let checked = recipe_checks(&before, AUDIENCE, &[&new_token]);
    assert!(checked[0].get("error").is_some(), "{checked:?}");
}

on_every_store!(
    a_backend_verifies_the_token_with_the_published_keys,
    a_bad_audience_is_refused_before_the_code_is_consumed,
    a_rotated_key_file_signs_with_the_new_key_and_still_publishes_the_old,
);

/// Without a token key, instances sharing a store (and so VCODE_SECRET_KEY) sign alike: a
/// token from one verifies with the keys another publishes.
async fn instances_sharing_a_store_publish_the_same_derived_key(backend: Backend) {
    let first = spawn_app_with(backend, with_issuer).await;
    let second = spawn_second_instance(&first, with_issuer).await;
    let token = token_of(&first, &random_phone()).await;
    let checked = recipe_checks(&second, AUDIENCE, &[&token]);
    assert!(checked[0].get("sub").is_some(), "{checked:?}");
}

on_stores!(
    shared_redis => Redis, shared_postgres => Postgres;
    [instances_sharing_a_store_publish_the_same_derived_key]
);

#[test]
fn the_tested_recipe_is_the_one_the_readme_shows() {
    let script = std::fs::read_to_string(RECIPE).unwrap();
    let recipe = script
        .split("# --- recipe ---\n")
        .nth(1)
        .and_then(|rest| rest.split("# --- end of recipe ---").next())
        .expect("the script marks its recipe");
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let documented = readme
        .split("## A backend trusts a verification")
        .nth(1)
        .and_then(|section| section.split("```python\n").nth(1))
        .and_then(|rest| rest.split("```").next())
        .expect("the README shows the recipe in a python block");
    assert_eq!(documented.trim(), recipe.trim());
}
