//! Delivery receipts over HTTP: the webhook gateway's signed receipts move a verification's
//! delivery forward only, once (also when the same receipt races itself), on every store; a
//! wrong or stale signature is 40100 and changes nothing. Aliyun's and Tencent's reports need
//! the token; Twilio's status callbacks are checked as the official SDK's `RequestValidator`
//! checks them (`twilio_receipts_are_accepted_exactly_as_the_official_sdk_accepts_them`). With
//! events on, a final word is one `verification.delivered` / `.undelivered` event after
//! `verification.created`, as the Standard Webhooks library verifies it.

use std::collections::HashSet;
use std::time::Duration;

use futures::future::join_all;
use serde_json::{Value, json};
use vcode::otp::VerifyBy;
use vcode::sms::receipts::ReceiptSettings;
use vcode::sms::webhook::{SIGNATURE_HEADER, TIMESTAMP_HEADER, signature};
use vcode_wire::{
    Delivery, DeliveryRates, FraudTraffic, FraudTrafficBucket, ReceiptsApplied, SendData,
    VerificationData, paths,
};

use crate::sms_providers::Fakes;
use crate::support::app::{Answer, TestApp};
use crate::support::event_receiver::{Receiver, events_to, new_secret};
use crate::support::fake_sms_provider::unix_now;
use crate::support::sdk;
use crate::support::sms_gateway::signed_webhook;
use crate::support::{Backend, SmsGateway, random_phone, spawn_app_with};

const SECRET: &str = "whsec-0123456789abcdef0123456789abcdef";
const PUBLIC_URL: &str = "https://vcode.example";
const TOKEN: &str = "receipt-token-0123456789abcdef0123456789";

fn receipts_on(settings: &mut vcode::Settings) {
    settings.otp.verify_by = VerifyBy::Id;
    settings.sms.receipts = ReceiptSettings {
        public_url: Some(PUBLIC_URL.to_owned()),
        token: Some(TOKEN.to_owned().into()),
    };
}

/// The app behind the signed webhook sender, receipts on.
async fn webhook_app(backend: Backend, gateway: &SmsGateway) -> TestApp {
    spawn_app_with(backend, |settings| {
        settings.sms = signed_webhook(gateway.url(), SECRET);
        receipts_on(settings);
    })
    .await
}

/// Sends to a new phone: the verification id and the gateway's message id.
async fn send(app: &TestApp, gateway: &SmsGateway) -> (String, String) {
    let number = random_phone();
    let sent = app.send(&number).await;
    assert_eq!(sent.status, 200, "{sent:?}");
    let received = gateway.received();
    let message = received
        .iter()
        .rev()
        .find(|message| message["phone"] == number.as_str())
        .expect("the gateway got the SMS");
    (
        sent.data::<SendData>().verification_id,
        message["message_id"].as_str().unwrap().to_owned(),
    )
}

/// Posts a receipt signed with `secret` at `timestamp`.
async fn post_receipt(app: &TestApp, body: &Value, secret: &str, timestamp: u64) -> Answer {
    let body = body.to_string();
    let signed = signature(secret.as_bytes(), timestamp, body.as_bytes());
    let request = app
        .client
        .post(app.url(paths::RECEIPT_WEBHOOK))
        .header("content-type", "application/json")
        .header(TIMESTAMP_HEADER, timestamp.to_string())
        .header(SIGNATURE_HEADER, signed)
        .body(body);
    app.request(request).await
}

async fn receipt(
    app: &TestApp,
    message_id: &str,
    status: &str,
    error: Option<&str>,
) -> ReceiptsApplied {
    let mut body = json!({"message_id": message_id, "status": status});
    if let Some(error) = error {
        body["error_code"] = json!(error);
    }
    let answer = post_receipt(app, &body, SECRET, unix_now()).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.data()
}

async fn verification(app: &TestApp, id: &str) -> VerificationData {
    let answer = app.get(&paths::verification(id)).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.data()
}

