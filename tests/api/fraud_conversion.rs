//! The conversion guard through the API, on every store: a prefix whose codes are never
//! verified is refused (403/40300 with retry_after) once its unverified sends surge, with no
//! SMS, no code left behind and the gate's proof given back; a prefix whose codes are
//! verified is not; only a send that issues a code counts (double submits answered by the
//! cooldown do not), and a verified code converts its send once; the operator lists the
//! blocked prefix, lifts it (the prefix is open again), and reads the traffic; the operator
//! routes need the admin token; the per-country series count sends and verifies.

use serde_json::Value;
use vcode::fraud::FraudSettings;
use vcode::settings::AbuseSettings;
use vcode_wire::{
    CaptchaAnswer, CaptchaCreated, FraudLifted, FraudPrefixState, FraudReason, FraudSuspensions,
    FraudTraffic, RetryAfterData, SendRequest, paths,
};

use crate::support::app::Answer;
use crate::support::{Backend, TestApp, spawn_app_with};

const TOKEN: &str = "fraud-admin-token-0123";
/// Unverified sends a prefix may have within grace in these tests.
const SURGE_FLOOR: u64 = 5;

fn number(prefix: &str) -> String {
    use rand::RngExt;
    format!(
        "+86{prefix}{:08}",
        rand::rng().random_range(0..100_000_000u32)
    )
}

async fn app(backend: Backend) -> TestApp {
    spawn_app_with(backend, |s| {
        s.admin_token = Some(TOKEN.into());
        s.abuse = AbuseSettings::unlimited();
        s.fraud = FraudSettings {
            surge_floor: SURGE_FLOOR,
            ..FraudSettings::default()
        };
    })
    .await
}

async fn admin(app: &TestApp, post: bool, path: &str, token: Option<&str>) -> Answer {
    let url = app.admin_url(path);
    let mut request = if post {
        app.client.post(url)
    } else {
        app.client.get(url)
    };
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    app.request(request).await
}

async fn a_prefix_that_never_converts_is_refused_until_lifted(backend: Backend) {
    let app = app(backend).await;
    // 86139: every code verified; 86138: none.
    for _ in 0..2 * SURGE_FLOOR {
        let phone = number("139");
        assert_eq!(app.send(&phone).await.status, 200);
        let code = app.last_code(&phone).await;
        assert_eq!(app.verify(&phone, &code).await.status, 200);
    }
    for _ in 0..SURGE_FLOOR {
        assert_eq!(app.send(&number("138")).await.status, 200);
    }
    let refused_phone = number("138");
    let refused = app.send(&refused_phone).await;
    assert_eq!(
        (refused.status, refused.code()),
        (403, 40300),
        "{refused:?}"
    );
    let wait = refused.data::<RetryAfterData>().retry_after;
    assert!((1..=60).contains(&wait), "{wait}");
    assert_eq!(refused.retry_after, Some(wait.to_string()));
    assert!(app.inbox(&refused_phone).await.is_empty(), "no SMS");
    assert_eq!(app.send(&number("138")).await.code(), 40300, "held");
    assert_eq!(
        app.send(&number("139")).await.status,
        200,
        "the converting prefix is not"
    );

    let listed = admin(&app, false, paths::FRAUD_SUSPENSIONS, Some(TOKEN)).await;
    assert_eq!(listed.status, 200, "{listed:?}");
    let listed: FraudSuspensions = listed.data();
    assert_eq!(listed.suspensions.len(), 1, "{listed:?}");
    let held = &listed.suspensions[0];
    assert_eq!(
        (held.prefix.as_str(), held.country.as_str(), held.reason),
        ("86138", "CN", FraudReason::Surge)
    );
    assert!(held.until_ms > held.since_ms);

    let traffic = admin(&app, false, paths::FRAUD_TRAFFIC, Some(TOKEN)).await;
    let traffic: FraudTraffic = traffic.data();
    assert_eq!(traffic.bucket_secs, 60);
    assert_eq!(traffic.series.len(), 60);
    let sends: u64 = traffic.series.iter().map(|b| b.sends).sum();
    let verified: u64 = traffic.series.iter().map(|b| b.verified).sum();
    let refused: u64 = traffic.series.iter().map(|b| b.refused).sum();
    let sms = 2 * SURGE_FLOOR + SURGE_FLOOR + 1;
    assert_eq!((sends, verified, refused), (sms, 2 * SURGE_FLOOR, 2));
    let top: Vec<(&str, u64, FraudPrefixState)> = traffic
        .top_prefixes
        .iter()
        .map(|p| (p.prefix.as_str(), p.sends, p.state))
        .collect();
    assert_eq!(
        top,
        [
            ("86139", 2 * SURGE_FLOOR + 1, FraudPrefixState::Ok),
            ("86138", SURGE_FLOOR, FraudPrefixState::Held)
        ]
    );

    let lift = paths::fraud_lift("86138");
    let lifted = admin(&app, true, &lift, Some(TOKEN)).await;
    assert_eq!(lifted.data::<FraudLifted>(), FraudLifted { lifted: true });
    assert_eq!(app.send(&number("138")).await.status, 200, "open again");
    let again = admin(&app, true, &lift, Some(TOKEN)).await;
    assert_eq!((again.status, again.code()), (404, 40400));
    let listed: FraudSuspensions = admin(&app, false, paths::FRAUD_SUSPENSIONS, Some(TOKEN))
        .await
        .data();
    assert!(listed.suspensions.is_empty());

    let metrics = app
        .client
        .get(app.admin_url(paths::METRICS))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for series in [
        "vcode_sms_sent_by_country_total{country=\"CN\"}",
        "vcode_verified_by_country_total{country=\"CN\"}",
        "vcode_fraud_holds_total{country=\"CN\"}",
        "vcode_fraud_refused_total{reason=\"surge\"}",
    ] {
        assert!(metrics.contains(series), "{series} missing");
    }
}

