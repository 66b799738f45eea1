//! The aliyun, tencent and twilio senders, configured by variables only, against local fakes
//! that check requests as the providers do: delivery, every documented failure classified,
//! credentials, timestamp window and nonces, timeouts, redirects, routing and failover with at
//! most one SMS per send, the providers' own limits answered as a quota, and the whole service
//! on top.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use vcode::domain::{Code, CodeLength, Locale, Phone, Purpose, Region};
use vcode::sms::{
    SmsAttempt, SmsErrorKind, SmsMessage, SmsObserver, SmsSender, SmsSettings, build_sender,
};

use crate::support::fake_sms_provider::{FakeSmsProvider, Outcome, Provider};
use crate::support::{Backend, codes, phone, random_phone, spawn_app_with};

const ALIYUN_ID: &str = "LTAI5tFakeAccessKey01";
const TENCENT_ID: &str = "AKIDFakeSecretId0001";
pub(crate) const TWILIO_SID: &str = "AC00000000000000000000000000000001";
const TWILIO_KEY_SID: &str = "SK00000000000000000000000000000002";
pub(crate) const SECRET: &str = "the-right-s3cret";

/// The fakes, one per provider, accepting `SECRET`.
pub(crate) struct Fakes {
    aliyun: FakeSmsProvider,
    tencent: FakeSmsProvider,
    twilio: FakeSmsProvider,
}

impl Fakes {
    pub(crate) fn start() -> Self {
        Self {
            aliyun: FakeSmsProvider::start(Provider::Aliyun, ALIYUN_ID, SECRET),
            tencent: FakeSmsProvider::start(Provider::Tencent, TENCENT_ID, SECRET),
            twilio: FakeSmsProvider::start(Provider::Twilio, TWILIO_SID, SECRET),
        }
    }

