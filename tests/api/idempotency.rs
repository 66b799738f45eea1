//! `Idempotency-Key` on `otp/send`: one run per key, repeats answered from the store.

use std::time::Duration;

use futures::future::join_all;
use vcode::settings::AbuseSettings;
use vcode_wire::{Delivery, SendData, SendRequest, headers, paths};

use crate::support::app::{Answer, webhook};
use crate::support::{Backend, SmsGateway, TestApp, random_phone, spawn_app_with};

async fn send_with_key(app: &TestApp, key: &str, body: &SendRequest) -> Answer {
    app.request(
        app.client
            .post(app.url(paths::OTP_SEND))
            .header(headers::IDEMPOTENCY_KEY, key)
            .json(body),
    )
    .await
}

fn unlimited(settings: &mut vcode::Settings) {
    settings.abuse = AbuseSettings::unlimited();
}

async fn concurrent_repeats_make_one_code_and_identical_answers(backend: Backend) {
    let app = std::sync::Arc::new(spawn_app_with(backend, unlimited).await);
    let number = random_phone();
    let body = SendRequest::new(&number);
    let sends = (0..20).map(|_| {
        let (app, body) = (app.clone(), body.clone());
        tokio::spawn(async move { send_with_key(&app, "order-7f3a", &body).await })
    });
    let answers: Vec<Answer> = join_all(sends)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    for answer in &answers {
        assert_eq!(answer.status, 200, "{answer:?}");
        assert_eq!(answer.body, answers[0].body);
    }
    assert_eq!(app.inbox(&number).await.len(), 1, "one SMS");
    // Without the key the same request is a duplicate the cooldown refuses.
    assert_eq!(app.send(&number).await.code(), 42900);
}

async fn a_repeat_gets_the_stored_answer_even_an_error(backend: Backend) {
    let app = spawn_app_with(backend, unlimited).await;
    let number = random_phone();
    assert_eq!(app.send(&number).await.status, 200);
    // First use of this key answers the cooldown; its repeat answers the same, stored.
    let first = send_with_key(&app, "k-1", &SendRequest::new(&number)).await;
    assert_eq!((first.status, first.code()), (429, 42900));
    let repeat = send_with_key(&app, "k-1", &SendRequest::new(&number)).await;
    assert_eq!(
        (repeat.status, repeat.body.clone()),
        (429, first.body.clone())
    );
    assert_eq!(repeat.retry_after, first.retry_after);
}

async fn the_same_key_with_another_body_is_422(backend: Backend) {
    let app = spawn_app_with(backend, unlimited).await;
    let key = "signup-42";
    assert_eq!(
        send_with_key(&app, key, &SendRequest::new(random_phone()))
            .await
            .status,
        200
    );
    let other = random_phone();
    let answer = send_with_key(&app, key, &SendRequest::new(&other)).await;
    assert_eq!((answer.status, answer.code()), (422, 42200), "{answer:?}");
    assert!(app.inbox(&other).await.is_empty());
}

async fn server_failures_are_not_kept(backend: Backend) {
    let gateway = SmsGateway::start();
    let app = spawn_app_with(backend, |s| {
        unlimited(s);
        s.sms = webhook(gateway.url());
    })
    .await;
    let body = SendRequest::new(random_phone());
    gateway.fail_with(500);
    assert_eq!(send_with_key(&app, "retry-me", &body).await.code(), 50200);
    gateway.succeed();
    let retried = send_with_key(&app, "retry-me", &body).await;
    assert_eq!(
        retried.status, 200,
        "a retry after a server failure runs again"
    );
    assert_eq!(gateway.received().len(), 1);
}

/// An SMS whose gateway answered too late may have arrived: the send stands, and its retry is
/// answered as it was, without a second SMS.
async fn an_unconfirmed_send_is_kept_and_replayed(backend: Backend) {
    let gateway = SmsGateway::start();
    let app = spawn_app_with(backend, |s| {
        unlimited(s);
        s.sms = webhook(gateway.url());
    })
    .await;
    gateway.answer_late(Duration::from_secs(3));
    let body = SendRequest::new(random_phone());
    let first = send_with_key(&app, "late-1", &body).await;
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(first.data::<SendData>().delivery, Delivery::Unconfirmed);
    let repeat = send_with_key(&app, "late-1", &body).await;
    assert_eq!((repeat.status, &repeat.body), (200, &first.body));
    assert_eq!(gateway.hits(), 1, "one SMS");
}

async fn a_repeat_waits_for_the_first_then_gives_up_with_409(backend: Backend) {
    let gateway = SmsGateway::start();
    let app = std::sync::Arc::new(
        spawn_app_with(backend, |s| {
            unlimited(s);
            s.sms = vcode::settings::SmsSettings::webhook(gateway.url(), Duration::from_secs(3));
            s.abuse.idempotency_wait = Duration::from_millis(300);
        })
        .await,
    );
    gateway.stall_for(Duration::from_millis(1200));
    let body = SendRequest::new(random_phone());
    let first = {
        let (app, body) = (app.clone(), body.clone());
        tokio::spawn(async move { send_with_key(&app, "slow", &body).await })
    };
    // The first holds the key once its SMS reaches the (stalled) gateway: a fixed sleep here
    // lost that race on a loaded machine.
    let arrived = std::time::Instant::now();
    while gateway.hits() == 0 {
        assert!(
            arrived.elapsed() < Duration::from_secs(5),
            "the first send never came"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let started = std::time::Instant::now();
    let waiting = send_with_key(&app, "slow", &body).await;
    assert_eq!(
        (waiting.status, waiting.code()),
        (409, 40900),
        "{waiting:?}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "it waited first"
    );
    let first = first.await.unwrap();
    assert_eq!(first.status, 200);
    // Once the first is done, a repeat gets its answer.
    assert_eq!(send_with_key(&app, "slow", &body).await.body, first.body);
    assert_eq!(gateway.received().len(), 1);
}

async fn malformed_keys_are_refused(backend: Backend) {
    let app = spawn_app_with(backend, unlimited).await;
    let body = SendRequest::new(random_phone());
    for key in ["x".repeat(256), "with space".to_owned(), "naïve".to_owned()] {
        let answer = app
            .request(
                app.client
                    .post(app.url(paths::OTP_SEND))
                    .header(headers::IDEMPOTENCY_KEY, key.as_bytes())
                    .json(&body),
            )
            .await;
        assert_eq!((answer.status, answer.code()), (400, 40000), "{key:?}");
    }
}

on_every_store!(
    concurrent_repeats_make_one_code_and_identical_answers,
    a_repeat_gets_the_stored_answer_even_an_error,
    the_same_key_with_another_body_is_422,
    server_failures_are_not_kept,
    an_unconfirmed_send_is_kept_and_replayed,
    a_repeat_waits_for_the_first_then_gives_up_with_409,
    malformed_keys_are_refused,
);
