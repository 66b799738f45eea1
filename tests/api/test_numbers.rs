//! Test numbers (`VCODE_TEST_NUMBERS`): a send stores the fixed code through the normal issue
//! and sends no SMS, on no quota and past the destination checks; the code verifies like any
//! other (one use, a token); start-up refuses them on a public bind unless told otherwise.

use serde_json::json;
use vcode::settings::{AbuseSettings, TestNumbers};
use vcode::{Application, Settings};

use crate::support::app::{test_settings, webhook};
use crate::support::{Backend, SmsGateway, random_phone, spawn_app_with};

const CODE: &str = "246810";
/// A US number: refused as a destination at the defaults (only the default region, CN).
const ABROAD: &str = "+14155552671";

fn test_numbers(pairs: &[(&str, &str)]) -> TestNumbers {
    let text: Vec<String> = pairs.iter().map(|(p, c)| format!("{p}={c}")).collect();
    serde_json::from_value(json!(text.join(","))).expect("test numbers read")
}

async fn a_test_number_gets_its_fixed_code_and_no_sms_on_no_quota(backend: Backend) {
    let gateway = SmsGateway::start();
    let number = random_phone();
    let app = spawn_app_with(backend, |s| {
        s.sms = webhook(gateway.url());
        s.otp.test_numbers = test_numbers(&[(&number, CODE), (ABROAD, "000000")]);
        s.otp.resend_cooldown = std::time::Duration::ZERO;
        // One SMS per phone and per client an hour: a test number must draw on neither.
        s.abuse = AbuseSettings {
            sends_per_phone_hour: 1,
            sends_per_ip_hour: 1,
            ..AbuseSettings::default()
        };
    })
    .await;
    for _ in 0..3 {
        let sent = app.send(&number).await;
        assert_eq!(sent.status, 200, "{sent:?}");
    }
    let wrong = app.verify(&number, "135791").await;
    assert_eq!(wrong.code(), 40010, "{wrong:?}");
    let verified = app.verify(&number, CODE).await;
    assert_eq!(verified.status, 200, "{verified:?}");
    assert!(verified.body["data"]["token"].is_string());
    assert_eq!(app.verify(&number, CODE).await.code(), 41000, "one use");
    // Past the country check, which refuses the same number when it is not a test number.
    assert_eq!(app.send(ABROAD).await.status, 200);
    assert_eq!(app.verify(ABROAD, "000000").await.status, 200);
    assert!(gateway.received().is_empty(), "no SMS to a test number");
    assert!(app.inbox(&number).await.is_empty(), "nothing in the outbox");

    // The client's budget is untouched: its one SMS an hour still goes out, then it is spent.
    let other = random_phone();
    assert_eq!(app.send(&other).await.status, 200);
    assert_eq!(gateway.received().len(), 1);
    let over = app.send(&random_phone()).await;
    assert_eq!((over.status, over.code()), (429, 42902), "{over:?}");
}

on_every_store!(a_test_number_gets_its_fixed_code_and_no_sms_on_no_quota);

#[tokio::test]
async fn start_up_refuses_test_numbers_on_a_public_bind_unless_allowed() {
    let public = |allowed: bool| Settings {
        bind: "0.0.0.0:0".parse().unwrap(),
        sms: webhook("http://127.0.0.1:9/sms"),
        ..test_settings_with(allowed)
    };
    let error = Application::build(public(false))
        .await
        .err()
        .expect("refused");
    assert!(
        format!("{error:#}").contains("VCODE_TEST_NUMBERS_ON_PUBLIC_BIND"),
        "{error:#}"
    );
}

fn test_settings_with(allowed: bool) -> Settings {
    let mut settings = test_settings();
    settings.dev_mode = false;
    settings.otp.test_numbers = test_numbers(&[("+8613800000000", "123456")]);
    settings.otp.test_numbers_on_public_bind = allowed;
    settings
}
