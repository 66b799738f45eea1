//! The threat list, tried as an attacker would against the default settings: each test is one
//! finding of the security review (issue 12) and what now stops it. The README's Security table
//! names these tests.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::json;
use vcode::client_ip::TrustedProxies;
use vcode_wire::{SendRequest, VerifyRequest, paths};

use crate::support::app::Answer;
use crate::support::{Backend, TestApp, random_phone, spawn_app, spawn_app_with, wrong_code};

/// An app behind a trusted proxy on loopback, so a test can speak for many client addresses.
async fn behind_proxy(backend: Backend) -> TestApp {
    spawn_app_with(backend, |s| {
        s.abuse.trusted_proxies = TrustedProxies::parse("127.0.0.1").unwrap();
    })
    .await
}

async fn send_from(app: &TestApp, client: &str, body: &SendRequest) -> Answer {
    let request = app
        .client
        .post(app.url(paths::OTP_SEND))
        .header("x-forwarded-for", client)
        .json(body);
    app.request(request).await
}

async fn verify_from(app: &TestApp, client: &str, id: &str, code: &str) -> Answer {
    let request = app
        .client
        .post(app.url(paths::OTP_VERIFY))
        .header("x-forwarded-for", client)
        .json(&VerifyRequest::with_id(id, code));
    app.request(request).await
}

/// An accepted send to `phone` from `client`: the id it answered.
async fn send_id_from(app: &TestApp, client: &str, phone: &str) -> String {
    let sent = send_from(app, client, &SendRequest::new(phone)).await;
    assert_eq!(sent.status, 200, "{sent:?}");
    sent.verification_id()
}

/// SMS pumping: every address of one IPv6 /64 is one client for the SMS budget (20 an hour).
async fn sms_pumping_through_one_ipv6_network_is_one_client(backend: Backend) {
    let app = behind_proxy(backend).await;
    let mut delivered = 0;
    for host in 1..=30 {
        let client = format!("2001:db8:7:7::{host:x}");
        let answer = send_from(&app, &client, &SendRequest::new(random_phone())).await;
        match answer.code() {
            200 => delivered += 1,
            42902 => assert!(answer.retry_after.is_some(), "{answer:?}"),
            _ => panic!("{answer:?}"),
        }
    }
    assert_eq!(delivered, 20, "one /64, one budget");
    let other_network = send_from(&app, "2001:db8:7:8::1", &SendRequest::new(random_phone())).await;
    assert_eq!(other_network.status, 200, "{other_network:?}");
}

/// Lock-out: a guesser's wrong codes stop the guesser (10 a day per phone and client), never
/// the owner on another address (the per-phone ceiling is 100). The guesser gets ids of its
/// own by sending to the victim, each with 5 attempts of its own: the failure limit is what
/// stops it, and the owner's id and code are untouched.
async fn guessing_stops_the_guesser_not_the_owner(backend: Backend) {
    // No cooldown: the guesser's sends to the victim are not held back by the owner's.
    let app = spawn_app_with(backend, |s| {
        s.abuse.trusted_proxies = TrustedProxies::parse("127.0.0.1").unwrap();
        s.otp.resend_cooldown = Duration::ZERO;
    })
    .await;
    let (owner, guesser) = ("203.0.113.10", "198.51.100.66");
    let victim = random_phone();
    let mine = send_id_from(&app, owner, &victim).await;
    let code = app.last_code(&victim).await;
    for _ in 0..2 {
        let theirs = send_id_from(&app, guesser, &victim).await;
        for _ in 0..5 {
            let answer = verify_from(&app, guesser, &theirs, wrong_code(&code)).await;
            assert!(
                [40010, 42901].contains(&answer.code()),
                "guesses count against the guesser's own id: {answer:?}"
            );
        }
    }
    let theirs = send_id_from(&app, guesser, &victim).await;
    let answer = verify_from(&app, guesser, &theirs, "123456").await;
    assert_eq!((answer.status, answer.code()), (429, 42902), "{answer:?}");
    // 10 wrong guesses later the owner gets in with their code, and with a fresh one.
    assert_eq!(
        app.last_code(&victim).await,
        code,
        "the same code all along"
    );
    let answer = verify_from(&app, owner, &mine, &code).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let mine = send_id_from(&app, owner, &victim).await;
    let code = app.last_code(&victim).await;
    let answer = verify_from(&app, owner, &mine, &code).await;
    assert_eq!(answer.status, 200, "{answer:?}");
}

