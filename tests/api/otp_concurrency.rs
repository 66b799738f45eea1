//! The race claims, with real concurrency: many clients, many connections, one phone.

use std::collections::HashMap;

use futures::future::join_all;
use serde::Serialize;
use vcode::domain::Purpose;
use vcode::otp::VerifyBy;
use vcode_wire::{Envelope, SendRequest, VerifyRequest, paths};

use crate::support::{Backend, codes, phone, random_phone, spawn_app, spawn_app_with};

/// Posts `body` to `url` `times` times at once, each on its own connection so that the server
/// sees them truly in parallel; counts the answers by (HTTP status, envelope code).
async fn post_at_once(
    url: String,
    body: impl Serialize + Clone + Send + 'static,
    times: usize,
) -> HashMap<(u16, u32), usize> {
    let requests = (0..times).map(|_| {
        let (url, body) = (url.clone(), body.clone());
        tokio::spawn(async move {
            let client = reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .build()
                .expect("client");
            let response = client
                .post(url)
                .json(&body)
                .send()
                .await
                .expect("an answer");
            let status = response.status().as_u16();
            let envelope: Envelope<serde_json::Value> = response.json().await.expect("envelope");
            (status, envelope.code)
        })
    });
    let mut tally = HashMap::new();
    for answer in join_all(requests).await {
        *tally.entry(answer.expect("task")).or_default() += 1;
    }
    tally
}

/// Under its id (the default) and by phone: each mode is its own atomic step in the store.
async fn hundred_concurrent_verifies_of_one_code_succeed_once(backend: Backend) {
    for by in [VerifyBy::Id, VerifyBy::Phone] {
        let app = spawn_app_with(backend, |s| s.otp.verify_by = by).await;
        let number = random_phone();
        let id = app.send_id(&number).await;
        let code = app.last_code(&number).await;
        let body = VerifyRequest {
            phone: Some(number),
            ..VerifyRequest::with_id(id, code)
        };
        let tally = post_at_once(app.url(paths::OTP_VERIFY), body, 100).await;
        assert_eq!(tally.get(&(200, 200)), Some(&1), "{by:?}: {tally:?}");
        assert_eq!(tally.get(&(410, 41000)), Some(&99), "{by:?}: {tally:?}");
    }
}

async fn fifty_concurrent_sends_make_one_code_and_one_sms(backend: Backend) {
    let app = spawn_app(backend).await;
    let number = random_phone();
    let body = SendRequest::new(&number);
    let tally = post_at_once(app.url(paths::OTP_SEND), body, 50).await;
    assert_eq!(tally.get(&(200, 200)), Some(&1), "{tally:?}");
    assert_eq!(tally.get(&(429, 42900)), Some(&49), "{tally:?}");
    let inbox = app.inbox(&number).await;
    assert_eq!(inbox.len(), 1, "exactly one SMS");
    let pending = app
        .store
        .codes
        .pending_code(&phone(&number), &Purpose::default())
        .await
        .unwrap()
        .expect("one pending code");
    assert_eq!(
        codes::pending(&phone(&number), &Purpose::default(), &pending).expose(),
        inbox[0]
    );
    assert_eq!(pending.deliveries, 1);
}

on_every_store!(
    hundred_concurrent_verifies_of_one_code_succeed_once,
    fifty_concurrent_sends_make_one_code_and_one_sms,
);
