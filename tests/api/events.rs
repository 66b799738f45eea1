//! Events as an application receives them: every change of a verification's life delivered as
//! a Standard Webhooks request that the official library (`tests/events/receiver.py`) verifies,
//! in order per verification, through a receiver outage, each event once with its
//! `webhook-id` however many dispatchers run; on every store that has an outbox.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use vcode::events::Dispatcher;
use vcode::otp::VerifyBy;
use vcode_wire::{FailedEvents, Replayed, SendData, VerifyRequest, paths};

use crate::support::event_receiver::{Receiver, events_to, new_secret};
use crate::support::{Backend, TestApp, eventually, random_phone, spawn_app_with};

on_every_store!(
    a_verification_s_events_arrive_signed_and_in_order,
    expired_and_canceled_verifications_say_so_once,
    a_receiver_that_was_down_gets_every_event_in_order,
    concurrent_dispatchers_deliver_each_event_once,
    failed_events_are_listed_and_replayed,
    verifies_by_phone_tell_the_events_a_verify_by_id_tells,
);

const WAIT: Duration = Duration::from_secs(20);

/// An app that verifies by id and delivers its events to `receiver`, signing with an old and a
/// new secret as during a rotation (the receiver holds only the new one).
async fn app_for(backend: Backend, receiver: &Receiver, secret: &str) -> TestApp {
    let old = new_secret();
    let events = events_to(&receiver.url, &[&old, secret]);
    spawn_app_with(backend, |settings| {
        settings.otp.verify_by = VerifyBy::Id;
        settings.events = events;
    })
    .await
}

/// Sends a code to a new phone: its verification id and the code.
async fn send(app: &TestApp) -> (String, String) {
    let phone = random_phone();
    let sent = app.send(&phone).await;
    assert_eq!(sent.status, 200, "{sent:?}");
    let id = sent.data::<SendData>().verification_id;
    (id, app.last_code(&phone).await)
}

/// A code of the same length that is not `code`.
fn wrong(code: &str) -> String {
    code.chars()
        .map(|digit| if digit == '0' { '1' } else { '0' })
        .collect()
}

async fn a_verification_s_events_arrive_signed_and_in_order(backend: Backend) {
    let secret = new_secret();
    let Some(receiver) = Receiver::start(&secret, "a_verification_s_events_arrive") else {
        return;
    };
    let app = app_for(backend, &receiver, &secret).await;
    let (id, code) = send(&app).await;
    assert_eq!(app.verify_id(&id, &wrong(&code)).await.status, 400);
    assert_eq!(app.verify_id(&id, &wrong(&code)).await.status, 400);
    assert_eq!(app.verify_id(&id, &code).await.status, 200);

    let expected = [
        "verification.created",
        "verification.failed_attempt",
        "verification.failed_attempt",
        "verification.approved",
    ];
    assert!(
        eventually(WAIT, || async {
            receiver.accepted_types(&id).await.len() >= 4
        })
        .await,
        "{:?}",
        receiver.deliveries().await
    );
    assert_eq!(receiver.accepted_types(&id).await, expected);
    let deliveries = receiver.deliveries().await;
    let ours: Vec<_> = deliveries
        .iter()
        .filter(|delivery| delivery.subject() == Some(id.as_str()))
        .collect();
    for delivery in &ours {
        assert!(delivery.verified, "{delivery:?}");
        assert!(!delivery.raw.contains(&code), "a code in {}", delivery.raw);
        let data = delivery.data.as_ref().unwrap();
        assert!(data["phone"].as_str().unwrap().contains('*'), "{data}");
        assert_eq!(data["purpose"], "login");
    }
    let attempts: Vec<_> = ours
        .iter()
        .filter(|delivery| delivery.kind.as_deref() == Some("verification.failed_attempt"))
        .map(|delivery| delivery.data.as_ref().unwrap()["attempts"].as_u64())
        .collect();
    assert_eq!(attempts, [Some(1), Some(2)]);
}