/// Attacker text in our SMS: only configured purposes exist, and the text comes from templates.
async fn purposes_are_configured_and_never_reach_the_sms_as_text(backend: Backend) {
    let app = spawn_app(backend).await;
    let phone = random_phone();
    let answer = app.send_for(&phone, "call-4001234567-now").await;
    assert_eq!((answer.status, answer.code()), (400, 40003), "{answer:?}");
    assert!(app.inbox(&phone).await.is_empty());
    for purpose in ["login", "register", "reset_password", "bind_phone"] {
        assert_eq!(app.send_for(&phone, purpose).await.status, 200, "{purpose}");
    }
}

/// Unbounded state: one client creates at most 30 captchas a minute.
async fn captcha_creation_is_limited_per_client(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut created = 0;
    let mut refused = None;
    for _ in 0..35 {
        let answer = app.post_json(paths::CAPTCHA, &json!(null)).await;
        match answer.code() {
            200 => created += 1,
            _ => refused = Some(answer),
        }
    }
    assert_eq!(created, 30);
    let refused = refused.expect("a refusal");
    assert_eq!(
        (refused.status, refused.code()),
        (429, 42902),
        "{refused:?}"
    );
}

/// Idempotency: a refused send leaves no record (its retry runs again), and the same phone
/// written two ways is the same request.
async fn idempotency_keeps_only_sends_that_delivered(backend: Backend) {
    let app = spawn_app_with(backend, |s| {
        s.otp.resend_cooldown = Duration::from_secs(1);
    })
    .await;
    let number = "13600136001";
    let send = |key: &'static str, phone: &'static str| {
        let request = app
            .client
            .post(app.url(paths::OTP_SEND))
            .header("idempotency-key", key)
            .json(&SendRequest::new(phone));
        app.request(request)
    };
    assert_eq!(app.send(number).await.status, 200);
    let refused = send("retry-1", number).await;
    assert_eq!(refused.code(), 42900, "{refused:?}");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let retried = send("retry-1", number).await;
    assert_eq!(retried.status, 200, "the refusal was not kept: {retried:?}");
    assert_eq!(app.inbox(number).await.len(), 2);
    let replayed = send("retry-1", "+8613600136001").await;
    assert_eq!(
        replayed.status, 200,
        "same phone, same request: {replayed:?}"
    );
    assert_eq!(replayed.body, retried.body);
    assert_eq!(app.inbox(number).await.len(), 2, "a replay sends nothing");
}

/// A ghost after a timeout: a send answered 503 while Redis stalled leaves nothing behind that
/// refuses its retry once Redis is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_send_answered_503_leaves_no_ghost_once_redis_is_back() {
    let app = spawn_app(Backend::Redis).await;
    let redis = app.redis.as_ref().expect("a Redis backend");
    // A warm connection, so the stalled send's script does reach Redis (and waits there).
    assert_eq!(app.send(&random_phone()).await.status, 200);
    let number = random_phone();
    redis.pause();
    let stalled = app.send(&number).await;
    // Redis runs the queued script once it resumes, past the caller's deadline.
    tokio::time::sleep(Duration::from_millis(300)).await;
    redis.resume();
    assert_eq!(
        (stalled.status, stalled.code()),
        (503, 50300),
        "{stalled:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ghost = app
        .store
        .codes
        .pending_code(
            &crate::support::phone(&number),
            &vcode::domain::Purpose::default(),
        )
        .await
        .unwrap();
    assert!(
        ghost.is_none(),
        "the stalled script wrote nothing: {ghost:?}"
    );
    let retry = app.send(&number).await;
    assert_eq!(
        retry.status, 200,
        "no cooldown left by the ghost: {retry:?}"
    );
    assert_eq!(app.inbox(&number).await.len(), 1, "one SMS, for the retry");
}