async fn receipts_move_a_delivery_forward_only_and_once(backend: Backend) {
    let gateway = SmsGateway::start();
    let app = webhook_app(backend, &gateway).await;
    let (id, message) = send(&app, &gateway).await;
    assert_eq!(verification(&app, &id).await.delivery, Delivery::Sent);

    let first = receipt(&app, &message, "delivered", None).await;
    assert_eq!((first.receipts, first.changed, first.unknown), (1, 1, 0));
    let shown = verification(&app, &id).await;
    assert_eq!(
        (shown.delivery, shown.delivery_error),
        (Delivery::Delivered, None)
    );
    // The same receipt again, a late `sent`, a contradicting `undelivered`: nothing changes.
    for (status, error) in [
        ("delivered", None),
        ("sent", None),
        ("undelivered", Some("E1")),
    ] {
        let again = receipt(&app, &message, status, error).await;
        assert_eq!((again.receipts, again.changed), (1, 0), "{status}");
    }
    let shown = verification(&app, &id).await;
    assert_eq!(
        (shown.delivery, shown.delivery_error),
        (Delivery::Delivered, None)
    );

    // A failure keeps the gateway's error code.
    let (failed_id, failed) = send(&app, &gateway).await;
    assert_eq!(receipt(&app, &failed, "sent", None).await.changed, 0);
    assert_eq!(
        receipt(&app, &failed, "undelivered", Some("E42"))
            .await
            .changed,
        1
    );
    let shown = verification(&app, &failed_id).await;
    assert_eq!(shown.delivery, Delivery::Undelivered);
    assert_eq!(shown.delivery_error.as_deref(), Some("E42"));

    let unknown = receipt(&app, "0123456789abcdef0123456789abcdef", "delivered", None).await;
    assert_eq!((unknown.changed, unknown.unknown), (0, 1));
    // The delivery rate's series (this process's counters: at least this test's).
    let metrics = app
        .client
        .get(app.admin_url(paths::METRICS))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for series in [
        r#"vcode_sms_tracked_total{provider="webhook",country="CN"}"#,
        r#"vcode_sms_receipts_total{provider="webhook",country="CN",delivery="delivered"}"#,
        r#"vcode_sms_receipts_total{provider="webhook",country="CN",delivery="undelivered"}"#,
    ] {
        assert!(metrics.contains(series), "{series} in\n{metrics}");
    }
}

async fn a_wrong_or_stale_signature_is_refused_and_changes_nothing(backend: Backend) {
    let gateway = SmsGateway::start();
    let app = webhook_app(backend, &gateway).await;
    let (id, message) = send(&app, &gateway).await;
    let body = json!({"message_id": message, "status": "delivered"});
    let other_secret = "whsec-ffffffffffffffffffffffffffffffff";
    for answer in [
        post_receipt(&app, &body, other_secret, unix_now()).await,
        post_receipt(&app, &body, SECRET, unix_now() - 301).await,
        post_receipt(&app, &body, SECRET, unix_now() + 301).await,
        app.post_json(paths::RECEIPT_WEBHOOK, &body).await,
    ] {
        assert_eq!((answer.status, answer.code()), (401, 40100), "{answer:?}");
    }
    assert_eq!(verification(&app, &id).await.delivery, Delivery::Sent);
    // Signed over another body than the one posted.
    let signed = signature(SECRET.as_bytes(), unix_now(), b"{}");
    let forged = app
        .client
        .post(app.url(paths::RECEIPT_WEBHOOK))
        .header(TIMESTAMP_HEADER, unix_now().to_string())
        .header(SIGNATURE_HEADER, signed)
        .body(body.to_string());
    assert_eq!(app.request(forged).await.status, 401);
    assert_eq!(verification(&app, &id).await.delivery, Delivery::Sent);
}

/// Twenty copies of one receipt at once: exactly one changes the delivery.
async fn racing_copies_of_a_receipt_change_it_once(backend: Backend) {
    let gateway = SmsGateway::start();
    let app = webhook_app(backend, &gateway).await;
    let (id, message) = send(&app, &gateway).await;
    let body = json!({"message_id": message, "status": "undelivered", "error_code": "30003"});
    let now = unix_now();
    let answers = join_all((0..20).map(|_| post_receipt(&app, &body, SECRET, now))).await;
    let changed: u32 = answers
        .iter()
        .map(|answer| {
            assert_eq!(answer.status, 200, "{answer:?}");
            answer.data::<ReceiptsApplied>().changed
        })
        .sum();
    assert_eq!(changed, 1);
    let shown = verification(&app, &id).await;
    assert_eq!(shown.delivery, Delivery::Undelivered);
    assert_eq!(shown.delivery_error.as_deref(), Some("30003"));
}