/// `VCODE_VERIFY_BY=either`: each phone's code verified by phone (no id) tells the same events,
/// under the id of its latest send, as a twin verified under its id: right after two wrong
/// codes, and spent by wrong codes. After the codes' TTL, the expiry timers find the by-phone
/// verifications ended (no `expired`); a reused code's earlier id, never verified under its
/// own id, says `expired`, as by id.
async fn verifies_by_phone_tell_the_events_a_verify_by_id_tells(backend: Backend) {
    let secret = new_secret();
    let Some(receiver) = Receiver::start(&secret, "verifies_by_phone") else {
        return;
    };
    let events = events_to(&receiver.url, &[&secret]);
    let ttl = Duration::from_secs(3);
    let app = spawn_app_with(backend, |settings| {
        settings.otp.verify_by = VerifyBy::Either;
        settings.otp.max_attempts = 3;
        settings.otp.code_ttl = ttl;
        settings.otp.resend_cooldown = Duration::ZERO;
        settings.events = events;
    })
    .await;
    let by_phone = |phone: String, code: String| {
        let app = &app;
        async move {
            app.post_json(paths::OTP_VERIFY, &VerifyRequest::new(phone, code))
                .await
                .status
        }
    };
    // A reused code sent twice: the second send's id takes the verify by phone.
    let approved_phone = random_phone();
    let first_id = app.send(&approved_phone).await.verification_id();
    let resent = app.send(&approved_phone).await;
    assert_eq!(resent.status, 200, "{resent:?}");
    let approved = resent.data::<SendData>().verification_id;
    let code = app.last_code(&approved_phone).await;
    assert_eq!(by_phone(approved_phone.clone(), wrong(&code)).await, 400);
    assert_eq!(by_phone(approved_phone.clone(), wrong(&code)).await, 400);
    assert_eq!(by_phone(approved_phone.clone(), code.clone()).await, 200);
    let (approved_by_id, code) = send(&app).await;
    assert_eq!(
        app.verify_id(&approved_by_id, &wrong(&code)).await.status,
        400
    );
    assert_eq!(
        app.verify_id(&approved_by_id, &wrong(&code)).await.status,
        400
    );
    assert_eq!(app.verify_id(&approved_by_id, &code).await.status, 200);

    let spent_phone = random_phone();
    let spent = app
        .send(&spent_phone)
        .await
        .data::<SendData>()
        .verification_id;
    let code = app.last_code(&spent_phone).await;
    for status in [400, 400, 429] {
        assert_eq!(by_phone(spent_phone.clone(), wrong(&code)).await, status);
    }
    // Spent with the code: the right one finds nothing.
    assert_ne!(by_phone(spent_phone.clone(), code).await, 200);
    let (spent_by_id, code) = send(&app).await;
    for status in [400, 400, 429] {
        assert_eq!(
            app.verify_id(&spent_by_id, &wrong(&code)).await.status,
            status
        );
    }

    let right: &[&str] = &[
        "verification.created",
        "verification.failed_attempt",
        "verification.failed_attempt",
        "verification.approved",
    ];
    let spent_types: &[&str] = &[
        "verification.created",
        "verification.failed_attempt",
        "verification.failed_attempt",
        "verification.failed_attempt",
        "verification.max_attempts_reached",
    ];
    // Past the TTL, every expiry timer has fallen due.
    tokio::time::sleep(ttl + Duration::from_millis(500)).await;
    receiver
        .assert_settled(
            &[
                (&approved, right),
                (&approved_by_id, right),
                (&spent, spent_types),
                (&spent_by_id, spent_types),
                (&first_id, &["verification.created", "verification.expired"]),
            ],
            WAIT,
            Duration::from_millis(1500),
        )
        .await;
    let deliveries = receiver.deliveries().await;
    let attempts = |id: &str| -> Vec<(String, Option<u64>)> {
        let mut seen = std::collections::HashSet::new();
        deliveries
            .iter()
            .filter(|delivery| delivery.accepted() && delivery.subject() == Some(id))
            .filter(|delivery| seen.insert(delivery.id.clone()))
            .map(|delivery| {
                assert!(delivery.verified, "{delivery:?}");
                let data = delivery.data.as_ref().unwrap();
                assert!(data["phone"].as_str().unwrap().contains('*'), "{data}");
                assert_eq!(data["purpose"], "login");
                (
                    delivery.kind.clone().unwrap_or_default(),
                    data["attempts"].as_u64(),
                )
            })
            .collect()
    };
    assert_eq!(attempts(&approved), attempts(&approved_by_id));
    assert_eq!(attempts(&spent), attempts(&spent_by_id));
    let counted: Vec<_> = attempts(&spent).into_iter().map(|(_, n)| n).collect();
    assert_eq!(counted, [None, Some(1), Some(2), Some(3), Some(3)]);
    // The verifications read as their events say.
    for (id, status) in [(&approved, "approved"), (&spent, "max_attempts_reached")] {
        let read = app
            .request(
                app.client
                    .get(app.url(&format!("/api/v1/otp/verifications/{id}"))),
            )
            .await;
        assert_eq!(read.status, 200, "{read:?}");
        assert_eq!(read.body["data"]["status"], status, "{read:?}");
    }
}

