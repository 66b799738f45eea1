//! The Twilio-compatible paths over HTTP on every store: accounts see only their own Services,
//! concurrent re-sends never pass Twilio's five sends, concurrent Service updates are all kept,
//! a Service's code length and purpose reach the send, and credentials are Twilio's.
//! (The official SDKs' whole flow, through Prism: twilio_sdk.rs.)

use std::time::Duration;

use serde_json::Value;
use vcode::twilio_compat::{TwilioAccounts, accounts};

use crate::support::{Backend, TestApp, random_phone, spawn_app_with};

/// One account's HTTP Basic credentials.
#[derive(Clone)]
struct Account {
    sid: String,
    token: String,
}

struct Answer {
    status: u16,
    body: Value,
}

impl Answer {
    fn code(&self) -> i64 {
        self.body["code"].as_i64().unwrap_or_default()
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
        let text = response.text().await.unwrap();
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text}"))
        };
        Answer { status, body }
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
    let (first, second) = (accounts::generate(), accounts::generate());
    let entries = format!("{}\n{}", first.2, second.2);
    let app = spawn_app_with(backend, |settings| {
        settings.twilio_accounts = Some(TwilioAccounts::parse(&entries).unwrap());
        settings.otp.resend_cooldown = Duration::ZERO;
        settings.abuse.sends_per_ip_hour = 0;
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

on_every_store!(
    another_accounts_service_is_not_found,
    credentials_are_twilios,
    concurrent_resends_never_pass_five_sends,
    concurrent_service_updates_are_all_kept,
    a_services_code_length_and_purpose_reach_the_send,
);
