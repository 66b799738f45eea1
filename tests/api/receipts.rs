//! Delivery receipts over HTTP: the webhook gateway's signed receipts move a verification's
//! delivery forward only, once (also when the same receipt races itself), on every store; a
//! wrong or stale signature is 40100 and changes nothing. Aliyun's and Tencent's reports need
//! the token; Twilio's status callbacks are checked as the official SDK's `RequestValidator`
//! checks them (`twilio_receipts_are_accepted_exactly_as_the_official_sdk_accepts_them`).

use std::io::Write;
use std::process::{Command, Stdio};

use futures::future::join_all;
use serde_json::{Value, json};
use vcode::otp::VerifyBy;
use vcode::sms::receipts::ReceiptSettings;
use vcode::sms::webhook::{SIGNATURE_HEADER, TIMESTAMP_HEADER, signature};
use vcode_wire::{Delivery, ReceiptsApplied, SendData, VerificationData, paths};

use crate::sms_providers::Fakes;
use crate::support::app::{Answer, TestApp};
use crate::support::fake_sms_provider::unix_now;
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

on_every_store!(
    receipts_move_a_delivery_forward_only_and_once,
    a_wrong_or_stale_signature_is_refused_and_changes_nothing,
    racing_copies_of_a_receipt_change_it_once,
);

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

/// The official SDK's verdicts on `cases` (each: `sign_url`, `params`, `token`, `algorithm`,
/// `url`, `posted`), or why they cannot be had.
fn twilio_sdk(cases: &Value) -> Result<Value, String> {
    let python = std::env::var("TEST_SDK_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/twilio_receipts.py");
    let mut child = Command::new(&python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{python} cannot be run: {e}"))?;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(cases.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    match output.status.code() {
        Some(0) => Ok(serde_json::from_slice(&output.stdout).expect("the script prints JSON")),
        Some(3) => Err(stderr.trim().to_owned()),
        _ => panic!("tests/sdk/twilio_receipts.py failed: {stderr}"),
    }
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
    let params = |status: &str| {
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
    let case = |name: &str,
                sign_url: &str,
                signed: Value,
                posted: Value,
                key: &str,
                algorithm: Value,
                header: Value| {
        json!({"name": name, "url": url, "sign_url": sign_url, "params": signed, "posted": posted,
               "token": key, "validator_token": token, "algorithm": algorithm,
               "settings_header": header})
    };
    let sha256 = json!("HMAC_SHA256");
    let settings = json!("key=webhooks_sharedkey_1,algorithm=HMAC_SHA256");
    let cases = json!([
        case(
            "exact URL",
            &url,
            params("sent"),
            params("sent"),
            token,
            Value::Null,
            Value::Null
        ),
        case(
            "with :443",
            &format!("{PUBLIC_URL}:443{}", paths::RECEIPT_TWILIO),
            params("sent"),
            params("sent"),
            token,
            Value::Null,
            Value::Null
        ),
        case(
            "another port",
            &format!("{PUBLIC_URL}:8443{}", paths::RECEIPT_TWILIO),
            params("sent"),
            params("sent"),
            token,
            Value::Null,
            Value::Null
        ),
        case(
            "another path",
            &format!("{PUBLIC_URL}/api/v1/receipts/twilio2"),
            params("sent"),
            params("sent"),
            token,
            Value::Null,
            Value::Null
        ),
        case(
            "http",
            &url.replace("https:", "http:"),
            params("sent"),
            params("sent"),
            token,
            Value::Null,
            Value::Null
        ),
        case(
            "wrong token",
            &url,
            params("undelivered"),
            params("undelivered"),
            "another-token",
            Value::Null,
            Value::Null
        ),
        case(
            "tampered status",
            &url,
            params("sent"),
            params("undelivered"),
            token,
            Value::Null,
            Value::Null
        ),
        case(
            "sha256 named",
            &url,
            params("undelivered"),
            params("undelivered"),
            token,
            sha256.clone(),
            settings.clone()
        ),
        case(
            "sha256 unnamed",
            &url,
            params("undelivered"),
            params("undelivered"),
            token,
            sha256,
            Value::Null
        ),
        case(
            "sha1 named sha256",
            &url,
            params("undelivered"),
            params("undelivered"),
            token,
            Value::Null,
            settings
        ),
        case(
            "undelivered",
            &url,
            params("undelivered"),
            params("undelivered"),
            token,
            Value::Null,
            Value::Null
        ),
    ]);
    let verdicts = match twilio_sdk(&cases) {
        Ok(verdicts) => verdicts,
        Err(why) if std::env::var_os("TEST_REQUIRE_SDK").is_none() => {
            eprintln!(
                "\n*** SKIPPED the Twilio receipt cases: {why}\n*** install the SDKs: python3 -m pip install -r tests/sdk/requirements.txt\n"
            );
            return;
        }
        Err(why) => panic!("TEST_REQUIRE_SDK is set but the Twilio SDK cannot run: {why}"),
    };
    let mut verdicts_seen = Vec::new();
    for (case, verdict) in cases
        .as_array()
        .unwrap()
        .iter()
        .zip(verdicts.as_array().unwrap())
    {
        let posted: Vec<(String, String)> = case["posted"]
            .as_array()
            .unwrap()
            .iter()
            .map(|pair| {
                (
                    pair[0].as_str().unwrap().to_owned(),
                    pair[1].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let mut request = app
            .client
            .post(app.url(paths::RECEIPT_TWILIO))
            .header("x-twilio-signature", verdict["signature"].as_str().unwrap())
            .form(&posted);
        if let Some(header) = case["settings_header"].as_str() {
            request = request.header("x-twilio-webhooks-signature-settings", header);
        }
        let answer = app.request(request).await;
        let sdk_accepts = verdict["valid"].as_bool().unwrap();
        let expected = if sdk_accepts { 200 } else { 401 };
        assert_eq!(answer.status, expected, "{}: {answer:?}", case["name"]);
        verdicts_seen.push((case["name"].as_str().unwrap().to_owned(), sdk_accepts));
        let delivery = verification(&app, &id).await.delivery;
        if !sdk_accepts {
            // A refused callback changed nothing; the ones before it moved at most to `sent`
            // or to the `undelivered` a valid one said.
            assert_ne!(delivery, Delivery::Delivered, "{}", case["name"]);
        }
    }
    // The SDK's verdicts themselves, so that a change in the SDK is seen here.
    let expected: Vec<(String, bool)> = [
        ("exact URL", true),
        ("with :443", true),
        ("another port", false),
        ("another path", false),
        ("http", false),
        ("wrong token", false),
        ("tampered status", false),
        ("sha256 named", true),
        ("sha256 unnamed", false),
        ("sha1 named sha256", false),
        ("undelivered", true),
    ]
    .into_iter()
    .map(|(name, valid)| (name.to_owned(), valid))
    .collect();
    assert_eq!(verdicts_seen, expected);
    let shown = verification(&app, &id).await;
    assert_eq!(shown.delivery, Delivery::Undelivered);
    assert_eq!(shown.delivery_error.as_deref(), Some("30003"));
}
