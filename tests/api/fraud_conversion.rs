//! The fraud guard's conversion promise through the API, on every store, as its levels keep it:
//! a prefix (a range of the calling code and 3 digits) without history whose codes are never
//! verified is refused (403/40300 with retry_after: the first strike's cool-off) after a handful
//! of unexplained sends (`VCODE_FRAUD_EVIDENCE`, small here), with no SMS, no code left behind
//! and the gate's proof given back; a prefix whose codes are verified is not; only a send that
//! issues a code counts (double submits answered by the cooldown do not), and a verified code
//! converts its send once; the operator lists the blocked prefix (reason and evidence from its
//! level), lifts it (the prefix is open again), and reads the traffic (sends, verified and the
//! guard's refusals per minute and country); the operator routes need the admin token; the
//! per-country series count sends and verifies.

use std::time::Duration;

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
/// Unexplained unconverted sends a range without history may have in these tests
/// (`VCODE_FRAUD_EVIDENCE`): the next send into it is refused.
const EVIDENCE: u64 = 5;
/// The cool-off of a range's first strike: how long its refusal lasts.
const FIRST_COOL_OFF: u64 = 15 * 60;

fn number(prefix: &str) -> String {
    use rand::RngExt;
    format!(
        "+86{prefix}{:08}",
        rand::rng().random_range(0..100_000_000u32)
    )
}

/// The guard's settings here: the defaults (the harness puts the levels out of reach), but a
/// handful of `EVIDENCE`.
fn fraud() -> FraudSettings {
    FraudSettings {
        evidence: EVIDENCE,
        ..FraudSettings::default()
    }
}

async fn app(backend: Backend) -> TestApp {
    spawn_app_with(backend, |s| {
        s.admin_token = Some(TOKEN.into());
        s.abuse = AbuseSettings::unlimited();
        s.fraud = fraud();
    })
    .await
}

/// A verified code's conversion reaches its levels in the background: waits for it (a busy
/// test machine may take a while), or the country would still see the verified sends as
/// unconverted.
async fn conversions_counted() {
    tokio::time::sleep(Duration::from_millis(1500)).await;
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
    for _ in 0..2 * EVIDENCE {
        let phone = number("139");
        assert_eq!(app.send(&phone).await.status, 200);
        let code = app.last_code(&phone).await;
        assert_eq!(app.verify(&phone, &code).await.status, 200);
    }
    conversions_counted().await;
    for _ in 0..EVIDENCE {
        assert_eq!(app.send(&number("138")).await.status, 200);
    }
    let refused_phone = number("138");
    let refused = app.send(&refused_phone).await;
    assert_eq!(
        (refused.status, refused.code()),
        (403, 40300),
        "{refused:?}"
    );
    // The first strike's cool-off, not a moment's hold.
    let wait = refused.data::<RetryAfterData>().retry_after;
    assert!(
        (FIRST_COOL_OFF - 60..=FIRST_COOL_OFF).contains(&wait),
        "{wait}"
    );
    assert_eq!(refused.retry_after, Some(wait.to_string()));
    assert!(app.inbox(&refused_phone).await.is_empty(), "no SMS");
    // Refused again by its block, in the store's step before the issue.
    let again_phone = number("138");
    let again = app.send(&again_phone).await;
    assert_eq!(again.code(), 40300, "blocked: {again:?}");
    let wait = again.data::<RetryAfterData>().retry_after;
    assert!(
        (FIRST_COOL_OFF - 60..=FIRST_COOL_OFF).contains(&wait),
        "{wait}"
    );
    assert!(app.inbox(&again_phone).await.is_empty(), "no SMS");
    assert_eq!(
        app.send(&number("139")).await.status,
        200,
        "the converting prefix is not"
    );

    let listed = admin(&app, false, paths::FRAUD_SUSPENSIONS, Some(TOKEN)).await;
    assert_eq!(listed.status, 200, "{listed:?}");
    let listed: FraudSuspensions = listed.data();
    assert_eq!(listed.suspensions.len(), 1, "{listed:?}");
    let blocked = &listed.suspensions[0];
    assert_eq!(
        (
            blocked.prefix.as_str(),
            blocked.country.as_str(),
            blocked.reason
        ),
        ("86138", "CN", FraudReason::Unconverted)
    );
    assert_eq!(
        blocked.until_ms - blocked.since_ms,
        FIRST_COOL_OFF * 1000,
        "{blocked:?}"
    );
    assert_eq!(blocked.strikes, 1, "{blocked:?}");
    // What decided it: the range's recent sends (the refused one included), none verified,
    // and its level's figures in words.
    assert_eq!(
        (blocked.sends, blocked.conversions),
        (EVIDENCE + 1, 0),
        "{blocked:?}"
    );
    assert!(
        blocked
            .evidence
            .starts_with("range3 86138: unconverted sends beyond"),
        "{blocked:?}"
    );
    assert!(
        blocked.evidence.contains("expected conversion 50 %"),
        "{blocked:?}"
    );

    let traffic = admin(&app, false, paths::FRAUD_TRAFFIC, Some(TOKEN)).await;
    let traffic: FraudTraffic = traffic.data();
    assert_eq!(traffic.bucket_secs, 60);
    assert_eq!(traffic.series.len(), 60);
    let sends: u64 = traffic.series.iter().map(|b| b.sends).sum();
    let verified: u64 = traffic.series.iter().map(|b| b.verified).sum();
    let refused: u64 = traffic.series.iter().map(|b| b.refused).sum();
    // Refused sends are no sends: the guard's two refusals are counted apart.
    let sms = 2 * EVIDENCE + EVIDENCE + 1;
    assert_eq!((sends, verified, refused), (sms, 2 * EVIDENCE, 2));
    let cn = |count: fn(&vcode_wire::FraudCountryCounts) -> u64| -> u64 {
        traffic
            .series
            .iter()
            .filter_map(|b| b.by_country.get("CN"))
            .map(count)
            .sum()
    };
    assert_eq!((cn(|c| c.sends), cn(|c| c.verified)), (sms, 2 * EVIDENCE));
    let top: Vec<(&str, u64, u64, FraudPrefixState)> = traffic
        .top_prefixes
        .iter()
        .map(|p| (p.prefix.as_str(), p.sends, p.verified, p.state))
        .collect();
    assert_eq!(
        top,
        [
            (
                "86139",
                2 * EVIDENCE + 1,
                2 * EVIDENCE,
                FraudPrefixState::Ok
            ),
            ("86138", EVIDENCE, 0, FraudPrefixState::Suspended)
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
        "vcode_fraud_suspensions_total{country=\"CN\"}",
        "vcode_fraud_refused_total{reason=\"level\"}",
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
                ..fraud()
            };
        })
        .await;
        for _ in 0..2 * EVIDENCE {
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
            assert_eq!(listed.suspensions.len(), 1, "flagged: {listed:?}");
            let flagged = &listed.suspensions[0];
            assert_eq!(
                (flagged.prefix.as_str(), flagged.reason),
                ("86138", FraudReason::Unconverted)
            );
            assert_eq!(sends, 2 * EVIDENCE);
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
    // They were one send: the range takes the handful's other sends, and the next is one too
    // many.
    for _ in 1..EVIDENCE {
        let answer = app.send(&number("137")).await;
        assert_eq!(answer.status, 200, "{answer:?}");
    }
    assert_eq!(traffic_totals(&app).await, (EVIDENCE, 0, 0));
    assert_eq!(app.send(&number("137")).await.code(), 40300);
}