/// An `undelivered` receipt takes its send out of the fraud guard's judgement, once: the
/// operator's traffic shows it undelivered (still a send), neither verified nor unconverted; a
/// `delivered` one changes nothing there.
async fn an_undelivered_send_leaves_the_fraud_guard_s_judgement_once(backend: Backend) {
    const ADMIN: &str = "receipts-admin-token-0123";
    let gateway = SmsGateway::start();
    let app = spawn_app_with(backend, |settings| {
        settings.sms = signed_webhook(gateway.url(), SECRET);
        settings.admin_token = Some(ADMIN.into());
        receipts_on(settings);
    })
    .await;
    let (_, arrived) = send(&app, &gateway).await;
    let (_, lost) = send(&app, &gateway).await;
    assert_eq!(receipt(&app, &arrived, "delivered", None).await.changed, 1);
    assert_eq!(
        receipt(&app, &lost, "undelivered", Some("30003"))
            .await
            .changed,
        1
    );
    // Repeats change nothing, and count nothing again.
    assert_eq!(
        receipt(&app, &lost, "undelivered", Some("30003"))
            .await
            .changed,
        0
    );
    let request = app
        .client
        .get(app.admin_url(paths::FRAUD_TRAFFIC))
        .bearer_auth(ADMIN);
    let answer = app.request(request).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let traffic: FraudTraffic = answer.data();
    let sum = |count: fn(&FraudTrafficBucket) -> u64| traffic.series.iter().map(count).sum::<u64>();
    assert_eq!(
        (sum(|b| b.sends), sum(|b| b.undelivered)),
        (2, 1),
        "{traffic:?}"
    );
    let [prefix] = &traffic.top_prefixes[..] else {
        panic!("one prefix: {traffic:?}")
    };
    assert_eq!(
        (prefix.sends, prefix.verified, prefix.undelivered),
        (2, 0, 1)
    );
}

on_every_store!(
    receipts_move_a_delivery_forward_only_and_once,
    a_wrong_or_stale_signature_is_refused_and_changes_nothing,
    racing_copies_of_a_receipt_change_it_once,
    the_delivery_rate_counts_each_final_word_once_in_the_store,
    an_undelivered_send_leaves_the_fraud_guard_s_judgement_once,
);

/// The operator's delivery rates (`?hours=N`).
async fn delivery_rates(app: &TestApp, query: &str) -> Answer {
    let request = app
        .client
        .get(format!("{}{query}", app.admin_url(paths::DELIVERY_RATES)));
    app.request(request).await
}

/// Receipts counted in the store, in the receipt's step: a final word once (a repeat, a late
/// `sent`, racing copies count nothing more), per provider and country, the same for another
/// instance on the store; bad spans are refused.
async fn the_delivery_rate_counts_each_final_word_once_in_the_store(backend: Backend) {
    let gateway = SmsGateway::start();
    let app = webhook_app(backend, &gateway).await;
    let empty = delivery_rates(&app, "").await;
    assert_eq!(empty.status, 200, "{empty:?}");
    assert!(empty.data::<DeliveryRates>().rates.is_empty());

    let mut messages = Vec::new();
    for _ in 0..3 {
        messages.push(send(&app, &gateway).await.1);
    }
    assert_eq!(
        receipt(&app, &messages[0], "delivered", None).await.changed,
        1
    );
    assert_eq!(
        receipt(&app, &messages[0], "delivered", None).await.changed,
        0
    );
    // Already `sent` by the gateway's answer: a `sent` receipt changes nothing.
    assert_eq!(receipt(&app, &messages[1], "sent", None).await.changed, 0);
    let body = json!({"message_id": messages[1], "status": "delivered"});
    let now = unix_now();
    join_all((0..10).map(|_| post_receipt(&app, &body, SECRET, now))).await;
    assert_eq!(
        receipt(&app, &messages[2], "undelivered", Some("30003"))
            .await
            .changed,
        1
    );

    let answer = delivery_rates(&app, "?hours=2").await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let rates: DeliveryRates = answer.data();
    assert_eq!(rates.to_hour - rates.from_hour, 1);
    let [rate] = &rates.rates[..] else {
        panic!("{rates:?}")
    };
    assert_eq!(
        (rate.provider.as_str(), rate.country.as_str()),
        ("webhook", "CN")
    );
    assert_eq!((rate.delivered, rate.undelivered), (2, 1));
    assert!((rate.rate - 2.0 / 3.0).abs() < 1e-9, "{rate:?}");
    let hours: u64 = rate.hours.iter().map(|h| h.delivered + h.undelivered).sum();
    assert_eq!(hours, 3);
    assert_eq!(rate.hours.last().unwrap().hour, rates.to_hour);

    for bad in ["?hours=0", "?hours=169", "?hours=x"] {
        let answer = delivery_rates(&app, bad).await;
        assert_eq!(answer.status, 400, "{bad}: {answer:?}");
    }
    // Shared: another instance on the same store reads the same counts.
    if matches!(backend, Backend::Redis | Backend::Postgres) {
        let other = crate::support::spawn_second_instance(&app, receipts_on).await;
        let seen: DeliveryRates = delivery_rates(&other, "?hours=2").await.data();
        assert_eq!(seen.rates, rates.rates);
    }
}

