//! The webhook sender against a real local HTTP gateway that fails on demand, the roll-back of
//! a code whose SMS could not be delivered (a gateway's 429 answered as a quota), a gateway
//! too slow to answer (the SMS stands, unconfirmed), and proxy variables that are not obeyed.
//! Redirects and signatures are in `secrets_at_rest`.

use std::time::{Duration, Instant};

use futures::future::join_all;
use serde_json::json;
use tokio::io::AsyncWriteExt;
use vcode::domain::Purpose;
use vcode::settings::AbuseSettings;
use vcode::store::ResendPolicy;
use vcode_wire::{Delivery, SendData, paths};

use crate::support::app::{Answer, webhook};
use crate::support::event_receiver::{events_to, new_secret};
use crate::support::{Backend, SmsGateway, codes, phone, random_phone, spawn_app_with};

const ADMIN_TOKEN: &str = "s3cret-admin-token-0123";

async fn delivered_sms_carries_the_stored_code(backend: Backend) {
    let gateway = SmsGateway::start();
    let app = spawn_app_with(backend, |s| s.sms = webhook(gateway.url())).await;
    let number = random_phone();
    let answer = app.send(&number).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let received = gateway.received();
    assert_eq!(received.len(), 1);
    let pending = app.pending_code(&number).await.expect("pending");
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
        let pending = app.pending_code(&number).await;
        assert!(
            pending.is_none(),
            "gateway {status}: the code was rolled back"
        );
    }
    // The gateway's own limit is the client's quota, for as long as the gateway says.
    gateway.throttle(42);
    let answer = app.send(&number).await;
    assert_eq!((answer.status, answer.code()), (429, 42902), "{answer:?}");
    assert_eq!(answer.body["data"]["retry_after"], 42);
    assert_eq!(answer.retry_after.as_deref(), Some("42"));
    let pending = app.pending_code(&number).await;
    assert!(pending.is_none(), "gateway 429: the code was rolled back");
    // No cooldown is left behind: the next send goes straight through.
    gateway.succeed();
    assert_eq!(app.send(&number).await.status, 200);
    assert_eq!(gateway.received().len(), 1);
}

/// With events on, the outbox's arguments follow the undo's own: a new code's rollback must
/// still read as one with no earlier code to restore (on Redis it restored the outbox's
/// arguments as the code instead, and the number kept a pending code that no SMS carried).
async fn failed_delivery_rolls_back_the_new_code_with_events_on(backend: Backend) {
    let gateway = SmsGateway::start();
    let app = spawn_app_with(backend, |s| {
        s.sms = webhook(gateway.url());
        // Never reached: only the outbox's writes matter here.
        s.events = events_to("http://127.0.0.1:9/events", &[&new_secret()]);
    })
    .await;
    let number = random_phone();
    gateway.fail_with(500);
    let answer = app.send(&number).await;
    assert_eq!((answer.status, answer.code()), (502, 50200), "{answer:?}");
    let pending = app.pending_code(&number).await;
    assert!(pending.is_none(), "the code was rolled back: {pending:?}");
    gateway.succeed();
    assert_eq!(
        app.send(&number).await.status,
        200,
        "no cooldown left behind"
    );
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
            .pending_code(&number)
            .await
            .expect("the earlier code is still pending");
        assert!(
            codes::holds(&phone(&number), &Purpose::default(), &pending, &first),
            "{policy:?}"
        );
        assert_eq!(pending.deliveries, 1, "{policy:?}");
        assert_eq!(app.verify(&number, &first).await.status, 200, "{policy:?}");
    }
}

/// A gateway that takes each SMS at once but answers only after the sender's timeout (500 ms):
/// every SMS may have arrived, so each send stands (code, cooldown, quota) and says so.
async fn a_gateway_answering_after_the_timeout_costs_one_sms_per_cooldown_and_its_code_verifies(
    backend: Backend,
) {
    let gateway = SmsGateway::start();
    let app = spawn_app_with(backend, |s| {
        s.sms = webhook(gateway.url());
        s.otp.resend_cooldown = Duration::from_secs(1);
        s.abuse = AbuseSettings {
            sends_per_phone_hour: 2,
            ..AbuseSettings::unlimited()
        };
        s.admin_token = Some(ADMIN_TOKEN.into());
    })
    .await;
    gateway.answer_late(Duration::from_secs(3));
    let number = random_phone();
    let started = Instant::now();
    let answers = join_all((0..8).map(|_| app.send(&number))).await;
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_millis(2500),
        "took {elapsed:?} with a 500 ms timeout"
    );
    let accepted: Vec<&Answer> = answers.iter().filter(|a| a.status == 200).collect();
    assert_eq!(accepted.len(), 1, "{answers:?}");
    assert!(answers.iter().all(|a| a.status == 200 || a.code() == 42900));
    let sent: SendData = accepted[0].data();
    assert_eq!(sent.delivery, Delivery::Unconfirmed, "{:?}", accepted[0]);
    assert_eq!(sent.resend_after, 1);
    assert_eq!(gateway.received().len(), 1, "one SMS for eight sends");
    let pending = app
        .pending_code(&number)
        .await
        .expect("the code stays: its SMS may arrive");
    let first = gateway.received()[0]["code"].as_str().unwrap().to_owned();
    assert!(codes::holds(
        &phone(&number),
        &Purpose::default(),
        &pending,
        &first
    ));

    // The cooldown stands too: no second SMS within it.
    assert_eq!(app.send(&number).await.code(), 42900);
    assert_eq!(gateway.hits(), 1);
    // After it, a resend delivers the same code again (VCODE_RESEND=reuse), still unconfirmed.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let again = app.send(&number).await;
    assert_eq!(again.status, 200, "{again:?}");
    assert_eq!(again.data::<SendData>().delivery, Delivery::Unconfirmed);
    let received: Vec<String> = gateway
        .received()
        .iter()
        .map(|sms| sms["code"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        received,
        [first.clone(), first.clone()],
        "one SMS per cooldown"
    );
    // Both counted against the phone's quota (2 an hour), as the SMS they may be.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(app.send(&number).await.code(), 42902);
    assert_eq!(gateway.hits(), 2);

    // The code of every SMS that arrived verifies (they all carry the one code).
    let verified = app.verify(&number, &first).await;
    assert_eq!(verified.status, 200, "{verified:?}");

    let stats = app
        .request(
            app.client
                .get(app.admin_url(&format!("{}?days=1", paths::STATS)))
                .bearer_auth(ADMIN_TOKEN),
        )
        .await;
    let totals = &stats.body["data"]["totals"];
    assert_eq!(
        (
            &totals["sms_unconfirmed"],
            &totals["sms_failed"],
            &totals["sms_sent"]
        ),
        (&json!(2), &json!(0), &json!(0)),
        "{stats:?}"
    );
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
    let pending = app.pending_code(&number).await;
    assert!(pending.is_none());
}