async fn expired_and_canceled_verifications_say_so_once(backend: Backend) {
    let secret = new_secret();
    let Some(receiver) = Receiver::start(&secret, "expired_and_canceled") else {
        return;
    };
    let old = new_secret();
    let events = events_to(&receiver.url, &[&old, &secret]);
    let app = spawn_app_with(backend, |settings| {
        settings.otp.verify_by = VerifyBy::Id;
        settings.otp.code_ttl = Duration::from_secs(1);
        settings.events = events;
    })
    .await;
    let (expiring, _) = send(&app).await;
    let (canceled, _) = send(&app).await;
    let cancel = app
        .request(
            app.client
                .post(app.url(&format!("/api/v1/otp/verifications/{canceled}/cancel"))),
        )
        .await;
    assert_eq!(cancel.status, 200, "{cancel:?}");
    // The canceled one's timer falls due too, and finds it canceled: nothing more.
    receiver
        .assert_settled(
            &[
                (&expiring, &["verification.created", "verification.expired"]),
                (
                    &canceled,
                    &["verification.created", "verification.canceled"],
                ),
            ],
            WAIT,
            Duration::from_millis(1500),
        )
        .await;
}

async fn a_receiver_that_was_down_gets_every_event_in_order(backend: Backend) {
    let secret = new_secret();
    let Some(receiver) = Receiver::start(&secret, "a_receiver_that_was_down") else {
        return;
    };
    receiver.set_mode(503, 0).await;
    let app = app_for(backend, &receiver, &secret).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let (id, code) = send(&app).await;
        assert_eq!(app.verify_id(&id, &wrong(&code)).await.status, 400);
        assert_eq!(app.verify_id(&id, &code).await.status, 200);
        ids.push(id);
    }
    // Down long enough for several tries of each first event.
    assert!(
        eventually(WAIT, || async {
            let refused = receiver.deliveries().await;
            ids.iter().all(|id| {
                refused
                    .iter()
                    .filter(|d| d.subject() == Some(id.as_str()))
                    .count()
                    >= 3
            })
        })
        .await
    );
    let before = receiver.deliveries().await;
    assert!(before.iter().all(|delivery| !delivery.accepted()));
    // Only the first event of each verification was tried while the receiver was down.
    for delivery in &before {
        assert_eq!(
            delivery.kind.as_deref(),
            Some("verification.created"),
            "{delivery:?}"
        );
    }
    receiver.set_mode(200, 0).await;
    let expected = [
        "verification.created",
        "verification.failed_attempt",
        "verification.approved",
    ];
    for id in &ids {
        assert!(
            eventually(WAIT, || async {
                receiver.accepted_types(id).await.len() >= 3
            })
            .await,
            "{id}: {:?}",
            receiver.accepted_types(id).await
        );
        assert_eq!(receiver.accepted_types(id).await, expected);
    }
    // The metrics saw the retries and the deliveries (one registry for the test process).
    let metrics = app
        .client
        .get(app.admin_url(paths::METRICS))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for outcome in ["retry", "delivered"] {
        let line = format!("vcode_event_deliveries_total{{outcome=\"{outcome}\"}} ");
        let count: u64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("{line} in {metrics}"));
        assert!(count > 0, "{line}{count}");
    }
    assert!(metrics.contains("vcode_events_pending "), "{metrics}");
    // Every try of one event carried its one webhook-id: each refused id was later accepted.
    let after = receiver.deliveries().await;
    for refused in before {
        assert!(
            after
                .iter()
                .any(|delivery| delivery.accepted() && delivery.id == refused.id),
            "{refused:?}"
        );
    }
}

