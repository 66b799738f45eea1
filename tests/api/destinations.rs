//! The destination policy through HTTP (the fraud guard's static half): which numbers get an
//! SMS at all. Number types (premium rate, toll-free, non-geographic… refused, `40004`) and geo
//! permissions (allow, monitor, block; `40005`), at the defaults and as configured, with the
//! refusals and the monitored SMS in the daily stats.

use serde_json::Value;
use vcode::domain::Purpose;
use vcode::settings::{AbuseSettings, NumberTypes, Regions};
use vcode_wire::paths;

use crate::support::app::Answer;
use crate::support::{Backend, TestApp, phone, random_phone, spawn_app, spawn_app_with};

const TOKEN: &str = "s3cret-admin-token-0123";

/// Issue 25's numbers: premium rate, satellite, personal, international freephone. Each paid
/// to whoever pumps SMS into it.
const PUMPED: [&str; 7] = [
    "+979 123456789",
    "+881 612345678",
    "+870 773 111 111",
    "+1 900 555 0123",
    "+44 909 8790000",
    "+44 70 1234 5678",
    "+800 12345678",
];

const US_MOBILE: &str = "+12025550143";
const HK_MOBILE: &str = "+85251234567";
const GB_MOBILE: &str = "+447400123456";

fn regions(raw: &str) -> Regions {
    Regions::parse(raw).unwrap()
}

fn assert_refused(answer: &Answer, code: i64, number: &str) {
    assert_eq!(
        (answer.status, answer.code()),
        (400, code),
        "{number}: {answer:?}"
    );
    assert_eq!(answer.body["data"], Value::Null, "{number}");
}

/// No SMS, and no code pending that a verify could find (a refused send answers no id).
async fn assert_nothing_sent(app: &TestApp, number: &str) {
    assert!(app.inbox(number).await.is_empty(), "{number}");
    let login = Purpose::parse("login").unwrap();
    let pending = app.store.codes.pending_code(&phone(number), &login).await;
    assert!(pending.unwrap().is_none(), "{number}");
}

async fn counters(app: &TestApp) -> Value {
    let report = app
        .request(
            app.client
                .get(app.admin_url(&format!("{}?days=1", paths::STATS)))
                .bearer_auth(TOKEN),
        )
        .await;
    assert_eq!(report.status, 200, "{report:?}");
    report.body["data"]["totals"].clone()
}

async fn pumped_numbers_get_no_sms_at_the_defaults(backend: Backend) {
    let app = spawn_app_with(backend, |s| s.admin_token = Some(TOKEN.into())).await;
    for number in PUMPED {
        assert_refused(&app.send(number).await, 40004, number);
        assert_nothing_sent(&app, number).await;
    }
    // The default region's mobiles, written either way, are served.
    assert_eq!(app.send(&random_phone()).await.status, 200);
    assert_eq!(app.send("13800138000").await.status, 200);
    let totals = counters(&app).await;
    assert_eq!(totals["refused_number_type"], 7, "{totals}");
    assert_eq!(totals["sms_sent"], 2, "{totals}");
}

/// Serving every country changes nothing for them: their type is the refusal.
async fn pumped_numbers_get_no_sms_in_any_country(backend: Backend) {
    let app = spawn_app_with(backend, |s| s.abuse.allowed_regions = regions("*")).await;
    for number in PUMPED {
        assert_refused(&app.send(number).await, 40004, number);
    }
    for number in [US_MOBILE, HK_MOBILE, GB_MOBILE] {
        assert_eq!(app.send(number).await.status, 200, "{number}");
    }
}

/// At the defaults only the default region's numbers are served.
async fn other_countries_are_blocked_at_the_defaults(backend: Backend) {
    let app = spawn_app(backend).await;
    for number in [US_MOBILE, HK_MOBILE, GB_MOBILE] {
        assert_refused(&app.send(number).await, 40005, number);
        assert_nothing_sent(&app, number).await;
    }
    let us = spawn_app_with(backend, |s| {
        s.otp.default_region = vcode::domain::Region::parse("US").unwrap();
    })
    .await;
    assert_eq!(us.send("2025550143").await.status, 200);
    assert_refused(&us.send(&random_phone()).await, 40005, "CN in US");
}

