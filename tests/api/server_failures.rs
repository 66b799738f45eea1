//! A 5xx keeps nothing: a send that failed on the server side leaves no running
//! `Idempotency-Key` record, and the solved captcha and proof of work it carried pass again, so
//! that the client's retry with the same key and the same proofs runs at once and sends exactly
//! one SMS. On every store with a refused SMS; with a paused Redis and a paused PostgreSQL,
//! stalled before the send's first store call and while its SMS goes out (there, once the
//! resumed store has run the give-backs that waited in its connections). A client's error
//! (4xx) keeps its proofs spent.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use vcode::Settings;
use vcode::settings::StoreSettings;
use vcode::store::postgres::PostgresSettings;
use vcode_wire::{ErrorCode, headers, paths};

use crate::pow::{easy_pow, solved_payload};
use crate::support::app::{Answer, webhook};
use crate::support::redis_server::signal_process;
use crate::support::{Backend, PostgresServer, SmsGateway, TestApp, random_phone, spawn_app_with};

/// Both gates on, every SMS to `gateway`.
fn gated(gateway: &SmsGateway) -> impl FnOnce(&mut Settings) {
    let url = gateway.url().to_owned();
    move |settings| {
        easy_pow(settings);
        settings.captcha.send_requires_captcha = true;
        settings.pow.send_requires_pow = true;
        settings.sms = webhook(&url);
    }
}

/// A fresh captcha's id and answer, read from the dev route as its viewer would.
async fn solved_captcha(app: &TestApp) -> (Value, Value) {
    let created = app.post_json(paths::CAPTCHA, &Value::Null).await;
    let id = created.body["data"]["captcha_id"].clone();
    let id_text = id.as_str().expect("a captcha id");
    let answer = app.get(&format!("/api/v1/dev/captcha/{id_text}")).await;
    (id, answer.body["data"]["answer"].clone())
}

/// A send body for `number` with a freshly solved captcha and proof of work.
async fn proven_body(app: &TestApp, number: &str) -> Value {
    let (captcha_id, captcha_answer) = solved_captcha(app).await;
    json!({
        "phone": number,
        "captcha_id": captcha_id,
        "captcha_answer": captcha_answer,
        "altcha": solved_payload(app).await,
    })
}

async fn send_with_key(app: &TestApp, key: &str, body: &Value) -> Answer {
    app.request(
        app.client
            .post(app.url(paths::OTP_SEND))
            .header(headers::IDEMPOTENCY_KEY, key)
            .json(body),
    )
    .await
}

/// SMS the gateway accepted for `number`.
fn sms_to(gateway: &SmsGateway, number: &str) -> usize {
    gateway
        .received()
        .iter()
        .filter(|sms| sms["phone"].as_str() == Some(number))
        .count()
}

/// The retry of a failed send: at once, same key, same proofs; one SMS in all.
async fn assert_retry_sends_once(app: &TestApp, gateway: &SmsGateway, key: &str, body: &Value) {
    let retry = send_with_key(app, key, body).await;
    assert_eq!(retry.status, 200, "the retry runs at once: {retry:?}");
    assert_kept_with_one_sms(app, gateway, key, body, &retry).await;
}