/// Unsafe modes: dev routes only for direct loopback peers; operator routes only on their own
/// listener; the stats token is compared whole, with a case-insensitive scheme.
async fn dev_and_operator_routes_are_not_on_the_public_path(backend: Backend) {
    let token = "operator-token-0123456789";
    let app = spawn_app_with(backend, |s| s.admin_token = Some(token.into())).await;
    let number = random_phone();
    assert_eq!(app.send(&number).await.status, 200);
    let outbox = format!("{}?phone={}", paths::DEV_INBOX, urlencode(&number));
    assert_eq!(app.get(&outbox).await.status, 200, "direct loopback peer");
    // Whatever a same-host proxy adds, its requests are not direct.
    for header in [
        "x-forwarded-for",
        "x-real-ip",
        "forwarded",
        "via",
        "x-forwarded-host",
        "x-forwarded-proto",
        "cf-connecting-ip",
        "true-client-ip",
        "x-client-ip",
        "x-cluster-client-ip",
        "x-original-forwarded-for",
        "fastly-client-ip",
        "x-envoy-external-address",
    ] {
        let request = app
            .client
            .get(app.url(&outbox))
            .header(header, "198.51.100.1");
        let answer = app.request(request).await;
        assert_eq!((answer.status, answer.code()), (404, 40400), "{header}");
    }
    for path in [paths::METRICS, paths::STATS] {
        assert_eq!(
            app.get(path).await.status,
            404,
            "{path} on the public listener"
        );
    }
    let metrics = app
        .client
        .get(app.admin_url(paths::METRICS))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(metrics.status(), 200);
    let stats = |auth: &'static str| {
        let request = app
            .client
            .get(app.admin_url(paths::STATS))
            .header("authorization", auth);
        app.request(request)
    };
    assert_eq!(stats("bearer operator-token-0123456789").await.status, 200);
    assert_eq!(stats("Bearer operator-token-012345678").await.status, 401);
    assert_eq!(stats("Bearer operator-token-0123456789x").await.status, 401);
}

/// With an admin token, every route of the operator listener needs it, `/metrics` included (it
/// tells traffic, provider failures and API key names), and an unknown path answers as a
/// known one does; without a token `/metrics` stays open on its loopback listener.
#[tokio::test]
async fn every_operator_route_needs_the_admin_token_when_one_is_set() {
    let token = "operator-token-0123456789";
    let app = spawn_app_with(Backend::Memory, |s| s.admin_token = Some(token.into())).await;
    let operator = |path: &str, auth: Option<&str>| {
        let mut request = app.client.get(app.admin_url(path));
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        request.send()
    };
    for path in [paths::METRICS, paths::STATS, "/no/such/route"] {
        for auth in [
            None,
            Some("Bearer operator-token-012345678"),
            Some("Bearer operator-token-0123456789x"),
            Some("Basic b3BlcmF0b3I6b3BlcmF0b3ItdG9rZW4tMDEyMzQ1Njc4OQ=="),
            Some(token),
        ] {
            let refused = operator(path, auth).await.unwrap();
            assert_eq!(refused.status(), 401, "{path} {auth:?}");
            assert_eq!(refused.headers()["www-authenticate"], "Bearer");
            assert_eq!(refused.headers()["x-content-type-options"], "nosniff");
            let body: serde_json::Value = refused.json().await.unwrap();
            assert_eq!(body["code"], 40100, "{path} {auth:?}");
        }
    }
    let metrics = operator(paths::METRICS, Some(&format!("Bearer {token}")))
        .await
        .unwrap();
    assert_eq!(metrics.status(), 200);
    assert!(
        metrics.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    let stats = operator(paths::STATS, Some(&format!("bearer {token}")))
        .await
        .unwrap();
    assert_eq!(stats.status(), 200);
    let unknown = operator("/no/such/route", Some(&format!("Bearer {token}")))
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);

    let open = spawn_app(Backend::Memory).await;
    let metrics = open
        .client
        .get(open.admin_url(paths::METRICS))
        .send()
        .await
        .unwrap();
    assert_eq!(metrics.status(), 200, "no token: loopback only, and open");
}

fn urlencode(phone: &str) -> String {
    phone.replace('+', "%2B")
}