async fn a_refused_send_leaves_nothing_behind_and_a_verify_converts_once(backend: Backend) {
    let app = app(backend).await;
    for _ in 0..EVIDENCE {
        assert_eq!(app.send(&number("136")).await.status, 200);
    }
    // The send that tips the range over is refused after its issue: no SMS, and its code
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
    assert_eq!(traffic_totals(&app).await, (EVIDENCE + 1, 0, 1));
    // Its verify converts it, once: a second try of the same code converts nothing more.
    let code = app.last_code(&phone).await;
    assert_eq!(app.verify(&phone, &code).await.status, 200);
    assert_ne!(app.verify(&phone, &code).await.status, 200);
    assert_eq!(traffic_totals(&app).await, (EVIDENCE + 1, 1, 1));
}

/// The guard's step follows the gate: a refused send, whether it tipped the range over (its
/// level's verdict after the issue) or found it blocked (the store's step), gives the user's
/// solved captcha back for the next send.
async fn a_refused_send_does_not_consume_the_solved_captcha(backend: Backend) {
    let app = spawn_app_with(backend, |s| {
        s.abuse = AbuseSettings::unlimited();
        s.captcha.send_requires_captcha = true;
        s.fraud = fraud();
    })
    .await;
    for _ in 0..EVIDENCE {
        let captcha = solved_captcha(&app).await;
        assert_eq!(gated_send(&app, &number("138"), &captcha).await.status, 200);
    }
    // The next sends go to ranges of their own, each a first send: served whatever the
    // country's counts say.
    for (tipping, next_range) in [(true, "139"), (false, "137")] {
        let captcha = solved_captcha(&app).await;
        let refused = gated_send(&app, &number("138"), &captcha).await;
        assert_eq!(refused.code(), 40300, "tipping {tipping}: {refused:?}");
        let next = gated_send(&app, &number(next_range), &captcha).await;
        assert_eq!(next.status, 200, "the captcha is still there: {next:?}");
        let spent = gated_send(&app, &number(next_range), &captcha).await;
        assert_ne!(
            spent.status, 200,
            "a captcha is good for one send: {spent:?}"
        );
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