/// The retry of a send that failed while the store was paused. The give-backs were written
/// into the paused server's connection and run when it resumes: on PostgreSQL another
/// connection's retry can get there first (a backend per connection), and the proof of work
/// is still used for as long. That refusal changes nothing (a 4xx frees the key and spends no
/// captcha: the proof of work is checked first), so the retry is repeated on it, for at most
/// two seconds; any other answer, or a proof never given back, fails.
async fn assert_retry_after_stall_sends_once(
    app: &TestApp,
    gateway: &SmsGateway,
    key: &str,
    body: &Value,
) {
    let given_up_at = std::time::Instant::now() + Duration::from_secs(2);
    let retry = loop {
        let retry = send_with_key(app, key, body).await;
        let proof_still_used = (retry.status, retry.code()) == (400, ErrorCode::PowRejected as i64);
        if !proof_still_used || std::time::Instant::now() >= given_up_at {
            break retry;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        retry.status, 200,
        "the retry runs once the store resumed: {retry:?}"
    );
    assert_kept_with_one_sms(app, gateway, key, body, &retry).await;
}

/// `retry` delivered the one SMS to the body's phone, and a repeat under its key answers it
/// again and sends nothing.
async fn assert_kept_with_one_sms(
    app: &TestApp,
    gateway: &SmsGateway,
    key: &str,
    body: &Value,
    retry: &Answer,
) {
    let number = body["phone"].as_str().expect("a phone");
    assert_eq!(sms_to(gateway, number), 1, "exactly one SMS");
    let repeat = send_with_key(app, key, body).await;
    assert_eq!((repeat.status, &repeat.body), (200, &retry.body), "kept");
    assert_eq!(sms_to(gateway, number), 1, "still one SMS");
}

async fn a_refused_sms_gives_the_key_captcha_and_proof_of_work_back(backend: Backend) {
    let gateway = SmsGateway::start();
    let app = spawn_app_with(backend, gated(&gateway)).await;
    let number = random_phone();
    let body = proven_body(&app, &number).await;
    gateway.fail_with(500);
    let failed = send_with_key(&app, "refused-1", &body).await;
    assert_eq!((failed.status, failed.code()), (502, 50200), "{failed:?}");
    gateway.succeed();
    assert_retry_sends_once(&app, &gateway, "refused-1", &body).await;

    // Without a key too: the proofs alone pass again.
    let number = random_phone();
    let body = proven_body(&app, &number).await;
    gateway.fail_with(503);
    let failed = app.post_json(paths::OTP_SEND, &body).await;
    assert_eq!(failed.status, 502, "{failed:?}");
    gateway.succeed();
    assert_eq!(app.post_json(paths::OTP_SEND, &body).await.status, 200);
    assert_eq!(sms_to(&gateway, &number), 1);
}

async fn a_client_error_keeps_the_proofs_spent(backend: Backend) {
    let gateway = SmsGateway::start();
    let app = spawn_app_with(backend, gated(&gateway)).await;
    let number = random_phone();
    assert_eq!(
        app.post_json(paths::OTP_SEND, &proven_body(&app, &number).await)
            .await
            .status,
        200
    );
    // Refused by the cooldown (429): the proofs it carried bought that attempt.
    let body = proven_body(&app, &number).await;
    let cooling = send_with_key(&app, "cooling", &body).await;
    assert_eq!(
        (cooling.status, cooling.code()),
        (429, 42900),
        "{cooling:?}"
    );
    let (captcha_id, captcha_answer) = solved_captcha(&app).await;
    let reused_pow = json!({
        "phone": random_phone(),
        "captcha_id": captcha_id,
        "captcha_answer": captcha_answer,
        "altcha": body["altcha"],
    });
    let answer = app.post_json(paths::OTP_SEND, &reused_pow).await;
    assert_eq!((answer.status, answer.code()), (400, 40021), "{answer:?}");
    let reused_captcha = json!({
        "phone": random_phone(),
        "captcha_id": body["captcha_id"],
        "captcha_answer": body["captcha_answer"],
        "altcha": solved_payload(&app).await,
    });
    let answer = app.post_json(paths::OTP_SEND, &reused_captcha).await;
    assert_eq!((answer.status, answer.code()), (400, 40020), "{answer:?}");
    assert_eq!(sms_to(&gateway, &number), 1);
}

on_every_store!(
    a_refused_sms_gives_the_key_captcha_and_proof_of_work_back,
    a_client_error_keeps_the_proofs_spent,
);

/// A store the test can freeze (SIGSTOP) and thaw, from a hook too.
#[derive(Clone)]
struct Stall {
    processes: Arc<dyn Fn() -> Vec<u32> + Send + Sync>,
}

impl Stall {
    fn pause(&self) {
        for pid in (self.processes)() {
            signal_process(pid, "-STOP");
        }
    }

    fn resume(&self) {
        for pid in (self.processes)() {
            signal_process(pid, "-CONT");
        }
    }
}

/// Stalled before the send's first store call (the key's claim), then while its SMS goes out
/// (the gateway freezes the store and refuses the SMS: the roll-back, the give-backs and the
/// key's release all meet a frozen store). Each answers a 5xx; once the store is back and has
/// run what waited in it, the retry with the same key and proofs runs and sends one SMS.
async fn a_stall_keeps_nothing(app: &TestApp, gateway: &SmsGateway, stall: &Stall) {
    let number = random_phone();
    let body = proven_body(app, &number).await;
    stall.pause();
    let stalled = send_with_key(app, "stalled-1", &body).await;
    stall.resume();
    assert_eq!(
        (stalled.status, stalled.code()),
        (503, 50300),
        "{stalled:?}"
    );
    assert_retry_after_stall_sends_once(app, gateway, "stalled-1", &body).await;

    let number = random_phone();
    let body = proven_body(app, &number).await;
    let freeze = stall.clone();
    gateway.on_arrival(move || freeze.pause());
    gateway.fail_with(500);
    let failed = send_with_key(app, "stalled-2", &body).await;
    gateway.succeed();
    stall.resume();
    assert_eq!((failed.status, failed.code()), (502, 50200), "{failed:?}");
    assert_retry_after_stall_sends_once(app, gateway, "stalled-2", &body).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paused_redis_keeps_nothing() {
    let gateway = SmsGateway::start();
    let app = spawn_app_with(Backend::Redis, gated(&gateway)).await;
    let pid = app.redis.as_ref().expect("the test's Redis").pid();
    let stall = Stall {
        processes: Arc::new(move || vec![pid]),
    };
    a_stall_keeps_nothing(&app, &gateway, &stall).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paused_postgres_keeps_nothing() {
    // A server of this test's own: the shared one must not freeze under other tests.
    let server = Arc::new(PostgresServer::start_with(false, &[], &[]));
    let url = server.fresh_database().await;
    let gateway = SmsGateway::start();
    let gate = gated(&gateway);
    let app = spawn_app_with(Backend::Memory, |settings| {
        gate(settings);
        settings.store = StoreSettings::Postgres(PostgresSettings {
            statement_timeout: Duration::from_millis(500),
            connect_timeout: Duration::from_millis(500),
            ..PostgresSettings::new(url)
        });
    })
    .await;
    let frozen = server.clone();
    let stall = Stall {
        processes: Arc::new(move || frozen.processes()),
    };
    a_stall_keeps_nothing(&app, &gateway, &stall).await;
}