/// HTTP edges: a stalled body is cut off; an oversized declared body is refused before it is
/// sent; HEAD works on GET routes; every answer says nosniff; errors echo no request value.
async fn http_edges_are_closed(backend: Backend) {
    let app = spawn_app_with(backend, |s| s.body_timeout = Duration::from_millis(500)).await;
    let address = app.address.trim_start_matches("http://").to_owned();

    let started = Instant::now();
    let stalled = raw_exchange(
        &address,
        "POST /api/v1/otp/send HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"phone\":",
    );
    assert!(stalled.contains("HTTP/1.1 408"), "{stalled}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );

    // A body that arrives in three pieces within its deadline is read whole: the send is
    // served (200), where a truncated body would be refused (400).
    let body = format!(r#"{{"phone":"{}"}}"#, random_phone());
    let pieces = [&body[..5], &body[5..12], &body[12..]];
    let in_pieces = raw_exchange_in_pieces(
        &address,
        &format!(
            "POST /api/v1/otp/send HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        ),
        &pieces,
    );
    assert!(in_pieces.contains("HTTP/1.1 200"), "{in_pieces}");

    let oversized = raw_exchange(
        &address,
        "POST /api/v1/otp/send HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000000\r\nexpect: 100-continue\r\n\r\n",
    );
    // actix-web writes its interim `100 Continue` before any handler runs; the 413 follows at
    // once, without a byte of the body sent.
    assert!(oversized.contains("HTTP/1.1 413"), "{oversized}");

    let head = app
        .client
        .head(app.url(paths::HEALTHZ))
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), 200);
    assert!(head.bytes().await.unwrap().is_empty());

    let answer = app
        .post_json(paths::OTP_SEND, &json!({ "phone": 987654321012_u64 }))
        .await;
    assert_eq!(answer.code(), 40000);
    assert!(
        !answer.body.to_string().contains("987654321012"),
        "{answer:?}"
    );
    let response = app
        .client
        .post(app.url(paths::OTP_SEND))
        .json(&SendRequest::new(random_phone()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["x-content-type-options"], "nosniff");
    assert_eq!(response.headers()["cache-control"], "no-store");
}

/// One HTTP/1.1 exchange on a raw socket: the request as written, the answer as read.
fn raw_exchange(address: &str, request: &str) -> String {
    raw_exchange_in_pieces(address, request, &[])
}

/// `raw_exchange` with the body written after `head` in `pieces`, 50 ms apart.
fn raw_exchange_in_pieces(address: &str, head: &str, pieces: &[&str]) -> String {
    let mut stream = TcpStream::connect(address).expect("the app listens");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream.write_all(head.as_bytes()).unwrap();
    for piece in pieces {
        std::thread::sleep(Duration::from_millis(50));
        stream.write_all(piece.as_bytes()).unwrap();
    }
    let mut answer = Vec::new();
    let mut chunk = [0; 4096];
    // Until a final (non-1xx) status line has arrived, or the server stops talking.
    while let Ok(read @ 1..) = stream.read(&mut chunk) {
        answer.extend_from_slice(&chunk[..read]);
        let text = String::from_utf8_lossy(&answer);
        if text
            .match_indices("HTTP/1.1 ")
            .any(|(at, _)| !text[at + 9..].starts_with('1'))
        {
            break;
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}

/// Phones: keypad letters and extensions are not read into another number.
async fn phones_with_letters_or_extensions_are_refused(backend: Backend) {
    let app = spawn_app(backend).await;
    for phone in [
        "1380013800a",
        "+8613800138000;ext=1",
        "+86 138 0013 8000 x12",
    ] {
        let answer = app.send(phone).await;
        assert_eq!((answer.status, answer.code()), (400, 40001), "{phone}");
    }
}

on_every_store!(
    sms_pumping_through_one_ipv6_network_is_one_client,
    guessing_stops_the_guesser_not_the_owner,
    purposes_are_configured_and_never_reach_the_sms_as_text,
    captcha_creation_is_limited_per_client,
    idempotency_keeps_only_sends_that_delivered,
    dev_and_operator_routes_are_not_on_the_public_path,
    http_edges_are_closed,
    phones_with_letters_or_extensions_are_refused,
);
