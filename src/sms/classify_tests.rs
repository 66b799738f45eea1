//! The providers' answers that the fake gateways do not script: unknown codes, answers that are
//! not the provider's JSON (a proxy's error page), gateway statuses without a body.

use super::http::HttpAnswer;
use super::{SmsErrorKind, aliyun, tencent, twilio};

fn answer(status: u16, body: &str) -> HttpAnswer {
    HttpAnswer {
        status,
        body: body.to_owned(),
    }
}

type Classify = fn(&HttpAnswer) -> Result<Option<String>, super::SmsError>;

const PROVIDERS: [(&str, Classify); 3] = [
    ("aliyun", aliyun::classify),
    ("tencent", tencent::classify),
    ("twilio", twilio::classify),
];

#[test]
fn answers_that_are_not_the_providers_json_are_classified_by_status() {
    for (name, classify) in PROVIDERS {
        for (status, kind) in [
            (502, SmsErrorKind::Retryable),
            (503, SmsErrorKind::Retryable),
            (429, SmsErrorKind::Retryable),
            (403, SmsErrorKind::Rejected),
            (404, SmsErrorKind::Rejected),
        ] {
            let error = classify(&answer(status, "<html>Bad Gateway</html>")).unwrap_err();
            assert_eq!(error.kind(), kind, "{name} {status}");
            assert_eq!(error.code(), format!("http_{status}"));
        }
    }
}

#[test]
fn unknown_error_codes_are_final_and_for_the_operator() {
    let aliyun_unknown = r#"{"Code":"isv.SOMETHING_NEW","Message":"new","RequestId":"x"}"#;
    let tencent_unknown = r#"{"Response":{"Error":{"Code":"FailedOperation.SomethingNew","Message":"new"},"RequestId":"x"}}"#;
    let twilio_unknown = r#"{"code":21999,"message":"new","status":400}"#;
    for (name, classify, body, status) in [
        ("aliyun", PROVIDERS[0].1, aliyun_unknown, 200),
        ("tencent", PROVIDERS[1].1, tencent_unknown, 200),
        ("twilio", PROVIDERS[2].1, twilio_unknown, 400),
    ] {
        let error = classify(&answer(status, body)).unwrap_err();
        assert_eq!(error.kind(), SmsErrorKind::Rejected, "{name}");
    }
}

#[test]
fn gateway_throttling_and_outages_are_retryable() {
    for (classify, status, body) in [
        (
            PROVIDERS[0].1,
            400,
            r#"{"Code":"Throttling.User","Message":"Request was denied due to user flow control.","RequestId":"x"}"#,
        ),
        (
            PROVIDERS[0].1,
            500,
            r#"{"Code":"InternalError","Message":"The request processing has failed due to some unknown error.","RequestId":"x"}"#,
        ),
        (
            PROVIDERS[1].1,
            200,
            r#"{"Response":{"Error":{"Code":"RequestLimitExceeded","Message":"too many"},"RequestId":"x"}}"#,
        ),
        (
            PROVIDERS[1].1,
            200,
            r#"{"Response":{"Error":{"Code":"InternalError.Timeout","Message":"timeout"},"RequestId":"x"}}"#,
        ),
        (
            PROVIDERS[2].1,
            503,
            r#"{"code":20503,"message":"Service Unavailable","status":503}"#,
        ),
    ] {
        let error = classify(&answer(status, body)).unwrap_err();
        assert_eq!(error.kind(), SmsErrorKind::Retryable, "{body}");
    }
}

#[test]
fn a_tencent_answer_that_is_ok_for_the_request_but_not_the_number_is_a_failure() {
    let body = r#"{"Response":{"SendStatusSet":[{"SerialNo":"","PhoneNumber":"+8613800138000","Fee":0,"Code":"FailedOperation.PhoneNumberInBlacklist","Message":"blacklisted"}],"RequestId":"x"}}"#;
    let error = tencent::classify(&answer(200, body)).unwrap_err();
    assert_eq!(error.kind(), SmsErrorKind::InvalidNumber);
    assert_eq!(error.code(), "FailedOperation.PhoneNumberInBlacklist");
}
