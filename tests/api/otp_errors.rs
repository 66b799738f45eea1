//! Every error the OTP routes can give, with its envelope and status, and proof that bad input
//! changes nothing in the store.

use serde_json::{Value, json};
use vcode::otp::VerifyBy;
use vcode_wire::{SendRequest, VerifyRequest, paths};

use crate::support::app::verify_request;
use crate::support::{Backend, TestApp, random_phone, spawn_app, spawn_app_with};

fn assert_envelope(answer: &crate::support::app::Answer, status: u16, code: i64) {
    assert_eq!((answer.status, answer.code()), (status, code), "{answer:?}");
    assert!(
        answer.body["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{answer:?}"
    );
    assert!(answer.body.get("data").is_some(), "{answer:?}");
}

/// Posts a raw body with a content type, for malformed requests.
async fn post_raw(
    app: &TestApp,
    path: &str,
    content_type: &str,
    body: impl Into<reqwest::Body>,
) -> crate::support::app::Answer {
    app.request(
        app.client
            .post(app.url(path))
            .header("content-type", content_type)
            .body(body),
    )
    .await
}

async fn malformed_requests_answer_40000(backend: Backend) {
    let app = spawn_app(backend).await;
    for path in [paths::OTP_SEND, paths::OTP_VERIFY] {
        for body in [
            "{",
            "[]",
            "null",
            "{\"phone\": 13800138000, \"code\": \"123456\"}",
            "{}",
        ] {
            let answer = post_raw(&app, path, "application/json", body).await;
            assert_envelope(&answer, 400, 40000);
        }
        let answer = post_raw(&app, path, "text/plain", "{\"phone\":\"13800138000\"}").await;
        assert_envelope(&answer, 400, 40000);
    }
    // Not a VerifyRequest: the code is missing.
    let missing_code = app
        .post_json(paths::OTP_VERIFY, &json!({"phone": "13800138000"}))
        .await;
    assert_envelope(&missing_code, 400, 40000);
    assert!(
        missing_code.body["message"]
            .as_str()
            .unwrap()
            .contains("code"),
        "{missing_code:?}"
    );
}

const BAD_PHONES: [&str; 5] = ["", "12345", "+999123", "not a phone", "+86 138 0013 800x"];
const BAD_PURPOSES: [&str; 4] = ["", "LOGIN", "log in", "a:b"];

async fn invalid_fields_answer_their_own_codes(backend: Backend) {
    let app = spawn_app(backend).await;
    let number = random_phone();
    let too_long = "x".repeat(33);
    let bad_purposes = BAD_PURPOSES.into_iter().chain([too_long.as_str()]);
    for bad_phone in BAD_PHONES {
        assert_envelope(&app.send(bad_phone).await, 400, 40001);
    }
    for bad_purpose in bad_purposes.clone() {
        assert_envelope(&app.send_for(&number, bad_purpose).await, 400, 40003);
    }
    let id = app.send_id(&number).await;
    for bad_code in ["", "12345", "1234567", "12345a", "abcdef"] {
        assert_envelope(&app.verify_id(&id, bad_code).await, 400, 40002);
    }
    // Under an id the phone and purpose are claims about it: a malformed phone is still the
    // client's error, a purpose that is not the id's (well-formed or not) a mismatch.
    let claiming = |phone: Option<&str>, purpose: Option<&str>| VerifyRequest {
        phone: phone.map(str::to_owned),
        purpose: purpose.map(str::to_owned),
        ..VerifyRequest::with_id(&id, "123456")
    };
    for bad_phone in BAD_PHONES {
        let answer = app
            .post_json(paths::OTP_VERIFY, &claiming(Some(bad_phone), None))
            .await;
        assert_envelope(&answer, 400, 40001);
    }
    for bad_purpose in bad_purposes.clone() {
        let answer = app
            .post_json(paths::OTP_VERIFY, &claiming(None, Some(bad_purpose)))
            .await;
        assert_envelope(&answer, 400, 40007);
    }
    // The phone path parses them as a send does.
    let by_phone = spawn_app_with(backend, |s| s.otp.verify_by = VerifyBy::Phone).await;
    for bad_phone in BAD_PHONES {
        assert_envelope(&by_phone.verify(bad_phone, "123456").await, 400, 40001);
    }
    for bad_purpose in bad_purposes {
        let answer = by_phone.verify_for(&number, "123456", bad_purpose).await;
        assert_envelope(&answer, 400, 40003);
    }
}

async fn bad_input_changes_nothing(backend: Backend) {
    let app = spawn_app(backend).await;
    let number = random_phone();
    assert_eq!(app.send(&number).await.status, 200);
    let before = app.pending_code(&number).await.expect("a pending code");
    let inbox_before = app.inbox(&number).await;

    // Malformed code, purpose and bodies for this very phone: none of them may count as a
    // failed attempt, send an SMS or touch the cooldown.
    for bad_code in ["12345", "abcdef", "1234567", ""] {
        app.verify(&number, bad_code).await;
    }
    let bad_purpose = VerifyRequest {
        purpose: Some("NOT VALID".into()),
        ..verify_request(&number, "123456")
    };
    app.post_json(paths::OTP_VERIFY, &bad_purpose).await;
    app.send_for(&number, "NOT VALID").await;
    post_raw(
        &app,
        paths::OTP_VERIFY,
        "application/json",
        format!("{{\"phone\":\"{number}\",\"code\":123456}}"),
    )
    .await;
    post_raw(
        &app,
        paths::OTP_SEND,
        "application/json",
        format!("{{\"phone\":\"{number}\""),
    )
    .await;
    let huge = verify_request(&number, &"1".repeat(10_000));
    app.post_json(paths::OTP_VERIFY, &huge).await;

    assert_eq!(app.pending_code(&number).await, Some(before));
    assert_eq!(app.inbox(&number).await, inbox_before);
}

async fn oversized_bodies_answer_41300(backend: Backend) {
    let app = spawn_app(backend).await;
    let padding = "x".repeat(8 * 1024);
    let mut padded = serde_json::to_value(SendRequest::new(random_phone())).unwrap();
    padded["padding"] = json!(padding);
    let answer = app.post_json(paths::OTP_SEND, &padded).await;
    assert_envelope(&answer, 413, 41300);
}

async fn unknown_routes_and_methods_answer_with_the_envelope(backend: Backend) {
    let app = spawn_app(backend).await;
    for path in [
        "/".to_owned(),
        format!("{}/nothing", paths::API_PREFIX),
        format!("{}/extra", paths::OTP_SEND),
        paths::OTP_SEND.replace("/v1/", "/v2/"),
    ] {
        assert_envelope(&app.get(&path).await, 404, 40400);
    }
    assert_envelope(&app.get(paths::OTP_SEND).await, 405, 40500);
    let delete = app
        .request(app.client.delete(app.url(paths::OTP_VERIFY)))
        .await;
    assert_envelope(&delete, 405, 40500);
    assert_envelope(
        &app.post_json(paths::HEALTHZ, &Value::Null).await,
        405,
        40500,
    );
}

/// By id: a verification whose code is gone (used here); by phone: a phone never sent to.
async fn verify_without_a_pending_code_answers_41000(backend: Backend) {
    let app = spawn_app(backend).await;
    let number = random_phone();
    let id = app.send_id(&number).await;
    let code = app.last_code(&number).await;
    assert_eq!(app.verify_id(&id, &code).await.status, 200);
    assert_envelope(&app.verify_id(&id, &code).await, 410, 41000);
    // The phone path (VCODE_VERIFY_BY=phone) has no id to find first.
    let by_phone = spawn_app_with(backend, |s| s.otp.verify_by = VerifyBy::Phone).await;
    assert_envelope(
        &by_phone.verify(&random_phone(), "123456").await,
        410,
        41000,
    );
}

on_every_store!(
    malformed_requests_answer_40000,
    invalid_fields_answer_their_own_codes,
    bad_input_changes_nothing,
    oversized_bodies_answer_41300,
    unknown_routes_and_methods_answer_with_the_envelope,
    verify_without_a_pending_code_answers_41000,
);