    /// Every provider's variables, pointing at the fakes, signing with `secret`.
    fn vars(&self, secret: &str) -> HashMap<String, String> {
        [
            ("VCODE_ALIYUN_ACCESS_KEY_ID", ALIYUN_ID),
            ("VCODE_ALIYUN_ACCESS_KEY_SECRET", secret),
            ("VCODE_ALIYUN_ENDPOINT", self.aliyun.base_url()),
            ("VCODE_ALIYUN_SIGN_NAME", "阿里云短信测试"),
            ("VCODE_ALIYUN_TEMPLATE", "SMS_154950909"),
            ("VCODE_ALIYUN_TIMEOUT_MS", "400"),
            ("VCODE_TENCENT_SECRET_ID", TENCENT_ID),
            ("VCODE_TENCENT_SECRET_KEY", secret),
            ("VCODE_TENCENT_SDK_APP_ID", "1400006666"),
            ("VCODE_TENCENT_ENDPOINT", self.tencent.base_url()),
            ("VCODE_TENCENT_SIGN_NAME", "腾讯云"),
            ("VCODE_TENCENT_TEMPLATE", "1110"),
            ("VCODE_TENCENT_TIMEOUT_MS", "400"),
            ("VCODE_TWILIO_ACCOUNT_SID", TWILIO_SID),
            ("VCODE_TWILIO_AUTH_TOKEN", secret),
            ("VCODE_TWILIO_FROM", "+15005550006"),
            ("VCODE_TWILIO_ENDPOINT", self.twilio.base_url()),
            ("VCODE_TWILIO_TIMEOUT_MS", "400"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    /// Settings from the variables plus `extra` (`VCODE_SMS`, `VCODE_SMS_ROUTES`, …).
    pub(crate) fn settings(&self, secret: &str, extra: &[(&str, &str)]) -> SmsSettings {
        let mut vars = self.vars(secret);
        vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        vcode::Settings::from_vars(vars)
            .expect("valid settings")
            .sms
    }
}

/// Records every attempt the senders report.
#[derive(Default)]
struct Attempts(Mutex<Vec<SmsAttempt>>);

impl SmsObserver for Attempts {
    fn attempt(&self, attempt: SmsAttempt) {
        self.0.lock().unwrap().push(attempt);
    }
}

impl Attempts {
    fn seen(&self) -> Vec<(&'static str, Option<SmsErrorKind>)> {
        let attempts = self.0.lock().unwrap();
        attempts.iter().map(|a| (a.provider, a.failure)).collect()
    }
}

struct Owned {
    phone: Phone,
    purpose: Purpose,
    code: Code,
    locale: Option<Locale>,
}

fn owned(number: &str, locale: Option<&str>) -> Owned {
    Owned {
        phone: Phone::parse(number, Region::default()).unwrap(),
        purpose: Purpose::default(),
        code: Code::generate(CodeLength::default()),
        locale: locale.map(|l| Locale::parse(l).unwrap()),
    }
}

impl Owned {
    fn message(&self) -> SmsMessage<'_> {
        SmsMessage {
            phone: &self.phone,
            purpose: &self.purpose,
            code: &self.code,
            expires_in: Duration::from_secs(300),
            locale: self.locale.as_ref(),
            tenant: None,
        }
    }
}

fn build(settings: &SmsSettings) -> (Arc<dyn SmsSender>, Arc<Attempts>) {
    let attempts = Arc::new(Attempts::default());
    (build_sender(settings, attempts.clone()).unwrap(), attempts)
}

const CN: &str = "+8613800138000";
const US: &str = "+14155550100";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_provider_delivers_a_request_its_fake_accepts() {
    let fakes = Fakes::start();
    for (name, fake, number, locale) in [
        ("aliyun", &fakes.aliyun, CN, None),
        ("tencent", &fakes.tencent, CN, None),
        ("twilio", &fakes.twilio, US, Some("en-US")),
    ] {
        let (sender, _) = build(&fakes.settings(SECRET, &[("VCODE_SMS", name)]));
        let sms = owned(number, locale);
        let receipt = sender.send(&sms.message()).await.unwrap_or_else(|e| {
            panic!("{name}: {e} (fake: {:?})", fake.last_refusal());
        });
        assert_eq!(receipt.provider, name);
        assert!(receipt.message_id.is_some(), "{name}: the provider's id");
        let accepted = fake.accepted();
        assert_eq!(accepted.len(), 1, "{name}");
        let code = sms.code.expose();
        match name {
            "aliyun" => {
                assert_eq!(accepted[0].phone, "8613800138000");
                assert_eq!(accepted[0].template, "SMS_154950909");
                assert_eq!(accepted[0].sign_name, "阿里云短信测试");
                assert_eq!(accepted[0].params, serde_json::json!({ "code": code }));
                // The empty body's length is stated, as the official SDK states it.
                assert_eq!(accepted[0].content_length.as_deref(), Some("0"));
            }
            "tencent" => {
                assert_eq!(accepted[0].phone, CN);
                assert_eq!(accepted[0].template, "1110");
                assert_eq!(accepted[0].params, serde_json::json!([code]));
            }
            _ => {
                assert_eq!(accepted[0].phone, US);
                let text = accepted[0].params.as_str().unwrap();
                assert!(
                    text.starts_with(&format!("Your login code is {code}")),
                    "{text}"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_failure_is_classified() {
    use SmsErrorKind::*;
    let fakes = Fakes::start();
    for (name, fake, number) in [
        ("aliyun", &fakes.aliyun, CN),
        ("tencent", &fakes.tencent, CN),
        ("twilio", &fakes.twilio, US),
    ] {
        let (sender, _) = build(&fakes.settings(SECRET, &[("VCODE_SMS", name)]));
        for (outcome, kind) in [
            (Outcome::Throttle, Throttled),
            (Outcome::InvalidNumber, InvalidNumber),
            (Outcome::TemplateNotApproved, Rejected),
            (Outcome::ServerError, Retryable),
        ] {
            fake.script(&[outcome]);
            let sms = owned(number, None);
            let error = sender.send(&sms.message()).await.unwrap_err();
            assert_eq!(error.kind(), kind, "{name} {outcome:?}: {error}");
            assert_eq!(error.provider(), name);
        }
        assert!(fake.accepted().is_empty(), "{name}: nothing was delivered");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_credentials_fail_the_providers_signature_check_and_are_rejected() {
    let fakes = Fakes::start();
    for (name, fake, number, refusal) in [
        ("aliyun", &fakes.aliyun, CN, "SignatureDoesNotMatch"),
        (
            "tencent",
            &fakes.tencent,
            CN,
            "AuthFailure.SignatureFailure",
        ),
        ("twilio", &fakes.twilio, US, "20003"),
    ] {
        let (sender, _) = build(&fakes.settings("a-wrong-secret", &[("VCODE_SMS", name)]));
        let sms = owned(number, None);
        let error = sender.send(&sms.message()).await.unwrap_err();
        assert_eq!(error.kind(), SmsErrorKind::Rejected, "{name}: {error}");
        assert_eq!(error.code(), refusal, "{name}");
        assert!(!error.to_string().contains("a-wrong-secret"));
        assert!(fake.accepted().is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_timestamps_and_replayed_nonces_are_refused() {
    use vcode::sms::http::ProviderClient;
    use vcode::sms::{aliyun, tencent};
    let fakes = Fakes::start();
    let settings = fakes.settings(SECRET, &[("VCODE_SMS", "aliyun,tencent")]);
    let sms = owned(CN, None);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let client = ProviderClient::new("test", Duration::from_secs(2)).unwrap();

    let aliyun = aliyun::AliyunSender::new(settings.aliyun.clone().unwrap()).unwrap();
    let stale = aliyun
        .build_request(&sms.message(), now - 3600, "nonce-stale")
        .unwrap();
    let error = aliyun::classify(&client.execute(stale).await.unwrap()).unwrap_err();
    assert_eq!(
        (error.code(), error.kind()),
        ("InvalidTimeStamp.Expired", SmsErrorKind::Rejected)
    );
    let fresh = aliyun
        .build_request(&sms.message(), now, "nonce-once")
        .unwrap();
    assert!(aliyun::classify(&client.execute(fresh.clone()).await.unwrap()).is_ok());
    let replay = aliyun::classify(&client.execute(fresh).await.unwrap()).unwrap_err();
    assert_eq!(replay.code(), "SignatureNonceUsed");
    assert_eq!(fakes.aliyun.accepted().len(), 1);

    let tencent = tencent::TencentSender::new(settings.tencent.clone().unwrap()).unwrap();
    let stale = tencent.build_request(&sms.message(), now - 600).unwrap();
    let error = tencent::classify(&client.execute(stale).await.unwrap()).unwrap_err();
    assert_eq!(
        (error.code(), error.kind()),
        ("AuthFailure.SignatureExpire", SmsErrorKind::Rejected)
    );
    assert!(fakes.tencent.accepted().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retryable_failures_fail_over_with_the_same_code_and_final_ones_do_not() {
    use SmsErrorKind::*;
    let fakes = Fakes::start();
    let routes = [
        ("VCODE_SMS", "twilio"),
        ("VCODE_SMS_ROUTES", "+86:aliyun,tencent"),
    ];
    let (sender, attempts) = build(&fakes.settings(SECRET, &routes));
    for (aliyun_outcome, expected) in [
        (
            Outcome::ServerError,
            vec![("aliyun", Some(Retryable)), ("tencent", None)],
        ),
        // The provider's own limit on the number: another provider would get around it.
        (Outcome::Throttle, vec![("aliyun", Some(Throttled))]),
        (
            Outcome::InvalidNumber,
            vec![("aliyun", Some(InvalidNumber))],
        ),
        (
            Outcome::TemplateNotApproved,
            vec![("aliyun", Some(Rejected))],
        ),
        (Outcome::Deliver, vec![("aliyun", None)]),
    ] {
        attempts.0.lock().unwrap().clear();
        let before = (
            fakes.aliyun.accepted().len(),
            fakes.tencent.accepted().len(),
        );
        fakes.aliyun.script(&[aliyun_outcome]);
        let sms = owned(CN, None);
        let result = sender.send(&sms.message()).await;
        assert_eq!(attempts.seen(), expected, "{aliyun_outcome:?}");
        let after = (
            fakes.aliyun.accepted().len(),
            fakes.tencent.accepted().len(),
        );
        let delivered = after.0 + after.1 - before.0 - before.1;
        assert_eq!(
            delivered,
            usize::from(result.is_ok()),
            "{aliyun_outcome:?}: at most one SMS"
        );
        if after.1 > before.1 {
            let tencent_params = &fakes.tencent.accepted()[before.1].params;
            assert_eq!(
                tencent_params,
                &serde_json::json!([sms.code.expose()]),
                "the same code"
            );
        }
    }
    // Other numbers take the default route.
    let sms = owned(US, Some("en"));
    assert_eq!(
        sender.send(&sms.message()).await.unwrap().provider,
        "twilio"
    );
    let seen: Vec<&str> = attempts.seen().iter().map(|(p, _)| *p).collect();
    assert_eq!(seen.last(), Some(&"twilio"));
    assert_eq!(
        SmsAttempt {
            provider: "tencent",
            failure: None
        }
        .stats_event_name(),
        "sms_tencent_sent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_silent_past_its_timeout_is_unconfirmed_and_not_failed_over() {
    let fakes = Fakes::start();
    let routes = [("VCODE_SMS", "aliyun,tencent")];
    let (sender, _) = build(&fakes.settings(SECRET, &routes));
    fakes
        .aliyun
        .script(&[Outcome::Stall(Duration::from_secs(3))]);
    let sms = owned(CN, None);
    let started = Instant::now();
    let error = sender.send(&sms.message()).await.unwrap_err();
    assert_eq!(error.kind(), SmsErrorKind::Unconfirmed, "{error}");
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        fakes.tencent.requests(),
        0,
        "it may have been delivered: no second SMS"
    );

    // A provider that cannot be reached took nothing: the next one may send.
    let unreachable = [
        ("VCODE_SMS", "aliyun,tencent"),
        ("VCODE_ALIYUN_ENDPOINT", "http://127.0.0.1:9"),
    ];
    let (sender, _) = build(&fakes.settings(SECRET, &unreachable));
    assert_eq!(
        sender.send(&sms.message()).await.unwrap().provider,
        "tencent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_are_not_followed() {
    let fakes = Fakes::start();
    let (sender, _) = build(&fakes.settings(SECRET, &[("VCODE_SMS", "aliyun,tencent")]));
    fakes.aliyun.script(&[Outcome::Redirect]);
    let sms = owned(CN, None);
    let error = sender.send(&sms.message()).await.unwrap_err();
    assert_eq!(
        (error.code(), error.kind()),
        ("http_302", SmsErrorKind::Rejected)
    );
    assert_eq!(fakes.aliyun.requests(), 1);
    assert_eq!(fakes.tencent.requests(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_sends_each_deliver_exactly_one_sms_across_failover() {
    let fakes = Fakes::start();
    let (sender, _) = build(&fakes.settings(SECRET, &[("VCODE_SMS", "aliyun,tencent")]));
    // Half of aliyun's answers are outages, in whatever order the sends arrive.
    let sends = 24;
    fakes
        .aliyun
        .script(&[Outcome::ServerError, Outcome::Deliver].repeat(sends / 2));
    let messages: Vec<Owned> = (0..sends).map(|_| owned(&random_phone(), None)).collect();
    let results = futures::future::join_all(messages.iter().map(|sms| {
        let sender = sender.clone();
        async move { sender.send(&sms.message()).await }
    }))
    .await;
    assert!(results.iter().all(Result::is_ok));
    let mut delivered: Vec<String> = fakes
        .aliyun
        .accepted()
        .into_iter()
        .chain(fakes.tencent.accepted())
        .map(|a| a.phone.trim_start_matches('+').to_owned())
        .collect();
    delivered.sort();
    let mut expected: Vec<String> = messages
        .iter()
        .map(|m| m.phone.as_e164().trim_start_matches('+').to_owned())
        .collect();
    expected.sort();
    assert_eq!(delivered, expected, "every send delivered exactly once");
    assert_eq!(fakes.aliyun.accepted().len(), sends / 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_are_counted_per_provider_and_result() {
    let fakes = Fakes::start();
    let (sender, _) = build(&fakes.settings(SECRET, &[("VCODE_SMS", "tencent")]));
    let count = || {
        let text = vcode::metrics::render();
        let line = text.lines().find(|l| {
            l.starts_with("vcode_sms_total{provider=\"tencent\",result=\"invalid_number\"}")
        });
        line.and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let before = count();
    fakes.tencent.script(&[Outcome::InvalidNumber]);
    let sms = owned(CN, None);
    assert!(sender.send(&sms.message()).await.is_err());
    assert!(count() >= before + 1.0, "{}", vcode::metrics::render());
    assert!(
        vcode::metrics::render().contains("vcode_sms_duration_seconds_count{provider=\"tencent\"}")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_service_sends_through_providers_and_rolls_back_on_failure() {
    let fakes = Fakes::start();
    let settings = fakes.settings(SECRET, &[("VCODE_SMS", "aliyun,tencent")]);
    let app = spawn_app_with(Backend::Memory, |s| s.sms = settings).await;

    fakes.aliyun.script(&[Outcome::ServerError]);
    let number = random_phone();
    let answer = app.send(&number).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let pending = app
        .store
        .codes
        .pending_code(&phone(&number), &Purpose::default())
        .await
        .unwrap()
        .expect("pending");
    let sent = fakes.tencent.accepted();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].params,
        serde_json::json!([
            codes::pending(&phone(&number), &Purpose::default(), &pending).expose()
        ])
    );
    assert!(fakes.aliyun.accepted().is_empty());

    fakes.aliyun.script(&[Outcome::TemplateNotApproved]);
    let other = random_phone();
    let answer = app.send(&other).await;
    assert_eq!((answer.status, answer.code()), (502, 50200), "{answer:?}");
    let pending = app
        .store
        .codes
        .pending_code(&phone(&other), &Purpose::default())
        .await
        .unwrap();
    assert!(pending.is_none(), "the code was rolled back");
    assert_eq!(
        fakes.tencent.accepted().len(),
        1,
        "a final failure is not failed over"
    );

    // A number the provider cannot deliver to is the caller's error: 400/40001, rolled back.
    fakes.aliyun.script(&[Outcome::InvalidNumber]);
    let unreachable = random_phone();
    let answer = app.send(&unreachable).await;
    assert_eq!((answer.status, answer.code()), (400, 40001), "{answer:?}");
    let pending = app
        .store
        .codes
        .pending_code(&phone(&unreachable), &Purpose::default())
        .await
        .unwrap();
    assert!(pending.is_none(), "the code was rolled back");
    assert_eq!(fakes.tencent.accepted().len(), 1, "not failed over either");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_provider_answering_after_its_timeout_leaves_a_code_that_verifies() {
    let fakes = Fakes::start();
    for (route, first, second) in [
        ("aliyun,tencent", &fakes.aliyun, &fakes.tencent),
        ("tencent,twilio", &fakes.tencent, &fakes.twilio),
        ("twilio,aliyun", &fakes.twilio, &fakes.aliyun),
    ] {
        let settings = fakes.settings(SECRET, &[("VCODE_SMS", route)]);
        let app = spawn_app_with(Backend::Memory, |s| s.sms = settings).await;
        let number = random_phone();
        let (taken, second_before) = (first.accepted().len(), second.requests());
        first.script(&[Outcome::Stall(Duration::from_secs(3))]);
        let answer = app.send(&number).await;
        assert_eq!(answer.status, 200, "{route}: {answer:?}");
        assert_eq!(answer.body["data"]["delivery"], "unconfirmed", "{route}");
        assert_eq!(second.requests(), second_before, "{route}: not failed over");
        let sms = first.accepted();
        assert_eq!(sms.len(), taken + 1, "{route}");
        let pending = app
            .store
            .codes
            .pending_code(&phone(&number), &Purpose::default())
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{route}: the code stays"));
        let code = codes::pending(&phone(&number), &Purpose::default(), &pending);
        assert!(
            sms[taken].params.to_string().contains(code.expose()),
            "{route}: the SMS that arrived carries the pending code"
        );
        let verified = app.verify(&number, code.expose()).await;
        assert_eq!(verified.status, 200, "{route}: {verified:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_providers_own_limit_is_a_quota_for_the_client_and_is_not_failed_over() {
    let fakes = Fakes::start();
    // Each fake's documented limit answer: Aliyun's hourly per-number flow control, Tencent's
    // 30-second per-number limit, Twilio's 429 (20429).
    for (route, first, second, retry_after) in [
        ("aliyun,tencent", &fakes.aliyun, &fakes.tencent, 3600),
        ("tencent,aliyun", &fakes.tencent, &fakes.aliyun, 30),
        ("twilio,aliyun", &fakes.twilio, &fakes.aliyun, 1),
    ] {
        let settings = fakes.settings(SECRET, &[("VCODE_SMS", route)]);
        let app = spawn_app_with(Backend::Memory, |s| s.sms = settings).await;
        let number = random_phone();
        let (first_before, second_before) = (first.requests(), second.requests());
        first.script(&[Outcome::Throttle]);
        let answer = app.send(&number).await;
        assert_eq!(
            (answer.status, answer.code()),
            (429, 42902),
            "{route}: {answer:?}"
        );
        assert_eq!(answer.body["data"]["retry_after"], retry_after, "{route}");
        assert_eq!(
            answer.retry_after.as_deref(),
            Some(retry_after.to_string().as_str()),
            "{route}"
        );
        assert_eq!(first.requests(), first_before + 1, "{route}");
        assert_eq!(second.requests(), second_before, "{route}: not failed over");
        let pending = app
            .store
            .codes
            .pending_code(&phone(&number), &Purpose::default())
            .await
            .unwrap();
        assert!(pending.is_none(), "{route}: the code was rolled back");
        // Nor is a cooldown left: once the provider takes messages again, so does vcode.
        let answer = app.send(&number).await;
        assert_eq!(answer.status, 200, "{route}: {answer:?}");
        assert_eq!(second.requests(), second_before, "{route}");
    }
    let metrics = vcode::metrics::render();
    for provider in ["aliyun", "tencent", "twilio"] {
        let label = format!("vcode_sms_total{{provider=\"{provider}\",result=\"throttled\"}}");
        assert!(metrics.contains(&label), "{label} in {metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twilio_authenticates_with_an_api_key_and_sends_from_a_number_of_a_messaging_service() {
    const KEY_SECRET: &str = "the-api-key-s3cret";
    const SERVICE: &str = "MG00000000000000000000000000000003";
    let fakes = Fakes::start();
    fakes.twilio.accept_api_key(TWILIO_KEY_SID, KEY_SECRET);
    let settings = |key_secret: &str| {
        let mut vars = fakes.vars(SECRET);
        vars.remove("VCODE_TWILIO_AUTH_TOKEN");
        vars.extend(
            [
                ("VCODE_SMS", "twilio"),
                ("VCODE_TWILIO_API_KEY_SID", TWILIO_KEY_SID),
                ("VCODE_TWILIO_API_KEY_SECRET", key_secret),
                ("VCODE_TWILIO_MESSAGING_SERVICE_SID", SERVICE),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned())),
        );
        vcode::Settings::from_vars(vars)
            .expect("valid settings")
            .sms
    };
    let (sender, _) = build(&settings(KEY_SECRET));
    let sms = owned(US, Some("en"));
    let receipt = sender.send(&sms.message()).await.unwrap_or_else(|e| {
        panic!("{e} (fake: {:?})", fakes.twilio.last_refusal());
    });
    assert_eq!(receipt.provider, "twilio");
    let accepted = fakes.twilio.accepted();
    assert_eq!(accepted.len(), 1);
    assert_eq!(accepted[0].sign_name, "+15005550006", "From");
    assert_eq!(accepted[0].messaging_service_sid.as_deref(), Some(SERVICE));

    // The key's SID with a wrong secret is Twilio's 20003, for the operator.
    let (sender, _) = build(&settings("a-wrong-secret"));
    let error = sender.send(&sms.message()).await.unwrap_err();
    assert_eq!(
        (error.code(), error.kind()),
        ("20003", SmsErrorKind::Rejected)
    );
    assert_eq!(fakes.twilio.accepted().len(), 1);
}