async fn concurrent_dispatchers_deliver_each_event_once(backend: Backend) {
    let secret = new_secret();
    let Some(receiver) = Receiver::start(&secret, "concurrent_dispatchers") else {
        return;
    };
    // Slow answers: every dispatcher finds events due while the others are posting theirs.
    receiver.set_mode(200, 150).await;
    let settings = events_to(&receiver.url, &[&secret]);
    let app = app_for(backend, &receiver, &secret).await;
    for _ in 0..4 {
        let dispatcher = Dispatcher::new(
            app.store.events.clone(),
            app.store.codes.clone(),
            settings.clone(),
        )
        .unwrap();
        Arc::new(dispatcher).spawn();
    }
    let mut ids = Vec::new();
    for _ in 0..20 {
        let (id, code) = send(&app).await;
        assert_eq!(app.verify_id(&id, &code).await.status, 200);
        ids.push(id);
    }
    assert!(
        eventually(WAIT, || async {
            let mut accepted = 0;
            for id in &ids {
                accepted += receiver.accepted_types(id).await.len();
            }
            accepted >= 40
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut tries: HashMap<String, usize> = HashMap::new();
    for delivery in receiver.deliveries().await {
        assert!(delivery.accepted(), "{delivery:?}");
        *tries.entry(delivery.id).or_default() += 1;
    }
    assert_eq!(tries.len(), 40);
    let repeated: Vec<_> = tries.iter().filter(|(_, count)| **count > 1).collect();
    assert!(
        repeated.is_empty(),
        "delivered more than once: {repeated:?}"
    );
    for id in &ids {
        assert_eq!(
            receiver.accepted_types(id).await,
            ["verification.created", "verification.approved"]
        );
    }
}

async fn failed_events_are_listed_and_replayed(backend: Backend) {
    let secret = new_secret();
    let Some(receiver) = Receiver::start(&secret, "failed_events_are_listed") else {
        return;
    };
    receiver.set_mode(503, 0).await;
    let mut events = events_to(&receiver.url, &[&secret]);
    // Given up at the first failure after a second.
    events.retry_for = Duration::from_secs(1);
    let app = spawn_app_with(backend, |settings| {
        settings.otp.verify_by = VerifyBy::Id;
        settings.events = events;
    })
    .await;
    let (id, _) = send(&app).await;
    let failed = || async {
        let answer = app
            .request(app.client.get(app.admin_url(paths::EVENTS_FAILED)))
            .await;
        assert_eq!(answer.status, 200, "{answer:?}");
        answer.data::<FailedEvents>().events
    };
    assert!(eventually(WAIT, || async { !failed().await.is_empty() }).await);
    let listed = failed().await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].kind, "verification.created");
    assert_eq!(listed[0].subject, id);
    assert!(listed[0].error.contains("HTTP 503"), "{listed:?}");

    receiver.set_mode(200, 0).await;
    let replay = app
        .request(
            app.client
                .post(app.admin_url(paths::EVENTS_REPLAY))
                .json(&serde_json::json!({"seqs": [listed[0].seq]})),
        )
        .await;
    assert_eq!(replay.data::<Replayed>().replayed, 1, "{replay:?}");
    assert!(
        eventually(WAIT, || async {
            !receiver.accepted_types(&id).await.is_empty()
        })
        .await
    );
    let accepted: Vec<_> = receiver
        .deliveries()
        .await
        .into_iter()
        .filter(|delivery| delivery.accepted())
        .collect();
    assert_eq!(accepted[0].id, listed[0].webhook_id, "the same webhook-id");
    assert!(failed().await.is_empty());
}

/// Two endpoints, each with its own secret: one wants approvals only, the other everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_endpoint_gets_the_events_its_filter_wants() {
    let (all_secret, approved_secret) = (new_secret(), new_secret());
    let Some(all) = Receiver::start(&all_secret, "each_endpoint_gets") else {
        return;
    };
    let Some(approvals) = Receiver::start(&approved_secret, "each_endpoint_gets") else {
        return;
    };
    let mut events = events_to(&all.url, &[&all_secret]);
    let mut filtered = events_to(&approvals.url, &[&approved_secret])
        .endpoints
        .remove(0);
    filtered.events = Some(vec![vcode::events::EventKind::Approved]);
    events.endpoints.push(filtered);
    let app = spawn_app_with(Backend::Memory, |settings| {
        settings.otp.verify_by = VerifyBy::Id;
        settings.events = events;
    })
    .await;
    let (id, code) = send(&app).await;
    assert_eq!(app.verify_id(&id, &wrong(&code)).await.status, 400);
    assert_eq!(app.verify_id(&id, &code).await.status, 200);
    assert!(
        eventually(WAIT, || async {
            all.accepted_types(&id).await.len() >= 3
                && !approvals.accepted_types(&id).await.is_empty()
        })
        .await
    );
    assert_eq!(
        approvals.accepted_types(&id).await,
        ["verification.approved"]
    );
    assert!(approvals.deliveries().await.iter().all(|d| d.accepted()));
    assert_eq!(
        all.accepted_types(&id).await,
        [
            "verification.created",
            "verification.failed_attempt",
            "verification.approved"
        ]
    );
}