on_stores!(
    events_memory => Memory, events_redis => Redis, events_cluster => Cluster,
    events_sentinel => Sentinel, events_postgres => Postgres;
    [a_final_word_is_one_signed_event_after_created]
);

/// The `data` of the accepted deliveries of verification `id`, one per event.
async fn event_data(receiver: &Receiver, id: &str) -> Vec<Value> {
    let mut seen = HashSet::new();
    receiver
        .deliveries()
        .await
        .into_iter()
        .filter(|delivery| delivery.accepted() && delivery.subject() == Some(id))
        .filter(|delivery| seen.insert(delivery.id.clone()))
        .map(|delivery| {
            assert!(delivery.verified, "{delivery:?}");
            delivery.data.unwrap()
        })
        .collect()
}

async fn a_final_word_is_one_signed_event_after_created(backend: Backend) {
    let secret = new_secret();
    let Some(receiver) = Receiver::start(&secret, "a_final_word_is_one_signed_event") else {
        return;
    };
    let gateway = SmsGateway::start();
    let events = events_to(&receiver.url, &[&secret]);
    let app = spawn_app_with(backend, |settings| {
        settings.sms = signed_webhook(gateway.url(), SECRET);
        settings.events = events;
        receipts_on(settings);
    })
    .await;
    let (delivered, delivered_message) = send(&app, &gateway).await;
    let (undelivered, undelivered_message) = send(&app, &gateway).await;

    // A `sent`, then the final word twice; the failure's copies race.
    assert_eq!(
        receipt(&app, &delivered_message, "sent", None)
            .await
            .changed,
        0
    );
    assert_eq!(
        receipt(&app, &delivered_message, "delivered", None)
            .await
            .changed,
        1
    );
    assert_eq!(
        receipt(&app, &delivered_message, "delivered", None)
            .await
            .changed,
        0
    );
    let body = json!({"message_id": undelivered_message, "status": "undelivered",
                      "error_code": "30003"});
    let now = unix_now();
    join_all((0..10).map(|_| post_receipt(&app, &body, SECRET, now))).await;

    // A second, time for a second copy of either to arrive, were one written.
    receiver
        .assert_settled(
            &[
                (
                    &delivered,
                    &["verification.created", "verification.delivered"],
                ),
                (
                    &undelivered,
                    &["verification.created", "verification.undelivered"],
                ),
            ],
            Duration::from_secs(20),
            Duration::from_millis(1000),
        )
        .await;
    let shown = &event_data(&receiver, &delivered).await[1];
    assert_eq!(shown["provider"], "webhook", "{shown}");
    assert_eq!(shown["message_id"], delivered_message.as_str(), "{shown}");
    assert!(shown.get("error_code").is_none(), "{shown}");
    let shown = &event_data(&receiver, &undelivered).await[1];
    assert_eq!(shown["provider"], "webhook", "{shown}");
    assert_eq!(shown["message_id"], undelivered_message.as_str(), "{shown}");
    assert_eq!(shown["error_code"], "30003", "{shown}");
    assert!(shown["phone"].as_str().unwrap().contains('*'), "{shown}");
}

