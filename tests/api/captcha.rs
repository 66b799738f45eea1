//! Captchas through HTTP on both stores: the picture, single use, and the SMS send gate.

use std::time::Duration;

use futures::future::join_all;
use serde_json::{Value, json};
use vcode::domain::Purpose;

use crate::support::app::Answer;
use crate::support::{Backend, TestApp, phone, random_phone, spawn_app, spawn_app_with};

struct Png {
    status: u16,
    content_type: String,
    cache_control: String,
    bytes: Vec<u8>,
}

async fn fetch_png(app: &TestApp, image_url: &str) -> Png {
    let response = app
        .client
        .get(app.url(image_url))
        .send()
        .await
        .expect("an answer");
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let (content_type, cache_control) = (header("content-type"), header("cache-control"));
    Png {
        status: response.status().as_u16(),
        content_type,
        cache_control,
        bytes: response.bytes().await.expect("a body").to_vec(),
    }
}

/// Creates a captcha; returns its id and image URL.
async fn create(app: &TestApp) -> (String, String) {
    let answer = app.post_json("/api/v1/captcha", &Value::Null).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let data = &answer.body["data"];
    assert!(data["expires_in"].as_u64().is_some(), "{answer:?}");
    (
        data["captcha_id"].as_str().expect("an id").to_owned(),
        data["image_url"].as_str().expect("a URL").to_owned(),
    )
}

/// Reads the answer as the person looking at the picture would (dev route).
async fn read_answer(app: &TestApp, id: &str) -> String {
    let answer = app.get(&format!("/api/v1/dev/captcha/{id}")).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.body["data"]["answer"]
        .as_str()
        .expect("an answer")
        .to_owned()
}

async fn verify(app: &TestApp, id: &str, answer: &str) -> Answer {
    app.post_json(
        "/api/v1/captcha/verify",
        &json!({"captcha_id": id, "answer": answer}),
    )
    .await
}

async fn picture_is_a_stable_uncached_png(backend: Backend) {
    let app = spawn_app(backend).await;
    let (id, image_url) = create(&app).await;
    assert_eq!(image_url, format!("/api/v1/captcha/{id}.png"));
    let first = fetch_png(&app, &image_url).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.content_type, "image/png");
    assert_eq!(first.cache_control, "no-store");
    assert!(first.bytes.starts_with(b"\x89PNG\r\n\x1a\n"));
    let decoded = image::load_from_memory(&first.bytes).expect("a decodable PNG");
    assert_eq!((decoded.width(), decoded.height()), (160, 60));
    let again = fetch_png(&app, &image_url).await;
    assert_eq!(again.bytes, first.bytes, "the same picture on every fetch");
    let (_, other_url) = create(&app).await;
    assert_ne!(fetch_png(&app, &other_url).await.bytes, first.bytes);
}

async fn picture_is_gone_once_used(backend: Backend) {
    let app = spawn_app(backend).await;
    let (id, image_url) = create(&app).await;
    let answer = read_answer(&app, &id).await;
    assert_eq!(verify(&app, &id, &answer).await.status, 200);
    let gone = app.get(&image_url).await;
    assert_eq!((gone.status, gone.code()), (404, 40400));
}

