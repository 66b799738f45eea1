//! The JSON of the wire types, byte for byte as the service writes it today (the strings below
//! were taken from its answers), and read back into the same values.

use serde::Serialize;
use serde::de::DeserializeOwned;
use vcode_wire::{
    CaptchaCreated, CaptchaVerifyRequest, Delivery, DevInboxData, DevMessage, Envelope, ErrorCode,
    Health, HealthStatus, RetryAfterData, SendData, SendRequest, VerificationData,
    VerificationStatus, VerifyData, VerifyRequest, WebhookReceipt, WebhookReceiptStatus,
    WrongCodeData, paths,
};

/// `value` is written as exactly `json`, and `json` reads back as `value`.
fn assert_wire<T>(value: &T, json: &str)
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    assert_eq!(serde_json::to_string(value).unwrap(), json);
    assert_eq!(&serde_json::from_str::<T>(json).unwrap(), value);
}

#[test]
fn successes_are_enveloped_as_the_service_writes_them() {
    assert_wire(
        &Envelope::ok(SendData {
            verification_id: "q3Vd0m9YyTnJkqW8cXoB4A".into(),
            expires_in: 300,
            resend_after: 60,
            delivery: Delivery::Sent,
        }),
        r#"{"code":200,"message":"ok","data":{"verification_id":"q3Vd0m9YyTnJkqW8cXoB4A","expires_in":300,"resend_after":60,"delivery":"sent"}}"#,
    );
    assert_wire(
        &SendData {
            verification_id: "q3Vd0m9YyTnJkqW8cXoB4A".into(),
            expires_in: 300,
            resend_after: 60,
            delivery: Delivery::Unconfirmed,
        },
        r#"{"verification_id":"q3Vd0m9YyTnJkqW8cXoB4A","expires_in":300,"resend_after":60,"delivery":"unconfirmed"}"#,
    );
    // An answer of a service that predates the field: every 200 was a confirmed SMS.
    let older: SendData = serde_json::from_str(r#"{"expires_in":300,"resend_after":60}"#).unwrap();
    assert_eq!(older.delivery, Delivery::Sent);
    assert_wire(
        &Envelope::ok(VerifyData {
            verified: true,
            token: None,
        }),
        r#"{"code":200,"message":"ok","data":{"verified":true}}"#,
    );
    let id = "0123456789abcdef0123456789abcdef";
    assert_wire(
        &Envelope::ok(CaptchaCreated {
            captcha_id: id.to_owned(),
            expires_in: 300,
            image_url: paths::captcha_image(id),
        }),
        concat!(
            r#"{"code":200,"message":"ok","data":{"captcha_id":"0123456789abcdef0123456789abcdef","#,
            r#""expires_in":300,"image_url":"/api/v1/captcha/0123456789abcdef0123456789abcdef.png"}}"#
        ),
    );
    assert_wire(
        &Envelope::ok(Health {
            status: HealthStatus::Ready,
        }),
        r#"{"code":200,"message":"ok","data":{"status":"ready"}}"#,
    );
    assert_wire(
        &Envelope::ok(DevInboxData {
            messages: vec![DevMessage {
                code: "123456".into(),
                phone: "+8613800138000".into(),
                purpose: "login".into(),
                sent_at_ms: 1_700_000_000_000,
            }],
        }),
        concat!(
            r#"{"code":200,"message":"ok","data":{"messages":[{"code":"123456","#,
            r#""phone":"+8613800138000","purpose":"login","sent_at_ms":1700000000000}]}}"#
        ),
    );
}

#[test]
fn errors_carry_their_data_or_null() {
    assert_wire(
        &Envelope::error(
            ErrorCode::WrongCode,
            "wrong code",
            Some(WrongCodeData {
                remaining_attempts: 4,
            }),
        ),
        r#"{"code":40010,"message":"wrong code","data":{"remaining_attempts":4}}"#,
    );
    assert_wire(
        &Envelope::error(
            ErrorCode::ResendCooldown,
            "a code was sent recently; retry later",
            Some(RetryAfterData { retry_after: 60 }),
        ),
        r#"{"code":42900,"message":"a code was sent recently; retry later","data":{"retry_after":60}}"#,
    );
    let expired: Envelope<Option<RetryAfterData>> =
        Envelope::error(ErrorCode::CodeExpired, "code expired or not found", None);
    assert_wire(
        &expired,
        r#"{"code":41000,"message":"code expired or not found","data":null}"#,
    );
    assert_eq!(expired.error_code(), Some(ErrorCode::CodeExpired));
    assert!(!expired.is_ok());
}

#[test]
fn requests_leave_out_what_is_not_set() {
    assert_wire(
        &SendRequest::new("+8613800138000"),
        r#"{"phone":"+8613800138000"}"#,
    );
    assert_wire(
        &SendRequest {
            purpose: Some("register".into()),
            captcha_id: Some("abc".into()),
            captcha_answer: Some("XYZ12".into()),
            ..SendRequest::new("+8613800138000")
        },
        r#"{"phone":"+8613800138000","purpose":"register","captcha_id":"abc","captcha_answer":"XYZ12"}"#,
    );
    assert_wire(
        &VerifyRequest::new("13800138000", "123456"),
        r#"{"phone":"13800138000","code":"123456"}"#,
    );
    assert_wire(
        &VerifyRequest::with_id("q3Vd0m9YyTnJkqW8cXoB4A", "123456"),
        r#"{"verification_id":"q3Vd0m9YyTnJkqW8cXoB4A","code":"123456"}"#,
    );
    assert_wire(
        &VerificationData {
            verification_id: "q3Vd0m9YyTnJkqW8cXoB4A".into(),
            status: VerificationStatus::MaxAttemptsReached,
            delivery: Delivery::Sent,
            delivery_error: None,
            remaining_attempts: 0,
            created_at: 1_800_000_000,
            expires_at: 1_800_000_300,
            phone: Some("+86138****8000".into()),
            email: None,
            purpose: "login".into(),
        },
        r#"{"verification_id":"q3Vd0m9YyTnJkqW8cXoB4A","status":"max_attempts_reached","delivery":"sent","remaining_attempts":0,"created_at":1800000000,"expires_at":1800000300,"phone":"+86138****8000","purpose":"login"}"#,
    );
    assert_wire(
        &VerificationData {
            verification_id: "q3Vd0m9YyTnJkqW8cXoB4A".into(),
            status: VerificationStatus::Pending,
            delivery: Delivery::Undelivered,
            delivery_error: Some("30003".into()),
            remaining_attempts: 5,
            created_at: 1_800_000_000,
            expires_at: 1_800_000_300,
            phone: Some("+86138****8000".into()),
            email: None,
            purpose: "login".into(),
        },
        r#"{"verification_id":"q3Vd0m9YyTnJkqW8cXoB4A","status":"pending","delivery":"undelivered","delivery_error":"30003","remaining_attempts":5,"created_at":1800000000,"expires_at":1800000300,"phone":"+86138****8000","purpose":"login"}"#,
    );
    assert_wire(
        &WebhookReceipt {
            message_id: "0f3c9a7e51b2d4866e0a9c3f7b1d5e2a".into(),
            status: WebhookReceiptStatus::Undelivered,
            error_code: Some("E42".into()),
        },
        r#"{"message_id":"0f3c9a7e51b2d4866e0a9c3f7b1d5e2a","status":"undelivered","error_code":"E42"}"#,
    );
    assert_wire(
        &CaptchaVerifyRequest {
            captcha_id: None,
            answer: Some("ABCDE".into()),
        },
        r#"{"answer":"ABCDE"}"#,
    );
}

#[test]
fn readers_ignore_fields_they_do_not_know() {
    let newer = r#"{"expires_in":300,"resend_after":60,"channel":"sms"}"#;
    let data: SendData = serde_json::from_str(newer).unwrap();
    assert_eq!(data.expires_in, 300);
    let token = r#"{"verified":true,"token":"eyJ.x.y"}"#;
    let data: VerifyData = serde_json::from_str(token).unwrap();
    assert_eq!(data.token.as_deref(), Some("eyJ.x.y"));
}