/// An app sending through one provider's fake, receipts on.
async fn provider_app(fakes: &Fakes, provider: &str) -> TestApp {
    let sms = fakes.settings(
        crate::sms_providers::SECRET,
        &[
            ("VCODE_SMS", provider),
            ("VCODE_SMS_RECEIPTS_URL", PUBLIC_URL),
            ("VCODE_SMS_RECEIPTS_TOKEN", TOKEN),
        ],
    );
    spawn_app_with(Backend::Memory, |settings| {
        settings.otp.verify_by = VerifyBy::Id;
        settings.sms = sms;
    })
    .await
}

async fn post_report(app: &TestApp, path: &str, token: &str, body: &Value) -> (u16, Value) {
    let request = app
        .client
        .post(format!("{}?token={token}", app.url(path)))
        .json(body);
    let answer = app.request(request).await;
    (answer.status, answer.body)
}

#[tokio::test]
async fn aliyun_and_tencent_reports_need_the_token_and_move_the_delivery() {
    let fakes = Fakes::start();
    for (provider, path, accepted) in [
        (
            "aliyun",
            paths::RECEIPT_ALIYUN,
            json!({"code": 0, "msg": "接收成功"}),
        ),
        (
            "tencent",
            paths::RECEIPT_TENCENT,
            json!({"result": 0, "errmsg": "OK"}),
        ),
    ] {
        let app = provider_app(&fakes, provider).await;
        let sent = app.send("13800138000").await;
        assert_eq!(sent.status, 200, "{provider}: {sent:?}");
        let id = sent.data::<SendData>().verification_id;
        // The fakes answer these message ids (BizId, SerialNo).
        let report = match provider {
            "aliyun" => json!([{"phone_number": "13800138000", "send_time": "2026-12-02 10:00:00",
                "report_time": "2026-12-02 10:00:05", "success": false, "err_code": "MK:0001",
                "err_msg": "失败", "sms_size": "1", "biz_id": "900619746936498440^0", "out_id": ""}]),
            _ => json!([{"user_receive_time": "2026-12-02 10:00:05", "nationcode": "86",
                "mobile": "13800138000", "report_status": "FAIL", "errmsg": "MK:0001",
                "description": "失败", "sid": "5000:1045710669157053657849499619"}]),
        };
        for token in ["", "receipt-token-0123456789abcdef012345678X"] {
            let (status, body) = post_report(&app, path, token, &report).await;
            assert_eq!(
                (status, body["code"].clone()),
                (401, json!(40100)),
                "{provider}"
            );
        }
        assert_eq!(verification(&app, &id).await.delivery, Delivery::Sent);
        let (status, body) = post_report(&app, path, TOKEN, &report).await;
        assert_eq!((status, body), (200, accepted), "{provider}");
        let shown = verification(&app, &id).await;
        assert_eq!(shown.delivery, Delivery::Undelivered, "{provider}");
        assert_eq!(
            shown.delivery_error.as_deref(),
            Some("MK:0001"),
            "{provider}"
        );
        let (status, _) = post_report(&app, path, TOKEN, &json!({"not": "an array"})).await;
        assert_eq!(status, 400, "{provider}");
    }
}

/// One callback put to the SDK and to vcode: signed over `sign_url` with `key` (SHA-256 when
/// `sha256`, and the settings header naming it sent when `named`) with the form of
/// `signed_status`, posted with the form of `posted_status`; and whether the SDK accepts it.
struct TwilioCase {
    name: &'static str,
    sign_url: String,
    signed_status: &'static str,
    posted_status: &'static str,
    key: &'static str,
    sha256: bool,
    named: bool,
    sdk_accepts: bool,
}