/// A client that hangs up while its send waits on the gateway leaves a whole send behind: the
/// SMS goes out and its code stays, or the gateway's failure rolls the code back (the send runs
/// to its end without its request; dropped with it, it left a code no SMS carried).
async fn a_client_that_hangs_up_mid_send_leaves_a_whole_send(backend: Backend) {
    let gateway = SmsGateway::start();
    let app = spawn_app_with(backend, |s| s.sms = webhook(gateway.url())).await;
    // The request written whole, then the connection reset (a phone that lost its network, a
    // proxy that gave up): actix drops the request's handler mid-send. (A polite close only
    // half-closes the connection, and actix lets the handler finish.)
    let hang_up = async |number: &str| {
        let body = serde_json::to_string(&vcode_wire::SendRequest::new(number)).unwrap();
        let host = app.address.trim_start_matches("http://");
        let mut connection = tokio::net::TcpStream::connect(host).await.expect("connect");
        let request = format!(
            "POST {} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            paths::OTP_SEND,
            body.len()
        );
        connection
            .write_all(request.as_bytes())
            .await
            .expect("write");
        // Until the send waits on the gateway.
        tokio::time::sleep(Duration::from_millis(100)).await;
        connection.set_zero_linger().expect("linger");
        drop(connection);
    };
    let settled = async |done: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !done() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };

    // The gateway answers 200 after the client has gone: the SMS is taken, its code kept.
    gateway.stall_for(Duration::from_millis(300));
    let delivered = random_phone();
    hang_up(&delivered).await;
    settled(&|| !gateway.received().is_empty()).await;
    let received = gateway.received();
    assert_eq!(received.len(), 1, "the SMS went out after the client left");
    let pending = app.pending_code(&delivered).await.expect("its code stays");
    let code = received[0]["code"].as_str().unwrap();
    assert!(codes::holds(
        &phone(&delivered),
        &Purpose::default(),
        &pending,
        code
    ));

    // The gateway fails after the client has gone: the code and its cooldown are rolled back.
    gateway.fail_with(500);
    let failed = random_phone();
    let hits = gateway.hits();
    hang_up(&failed).await;
    settled(&|| gateway.hits() > hits).await;
    // The roll-back follows the gateway's answer.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        app.pending_code(&failed).await.is_none(),
        "no code without its SMS"
    );
    gateway.succeed();
    assert_eq!(
        app.send(&failed).await.status,
        200,
        "no cooldown left behind"
    );
}

/// The proxy variables a container may inherit, all pointing at `proxy`.
const PROXY_VARIABLES: [&str; 6] = [
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

/// The variables are read when a client is built, for the whole process: so the sending side
/// runs in a process of its own (this test binary, running `sends_past_the_proxy_variables`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_variables_are_not_obeyed() {
    let proxy = SmsGateway::start();
    let base = proxy.url().trim_end_matches("/sms").to_owned();
    let mut child = std::process::Command::new(std::env::current_exe().expect("the test binary"));
    child.args([
        "--exact",
        "sms_webhook::sends_past_the_proxy_variables",
        "--ignored",
    ]);
    for var in PROXY_VARIABLES {
        child.env(var, &base);
    }
    let output = child.env_remove("NO_PROXY").env_remove("no_proxy").output();
    let output = output.expect("the test binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("1 passed"), "{stdout}");
    assert_eq!(proxy.hits(), 0, "a request went through the proxy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by proxy_variables_are_not_obeyed, with the proxy variables set"]
async fn sends_past_the_proxy_variables() {
    assert!(
        std::env::var_os("HTTP_PROXY").is_some(),
        "run with the variables"
    );
    let gateway = SmsGateway::start();
    let mut app = spawn_app_with(Backend::Memory, |s| s.sms = webhook(gateway.url())).await;
    // The test's own client would obey them.
    app.client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let answer = app.send(&random_phone()).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(gateway.received().len(), 1);
}

on_every_store!(
    delivered_sms_carries_the_stored_code,
    failed_delivery_rolls_back_the_new_code_and_its_cooldown,
    failed_delivery_rolls_back_the_new_code_with_events_on,
    failed_redelivery_keeps_the_earlier_code,
    a_gateway_answering_after_the_timeout_costs_one_sms_per_cooldown_and_its_code_verifies,
    an_unreachable_gateway_fails_cleanly,
    a_client_that_hangs_up_mid_send_leaves_a_whole_send,
);
