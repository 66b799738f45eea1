//! The Twilio-compatible paths over HTTP on every store: accounts see only their own Services,
//! concurrent first starts make one verification and concurrent re-sends never pass Twilio's
//! five sends, concurrent Service updates are all kept, a Service's code length, purpose,
//! name, do-not-share warning and (vcode's own) code lifetime and texts reach the SMS,
//! `SkipSmsToLandlines` refuses fixed lines (60205), the fraud guard's refusal is Twilio's
//! 60410, and credentials are Twilio's. `Channel=email` against a real mail server (aiosmtpd,
//! the harness of email.rs): the code read from the mail checks, re-sends mail the same code
//! under the same SID up to 60203, the Service's name, lifetime and the start's locale reach
//! the mail, a refused mail is 30008 and leaves nothing, no relay is 60217.
//! (The official SDKs' whole flow, through Prism: twilio_sdk.rs.)

use std::time::Duration;

use serde_json::{Value, json};
use vcode::fraud::FraudSettings;
use vcode::settings::{AbuseSettings, NumberTypes, Regions};
use vcode::twilio_compat::{TwilioAccounts, accounts};

use crate::email::{MailServer, check, code_in, mailing_settings, tools_present};
use crate::support::app::webhook;
use crate::support::{Backend, SmsGateway, TestApp, random_phone, spawn_app_with};

/// One account's HTTP Basic credentials.
#[derive(Clone)]
struct Account {
    sid: String,
    token: String,
}

struct Answer {
    status: u16,
    body: Value,
    retry_after: Option<String>,
}

impl Answer {
    fn code(&self) -> i64 {
        self.body["code"].as_i64().unwrap_or_default()
    }

    fn retry_after(&self) -> Option<&str> {
        self.retry_after.as_deref()
    }
}

impl Account {
    async fn call(
        &self,
        app: &TestApp,
        method: reqwest::Method,
        path: &str,
        form: &[(&str, &str)],
    ) -> Answer {
        let request = app
            .client
            .request(method, app.url(path))
            .basic_auth(&self.sid, Some(&self.token))
            .form(form);
        let response = request.send().await.expect("the app answers");
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .map(|value| value.to_str().unwrap().to_owned());
        let text = response.text().await.unwrap();
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"))
        };
        Answer {
            status,
            body,
            retry_after,
        }
    }

    async fn post(&self, app: &TestApp, path: &str, form: &[(&str, &str)]) -> Answer {
        self.call(app, reqwest::Method::POST, path, form).await
    }

    async fn get(&self, app: &TestApp, path: &str) -> Answer {
        self.call(app, reqwest::Method::GET, path, &[]).await
    }

    /// Starts a verification of `to` by SMS; it must be accepted.
    async fn start(&self, app: &TestApp, service: &str, to: &str) -> Answer {
        let path = format!("/v2/Services/{service}/Verifications");
        let started = self
            .post(app, &path, &[("To", to), ("Channel", "sms")])
            .await;
        assert_eq!(started.status, 201, "{}", started.body);
        started
    }

    async fn create_service(&self, app: &TestApp, form: &[(&str, &str)]) -> String {
        let answer = self.post(app, "/v2/Services", form).await;
        assert_eq!(answer.status, 201, "{}", answer.body);
        answer.body["sid"].as_str().unwrap().to_owned()
    }
}

/// An app with two accounts, no resend cooldown and no client budget.
async fn app_with_accounts(backend: Backend) -> (TestApp, Account, Account) {
    app_with_accounts_and(backend, |_| {}).await
}

/// The same, with settings of its own.
async fn app_with_accounts_and(
    backend: Backend,
    also: impl FnOnce(&mut vcode::settings::Settings),
) -> (TestApp, Account, Account) {
    let (first, second) = (accounts::generate(), accounts::generate());
    let entries = format!("{}\n{}", first.2, second.2);
    let app = spawn_app_with(backend, |settings| {
        settings.twilio_accounts = Some(TwilioAccounts::parse(&entries).unwrap());
        settings.otp.resend_cooldown = Duration::ZERO;
        settings.abuse.sends_per_ip_hour = 0;
        also(settings);
    })
    .await;
    let account = |(sid, token, _): (String, String, String)| Account { sid, token };
    (app, account(first), account(second))
}

async fn another_accounts_service_is_not_found(backend: Backend) {
    let (app, owner, other) = app_with_accounts(backend).await;
    let service = owner
        .create_service(&app, &[("FriendlyName", "Shop")])
        .await;
    let to = random_phone();
    let started = owner.start(&app, &service, &to).await;
    let verification = started.body["sid"].as_str().unwrap();
    for answer in [
        other.get(&app, &format!("/v2/Services/{service}")).await,
        other
            .post(
                &app,
                &format!("/v2/Services/{service}"),
                &[("FriendlyName", "Mine")],
            )
            .await,
        other
            .call(
                &app,
                reqwest::Method::DELETE,
                &format!("/v2/Services/{service}"),
                &[],
            )
            .await,
        other
            .post(
                &app,
                &format!("/v2/Services/{service}/Verifications"),
                &[("To", &to), ("Channel", "sms")],
            )
            .await,
        other
            .get(
                &app,
                &format!("/v2/Services/{service}/Verifications/{verification}"),
            )
            .await,
        other
            .post(
                &app,
                &format!("/v2/Services/{service}/VerificationCheck"),
                &[("To", &to), ("Code", "123456")],
            )
            .await,
    ] {
        assert_eq!(
            (answer.status, answer.code()),
            (404, 20404),
            "{}",
            answer.body
        );
        assert_eq!(
            answer.body["more_info"],
            "https://www.twilio.com/docs/errors/20404"
        );
    }
    let listed = other.get(&app, "/v2/Services").await;
    assert_eq!(listed.body["services"], Value::Array(vec![]));
    assert_eq!(
        owner.get(&app, "/v2/Services").await.body["services"][0]["sid"],
        service
    );
    // A verification of one Service is no verification of another of the same account.
    let sibling = owner
        .create_service(&app, &[("FriendlyName", "Bank")])
        .await;
    let answer = owner
        .get(
            &app,
            &format!("/v2/Services/{sibling}/Verifications/{verification}"),
        )
        .await;
    assert_eq!(
        (answer.status, answer.code()),
        (404, 20404),
        "{}",
        answer.body
    );
    // Still the owner's, untouched.
    let fetched = owner.get(&app, &format!("/v2/Services/{service}")).await;
    assert_eq!(fetched.body["friendly_name"], "Shop");
}

