//! Captchas through HTTP on every store: the picture, single use, and the SMS send gate.

use std::time::Duration;

use futures::future::join_all;
use serde_json::{Value, json};
use vcode::domain::Purpose;
use vcode_wire::{
    CaptchaAnswer, CaptchaCreated, CaptchaVerifyRequest, SendRequest, Verified, paths,
};

use crate::support::app::{Answer, ok_body};
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

/// Creates a captcha; returns its id and image URL (reading it checks `expires_in` too).
async fn create(app: &TestApp) -> (String, String) {
    let answer = app.post_json(paths::CAPTCHA, &Value::Null).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let created: CaptchaCreated = answer.data();
    (created.captcha_id, created.image_url)
}

/// Reads the answer as the person looking at the picture would (dev route).
async fn read_answer(app: &TestApp, id: &str) -> String {
    let answer = app.get(&paths::dev_captcha_answer(id)).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.data::<CaptchaAnswer>().answer
}

async fn verify(app: &TestApp, id: &str, answer: &str) -> Answer {
    app.post_json(
        paths::CAPTCHA_VERIFY,
        &CaptchaVerifyRequest::new(id, answer),
    )
    .await
}

async fn picture_is_a_stable_uncached_png(backend: Backend) {
    let app = spawn_app(backend).await;
    let (id, image_url) = create(&app).await;
    assert_eq!(image_url, paths::captcha_image(&id));
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
    let answer = app.post_json(paths::CAPTCHA, &Value::Null).await;
    let CaptchaCreated {
        captcha_id: id,
        image_url,
        ..
    } = answer.data();
    assert_eq!(fetch_png(&app, &image_url).await.status, 200);
    tokio::time::sleep(Duration::from_millis(700)).await;
    let gone = app.get(&image_url).await;
    assert_eq!((gone.status, gone.code()), (404, 40400));
    assert_eq!(verify(&app, &id, "ABCDE").await.code(), 40020);
}

async fn unknown_or_malformed_ids_are_404(backend: Backend) {
    let app = spawn_app(backend).await;
    for id in ["0123456789abcdef0123456789abcdef", "not-an-id", ""] {
        let path = paths::captcha_image(id);
        let answer = app.get(&path).await;
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
    assert_eq!(ok.body, ok_body(Verified { verified: true }));
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
    let without_answer = CaptchaVerifyRequest {
        captcha_id: Some(id),
        answer: None,
    };
    let missing_answer = app.post_json(paths::CAPTCHA_VERIFY, &without_answer).await;
    assert_eq!(missing_answer.code(), 40020);
    let unknown = "0123456789abcdef0123456789abcdef";
    for body in [
        CaptchaVerifyRequest::new("", ""),
        CaptchaVerifyRequest::new("", "ABCDE"),
        CaptchaVerifyRequest {
            captcha_id: None,
            answer: Some("ABCDE".to_owned()),
        },
        CaptchaVerifyRequest::new(unknown, ""),
        CaptchaVerifyRequest::new(unknown, "ABCDE"),
        CaptchaVerifyRequest::new("../etc", "ABCDE"),
    ] {
        let result = app.post_json(paths::CAPTCHA_VERIFY, &body).await;
        assert_eq!((result.status, result.code()), (400, 40020), "{body:?}");
    }
    // Not the wire type: the id is a number.
    let wrong_type = app
        .post_json(
            paths::CAPTCHA_VERIFY,
            &json!({"captcha_id": 5, "answer": "A"}),
        )
        .await;
    assert_eq!((wrong_type.status, wrong_type.code()), (400, 40000));
}

async fn fifty_concurrent_verifies_succeed_once(backend: Backend) {
    let app = spawn_app(backend).await;
    let (id, _) = create(&app).await;
    let answer = read_answer(&app, &id).await;
    let url = app.url(paths::CAPTCHA_VERIFY);
    let attempts = (0..50).map(|_| {
        let (url, id, answer) = (url.clone(), id.clone(), answer.clone());
        tokio::spawn(async move {
            reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .build()
                .expect("client")
                .post(url)
                .json(&CaptchaVerifyRequest::new(id, answer))
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
    let body = SendRequest {
        captcha_id: id.map(str::to_owned),
        captcha_answer: answer.map(str::to_owned),
        ..SendRequest::new(number)
    };
    app.post_json(paths::OTP_SEND, &body).await
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

on_every_store!(
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