async fn the_operator_routes_need_the_token_and_check_their_input(backend: Backend) {
    let app = app(backend).await;
    for (post, path) in [
        (false, paths::FRAUD_SUSPENSIONS.to_owned()),
        (false, paths::FRAUD_TRAFFIC.to_owned()),
        (true, paths::fraud_lift("86138")),
    ] {
        for token in [None, Some("wrong-token-0123456789")] {
            let answer = admin(&app, post, &path, token).await;
            assert_eq!((answer.status, answer.code()), (401, 40100), "{path}");
        }
    }
    let not_blocked = admin(&app, true, &paths::fraud_lift("86138"), Some(TOKEN)).await;
    assert_eq!(not_blocked.code(), 40400);
    let not_digits = admin(&app, true, &paths::fraud_lift("86x38"), Some(TOKEN)).await;
    assert_eq!(not_digits.code(), 40000);
    for minutes in ["0", "1441", "x"] {
        let path = format!("{}?minutes={minutes}", paths::FRAUD_TRAFFIC);
        let answer = admin(&app, false, &path, Some(TOKEN)).await;
        assert_eq!(answer.code(), 40000, "minutes={minutes}");
    }
    let day = format!("{}?minutes=1440", paths::FRAUD_TRAFFIC);
    let traffic: FraudTraffic = admin(&app, false, &day, Some(TOKEN)).await.data();
    assert_eq!(traffic.series.len(), 1440);
    assert!(
        traffic
            .series
            .windows(2)
            .all(|w| w[0].t_ms + 60_000 == w[1].t_ms)
    );
    assert_eq!(traffic.baseline_conversion, None);
    assert!(traffic.top_prefixes.is_empty());
}

async fn the_guard_off_counts_nothing_and_monitor_never_refuses(backend: Backend) {
    for level in ["off", "monitor"] {
        let app = spawn_app_with(backend, |s| {
            s.admin_token = Some(TOKEN.into());
            s.abuse = AbuseSettings::unlimited();
            s.fraud = FraudSettings {
                level: vcode::fraud::Level::parse(level).unwrap(),
                surge_floor: SURGE_FLOOR,
                ..FraudSettings::default()
            };
        })
        .await;
        for _ in 0..2 * SURGE_FLOOR {
            assert_eq!(app.send(&number("138")).await.status, 200, "{level}");
        }
        let listed: FraudSuspensions = admin(&app, false, paths::FRAUD_SUSPENSIONS, Some(TOKEN))
            .await
            .data();
        let traffic: FraudTraffic = admin(&app, false, paths::FRAUD_TRAFFIC, Some(TOKEN))
            .await
            .data();
        let sends: u64 = traffic.series.iter().map(|b| b.sends).sum();
        if level == "off" {
            assert!(listed.suspensions.is_empty());
            assert_eq!(sends, 0);
        } else {
            assert_eq!(listed.suspensions.len(), 1, "flagged");
            assert_eq!(sends, 2 * SURGE_FLOOR);
            assert_eq!(traffic.top_prefixes[0].state, FraudPrefixState::Monitored);
        }
    }
}

/// A solved captcha and the send that carries it.
async fn gated_send(app: &TestApp, phone: &str, captcha: &(String, String)) -> Answer {
    let body = SendRequest {
        captcha_id: Some(captcha.0.clone()),
        captcha_answer: Some(captcha.1.clone()),
        ..SendRequest::new(phone)
    };
    app.post_json(paths::OTP_SEND, &body).await
}

async fn solved_captcha(app: &TestApp) -> (String, String) {
    let created = app.post_json(paths::CAPTCHA, &Value::Null).await;
    let id = created.data::<CaptchaCreated>().captcha_id;
    let answer = app
        .get(&paths::dev_captcha_answer(&id))
        .await
        .data::<CaptchaAnswer>()
        .answer;
    (id, answer)
}

