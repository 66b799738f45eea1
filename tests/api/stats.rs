//! Daily counters: a scripted sequence of requests must produce exactly these numbers, on both
//! stores; the route exists only with an admin token and only answers to it.

use std::time::Duration;

use serde_json::{Value, json};
use vcode::settings::AbuseSettings;
use vcode_wire::{
    CaptchaAnswer, CaptchaCreated, CaptchaVerifyRequest, SendRequest, headers, paths,
};

use crate::support::app::Answer;
use crate::support::{Backend, TestApp, random_phone, spawn_app, spawn_app_with, wrong_code};

const TOKEN: &str = "s3cret-admin-token-0123";

async fn stats(app: &TestApp, token: Option<&str>, days: &str) -> Answer {
    let mut request = app
        .client
        .get(app.admin_url(&format!("{}?days={days}", paths::STATS)));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    app.request(request).await
}

async fn counters_match_a_scripted_sequence(backend: Backend) {
    let app = spawn_app_with(backend, |s| {
        s.admin_token = Some(TOKEN.into());
        s.otp.max_attempts = 2;
        s.abuse = AbuseSettings {
            sends_per_ip_hour: 3,
            ..AbuseSettings::unlimited()
        };
    })
    .await;
    let (a, b, c, d) = (
        random_phone(),
        random_phone(),
        random_phone(),
        random_phone(),
    );

    assert_eq!(app.send(&a).await.status, 200);
    assert_eq!(app.send(&a).await.code(), 42900);
    let keyed = |phone: &str| {
        app.client
            .post(app.url(paths::OTP_SEND))
            .header(headers::IDEMPOTENCY_KEY, "stats-key")
            .json(&SendRequest::new(phone))
    };
    assert_eq!(app.request(keyed(&b)).await.status, 200);
    assert_eq!(app.request(keyed(&b)).await.status, 200);
    let code_a = app.last_code(&a).await;
    assert_eq!(app.verify(&a, wrong_code(&code_a)).await.code(), 40010);
    assert_eq!(app.verify(&a, &code_a).await.status, 200);
    assert_eq!(app.verify(&a, &code_a).await.code(), 41000);
    assert_eq!(app.send(&c).await.status, 200);
    let code_c = app.last_code(&c).await;
    assert_eq!(app.verify(&c, wrong_code(&code_c)).await.code(), 40010);
    assert_eq!(app.verify(&c, wrong_code(&code_c)).await.code(), 42901);
    assert_eq!(
        app.send(&d).await.code(),
        42902,
        "the fourth SMS from one client"
    );
    for solve in [false, true] {
        let created = app.post_json(paths::CAPTCHA, &Value::Null).await;
        let id = created.data::<CaptchaCreated>().captcha_id;
        let peeked = app.get(&paths::dev_captcha_answer(&id)).await;
        let answer = peeked.data::<CaptchaAnswer>().answer;
        let typed = if solve { answer } else { "WRONG".to_owned() };
        let body = CaptchaVerifyRequest::new(id, typed);
        app.post_json(paths::CAPTCHA_VERIFY, &body).await;
    }

    let report = stats(&app, Some(TOKEN), "2").await;
    assert_eq!(report.status, 200, "{report:?}");
    let data = &report.body["data"];
    let expected = json!({
        "send_requests": 6, "sms_sent": 3, "sms_failed": 0, "sms_unconfirmed": 0,
        "dedup_cooldown": 1, "dedup_idempotency": 1,
        "verify_ok": 1, "verify_wrong": 2, "verify_expired": 1, "verify_locked": 1,
        "captcha_created": 2, "captcha_solved": 1, "captcha_failed": 1,
        "pow_challenges": 0, "pow_solved": 0, "pow_refused": 0,
        "quota_phone": 0, "quota_ip": 1, "quota_global": 0, "quota_failures": 0,
        "refused_number_type": 0, "refused_region": 0, "sms_monitored": 0,
        "test_number_sends": 0,
        "fraud_suspended": 0, "fraud_held": 0, "fraud_refused_conversion": 0,
        "fraud_refused_surge": 0, "fraud_refused_level": 0, "fraud_returning_passed": 0,
        "fraud_refused_spend": 0, "fraud_spend_capped": 0,
        "fraud_lifted": 0,
        "sms_log_sent": 3, "sms_log_failed": 0, "sms_webhook_sent": 0, "sms_webhook_failed": 0,
        "sms_aliyun_sent": 0, "sms_aliyun_failed": 0, "sms_tencent_sent": 0,
        "sms_tencent_failed": 0, "sms_twilio_sent": 0, "sms_twilio_failed": 0,
    });
    assert_eq!(data["days"][0]["counters"], expected);
    assert_eq!(data["days"].as_array().unwrap().len(), 2);
    assert_eq!(
        data["days"][1]["counters"]["send_requests"],
        json!(0),
        "yesterday"
    );
    assert_eq!(data["totals"], expected);
    let share = data["dedup_saved_share"].as_f64().unwrap();
    assert!((share - 2.0 / 6.0).abs() < 1e-9, "{share}");
    let today = vcode::stats::utc_date(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    );
    assert_eq!(data["days"][0]["date"], json!(today));

    if let Some(server) = &app.redis {
        let mut redis = server.connection().await;
        let key = format!("verify_code:stats:{today}");
        let sent: u64 = ::redis::cmd("HGET")
            .arg(&key)
            .arg("sms_sent")
            .query_async(&mut redis)
            .await
            .unwrap();
        assert_eq!(sent, 3);
        let ttl: i64 = ::redis::cmd("TTL")
            .arg(&key)
            .query_async(&mut redis)
            .await
            .unwrap();
        assert!(ttl > 7 * 86_400 && ttl <= 8 * 86_400, "TTL {ttl}");
    }
}

async fn counters_are_flushed_in_the_background(backend: Backend) {
    let app = spawn_app_with(backend, |s| s.admin_token = Some(TOKEN.into())).await;
    app.send(&random_phone()).await;
    // Without asking for a report (which flushes), the counter reaches the store within ~1 s.
    let date = vcode::stats::utc_date(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    );
    let reached = crate::support::eventually(Duration::from_secs(3), || async {
        let days = app
            .store
            .stats
            .stats(std::slice::from_ref(&date))
            .await
            .unwrap();
        days[0].get("sms_sent") == Some(&1)
    })
    .await;
    assert!(reached);
}

async fn the_route_needs_the_token(backend: Backend) {
    let app = spawn_app_with(backend, |s| s.admin_token = Some(TOKEN.into())).await;
    for token in [None, Some("wrong-token-wrong-token"), Some(&TOKEN[1..])] {
        let answer = stats(&app, token, "1").await;
        assert_eq!((answer.status, answer.code()), (401, 40100), "{token:?}");
    }
    for days in ["0", "8", "x"] {
        let answer = stats(&app, Some(TOKEN), days).await;
        assert_eq!((answer.status, answer.code()), (400, 40000), "{days}");
    }
    let without_token = spawn_app(backend).await;
    let answer = stats(&without_token, Some(TOKEN), "1").await;
    assert_eq!((answer.status, answer.code()), (404, 40400));
}

on_every_store!(
    counters_match_a_scripted_sequence,
    counters_are_flushed_in_the_background,
    the_route_needs_the_token,
);
