//! The providers' answers that the fake gateways do not script: unknown codes, answers that are
//! not the provider's JSON (a proxy's error page), gateway statuses without a body, and every
//! limit code with the wait it names.

use std::time::Duration;

use super::http::HttpAnswer;
use super::{SmsErrorKind, aliyun, tencent, twilio};

fn answer(status: u16, body: &str) -> HttpAnswer {
    HttpAnswer {
        status,
        body: body.to_owned(),
        retry_after: None,
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
            (429, SmsErrorKind::Throttled),
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
fn gateway_outages_are_retryable() {
    for (classify, status, body) in [
        (
            PROVIDERS[0].1,
            500,
            r#"{"Code":"InternalError","Message":"The request processing has failed due to some unknown error.","RequestId":"x"}"#,
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

/// A Tencent error answer for `code`, in `Response.Error` or in the number's status.
fn tencent_answer(code: &str, in_status: bool) -> HttpAnswer {
    let body = if in_status {
        format!(
            r#"{{"Response":{{"SendStatusSet":[{{"SerialNo":"","PhoneNumber":"+8613800138000","Fee":0,"Code":"{code}","Message":"limit"}}],"RequestId":"x"}}}}"#
        )
    } else {
        format!(
            r#"{{"Response":{{"Error":{{"Code":"{code}","Message":"limit"}},"RequestId":"x"}}}}"#
        )
    };
    answer(200, &body)
}

fn aliyun_answer(status: u16, code: &str, message: &str) -> HttpAnswer {
    answer(
        status,
        &format!(r#"{{"Code":"{code}","Message":"{message}","RequestId":"x"}}"#),
    )
}

/// The wait a limit code names.
#[derive(Clone, Copy, Debug)]
enum Wait {
    Secs(u64),
    /// Until the next midnight in China (UTC+8), where the daily limits count calendar days.
    ChinaDay,
}

impl Wait {
    /// Whether `wait` is this one, within a second of the test's own clock.
    fn is(self, wait: Duration) -> bool {
        match self {
            Wait::Secs(secs) => wait == Duration::from_secs(secs),
            Wait::ChinaDay => {
                let expected = 86_400 - (super::unix_now() + 8 * 3600) % 86_400;
                wait.as_secs().abs_diff(expected) <= 1
            }
        }
    }
}

#[test]
fn provider_limits_are_final_with_the_window_their_code_names() {
    use Wait::*;
    let checks: [(HttpAnswer, Classify, Wait); 16] = [
        (
            aliyun_answer(200, "isv.BUSINESS_LIMIT_CONTROL", "触发分钟级流控Permits:1"),
            aliyun::classify,
            Secs(60),
        ),
        (
            aliyun_answer(200, "isv.BUSINESS_LIMIT_CONTROL", "触发小时级流控Permits:5"),
            aliyun::classify,
            Secs(3600),
        ),
        (
            aliyun_answer(200, "isv.BUSINESS_LIMIT_CONTROL", "触发天级流控Permits:10"),
            aliyun::classify,
            ChinaDay,
        ),
        (
            aliyun_answer(200, "isv.DAY_LIMIT_CONTROL", "触发日发送限额"),
            aliyun::classify,
            ChinaDay,
        ),
        (
            aliyun_answer(
                400,
                "Throttling.User",
                "Request was denied due to user flow control.",
            ),
            aliyun::classify,
            Secs(1),
        ),
        (
            tencent_answer("LimitExceeded.PhoneNumberThirtySecondLimit", true),
            tencent::classify,
            Secs(30),
        ),
        (
            tencent_answer("LimitExceeded.PhoneNumberOneHourLimit", true),
            tencent::classify,
            Secs(3600),
        ),
        (
            tencent_answer("LimitExceeded.PhoneNumberDailyLimit", true),
            tencent::classify,
            ChinaDay,
        ),
        (
            tencent_answer("LimitExceeded.PhoneNumberSameContentDailyLimit", true),
            tencent::classify,
            ChinaDay,
        ),
        (
            tencent_answer("LimitExceeded.DailyLimit", false),
            tencent::classify,
            ChinaDay,
        ),
        (
            tencent_answer("LimitExceeded.AppMainlandChinaDailyLimit", false),
            tencent::classify,
            ChinaDay,
        ),
        (
            tencent_answer("LimitExceeded.DeliveryFrequencyLimit", true),
            tencent::classify,
            Secs(60),
        ),
        (
            tencent_answer("RequestLimitExceeded", false),
            tencent::classify,
            Secs(1),
        ),
        (
            answer(
                429,
                r#"{"code":20429,"message":"Too Many Requests","status":429}"#,
            ),
            twilio::classify,
            Secs(1),
        ),
        (
            answer(
                400,
                r#"{"code":14107,"message":"SMS send rate limit exceeded","status":400}"#,
            ),
            twilio::classify,
            Secs(30),
        ),
        (
            answer(
                400,
                r#"{"code":63038,"message":"Account exceeded the daily messages limit","status":400}"#,
            ),
            twilio::classify,
            Secs(86_400),
        ),
    ];
    for (answer, classify, expected) in checks {
        let error = classify(&answer).unwrap_err();
        assert_eq!(error.kind(), SmsErrorKind::Throttled, "{}", answer.body);
        assert!(!error.kind().allows_failover());
        let wait = error
            .retry_after()
            .expect("a throttled error says how long");
        assert!(
            expected.is(wait),
            "{wait:?}, not {expected:?}, for {}",
            answer.body
        );
    }
}

#[test]
fn a_retry_after_header_overrides_the_codes_window() {
    let mut limited = aliyun_answer(200, "isv.BUSINESS_LIMIT_CONTROL", "触发天级流控Permits:10");
    limited.retry_after = Some(Duration::from_secs(90));
    let error = aliyun::classify(&limited).unwrap_err();
    assert_eq!(error.retry_after(), Some(Duration::from_secs(90)));
    for (name, classify) in PROVIDERS {
        let mut busy = answer(429, "<html>Too Many Requests</html>");
        let error = classify(&busy).unwrap_err();
        assert_eq!(
            error.retry_after(),
            Some(Duration::from_secs(60)),
            "{name}: a minute"
        );
        busy.retry_after = Some(Duration::from_secs(5));
        let error = classify(&busy).unwrap_err();
        assert_eq!(
            (error.kind(), error.retry_after()),
            (SmsErrorKind::Throttled, Some(Duration::from_secs(5))),
            "{name}"
        );
    }
}

#[test]
fn tencent_limit_codes_that_are_not_about_sending_rates_are_for_the_operator() {
    for code in [
        "LimitExceeded.AppCountryOrRegionInBlacklist",
        "LimitExceeded.PhoneNumberCountLimit",
    ] {
        let error = tencent::classify(&tencent_answer(code, false)).unwrap_err();
        assert_eq!(error.kind(), SmsErrorKind::Rejected, "{code}");
        assert_eq!(error.retry_after(), None);
    }
}