#[tokio::test]
async fn twilio_receipts_are_accepted_exactly_as_the_official_sdk_accepts_them() {
    let fakes = Fakes::start();
    let app = provider_app(&fakes, "twilio").await;
    let sent = app.send("+8613800138000").await;
    assert_eq!(sent.status, 200, "{sent:?}");
    let id = sent.data::<SendData>().verification_id;
    let token = crate::sms_providers::SECRET;
    let url = format!("{PUBLIC_URL}{}", paths::RECEIPT_TWILIO);
    let sid = "SM1f0e8ae6ade43cb3c0ce4525424e404f";
    let form = |status: &str| {
        json!([
            ["AccountSid", crate::sms_providers::TWILIO_SID],
            ["MessageSid", sid],
            ["SmsSid", sid],
            ["MessageStatus", status],
            ["SmsStatus", status],
            ["To", "+8613800138000"],
            ["From", "+15005550006"],
            ["ApiVersion", "2010-04-01"],
            ["ErrorCode", "30003"]
        ])
    };
    let with_port = |port: u16| format!("{PUBLIC_URL}:{port}{}", paths::RECEIPT_TWILIO);
    let other_path = format!("{PUBLIC_URL}/api/v1/receipts/twilio2");
    let http = url.replace("https:", "http:");
    #[rustfmt::skip]
    let table = [
        // name, signed over, signed status, posted status, key, SHA-256, named, SDK accepts
        ("exact URL", url.clone(), "sent", "sent", token, false, false, true),
        ("with :443", with_port(443), "sent", "sent", token, false, false, true),
        ("another port", with_port(8443), "sent", "sent", token, false, false, false),
        ("another path", other_path, "sent", "sent", token, false, false, false),
        ("http", http, "sent", "sent", token, false, false, false),
        ("wrong token", url.clone(), "undelivered", "undelivered", "another-token", false, false, false),
        ("tampered status", url.clone(), "sent", "undelivered", token, false, false, false),
        ("sha256 named", url.clone(), "undelivered", "undelivered", token, true, true, true),
        ("sha256 unnamed", url.clone(), "undelivered", "undelivered", token, true, false, false),
        ("sha1 named sha256", url.clone(), "undelivered", "undelivered", token, false, true, false),
        ("undelivered", url.clone(), "undelivered", "undelivered", token, false, false, true),
    ];
    let cases: Vec<TwilioCase> = table
        .into_iter()
        .map(
            |(name, sign_url, signed_status, posted_status, key, sha256, named, sdk_accepts)| {
                TwilioCase {
                    name,
                    sign_url,
                    signed_status,
                    posted_status,
                    key,
                    sha256,
                    named,
                    sdk_accepts,
                }
            },
        )
        .collect();
    let settings_header = "key=webhooks_sharedkey_1,algorithm=HMAC_SHA256";
    let input: Vec<Value> = cases
        .iter()
        .map(|case| {
            json!({"name": case.name, "url": url, "sign_url": case.sign_url,
                   "params": form(case.signed_status), "posted": form(case.posted_status),
                   "token": case.key, "validator_token": token,
                   "algorithm": if case.sha256 { json!("HMAC_SHA256") } else { Value::Null },
                   "settings_header": if case.named { json!(settings_header) } else { Value::Null }})
        })
        .collect();
    let verdicts = match sdk::run("tests/sdk/twilio_receipts.py", &json!(input)) {
        Ok(verdicts) => verdicts,
        Err(why) => {
            sdk::skip_unless_required("the Twilio receipt cases", &why);
            return;
        }
    };
    let verdicts = verdicts.as_array().unwrap();
    for ((case, verdict), sent) in cases.iter().zip(verdicts).zip(&input) {
        let sdk_accepts = verdict["valid"].as_bool().unwrap();
        // The SDK's verdict itself, so that a change in the SDK is seen here.
        assert_eq!(sdk_accepts, case.sdk_accepts, "the SDK on {}", case.name);
        let posted: Vec<(&str, &str)> = sent["posted"]
            .as_array()
            .unwrap()
            .iter()
            .map(|pair| (pair[0].as_str().unwrap(), pair[1].as_str().unwrap()))
            .collect();
        let mut request = app
            .client
            .post(app.url(paths::RECEIPT_TWILIO))
            .header("x-twilio-signature", verdict["signature"].as_str().unwrap())
            .form(&posted);
        if case.named {
            request = request.header("x-twilio-webhooks-signature-settings", settings_header);
        }
        let answer = app.request(request).await;
        let expected = if sdk_accepts { 200 } else { 401 };
        assert_eq!(answer.status, expected, "{}: {answer:?}", case.name);
        if !sdk_accepts {
            // Refused callbacks change nothing: only valid ones moved the delivery, never to
            // `delivered`.
            let delivery = verification(&app, &id).await.delivery;
            assert_ne!(delivery, Delivery::Delivered, "{}", case.name);
        }
    }
    let shown = verification(&app, &id).await;
    assert_eq!(shown.delivery, Delivery::Undelivered);
    assert_eq!(shown.delivery_error.as_deref(), Some("30003"));
}