async fn credentials_are_twilios(backend: Backend) {
    let (app, owner, _) = app_with_accounts(backend).await;
    let wrong = Account {
        sid: owner.sid.clone(),
        token: "0".repeat(32),
    };
    for answer in [
        wrong.get(&app, "/v2/Services").await,
        Account {
            sid: "AC".to_owned() + &"0".repeat(32),
            token: owner.token.clone(),
        }
        .get(&app, "/v2/Services")
        .await,
    ] {
        assert_eq!(
            (answer.status, answer.code()),
            (401, 20003),
            "{}",
            answer.body
        );
        assert_eq!(answer.body["status"], 401);
    }
    let anonymous = app
        .client
        .get(app.url("/v2/Services"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    assert_eq!(
        anonymous.headers()["www-authenticate"],
        "Basic realm=\"Twilio API\""
    );
}

async fn concurrent_resends_never_pass_five_sends(backend: Backend) {
    let (app, owner, _) = app_with_accounts(backend).await;
    let service = owner
        .create_service(&app, &[("FriendlyName", "Shop")])
        .await;
    let to = random_phone();
    let path = format!("/v2/Services/{service}/Verifications");
    let first = owner
        .post(&app, &path, &[("To", &to), ("Channel", "sms")])
        .await;
    let sid = first.body["sid"].as_str().unwrap().to_owned();
    let form = [("To", to.as_str()), ("Channel", "sms")];
    let starts = (0..10).map(|_| owner.post(&app, &path, &form));
    let answers = futures::future::join_all(starts).await;
    let sent: Vec<&Answer> = answers.iter().filter(|a| a.status == 201).collect();
    assert_eq!(
        sent.len(),
        4,
        "{:?}",
        answers.iter().map(|a| &a.body).collect::<Vec<_>>()
    );
    assert!(sent.iter().all(|a| a.body["sid"] == sid.as_str()));
    assert!(
        answers
            .iter()
            .filter(|a| a.status != 201)
            .all(|a| (a.status, a.code()) == (429, 60203))
    );
    assert_eq!(app.inbox(&to).await.len(), 5);
    let fetched = owner.get(&app, &format!("{path}/{sid}")).await;
    assert_eq!(
        fetched.body["send_code_attempts"].as_array().unwrap().len(),
        5
    );
    let codes = app.inbox(&to).await;
    assert!(
        codes.iter().all(|code| *code == codes[0]),
        "one code re-sent: {codes:?}"
    );
}

async fn concurrent_service_updates_are_all_kept(backend: Backend) {
    let (app, owner, _) = app_with_accounts(backend).await;
    let service = owner
        .create_service(&app, &[("FriendlyName", "Shop")])
        .await;
    let path = format!("/v2/Services/{service}");
    let flags = [
        "LookupEnabled",
        "Psd2Enabled",
        "SkipSmsToLandlines",
        "DtmfInputRequired",
        "DoNotShareWarningEnabled",
        "CustomCodeEnabled",
    ];
    let forms = flags.map(|flag| [(flag, "true")]);
    let updates = forms.iter().map(|form| owner.post(&app, &path, form));
    for answer in futures::future::join_all(updates).await {
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    let service = owner.get(&app, &path).await.body;
    for field in [
        "lookup_enabled",
        "psd2_enabled",
        "skip_sms_to_landlines",
        "dtmf_input_required",
        "do_not_share_warning_enabled",
        "custom_code_enabled",
    ] {
        assert_eq!(service[field], true, "{field}: {service}");
    }
}

async fn a_services_code_length_and_purpose_reach_the_send(backend: Backend) {
    let (app, owner, _) = app_with_accounts(backend).await;
    let service = owner
        .create_service(&app, &[("FriendlyName", "Bank"), ("CodeLength", "10")])
        .await;
    for bad in ["3", "11", "six"] {
        let answer = owner
            .post(
                &app,
                "/v2/Services",
                &[("FriendlyName", "x"), ("CodeLength", bad)],
            )
            .await;
        assert_eq!((answer.status, answer.code()), (400, 60200), "{bad}");
    }
    let to = random_phone();
    owner.start(&app, &service, &to).await;
    let code = app.last_code(&to).await;
    assert_eq!(code.len(), 10, "{code}");
    // The same phone's code of /api/v1 lives apart: neither verifies the other.
    assert_eq!(app.send(&to).await.status, 200);
    let api_code = app.last_code(&to).await;
    let check = format!("/v2/Services/{service}/VerificationCheck");
    let answer = owner
        .post(&app, &check, &[("To", &to), ("Code", &api_code)])
        .await;
    assert_eq!(answer.body["status"], "pending", "{}", answer.body);
    let answer = owner
        .post(&app, &check, &[("To", &to), ("Code", &code)])
        .await;
    assert_eq!(
        (
            answer.body["status"].as_str(),
            answer.body["valid"].as_bool()
        ),
        (Some("approved"), Some(true))
    );
    assert_eq!(app.verify(&to, &api_code).await.status, 200);
}

/// Concurrent first starts of one (Service, To): one verification (one SID), exactly one SMS
/// per start answered 201 (at most five), the others told to retry (20429) or 60203 with no
/// SMS; its code approves it. With vcode's resend cooldown on, exactly one SMS goes out.
async fn concurrent_first_starts_make_one_verification(backend: Backend) {
    for cooldown in [Duration::ZERO, Duration::from_secs(60)] {
        let (app, owner, _) = app_with_accounts_and(backend, |s| {
            s.otp.resend_cooldown = cooldown;
        })
        .await;
        let service = owner
            .create_service(&app, &[("FriendlyName", "Shop")])
            .await;
        let path = format!("/v2/Services/{service}/Verifications");
        for _ in 0..3 {
            let to = random_phone();
            let form = [("To", to.as_str()), ("Channel", "sms")];
            let starts = (0..12).map(|_| owner.post(&app, &path, &form));
            let answers = futures::future::join_all(starts).await;
            let bodies: Vec<&Value> = answers.iter().map(|a| &a.body).collect();
            let sent: Vec<&Answer> = answers.iter().filter(|a| a.status == 201).collect();
            assert!((1..=5).contains(&sent.len()), "{bodies:?}");
            let sid = &sent[0].body["sid"];
            assert!(sent.iter().all(|a| &a.body["sid"] == sid), "{bodies:?}");
            assert!(
                answers
                    .iter()
                    .filter(|a| a.status != 201)
                    .all(|a| matches!((a.status, a.code()), (429, 20429) | (429, 60203))),
                "{bodies:?}"
            );
            let codes = app.inbox(&to).await;
            assert_eq!(codes.len(), sent.len(), "one SMS a 201: {bodies:?}");
            assert!(codes.iter().all(|code| *code == codes[0]), "{codes:?}");
            if !cooldown.is_zero() {
                assert_eq!(sent.len(), 1, "{bodies:?}");
            }
            let fetched = owner
                .get(&app, &format!("{path}/{}", sid.as_str().unwrap()))
                .await;
            assert_eq!(
                fetched.body["send_code_attempts"].as_array().unwrap().len(),
                sent.len(),
                "{}",
                fetched.body
            );
            let check = format!("/v2/Services/{service}/VerificationCheck");
            let approved = owner
                .post(
                    &app,
                    &check,
                    &[
                        ("VerificationSid", sid.as_str().unwrap()),
                        ("Code", &codes[0]),
                    ],
                )
                .await;
            assert_eq!(approved.body["status"], "approved", "{}", approved.body);
        }
    }
}

/// A Service's name (or the start's `CustomFriendlyName`) is in its SMS, and its do-not-share
/// switch adds the warning, in the start's locale.
async fn a_services_name_and_warning_are_in_its_sms(backend: Backend) {
    let gateway = SmsGateway::start();
    let (app, owner, _) = app_with_accounts_and(backend, |s| s.sms = webhook(gateway.url())).await;
    let service = owner
        .create_service(&app, &[("FriendlyName", "Acme Bank")])
        .await;
    let path = format!("/v2/Services/{service}/Verifications");
    let to = random_phone();
    let started = owner
        .post(
            &app,
            &path,
            &[("To", &to), ("Channel", "sms"), ("Locale", "en")],
        )
        .await;
    assert_eq!(started.status, 201, "{}", started.body);
    let code = app.last_code(&to).await;
    let text = gateway.received().last().unwrap()["text"].clone();
    assert_eq!(
        text,
        format!("Your Acme Bank verification code is: {code}. It expires in 5 min.")
    );

    let switched = owner
        .post(
            &app,
            &format!("/v2/Services/{service}"),
            &[("DoNotShareWarningEnabled", "true")],
        )
        .await;
    assert_eq!(switched.status, 200, "{}", switched.body);
    let to = random_phone();
    let form = [
        ("To", to.as_str()),
        ("Channel", "sms"),
        ("Locale", "zh-CN"),
        ("CustomFriendlyName", "小店"),
    ];
    assert_eq!(owner.post(&app, &path, &form).await.status, 201);
    let code = app.last_code(&to).await;
    let text = gateway.received().last().unwrap()["text"].clone();
    assert_eq!(
        text,
        format!(
            "您的小店验证码是：{code}，5分钟内有效。请勿将验证码告诉任何人，我们的工作人员绝不会向您索要验证码。"
        )
    );
    let to = random_phone();
    let form = [("To", to.as_str()), ("Channel", "sms"), ("Locale", "en-GB")];
    assert_eq!(owner.post(&app, &path, &form).await.status, 201);
    let code = app.last_code(&to).await;
    let text = gateway.received().last().unwrap()["text"].clone();
    assert_eq!(
        text,
        format!(
            "Your Acme Bank verification code is: {code}. It expires in 5 min. Don't share this code with anyone; our employees will never ask for the code."
        )
    );
    // A name Twilio would refuse is refused, and nothing is sent.
    let to = random_phone();
    let long = "n".repeat(33);
    let form = [
        ("To", to.as_str()),
        ("Channel", "sms"),
        ("CustomFriendlyName", long.as_str()),
    ];
    let refused = owner.post(&app, &path, &form).await;
    assert_eq!((refused.status, refused.code()), (400, 60200));
    assert!(app.inbox(&to).await.is_empty());
    // /api/v1's texts are untouched.
    let to = random_phone();
    assert_eq!(app.send(&to).await.status, 200);
    let text = gateway.received().last().unwrap()["text"].clone();
    assert!(
        text.as_str().unwrap().starts_with("您的登录验证码是"),
        "{text}"
    );
}

/// vcode's own Service extensions: a code lifetime (`VcodeCodeTtl`) and texts per locale
/// (`VcodeTexts`), stored, shown, checked and used by the SMS and the code's expiry.
async fn a_services_own_lifetime_and_texts_reach_the_sms(backend: Backend) {
    let gateway = SmsGateway::start();
    let (app, owner, _) = app_with_accounts_and(backend, |s| s.sms = webhook(gateway.url())).await;
    let texts = json!({"en": "{name}: {code} ({minutes} min)", "zh-CN": "{name}验证码{code}"});
    let service = owner
        .create_service(
            &app,
            &[
                ("FriendlyName", "Acme"),
                ("VcodeCodeTtl", "120"),
                ("VcodeTexts", &texts.to_string()),
            ],
        )
        .await;
    let url = format!("/v2/Services/{service}");
    let shown = owner.get(&app, &url).await.body;
    assert_eq!(shown["vcode_code_ttl"], 120, "{shown}");
    assert_eq!(shown["vcode_texts"], texts, "{shown}");
    for (name, bad) in [
        ("VcodeCodeTtl", "59"),
        ("VcodeCodeTtl", "86401"),
        ("VcodeCodeTtl", "two"),
        ("VcodeTexts", r#"{"en": "no code"}"#),
        ("VcodeTexts", r#"{"en": "{code} {phone}"}"#),
        ("VcodeTexts", r#"{"not a locale!": "{code}"}"#),
        ("VcodeTexts", "[1]"),
    ] {
        let answer = owner.post(&app, &url, &[(name, bad)]).await;
        assert_eq!((answer.status, answer.code()), (400, 60200), "{name}={bad}");
    }
    assert_eq!(
        owner.get(&app, &url).await.body,
        shown,
        "a refusal changes nothing"
    );

    let path = format!("{url}/Verifications");
    for (locale, expected) in [
        ("en-US", "Acme: {code} (2 min)"),
        ("zh", "Acme验证码{code}"),
    ] {
        let to = random_phone();
        let form = [("To", to.as_str()), ("Channel", "sms"), ("Locale", locale)];
        let started = owner.post(&app, &path, &form).await;
        assert_eq!(started.status, 201, "{}", started.body);
        let code = app.last_code(&to).await;
        let text = gateway.received().last().unwrap()["text"].clone();
        assert_eq!(text, expected.replace("{code}", &code), "{locale}");
        // The code lives the Service's 120 s, not the server's 300.
        let sid = started.body["sid"].as_str().unwrap();
        let id = vcode::twilio_compat::sid::verification_id(sid).unwrap();
        // Where it leads, as its id tells the service (Redis keeps no index of a phone's id).
        let target = vcode::store::VerificationTarget {
            phone_e164: to.clone(),
            purpose: vcode::twilio_compat::sid::purpose_of(&service)
                .as_str()
                .to_owned(),
        };
        let record = app
            .store
            .codes
            .verification(&id, Some(&target))
            .await
            .unwrap()
            .expect("recorded");
        let left = record.expires_at_ms.saturating_sub(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64,
        );
        assert!((100_000..=120_000).contains(&left), "{left} ms left");
    }
    // A locale without a text of the Service's: the built-in one, named.
    let to = random_phone();
    let form = [("To", to.as_str()), ("Channel", "sms"), ("Locale", "fr")];
    assert_eq!(owner.post(&app, &path, &form).await.status, 201);
    let text = gateway.received().last().unwrap()["text"].clone();
    assert!(text.as_str().unwrap().contains("Acme"), "{text}");
    // Back to the server's lifetime and the built-in texts.
    let reset = owner
        .post(&app, &url, &[("VcodeCodeTtl", "0"), ("VcodeTexts", "{}")])
        .await;
    assert_eq!(reset.status, 200, "{}", reset.body);
    assert_eq!(reset.body["vcode_code_ttl"], Value::Null);
    assert_eq!(reset.body["vcode_texts"], json!({}));
}

/// `SkipSmsToLandlines`: a fixed line is refused with 60205 and gets no SMS; without it, the
/// same number (of a type vcode serves here) gets its SMS.
async fn skip_sms_to_landlines_refuses_fixed_lines(backend: Backend) {
    const FIXED_LINE: &str = "+390612345678";
    let (app, owner, _) = app_with_accounts_and(backend, |s| {
        s.abuse.allowed_regions = Regions::parse("CN,IT").unwrap();
        s.abuse.allowed_number_types =
            NumberTypes::parse("mobile,fixed_line_or_mobile,fixed_line").unwrap();
    })
    .await;
    let skipping = owner
        .create_service(
            &app,
            &[("FriendlyName", "Shop"), ("SkipSmsToLandlines", "true")],
        )
        .await;
    let refused = owner
        .post(
            &app,
            &format!("/v2/Services/{skipping}/Verifications"),
            &[("To", FIXED_LINE), ("Channel", "sms")],
        )
        .await;
    assert_eq!(
        refused.body,
        json!({
            "code": 60205,
            "message": "SMS is not supported by landline phone number",
            "more_info": "https://www.twilio.com/docs/errors/60205",
            "status": 400,
        })
    );
    assert!(app.inbox(FIXED_LINE).await.is_empty());
    // A mobile is served by the same Service.
    owner.start(&app, &skipping, &random_phone()).await;
    let serving = owner
        .create_service(&app, &[("FriendlyName", "Shop")])
        .await;
    owner.start(&app, &serving, FIXED_LINE).await;
    assert_eq!(app.inbox(FIXED_LINE).await.len(), 1);
}

/// The fraud guard's refusal of a prefix that never converts (its level, past a handful of
/// unexplained sends) is Twilio's 60410 (its Fraud Guard's code), with `Retry-After` (the first
/// strike's cool-off), and no SMS; a prefix whose codes are checked is still served.
async fn the_fraud_guards_refusal_is_60410(backend: Backend) {
    /// Unexplained unconverted sends a range without history may have (`VCODE_FRAUD_EVIDENCE`).
    const EVIDENCE: u64 = 5;
    let (app, owner, _) = app_with_accounts_and(backend, |s| {
        s.abuse = AbuseSettings::unlimited();
        s.fraud = FraudSettings {
            evidence: EVIDENCE,
            ..FraudSettings::default()
        };
    })
    .await;
    let service = owner
        .create_service(&app, &[("FriendlyName", "Shop")])
        .await;
    let number = |prefix: &str| {
        use rand::RngExt;
        format!(
            "+86{prefix}{:08}",
            rand::rng().random_range(0..100_000_000u32)
        )
    };
    let check = format!("/v2/Services/{service}/VerificationCheck");
    // 86139 converts; 86138 never does.
    for _ in 0..2 * EVIDENCE {
        let to = number("139");
        owner.start(&app, &service, &to).await;
        let code = app.last_code(&to).await;
        let approved = owner
            .post(&app, &check, &[("To", &to), ("Code", &code)])
            .await;
        assert_eq!(approved.body["status"], "approved", "{}", approved.body);
    }
    // Their conversions reach the levels in the background (a busy machine may take a while).
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    for _ in 0..EVIDENCE {
        owner.start(&app, &service, &number("138")).await;
    }
    let to = number("138");
    let refused = owner
        .post(
            &app,
            &format!("/v2/Services/{service}/Verifications"),
            &[("To", &to), ("Channel", "sms")],
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(
        refused.body,
        json!({
            "code": 60410,
            "message": "Verification delivery attempt blocked",
            "more_info": "https://www.twilio.com/docs/errors/60410",
            "status": 403,
        })
    );
    let wait: u64 = refused.retry_after().unwrap().parse().unwrap();
    assert!((14 * 60..=15 * 60).contains(&wait), "{wait}");
    assert!(app.inbox(&to).await.is_empty(), "no SMS");
    // The prefix stays refused (its block, in the store's step); the converting one is served.
    let next = number("138");
    let blocked = owner
        .post(
            &app,
            &format!("/v2/Services/{service}/Verifications"),
            &[("To", &next), ("Channel", "sms")],
        )
        .await;
    assert_eq!(
        (blocked.status, blocked.code()),
        (403, 60410),
        "{}",
        blocked.body
    );
    assert!(app.inbox(&next).await.is_empty(), "no SMS");
    owner.start(&app, &service, &number("139")).await;
    // Nothing is left to check: the refused start made no verification.
    let nothing = owner
        .post(&app, &check, &[("To", &to), ("Code", "123456")])
        .await;
    assert_eq!(
        (nothing.status, nothing.code()),
        (404, 20404),
        "{}",
        nothing.body
    );
}

/// The paths split by hand under `/v2/Services` answer as the five resources did: each
/// method its handler or 405 with `Allow`, any other path the JSON 404; SIDs percent-decoded;
/// absolute URLs from `Host`, or from `X-Forwarded-*` when a request carries them (actix's
/// `ConnectionInfo`, as before); metrics name the route's pattern.
async fn routes_methods_and_urls_are_the_resources(backend: Backend) {
    let (app, owner, _) = app_with_accounts(backend).await;
    let service = owner
        .create_service(&app, &[("FriendlyName", "Shop")])
        .await;
    for (method, path, allow) in [
        ("DELETE", "/v2/Services".to_owned(), "GET, POST"),
        (
            "PUT",
            format!("/v2/Services/{service}"),
            "GET, POST, DELETE",
        ),
        (
            "GET",
            format!("/v2/Services/{service}/Verifications"),
            "POST",
        ),
        (
            "GET",
            format!("/v2/Services/{service}/VerificationCheck"),
            "POST",
        ),
        (
            "DELETE",
            format!("/v2/Services/{service}/Verifications/VE{}", "0".repeat(32)),
            "GET, POST",
        ),
    ] {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let response = app
            .client
            .request(method.clone(), app.url(&path))
            .basic_auth(&owner.sid, Some(&owner.token))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 405, "{method} {path}");
        assert_eq!(response.headers()["allow"], allow, "{method} {path}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["code"], 40500, "{body}");
    }
    for path in [
        "/v2/Services/".to_owned(),
        "/v2/ServicesX".to_owned(),
        "/v2/Services//Verifications".to_owned(),
        format!("/v2/Services/{service}/"),
        format!("/v2/Services/{service}/Nothing"),
        format!("/v2/Services/{service}/Verifications/"),
        format!("/v2/Services/{service}/Verifications/VE1/More"),
    ] {
        let answer = owner.get(&app, &path).await;
        assert_eq!(
            (answer.status, answer.code()),
            (404, 40400),
            "{path}: {}",
            answer.body
        );
    }
    // A percent-encoded SID reads as its characters.
    let escaped = format!("%{:02X}{}", service.as_bytes()[0], &service[1..]);
    let fetched = owner.get(&app, &format!("/v2/Services/{escaped}")).await;
    assert_eq!(fetched.body["sid"], service.as_str(), "{}", fetched.body);

    let host = app.url("").trim_start_matches("http://").to_owned();
    let url = |answer: &Answer| answer.body["url"].as_str().unwrap().to_owned();
    assert_eq!(
        url(&fetched),
        format!("http://{host}/v2/Services/{service}")
    );
    let forwarded = app
        .client
        .get(app.url(&format!("/v2/Services/{service}")))
        .basic_auth(&owner.sid, Some(&owner.token))
        .header("X-Forwarded-Host", "verify.example")
        .header("X-Forwarded-Proto", "https")
        .send()
        .await
        .unwrap();
    let body: Value = forwarded.json().await.unwrap();
    assert_eq!(
        body["url"],
        format!("https://verify.example/v2/Services/{service}")
    );

    let to = random_phone();
    let started = owner.start(&app, &service, &to).await;
    let sid = started.body["sid"].as_str().unwrap();
    assert_eq!(
        url(&started),
        format!("http://{host}/v2/Services/{service}/Verifications/{sid}")
    );
    // The start's answer (written by hand): Twilio's shape, every property.
    let attempts = started.body["send_code_attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "{}", started.body);
    let keys: Vec<&str> = started
        .body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut expected = vec![
        "sid",
        "service_sid",
        "account_sid",
        "to",
        "channel",
        "status",
        "valid",
        "lookup",
        "amount",
        "payee",
        "send_code_attempts",
        "date_created",
        "date_updated",
        "sna",
        "url",
    ];
    let mut keys = keys;
    keys.sort_unstable();
    expected.sort_unstable();
    assert_eq!(keys, expected);
    assert_eq!(
        (
            &started.body["status"],
            &started.body["valid"],
            &started.body["lookup"],
            &started.body["channel"],
            &started.body["account_sid"],
        ),
        (
            &json!("pending"),
            &json!(false),
            &json!({}),
            &json!("sms"),
            &json!(owner.sid),
        )
    );
    assert_eq!(started.body["amount"], Value::Null);
    assert_eq!(started.body["to"], to.as_str());
    assert_eq!(attempts[0]["channel"], "sms");
    assert!(
        attempts[0]["attempt_sid"]
            .as_str()
            .unwrap()
            .starts_with("VL")
    );
    assert_eq!(attempts[0]["time"], started.body["date_created"]);
    // A Host with a quote in it still makes JSON.
    let quoted = app
        .client
        .get(app.url(&format!("/v2/Services/{service}/Verifications/{sid}")))
        .basic_auth(&owner.sid, Some(&owner.token))
        .header("Host", "quoted\"host")
        .send()
        .await
        .unwrap();
    let body: Value = quoted.json().await.unwrap();
    assert_eq!(
        body["url"],
        format!("http://quoted\"host/v2/Services/{service}/Verifications/{sid}")
    );
    let metrics = app
        .client
        .get(app.admin_url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for pattern in [
        "/v2/Services",
        "/v2/Services/{sid}",
        "/v2/Services/{sid}/Verifications",
    ] {
        assert!(
            metrics.contains(&format!("route=\"{pattern}\"")),
            "{pattern} not in the metrics"
        );
    }
}

/// A credential verified once is believed again (by its digest), a wrong secret of the same
/// account never, before or after.
async fn remembered_credentials_never_let_a_wrong_secret_in(backend: Backend) {
    let (app, owner, other) = app_with_accounts(backend).await;
    let wrong = Account {
        sid: owner.sid.clone(),
        token: "0".repeat(32),
    };
    for _ in 0..3 {
        assert_eq!(owner.get(&app, "/v2/Services").await.status, 200);
        let refused = wrong.get(&app, "/v2/Services").await;
        assert_eq!((refused.status, refused.code()), (401, 20003));
        let mixed = Account {
            sid: owner.sid.clone(),
            token: other.token.clone(),
        };
        assert_eq!(mixed.get(&app, "/v2/Services").await.status, 401);
        assert_eq!(other.get(&app, "/v2/Services").await.status, 200);
    }
}

on_every_store!(
    an_email_verification_is_mailed_checked_resent_and_canceled,
    a_refused_mail_is_30008_and_no_relay_is_60217,
    the_fraud_guard_holds_a_mail_domain_with_60410,
    routes_methods_and_urls_are_the_resources,
    remembered_credentials_never_let_a_wrong_secret_in,
    concurrent_first_starts_make_one_verification,
    a_services_name_and_warning_are_in_its_sms,
    a_services_own_lifetime_and_texts_reach_the_sms,
    skip_sms_to_landlines_refuses_fixed_lines,
    the_fraud_guards_refusal_is_60410,
    another_accounts_service_is_not_found,
    credentials_are_twilios,
    concurrent_resends_never_pass_five_sends,
    concurrent_service_updates_are_all_kept,
    a_services_code_length_and_purpose_reach_the_send,
);

/// The subject and the text of a received mail, as Python's email package reads them.
fn subject_and_text(mail: &Value) -> (String, String) {
    let read = check(mail["data"].as_str().unwrap(), None);
    let subject = read["headers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|header| header[0] == "Subject")
        .expect("a Subject header")[1]
        .as_str()
        .unwrap()
        .to_owned();
    (subject, read["text"].as_str().unwrap().to_owned())
}

/// `Channel=email` through the same send as /api/v1's: Twilio's verification resource with
/// `channel: email`, the address echoed (its domain lower-cased), the code read from the mail
/// the server received; checked by `To` (in any case) and by `VerificationSid`; a re-send mails
/// the same code under the same SID, the sixth send is 60203 and mails nothing; a cancel ends
/// it; the Service's name and lifetime and the start's `CustomFriendlyName` and `Locale` reach
/// the mail; `ChannelConfiguration` is accepted when it is JSON; malformed or mismatched
/// destinations are 60200 and mail nothing.
async fn an_email_verification_is_mailed_checked_resent_and_canceled(backend: Backend) {
    if !tools_present("Twilio email") {
        return;
    }
    let server = MailServer::start("plain", &[]);
    let email = mailing_settings(&server, None, &[]);
    let (app, owner, _) = app_with_accounts_and(backend, move |s| s.email = email).await;
    let service = owner
        .create_service(
            &app,
            &[("FriendlyName", "Acme Mail"), ("VcodeCodeTtl", "120")],
        )
        .await;
    let path = format!("/v2/Services/{service}/Verifications");
    let check_path = format!("/v2/Services/{service}/VerificationCheck");
    let n = rand::random::<u32>();

    let address = format!("Ann.Lee+{n}@Example.COM");
    let shown = format!("Ann.Lee+{n}@example.com");
    let form = [
        ("To", address.as_str()),
        ("Channel", "email"),
        ("Locale", "en"),
    ];
    let started = owner.post(&app, &path, &form).await;
    assert_eq!(started.status, 201, "{}", started.body);
    let body = &started.body;
    assert_eq!(body["channel"], "email", "{body}");
    assert_eq!(body["to"], shown.as_str());
    assert_eq!(body["status"], "pending");
    assert_eq!(body["valid"], false);
    assert_eq!(body["lookup"], json!({}));
    assert_eq!(body["send_code_attempts"].as_array().unwrap().len(), 1);
    assert_eq!(body["send_code_attempts"][0]["channel"], "email");
    let sid = body["sid"].as_str().unwrap().to_owned();
    assert!(sid.starts_with("VE") && sid.len() == 34, "{sid}");
    let mail = server.next();
    assert_eq!(mail["rcpt_tos"], json!([shown]));
    let (subject, text) = subject_and_text(&mail);
    assert_eq!(subject, "Your Acme Mail verification code");
    assert!(text.contains("It expires in 2 minutes."), "{text}");
    let code = code_in(&text);
    let wrong = if code == "000000" { "111111" } else { "000000" };
    let pending = owner
        .post(&app, &check_path, &[("To", &shown), ("Code", wrong)])
        .await;
    assert_eq!(pending.status, 200, "{}", pending.body);
    assert_eq!(
        (&pending.body["status"], &pending.body["valid"]),
        (&json!("pending"), &json!(false))
    );
    let lower = address.to_lowercase();
    let approved = owner
        .post(&app, &check_path, &[("To", &lower), ("Code", &code)])
        .await;
    assert_eq!(approved.status, 200, "{}", approved.body);
    assert_eq!(approved.body["status"], "approved", "{}", approved.body);
    assert_eq!(approved.body["valid"], true);
    assert_eq!(approved.body["channel"], "email");
    assert_eq!(approved.body["to"], shown.as_str());
    assert_eq!(approved.body["sid"], sid.as_str());
    let fetched = owner.get(&app, &format!("{path}/{sid}")).await;
    assert_eq!(fetched.status, 200, "{}", fetched.body);
    assert_eq!(fetched.body["status"], "approved");
    assert_eq!(fetched.body["channel"], "email");
    assert_eq!(fetched.body["to"], shown.as_str());
    assert_eq!(fetched.body["send_code_attempts"][0]["channel"], "email");

    // Re-sends: the same SID and the same code in every mail, five sends, then 60203.
    let address = format!("bob{n}@example.org");
    let form = [("To", address.as_str()), ("Channel", "email")];
    let first = owner.post(&app, &path, &form).await;
    assert_eq!(first.status, 201, "{}", first.body);
    let first_sid = first.body["sid"].as_str().unwrap().to_owned();
    let code = code_in(&subject_and_text(&server.next()).1);
    for sends in 2..=5 {
        let again = owner.post(&app, &path, &form).await;
        assert_eq!(again.status, 201, "{}", again.body);
        assert_eq!(again.body["sid"], first_sid.as_str());
        let attempts = again.body["send_code_attempts"].as_array().unwrap().clone();
        assert_eq!(attempts.len(), sends);
        assert!(attempts.iter().all(|attempt| attempt["channel"] == "email"));
        assert_eq!(code_in(&subject_and_text(&server.next()).1), code);
    }
    let sixth = owner.post(&app, &path, &form).await;
    assert_eq!((sixth.status, sixth.code()), (429, 60203), "{}", sixth.body);
    assert!(server.nothing_received(), "the sixth send mailed");
    let approved = owner
        .post(
            &app,
            &check_path,
            &[("VerificationSid", &first_sid), ("Code", &code)],
        )
        .await;
    assert_eq!(approved.body["status"], "approved", "{}", approved.body);
    assert_eq!(approved.body["to"], address.as_str());

    // Canceled: its code no longer checks.
    let address = format!("carol{n}@example.org");
    let form = [("To", address.as_str()), ("Channel", "email")];
    let started = owner.post(&app, &path, &form).await;
    assert_eq!(started.status, 201, "{}", started.body);
    let sid = started.body["sid"].as_str().unwrap().to_owned();
    let code = code_in(&subject_and_text(&server.next()).1);
    let canceled = owner
        .post(&app, &format!("{path}/{sid}"), &[("Status", "canceled")])
        .await;
    assert_eq!(canceled.body["status"], "canceled", "{}", canceled.body);
    assert_eq!(canceled.body["channel"], "email");
    let gone = owner
        .post(&app, &check_path, &[("To", &address), ("Code", &code)])
        .await;
    assert_eq!((gone.status, gone.code()), (404, 20404), "{}", gone.body);

    // The start's name and locale; a ChannelConfiguration that is JSON is accepted (ignored).
    let address = format!("dave{n}@example.org");
    let form = [
        ("To", address.as_str()),
        ("Channel", "email"),
        ("Locale", "zh-CN"),
        ("CustomFriendlyName", "小店"),
        (
            "ChannelConfiguration",
            r#"{"template_id": "d-1", "from": "x@example.net", "from_name": "X", "substitutions": {"a": "b"}}"#,
        ),
    ];
    let started = owner.post(&app, &path, &form).await;
    assert_eq!(started.status, 201, "{}", started.body);
    let mail = server.next();
    assert_eq!(mail["mail_from"], "no-reply@acme.example");
    let (subject, text) = subject_and_text(&mail);
    assert_eq!(subject, "您的小店验证码");
    assert!(text.contains("2分钟内有效"), "{text}");

    // Malformed or mismatched destinations, a ChannelConfiguration that is not JSON: 60200,
    // and no mail.
    let phone = random_phone();
    let other = format!("erin{n}@example.org");
    for form in [
        [("To", "erin@"), ("Channel", "email")],
        [
            ("To", "erin@example.org\r\nBcc: x@example.net"),
            ("Channel", "email"),
        ],
        [("To", phone.as_str()), ("Channel", "email")],
        [("To", other.as_str()), ("Channel", "sms")],
    ] {
        let refused = owner.post(&app, &path, &form).await;
        assert_eq!(
            (refused.status, refused.code()),
            (400, 60200),
            "{form:?}: {}",
            refused.body
        );
    }
    let form = [
        ("To", other.as_str()),
        ("Channel", "email"),
        ("ChannelConfiguration", "template_id=d-1"),
    ];
    let refused = owner.post(&app, &path, &form).await;
    assert_eq!(
        (refused.status, refused.code()),
        (400, 60200),
        "{}",
        refused.body
    );
    assert!(server.nothing_received(), "a refused start mailed");
    let nothing = owner
        .post(&app, &check_path, &[("To", &other), ("Code", "123456")])
        .await;
    assert_eq!(
        (nothing.status, nothing.code()),
        (404, 20404),
        "{}",
        nothing.body
    );
}

/// A mail the relay refuses (554) is Twilio's 30008 at 502 and leaves no verification: its
/// check is not found and a retry mails again (not 60203, not "busy"). Without a relay (and
/// not in dev mode), `Channel=email` is Twilio's 60217.
async fn a_refused_mail_is_30008_and_no_relay_is_60217(backend: Backend) {
    if !tools_present("Twilio email refusals") {
        return;
    }
    let server = MailServer::start("refuse_data", &[]);
    let email = mailing_settings(&server, None, &[]);
    let (app, owner, _) = app_with_accounts_and(backend, move |s| s.email = email).await;
    let service = owner
        .create_service(&app, &[("FriendlyName", "Acme")])
        .await;
    let path = format!("/v2/Services/{service}/Verifications");
    let address = format!("frank{}@example.org", rand::random::<u32>());
    let form = [("To", address.as_str()), ("Channel", "email")];
    for _ in 0..2 {
        let refused = owner.post(&app, &path, &form).await;
        assert_eq!(
            (refused.status, refused.code()),
            (502, 30008),
            "{}",
            refused.body
        );
        assert_eq!(refused.body["message"], "The email could not be delivered");
        server.next();
    }
    let check_path = format!("/v2/Services/{service}/VerificationCheck");
    let nothing = owner
        .post(&app, &check_path, &[("To", &address), ("Code", "123456")])
        .await;
    assert_eq!(
        (nothing.status, nothing.code()),
        (404, 20404),
        "{}",
        nothing.body
    );

    let (app, owner, _) = app_with_accounts_and(backend, |s| s.dev_mode = false).await;
    let service = owner
        .create_service(&app, &[("FriendlyName", "Acme")])
        .await;
    let path = format!("/v2/Services/{service}/Verifications");
    let off = owner.post(&app, &path, &form).await;
    assert_eq!((off.status, off.code()), (400, 60217), "{}", off.body);
    let malformed = owner
        .post(&app, &path, &[("To", "frank@"), ("Channel", "email")])
        .await;
    assert_eq!(
        (malformed.status, malformed.code()),
        (400, 60200),
        "{}",
        malformed.body
    );
}

/// The codes dev mode "mailed" to `address`, oldest first.
async fn outbox_codes(app: &TestApp, address: &str) -> Vec<String> {
    let outbox = app
        .request(
            app.client
                .get(app.url(vcode_wire::paths::DEV_INBOX))
                .query(&[("email", address)]),
        )
        .await;
    outbox.body["data"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["code"].as_str().unwrap().to_owned())
        .collect()
}

/// `Channel=email` passes the fraud guard as /api/v1's email does: a mail domain whose codes
/// are never checked is refused by its `@domain` level (60410, `Retry-After`, no mail, nothing to
/// check) while one whose codes are checked still gets its mail. Dev mode's log mailer.
async fn the_fraud_guard_holds_a_mail_domain_with_60410(backend: Backend) {
    let (app, owner, _) = app_with_accounts_and(backend, |s| {
        s.abuse = AbuseSettings::unlimited();
        s.fraud = FraudSettings::default();
    })
    .await;
    let service = owner
        .create_service(&app, &[("FriendlyName", "Shop")])
        .await;
    let path = format!("/v2/Services/{service}/Verifications");
    let check = format!("/v2/Services/{service}/VerificationCheck");
    let tag = rand::random::<u32>();
    let (good, bad) = (format!("good{tag}.example"), format!("bad{tag}.example"));
    let start = |address: String| {
        let (owner, app, path) = (&owner, &app, &path);
        async move {
            owner
                .post(app, path, &[("To", &address), ("Channel", "email")])
                .await
        }
    };
    for i in 0..10 {
        let address = format!("user{i}@{good}");
        let started = start(address.clone()).await;
        assert_eq!(started.status, 201, "{}", started.body);
        let code = outbox_codes(&app, &address).await.pop().unwrap();
        let approved = owner
            .post(&app, &check, &[("To", &address), ("Code", &code)])
            .await;
        assert_eq!(approved.body["status"], "approved", "{}", approved.body);
    }
    // A domain without history, never verified: refused by its level after a handful.
    let mut paid = 0;
    while paid < 60 {
        let started = start(format!("bot{paid}@{bad}")).await;
        if started.status != 201 {
            break;
        }
        paid += 1;
    }
    assert!((9..=12).contains(&paid), "paid {paid}");
    let held = format!("bot-next@{bad}");
    let refused = start(held.clone()).await;
    assert_eq!(
        (refused.status, refused.code()),
        (403, 60410),
        "{}",
        refused.body
    );
    assert!(refused.retry_after().is_some());
    assert!(outbox_codes(&app, &held).await.is_empty(), "no mail");
    let nothing = owner
        .post(&app, &check, &[("To", &held), ("Code", "123456")])
        .await;
    assert_eq!(
        (nothing.status, nothing.code()),
        (404, 20404),
        "{}",
        nothing.body
    );
    let other = start(format!("user-next@{good}")).await;
    assert_eq!(
        other.status, 201,
        "the converting domain is not held: {}",
        other.body
    );
}
