//! `otp/send` behind `VCODE_SEND_GATE`: every combination of gates and proofs, nothing created
//! by a refused send, one solved challenge for one send (also 50 at once), and idempotent
//! repeats that carry the same payload.

use std::time::Duration;

use serde_json::{Value, json};
use vcode::domain::Purpose;
use vcode::settings::AbuseSettings;

use super::{on_memory_and_redis, post_at_once, solved_payload, spawn_pow_app};
use crate::support::app::Answer;
use crate::support::{Backend, TestApp, phone, random_phone};

/// A solved captcha's id and answer, read as its viewer would (dev route).
async fn solved_captcha(app: &TestApp) -> (String, String) {
    let created = app.post_json("/api/v1/captcha", &Value::Null).await;
    let id = created.body["data"]["captcha_id"]
        .as_str()
        .expect("an id")
        .to_owned();
    let answer = app.get(&format!("/api/v1/dev/captcha/{id}")).await;
    let answer = answer.body["data"]["answer"].as_str().expect("an answer");
    (id, answer.to_owned())
}

async fn send(
    app: &TestApp,
    number: &str,
    captcha: Option<&(String, String)>,
    altcha: Option<&str>,
) -> Answer {
    let mut body = json!({ "phone": number });
    if let Some((id, answer)) = captcha {
        body["captcha_id"] = json!(id);
        body["captcha_answer"] = json!(answer);
    }
    if let Some(altcha) = altcha {
        body["altcha"] = json!(altcha);
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

#[tokio::test]
async fn every_gate_lets_through_exactly_the_sends_with_its_proofs() {
    for (captcha_gate, pow_gate) in [(false, false), (true, false), (false, true), (true, true)] {
        let app = spawn_pow_app(Backend::Memory, |s| {
            s.captcha.send_requires_captcha = captcha_gate;
            s.pow.send_requires_pow = pow_gate;
        })
        .await;
        for (with_captcha, with_pow) in [(false, false), (true, false), (false, true), (true, true)]
        {
            let case = format!(
                "gate captcha={captcha_gate} pow={pow_gate}; \
                 sent captcha={with_captcha} pow={with_pow}"
            );
            let number = random_phone();
            let captcha = match with_captcha {
                true => Some(solved_captcha(&app).await),
                false => None,
            };
            let altcha = match with_pow {
                true => Some(solved_payload(&app).await),
                false => None,
            };
            let answer = send(&app, &number, captcha.as_ref(), altcha.as_deref()).await;
            let pow_refused = pow_gate && !with_pow;
            let captcha_refused = captcha_gate && !with_captcha;
            if !pow_refused && !captcha_refused {
                assert_eq!(answer.status, 200, "{case}: {answer:?}");
                assert_eq!(app.inbox(&number).await.len(), 1, "{case}");
                continue;
            }
            // The proof of work is checked first: its refusal leaves a solved captcha unused.
            let expected = if pow_refused { 40021 } else { 40020 };
            assert_eq!((answer.status, answer.code()), (400, expected), "{case}");
            assert_nothing_sent(&app, &number).await;
            if let (true, Some(captcha)) = (pow_refused, &captcha) {
                let altcha = solved_payload(&app).await;
                let retry = send(&app, &number, Some(captcha), Some(&altcha)).await;
                assert_eq!(
                    retry.status, 200,
                    "{case}, retried with a payload: {retry:?}"
                );
            }
        }
    }
}

#[tokio::test]
async fn a_bad_or_used_payload_creates_no_code_and_no_sms() {
    let app = spawn_pow_app(Backend::Memory, |s| {
        s.pow.send_requires_pow = true;
        s.otp.resend_cooldown = Duration::ZERO;
    })
    .await;
    let number = random_phone();
    for bad in [
        "",
        "bm90IGFsdGNoYQ==",
        &super::altcha_client("foreign", "").await,
    ] {
        let answer = send(&app, &number, None, Some(bad)).await;
        assert_eq!((answer.status, answer.code()), (400, 40021), "{bad}");
    }
    assert_nothing_sent(&app, &number).await;

    let payload = solved_payload(&app).await;
    assert_eq!(send(&app, &number, None, Some(&payload)).await.status, 200);
    // One solved challenge buys one send, whichever phone the next one is for.
    let other = random_phone();
    let replay = send(&app, &other, None, Some(&payload)).await;
    assert_eq!((replay.status, replay.code()), (400, 40021));
    assert_nothing_sent(&app, &other).await;
    assert_eq!(app.inbox(&number).await.len(), 1);
}

async fn fifty_parallel_sends_with_one_payload_open_one(backend: Backend) {
    let app = spawn_pow_app(backend, |s| {
        s.pow.send_requires_pow = true;
        s.abuse = AbuseSettings::unlimited();
    })
    .await;
    let payload = solved_payload(&app).await;
    // Fifty phones: only the proof of work can hold the other sends back.
    let numbers: Vec<String> = (0..50).map(|_| random_phone()).collect();
    let bodies = numbers
        .iter()
        .map(|number| json!({ "phone": number, "altcha": payload }))
        .collect();
    let tally = post_at_once(&app.url("/api/v1/otp/send"), bodies).await;
    assert_eq!(tally.get(&(200, 200)), Some(&1), "{tally:?}");
    assert_eq!(tally.get(&(400, 40021)), Some(&49), "{tally:?}");
    let mut sms = 0;
    for number in &numbers {
        sms += app.inbox(number).await.len();
    }
    assert_eq!(sms, 1, "exactly one SMS");
}

on_memory_and_redis!(fifty_parallel_sends_with_one_payload_open_one);

#[tokio::test]
async fn an_idempotent_repeat_with_its_payload_is_answered_not_refused() {
    let app = spawn_pow_app(Backend::Memory, |s| s.pow.send_requires_pow = true).await;
    let number = random_phone();
    let payload = solved_payload(&app).await;
    let body = json!({ "phone": number, "altcha": payload });
    let send_with_key = |body: Value| {
        app.request(
            app.client
                .post(app.url("/api/v1/otp/send"))
                .header("idempotency-key", "pow-order-1")
                .json(&body),
        )
    };
    let first = send_with_key(body.clone()).await;
    assert_eq!(first.status, 200, "{first:?}");
    let repeat = send_with_key(body).await;
    assert_eq!(repeat.body, first.body);
    assert_eq!(app.inbox(&number).await.len(), 1);
    // The payload is part of the request the key was first used with.
    let other = solved_payload(&app).await;
    let changed = send_with_key(json!({ "phone": number, "altcha": other })).await;
    assert_eq!(changed.code(), 42200, "{changed:?}");
}