/// The operator listener describes its event routes in an OpenAPI document of its own (the
/// public one leaves the operator routes out), and serves what it describes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_operator_description_covers_the_event_routes() {
    let app = spawn_app_with(Backend::Memory, |_| {}).await;
    let spec: serde_json::Value = app
        .client
        .get(app.admin_url(paths::ADMIN_OPENAPI))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        spec["openapi"].as_str().map(|v| &v[..3]),
        Some("3.1"),
        "{spec}"
    );
    let described = [
        ("get", paths::EVENTS_FAILED),
        ("post", paths::EVENTS_REPLAY),
        ("get", paths::DELIVERY_RATES),
        ("get", paths::FRAUD_SAFE_LIST),
        ("post", paths::FRAUD_SAFE_LIST),
        ("delete", paths::FRAUD_SAFE_LIST_ENTRY),
        ("get", paths::ADMIN_OPENAPI),
    ];
    for (method, path) in described {
        assert!(
            spec["paths"][path][method].is_object(),
            "{method} {path}: {spec}"
        );
    }
    assert_eq!(spec["paths"].as_object().unwrap().len(), 6, "{spec}");
    let failed = app
        .client
        .get(app.admin_url(paths::EVENTS_FAILED))
        .send()
        .await
        .unwrap();
    assert_eq!(failed.status(), 200);
    let replayed = app
        .client
        .post(app.admin_url(paths::EVENTS_REPLAY))
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(replayed.status(), 200);
    // The public description still leaves them out.
    let public: serde_json::Value = app
        .client
        .get(app.url(paths::OPENAPI))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(public["paths"].get(paths::EVENTS_FAILED).is_none());
}
