//! The webhook sender against a real local HTTP gateway that fails on demand, and the roll-back
//! of a code whose SMS could not be delivered.

use std::time::{Duration, Instant};

use vcode::domain::Purpose;
use vcode::store::ResendPolicy;

use crate::support::app::webhook;
use crate::support::{Backend, SmsGateway, codes, phone, random_phone, spawn_app_with};

async fn delivered_sms_carries_the_stored_code(backend: Backend) {
    let gateway = SmsGateway::start();
    let app = spawn_app_with(backend, |s| s.sms = webhook(gateway.url())).await;
    let number = random_phone();
    let answer = app.send(&number).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let received = gateway.received();
    assert_eq!(received.len(), 1);
    let pending = app
        .store
        .codes
        .pending_code(&phone(&number), &Purpose::default())
        .await
        .unwrap()
        .expect("pending");
    assert_eq!(received[0]["phone"], number.as_str());
    assert_eq!(received[0]["purpose"], "login");
    assert_eq!(
        received[0]["code"],
        codes::pending(&phone(&number), &Purpose::default(), &pending).expose()
    );
    assert!(
        received[0]["text"]
            .as_str()
            .unwrap()
            .contains(codes::pending(&phone(&number), &Purpose::default(), &pending).expose())
    );
    assert_eq!(received[0]["message_id"].as_str().unwrap().len(), 32);
}

async fn failed_delivery_rolls_back_the_new_code_and_its_cooldown(backend: Backend) {
    let gateway = SmsGateway::start();
    let app = spawn_app_with(backend, |s| s.sms = webhook(gateway.url())).await;
    let number = random_phone();
    for status in [500, 503, 400] {
        gateway.fail_with(status);
        let answer = app.send(&number).await;
        assert_eq!((answer.status, answer.code()), (502, 50200), "{answer:?}");
        let pending = app
            .store
            .codes
            .pending_code(&phone(&number), &Purpose::default())
            .await
            .unwrap();
        assert!(
            pending.is_none(),
            "gateway {status}: the code was rolled back"
        );
    }
    // No cooldown is left behind: the next send goes straight through.
    gateway.succeed();
    assert_eq!(app.send(&number).await.status, 200);
    assert_eq!(gateway.received().len(), 1);
}

async fn failed_redelivery_keeps_the_earlier_code(backend: Backend) {
    for policy in [ResendPolicy::Reuse, ResendPolicy::Rotate] {
        let gateway = SmsGateway::start();
        let app = spawn_app_with(backend, |s| {
            s.sms = webhook(gateway.url());
            s.otp.resend_cooldown = Duration::ZERO;
            s.otp.resend = policy;
        })
        .await;
        let number = random_phone();
        assert_eq!(app.send(&number).await.status, 200);
        let first = gateway.received()[0]["code"].as_str().unwrap().to_owned();
        gateway.fail_with(500);
        assert_eq!(app.send(&number).await.code(), 50200);
        let pending = app
            .store
            .codes
            .pending_code(&phone(&number), &Purpose::default())
            .await
            .unwrap()
            .expect("the earlier code is still pending");
        assert!(
            codes::holds(&phone(&number), &Purpose::default(), &pending, &first),
            "{policy:?}"
        );
        assert_eq!(pending.deliveries, 1, "{policy:?}");
        assert_eq!(app.verify(&number, &first).await.status, 200, "{policy:?}");
    }
}

async fn a_stalled_gateway_fails_within_the_timeout(backend: Backend) {
    let gateway = SmsGateway::start();
    let app = spawn_app_with(backend, |s| s.sms = webhook(gateway.url())).await;
    gateway.stall_for(Duration::from_secs(3));
    let number = random_phone();
    let started = Instant::now();
    let answer = app.send(&number).await;
    let elapsed = started.elapsed();
    assert_eq!((answer.status, answer.code()), (502, 50200), "{answer:?}");
    assert!(
        elapsed < Duration::from_millis(1500),
        "took {elapsed:?} with a 500 ms timeout"
    );
    let pending = app
        .store
        .codes
        .pending_code(&phone(&number), &Purpose::default())
        .await
        .unwrap();
    assert!(pending.is_none());
}

async fn an_unreachable_gateway_fails_cleanly(backend: Backend) {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/sms");
    let app = spawn_app_with(backend, |s| s.sms = webhook(&url)).await;
    let number = random_phone();
    assert_eq!(app.send(&number).await.code(), 50200);
    let pending = app
        .store
        .codes
        .pending_code(&phone(&number), &Purpose::default())
        .await
        .unwrap();
    assert!(pending.is_none());
}

on_both_stores!(
    delivered_sms_carries_the_stored_code,
    failed_delivery_rolls_back_the_new_code_and_its_cooldown,
    failed_redelivery_keeps_the_earlier_code,
    a_stalled_gateway_fails_within_the_timeout,
    an_unreachable_gateway_fails_cleanly,
);