async fn countries_are_allowed_monitored_or_blocked(backend: Backend) {
    let app = spawn_app_with(backend, |s| {
        s.admin_token = Some(TOKEN.into());
        s.abuse = AbuseSettings {
            allowed_regions: regions("CN,HK"),
            monitored_regions: regions("US"),
            ..AbuseSettings::unlimited()
        };
    })
    .await;
    assert_eq!(app.send(&random_phone()).await.status, 200);
    assert_eq!(app.send(HK_MOBILE).await.status, 200);
    // Monitored: sent like any other, and counted.
    let monitored = app.send(US_MOBILE).await;
    assert_eq!(monitored.status, 200, "{monitored:?}");
    // A cooldown refusal sends nothing: not counted again.
    assert_eq!(app.send(US_MOBILE).await.code(), 42900);
    let code = app.last_code(US_MOBILE).await;
    assert_eq!(app.verify(US_MOBILE, &code).await.status, 200);
    assert_refused(&app.send(GB_MOBILE).await, 40005, GB_MOBILE);
    let totals = counters(&app).await;
    assert_eq!(totals["sms_sent"], 3, "{totals}");
    assert_eq!(totals["sms_monitored"], 1, "{totals}");
    assert_eq!(totals["refused_region"], 1, "{totals}");
    assert_eq!(totals["refused_number_type"], 0, "{totals}");
}

/// `*` in the monitored list serves every country but the blocked ones, each monitored, the
/// allowed ones (here the default region's) not.
async fn everything_monitored_but_what_is_blocked(backend: Backend) {
    let app = spawn_app_with(backend, |s| {
        s.admin_token = Some(TOKEN.into());
        s.abuse.monitored_regions = regions("*");
        s.abuse.blocked_regions = regions("GB");
    })
    .await;
    assert_eq!(app.send(&random_phone()).await.status, 200);
    assert_eq!(app.send(US_MOBILE).await.status, 200);
    assert_eq!(app.send(HK_MOBILE).await.status, 200);
    assert_refused(&app.send(GB_MOBILE).await, 40005, GB_MOBILE);
    let totals = counters(&app).await;
    assert_eq!(totals["sms_monitored"], 2, "{totals}");
    assert_eq!(totals["refused_region"], 1, "{totals}");
}

/// An operator who serves fixed lines or satellite phones says so; premium rate stays out.
async fn extra_number_types_are_served_when_listed(backend: Backend) {
    let app = spawn_app_with(backend, |s| {
        s.abuse.allowed_regions = regions("CN,IT");
        s.abuse.allowed_number_types =
            NumberTypes::parse("mobile,fixed_line_or_mobile,fixed_line,non_geographic").unwrap();
    })
    .await;
    for number in ["+39 06 1234 5678", "+881 612345678", "+870 773 111 111"] {
        assert_eq!(app.send(number).await.status, 200, "{number}");
    }
    for number in ["+979 123456789", "+800 12345678"] {
        assert_refused(&app.send(number).await, 40004, number);
    }
    // A fixed line of a country not served is still the country's refusal.
    assert_refused(&app.send("+44 20 7183 8750").await, 40005, "GB fixed line");
}

/// The check comes before the gate and the idempotency key: a refused number consumes no
/// captcha and leaves no idempotency record.
async fn a_refused_number_costs_nothing_else(backend: Backend) {
    let app = spawn_app_with(backend, |s| s.captcha.send_requires_captcha = true).await;
    let created = app.post_json(paths::CAPTCHA, &Value::Null).await;
    let id = created.body["data"]["captcha_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let answer = app.get(&paths::dev_captcha_answer(&id)).await.body["data"]["answer"]
        .as_str()
        .unwrap()
        .to_owned();
    let body = |phone: &str| serde_json::json!({"phone": phone, "captcha_id": id, "captcha_answer": answer});
    let refused = app
        .request(
            app.client
                .post(app.url(paths::OTP_SEND))
                .header(vcode_wire::headers::IDEMPOTENCY_KEY, "fraud-guard-key")
                .json(&body("+979123456789")),
        )
        .await;
    assert_refused(&refused, 40004, "+979123456789");
    let number = random_phone();
    let sent = app
        .request(
            app.client
                .post(app.url(paths::OTP_SEND))
                .header(vcode_wire::headers::IDEMPOTENCY_KEY, "fraud-guard-key")
                .json(&body(&number)),
        )
        .await;
    assert_eq!(
        sent.status, 200,
        "the captcha and the key were left unused: {sent:?}"
    );
    assert_eq!(app.inbox(&number).await.len(), 1);
}

on_every_store!(
    pumped_numbers_get_no_sms_at_the_defaults,
    countries_are_allowed_monitored_or_blocked,
);

// Decided from the number alone, before any store is asked: one store shows it.
on_stores!(
    embedded => Memory;
    [
        pumped_numbers_get_no_sms_in_any_country,
        other_countries_are_blocked_at_the_defaults,
        everything_monitored_but_what_is_blocked,
        extra_number_types_are_served_when_listed,
        a_refused_number_costs_nothing_else,
    ]
);