async fn picture_is_gone_once_expired(backend: Backend) {
    let app = spawn_app_with(backend, |s| s.captcha.ttl = Duration::from_millis(500)).await;
    let answer = app.post_json("/api/v1/captcha", &Value::Null).await;
    let id = answer.body["data"]["captcha_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let image_url = answer.body["data"]["image_url"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(fetch_png(&app, &image_url).await.status, 200);
    tokio::time::sleep(Duration::from_millis(700)).await;
    let gone = app.get(&image_url).await;
    assert_eq!((gone.status, gone.code()), (404, 40400));
    assert_eq!(verify(&app, &id, "ABCDE").await.code(), 40020);
}

async fn unknown_or_malformed_ids_are_404(backend: Backend) {
    let app = spawn_app(backend).await;
    for path in [
        "/api/v1/captcha/0123456789abcdef0123456789abcdef.png",
        "/api/v1/captcha/not-an-id.png",
        "/api/v1/captcha/.png",
    ] {
        let answer = app.get(path).await;
        assert_eq!((answer.status, answer.code()), (404, 40400), "{path}");
    }
}

async fn right_answer_in_any_case_verifies_once(backend: Backend) {
    let app = spawn_app(backend).await;
    let (id, _) = create(&app).await;
    let answer = read_answer(&app, &id).await;
    assert_eq!(answer.len(), 5);
    let typed = format!("  {}  ", answer.to_lowercase());
    let ok = verify(&app, &id, &typed).await;
    assert_eq!(
        ok.body,
        json!({"code": 200, "message": "ok", "data": {"verified": true}})
    );
    let again = verify(&app, &id, &answer).await;
    assert_eq!((again.status, again.code()), (400, 40020));
}

async fn a_wrong_answer_burns_the_captcha(backend: Backend) {
    let app = spawn_app(backend).await;
    let (id, _) = create(&app).await;
    let answer = read_answer(&app, &id).await;
    let wrong = if answer == "AAAAA" { "BBBBB" } else { "AAAAA" };
    assert_eq!(verify(&app, &id, wrong).await.code(), 40020);
    assert_eq!(
        verify(&app, &id, &answer).await.code(),
        40020,
        "consumed by the wrong try"
    );
}

async fn empty_answers_and_unknown_ids_never_match(backend: Backend) {
    let app = spawn_app(backend).await;
    for answer in ["", "   ", "\t"] {
        let (id, _) = create(&app).await;
        let result = verify(&app, &id, answer).await;
        assert_eq!((result.status, result.code()), (400, 40020), "{answer:?}");
    }
    let (id, _) = create(&app).await;
    let missing_answer = app
        .post_json("/api/v1/captcha/verify", &json!({"captcha_id": id}))
        .await;
    assert_eq!(missing_answer.code(), 40020);
    for body in [
        json!({"captcha_id": "", "answer": ""}),
        json!({"captcha_id": "", "answer": "ABCDE"}),
        json!({"answer": "ABCDE"}),
        json!({"captcha_id": "0123456789abcdef0123456789abcdef", "answer": ""}),
        json!({"captcha_id": "0123456789abcdef0123456789abcdef", "answer": "ABCDE"}),
        json!({"captcha_id": "../etc", "answer": "ABCDE"}),
    ] {
        let result = app.post_json("/api/v1/captcha/verify", &body).await;
        assert_eq!((result.status, result.code()), (400, 40020), "{body}");
    }
    let wrong_type = app
        .post_json(
            "/api/v1/captcha/verify",
            &json!({"captcha_id": 5, "answer": "A"}),
        )
        .await;
    assert_eq!((wrong_type.status, wrong_type.code()), (400, 40000));
}

async fn fifty_concurrent_verifies_succeed_once(backend: Backend) {
    let app = spawn_app(backend).await;
    let (id, _) = create(&app).await;
    let answer = read_answer(&app, &id).await;
    let url = app.url("/api/v1/captcha/verify");
    let attempts = (0..50).map(|_| {
        let (url, id, answer) = (url.clone(), id.clone(), answer.clone());
        tokio::spawn(async move {
            reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .build()
                .expect("client")
                .post(url)
                .json(&json!({"captcha_id": id, "answer": answer}))
                .send()
                .await
                .expect("an answer")
                .status()
                .as_u16()
        })
    });
    let statuses: Vec<u16> = join_all(attempts)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 400).count(),
        49,
        "{statuses:?}"
    );
}

async fn send_with_captcha(
    app: &TestApp,
    number: &str,
    id: Option<&str>,
    answer: Option<&str>,
) -> Answer {
    let mut body = json!({"phone": number});
    if let Some(id) = id {
        body["captcha_id"] = json!(id);
    }
    if let Some(answer) = answer {
        body["captcha_answer"] = json!(answer);
    }
    app.post_json("/api/v1/otp/send", &body).await
}

async fn assert_nothing_sent(app: &TestApp, number: &str) {
    assert!(app.inbox(number).await.is_empty(), "no SMS");
    let pending = app
        .store
        .codes
        .pending_code(&phone(number), &Purpose::default())
        .await
        .unwrap();
    assert!(pending.is_none(), "no code");
}

async fn the_send_gate_lets_only_solved_captchas_through(backend: Backend) {
    let app = spawn_app_with(backend, |s| {
        s.captcha.send_requires_captcha = true;
        s.otp.resend_cooldown = Duration::ZERO;
    })
    .await;
    let number = random_phone();

    assert_eq!(
        send_with_captcha(&app, &number, None, None).await.code(),
        40020
    );
    let (id, _) = create(&app).await;
    assert_eq!(
        send_with_captcha(&app, &number, Some(&id), None)
            .await
            .code(),
        40020
    );
    assert_nothing_sent(&app, &number).await;

    let (id, _) = create(&app).await;
    let answer = read_answer(&app, &id).await;
    let wrong = if answer == "AAAAA" { "BBBBB" } else { "AAAAA" };
    assert_eq!(
        send_with_captcha(&app, &number, Some(&id), Some(wrong))
            .await
            .code(),
        40020
    );
    // The wrong try consumed it: the right answer no longer helps.
    assert_eq!(
        send_with_captcha(&app, &number, Some(&id), Some(&answer))
            .await
            .code(),
        40020
    );
    assert_nothing_sent(&app, &number).await;

    // A malformed phone is refused before the captcha is touched.
    let (id, _) = create(&app).await;
    let answer = read_answer(&app, &id).await;
    assert_eq!(
        send_with_captcha(&app, "12345", Some(&id), Some(&answer))
            .await
            .code(),
        40001
    );

    let sent = send_with_captcha(&app, &number, Some(&id), Some(&answer)).await;
    assert_eq!(sent.status, 200, "{sent:?}");
    assert_eq!(app.inbox(&number).await.len(), 1);
    // One solved captcha buys one send.
    assert_eq!(
        send_with_captcha(&app, &number, Some(&id), Some(&answer))
            .await
            .code(),
        40020
    );
    assert_eq!(app.inbox(&number).await.len(), 1);
}

on_both_stores!(
    picture_is_a_stable_uncached_png,
    picture_is_gone_once_used,
    picture_is_gone_once_expired,
    unknown_or_malformed_ids_are_404,
    right_answer_in_any_case_verifies_once,
    a_wrong_answer_burns_the_captcha,
    empty_answers_and_unknown_ids_never_match,
    fifty_concurrent_verifies_succeed_once,
    the_send_gate_lets_only_solved_captchas_through,
);