/// The traffic's sends, verified and refused, summed over the last hour.
async fn traffic_totals(app: &TestApp) -> (u64, u64, u64) {
    let traffic: FraudTraffic = admin(app, false, paths::FRAUD_TRAFFIC, Some(TOKEN))
        .await
        .data();
    let sum =
        |count: fn(&vcode_wire::FraudTrafficBucket) -> u64| traffic.series.iter().map(count).sum();
    (sum(|b| b.sends), sum(|b| b.verified), sum(|b| b.refused))
}

async fn double_submits_of_one_phone_count_as_one_send(backend: Backend) {
    let app = app(backend).await;
    // Twenty submits of one phone at once: one SMS, the others answered by its cooldown.
    let phone = number("137");
    let answers = futures::future::join_all((0..20).map(|_| app.send(&phone))).await;
    let statuses: Vec<(u16, i64)> = answers.iter().map(|a| (a.status, a.code())).collect();
    assert_eq!(
        statuses.iter().filter(|(status, _)| *status == 200).count(),
        1,
        "{statuses:?}"
    );
    assert!(
        statuses.iter().all(|&(_, code)| code != 40300),
        "{statuses:?}"
    );
    assert_eq!(app.inbox(&phone).await.len(), 1);
    // They were one send: the prefix takes the surge floor's other sends, and the next is one
    // too many.
    for _ in 1..SURGE_FLOOR {
        let answer = app.send(&number("137")).await;
        assert_eq!(answer.status, 200, "{answer:?}");
    }
    assert_eq!(traffic_totals(&app).await, (SURGE_FLOOR, 0, 0));
    assert_eq!(app.send(&number("137")).await.code(), 40300);
}

async fn a_refused_send_leaves_nothing_behind_and_a_verify_converts_once(backend: Backend) {
    let app = app(backend).await;
    for _ in 0..SURGE_FLOOR {
        assert_eq!(app.send(&number("136")).await.status, 200);
    }
    // The send that tips the prefix over is refused after its issue: no SMS, and its code
    // and cooldown are undone.
    let phone = number("136");
    assert_eq!(app.send(&phone).await.code(), 40300);
    assert!(app.inbox(&phone).await.is_empty(), "no SMS");
    let lifted = admin(&app, true, &paths::fraud_lift("86136"), Some(TOKEN)).await;
    assert_eq!(lifted.data::<FraudLifted>(), FraudLifted { lifted: true });
    let again = app.send(&phone).await;
    assert_eq!(
        again.status, 200,
        "no cooldown left by the refused send: {again:?}"
    );
    assert_eq!(app.inbox(&phone).await.len(), 1);
    assert_eq!(traffic_totals(&app).await, (SURGE_FLOOR + 1, 0, 1));
    // Its verify converts it, once: a second try of the same code converts nothing more.
    let code = app.last_code(&phone).await;
    assert_eq!(app.verify(&phone, &code).await.status, 200);
    assert_ne!(app.verify(&phone, &code).await.status, 200);
    assert_eq!(traffic_totals(&app).await, (SURGE_FLOOR + 1, 1, 1));
}

/// The guard's step follows the gate: a refused send, whether it tipped the prefix over or
/// found it blocked, gives the user's solved captcha back for the next send.
async fn a_refused_send_does_not_consume_the_solved_captcha(backend: Backend) {
    let app = spawn_app_with(backend, |s| {
        s.abuse = AbuseSettings::unlimited();
        s.captcha.send_requires_captcha = true;
        s.fraud = FraudSettings {
            surge_floor: SURGE_FLOOR,
            ..FraudSettings::default()
        };
    })
    .await;
    for _ in 0..SURGE_FLOOR {
        let captcha = solved_captcha(&app).await;
        assert_eq!(gated_send(&app, &number("138"), &captcha).await.status, 200);
    }
    for tipping in [true, false] {
        let captcha = solved_captcha(&app).await;
        let refused = gated_send(&app, &number("138"), &captcha).await;
        assert_eq!(refused.code(), 40300, "tipping {tipping}: {refused:?}");
        let next = gated_send(&app, &number("139"), &captcha).await;
        assert_eq!(next.status, 200, "the captcha is still there: {next:?}");
    }
}

on_every_store!(
    a_prefix_that_never_converts_is_refused_until_lifted,
    the_operator_routes_need_the_token_and_check_their_input,
    the_guard_off_counts_nothing_and_monitor_never_refuses,
    double_submits_of_one_phone_count_as_one_send,
    a_refused_send_leaves_nothing_behind_and_a_verify_converts_once,
    a_refused_send_does_not_consume_the_solved_captcha,
);
