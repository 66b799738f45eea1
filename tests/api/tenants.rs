//! Tenants and their end users (issue 38): an app calling from one server address, by API key
//! on `/api/v1` or as a Twilio account on `/v2`, is limited by its own budget, never by its
//! server address's client budget; the end users it names are limited as browsers are; a
//! guesser typing into the app locks no one out; a tenant's verifications are reachable only
//! with its credentials; wrong credentials from one address are slowed.

use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use vcode::api_keys::{ApiKeySettings, ApiKeys, Operation};
use vcode::settings::Settings;
use vcode::twilio_compat::{TwilioAccounts, accounts, sid};
use vcode_wire::{SendRequest, VerifyRequest, paths};

use crate::support::app::Answer;
use crate::support::{Backend, TestApp, random_phone, spawn_app_with};

const KEY: &str = "vck_tenant-key-0123456789abcdefghijklmnopqr";
const OTHER_KEY: &str = "vck_other-tenant-0123456789abcdefghijklmno";

/// Every default limit on (the tests' own settings turn none off), with an API key for sends
/// and verifies, and one Twilio account.
async fn app_with_tenants(
    backend: Backend,
    also: impl FnOnce(&mut Settings),
) -> (TestApp, (String, String)) {
    let entry = format!("shop:{}", hex::encode(Sha256::digest(KEY)));
    let (account_sid, token, line) = accounts::generate();
    let app = spawn_app_with(backend, |s| {
        s.api_key = ApiKeySettings {
            required: vec![Operation::Send, Operation::Verify],
        };
        s.api_keys = Some(ApiKeys::parse(&entry).unwrap());
        s.twilio_accounts = Some(TwilioAccounts::parse(&line).unwrap());
        s.otp.resend_cooldown = Duration::ZERO;
        also(s);
    })
    .await;
    (app, (account_sid, token))
}

async fn keyed(app: &TestApp, path: &str, body: &impl serde::Serialize) -> Answer {
    app.request(app.client.post(app.url(path)).bearer_auth(KEY).json(body))
        .await
}

fn send_for_end_user(phone: &str, end_user: Value) -> Value {
    let mut body = serde_json::to_value(SendRequest::new(phone)).unwrap();
    body.as_object_mut()
        .unwrap()
        .extend(end_user.as_object().unwrap().clone());
    body
}

async fn twilio(
    app: &TestApp,
    (sid, token): &(String, String),
    method: reqwest::Method,
    path: &str,
    form: &[(&str, &str)],
) -> (u16, Value, Option<String>) {
    let response = app
        .client
        .request(method, app.url(path))
        .basic_auth(sid, Some(token))
        .form(form)
        .send()
        .await
        .expect("the app answers");
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|value| value.to_str().unwrap().to_owned());
    let body = response.json().await.unwrap_or(Value::Null);
    (status, body, retry_after)
}

/// A new Service of `account`: its SID.
async fn create_service(app: &TestApp, account: &(String, String)) -> String {
    let (status, body, _) = twilio(
        app,
        account,
        reqwest::Method::POST,
        "/v2/Services",
        &[("FriendlyName", "Shop")],
    )
    .await;
    assert_eq!(status, 201, "{body}");
    body["sid"].as_str().unwrap().to_owned()
}

async fn an_api_key_tenant_is_not_limited_by_its_server_address(backend: Backend) {
    let (app, _) = app_with_tenants(backend, |_| {}).await;
    let quota = vcode::settings::AbuseSettings::default().sends_per_ip_hour as usize;
    // Past the client budget of the one address every request comes from: unnamed users, then
    // 200 end users named by their addresses, each verified.
    for _ in 0..quota + 5 {
        let sent = keyed(&app, paths::OTP_SEND, &SendRequest::new(random_phone())).await;
        assert_eq!(sent.status, 200, "{sent:?}");
    }
    for user in 0..200u32 {
        let phone = random_phone();
        let end_user = json!({ "end_user_ip": format!("198.18.{}.{}", user / 250, user % 250) });
        let sent = keyed(
            &app,
            paths::OTP_SEND,
            &send_for_end_user(&phone, end_user.clone()),
        )
        .await;
        assert_eq!(sent.status, 200, "{user}: {sent:?}");
        let mut verify = serde_json::to_value(VerifyRequest::with_id(
            sent.verification_id(),
            app.last_code(&phone).await,
        ))
        .unwrap();
        verify["end_user_ip"] = end_user["end_user_ip"].clone();
        let verified = keyed(&app, paths::OTP_VERIFY, &verify).await;
        assert_eq!(verified.status, 200, "{user}: {verified:?}");
    }
    // Its users' sends did not spend the browsers' budget of that address: a browser there
    // still sends (the API key is required for sends here, so a second app without keys).
    let (browser_app, _) = app_with_tenants(backend, |s| {
        s.api_key = ApiKeySettings::default();
        s.api_keys = None;
    })
    .await;
    let sent = browser_app.send(&random_phone()).await;
    assert_eq!(sent.status, 200, "{sent:?}");
}

async fn an_end_user_is_limited_as_a_browser_and_alone(backend: Backend) {
    let (app, _) = app_with_tenants(backend, |s| s.abuse.sends_per_ip_hour = 3).await;
    let alice = json!({"end_user_ip": "203.0.113.9"});
    for _ in 0..3 {
        let sent = keyed(
            &app,
            paths::OTP_SEND,
            &send_for_end_user(&random_phone(), alice.clone()),
        )
        .await;
        assert_eq!(sent.status, 200, "{sent:?}");
    }
    let refused = keyed(
        &app,
        paths::OTP_SEND,
        &send_for_end_user(&random_phone(), alice),
    )
    .await;
    assert_eq!(
        (refused.status, refused.code()),
        (429, 42902),
        "{refused:?}"
    );
    // Another end user of the same tenant, by address or by the tenant's own key, goes on.
    for other in [
        json!({"end_user_ip": "203.0.113.10"}),
        json!({"end_user_id": "user-42"}),
    ] {
        let sent = keyed(
            &app,
            paths::OTP_SEND,
            &send_for_end_user(&random_phone(), other),
        )
        .await;
        assert_eq!(sent.status, 200, "{sent:?}");
    }
    // One IPv6 end user is its /64, as a browser is.
    for (index, address) in ["2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2::3"]
        .into_iter()
        .enumerate()
    {
        let sent = keyed(
            &app,
            paths::OTP_SEND,
            &send_for_end_user(&random_phone(), json!({ "end_user_ip": address })),
        )
        .await;
        assert_eq!(sent.status, 200, "{index}: {sent:?}");
    }
    let refused = keyed(
        &app,
        paths::OTP_SEND,
        &send_for_end_user(&random_phone(), json!({"end_user_ip": "2001:db8:1:2::ff"})),
    )
    .await;
    assert_eq!(refused.code(), 42902, "{refused:?}");
}

async fn end_user_fields_need_an_api_key_and_a_valid_value(backend: Backend) {
    let (app, _) = app_with_tenants(backend, |s| {
        s.api_key = ApiKeySettings {
            required: vec![Operation::Verify],
        };
    })
    .await;
    let phone = random_phone();
    for end_user in [
        json!({"end_user_ip": "203.0.113.9"}),
        json!({"end_user_id": "user-42"}),
    ] {
        let refused = app
            .post_json(paths::OTP_SEND, &send_for_end_user(&phone, end_user))
            .await;
        assert_eq!(
            (refused.status, refused.code()),
            (400, 40000),
            "{refused:?}"
        );
    }
    for end_user in [
        json!({"end_user_ip": "not an address"}),
        json!({"end_user_id": "has space"}),
        json!({"end_user_id": ""}),
        json!({"end_user_ip": "203.0.113.9", "end_user_id": "user-42"}),
    ] {
        let refused = keyed(&app, paths::OTP_SEND, &send_for_end_user(&phone, end_user)).await;
        assert_eq!(
            (refused.status, refused.code()),
            (400, 40000),
            "{refused:?}"
        );
    }
    // Nothing was sent by any of them.
    assert!(app.inbox(&phone).await.is_empty());
}

/// A guesser typing wrong codes into the app spends only the attempts of the verifications it
/// started; the owner's next verification approves with the right code, by API key and through
/// a Twilio Service.
async fn a_guesser_through_a_tenant_locks_no_one_out(backend: Backend) {
    let (app, account) = app_with_tenants(backend, |_| {}).await;
    let phone = random_phone();
    let failures = vcode::settings::AbuseSettings::default().failed_verifies_per_client_day;
    // Two verifications' worth of wrong codes, as many as the per-client failure quota.
    for _ in 0..failures.div_ceil(5) {
        let id = keyed(&app, paths::OTP_SEND, &SendRequest::new(&phone))
            .await
            .verification_id();
        for _ in 0..5 {
            let wrong = keyed(
                &app,
                paths::OTP_VERIFY,
                &VerifyRequest::with_id(&id, "000000"),
            )
            .await;
            assert!(matches!(wrong.code(), 40010 | 42901), "{wrong:?}");
        }
    }
    let id = keyed(&app, paths::OTP_SEND, &SendRequest::new(&phone))
        .await
        .verification_id();
    let code = app.last_code(&phone).await;
    let approved = keyed(&app, paths::OTP_VERIFY, &VerifyRequest::with_id(&id, &code)).await;
    assert_eq!(approved.status, 200, "{approved:?}");

    // The same through a Twilio Service: ten wrong checks, then the owner's code approves.
    let service = create_service(&app, &account).await;
    let phone = random_phone();
    let start = format!("/v2/Services/{service}/Verifications");
    let check = format!("/v2/Services/{service}/VerificationCheck");
    for _ in 0..2 {
        let (status, body, _) = twilio(
            &app,
            &account,
            reqwest::Method::POST,
            &start,
            &[("To", &phone), ("Channel", "sms")],
        )
        .await;
        assert_eq!(status, 201, "{body}");
        for _ in 0..5 {
            let (status, body, _) = twilio(
                &app,
                &account,
                reqwest::Method::POST,
                &check,
                &[("To", &phone), ("Code", "000000")],
            )
            .await;
            assert!(status == 200 || body["code"] == 60202, "{status} {body}");
        }
    }
    let (status, body, _) = twilio(
        &app,
        &account,
        reqwest::Method::POST,
        &start,
        &[("To", &phone), ("Channel", "sms")],
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let code = app.last_code(&phone).await;
    let (status, body, _) = twilio(
        &app,
        &account,
        reqwest::Method::POST,
        &check,
        &[("To", &phone), ("Code", &code)],
    )
    .await;
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("approved")),
        "{body}"
    );
}

/// A guesser's end user is stopped by the per-client failure quota, another end user is not.
async fn a_named_guesser_is_stopped_alone(backend: Backend) {
    let (app, _) = app_with_tenants(backend, |_| {}).await;
    let phone = random_phone();
    let failures = vcode::settings::AbuseSettings::default().failed_verifies_per_client_day;
    let guesser = json!({"end_user_id": "guesser"});
    let mut refused = None;
    for _ in 0..failures.div_ceil(5) + 1 {
        let id = keyed(&app, paths::OTP_SEND, &SendRequest::new(&phone))
            .await
            .verification_id();
        for _ in 0..5 {
            let mut body = serde_json::to_value(VerifyRequest::with_id(&id, "000000")).unwrap();
            body["end_user_id"] = guesser["end_user_id"].clone();
            let wrong = keyed(&app, paths::OTP_VERIFY, &body).await;
            if wrong.code() == 42902 {
                refused = Some(wrong);
            }
        }
    }
    assert!(refused.is_some(), "the guesser's failure quota held it");
    let id = keyed(&app, paths::OTP_SEND, &SendRequest::new(&phone))
        .await
        .verification_id();
    let code = app.last_code(&phone).await;
    let mut body = serde_json::to_value(VerifyRequest::with_id(&id, &code)).unwrap();
    body["end_user_id"] = json!("owner");
    let approved = keyed(&app, paths::OTP_VERIFY, &body).await;
    assert_eq!(approved.status, 200, "{approved:?}");
}

/// A Twilio Service's verification, its `VE…` SID turned into a vcode id, is unknown to the
/// `/api/v1` routes (status, cancel, verify), and nothing happens to it; an `/api/v1`
/// verification is unknown to `/v2`.
async fn a_tenants_verifications_belong_to_it(backend: Backend) {
    let (app, account) = app_with_tenants(backend, |s| {
        // Open routes: only the ownership stands between a public caller and the id.
        s.api_key = ApiKeySettings::default();
        s.api_keys = None;
    })
    .await;
    let service = create_service(&app, &account).await;
    let phone = random_phone();
    let (_, started, _) = twilio(
        &app,
        &account,
        reqwest::Method::POST,
        &format!("/v2/Services/{service}/Verifications"),
        &[("To", &phone), ("Channel", "sms")],
    )
    .await;
    let ve = started["sid"].as_str().unwrap().to_owned();
    let id = sid::verification_id(&ve).unwrap().as_str().to_owned();
    let code = app.last_code(&phone).await;
    let status = app.get(&paths::verification(&id)).await;
    assert_eq!((status.status, status.code()), (404, 40401), "{status:?}");
    let cancel = app
        .post_json(&paths::verification_cancel(&id), &json!({}))
        .await;
    assert_eq!((cancel.status, cancel.code()), (404, 40401), "{cancel:?}");
    for wrong in [
        "000000",
        "000000",
        "000000",
        "000000",
        "000000",
        code.as_str(),
    ] {
        let verify = app.verify_id(&id, wrong).await;
        assert_eq!((verify.status, verify.code()), (404, 40401), "{verify:?}");
    }
    // The account's verification is untouched: pending with all its attempts, and its code
    // approves it.
    let (_, fetched, _) = twilio(
        &app,
        &account,
        reqwest::Method::GET,
        &format!("/v2/Services/{service}/Verifications/{ve}"),
        &[],
    )
    .await;
    assert_eq!(fetched["status"], "pending", "{fetched}");
    let (_, checked, _) = twilio(
        &app,
        &account,
        reqwest::Method::POST,
        &format!("/v2/Services/{service}/VerificationCheck"),
        &[("VerificationSid", &ve), ("Code", &code)],
    )
    .await;
    assert_eq!(checked["status"], "approved", "{checked}");

    // And the reverse: an /api/v1 verification's SID is unknown to the account's Service.
    let own = app.send_id(&random_phone()).await;
    let own_sid = sid::of_verification(&vcode::domain::VerificationId::parse(&own).unwrap());
    let (status, body, _) = twilio(
        &app,
        &account,
        reqwest::Method::GET,
        &format!("/v2/Services/{service}/Verifications/{own_sid}"),
        &[],
    )
    .await;
    assert_eq!(
        (status, body["code"].as_i64()),
        (404, Some(20404)),
        "{body}"
    );
}

/// Wrong credentials from one address are slowed past the limit (429, `Retry-After`), right
/// ones are not refused before that, and the limit is the address's alone.
async fn wrong_credentials_are_slowed(backend: Backend) {
    let (app, account) = app_with_tenants(backend, |_| {}).await;
    let limit = vcode::settings::AbuseSettings::default().credential_failures_per_client_minute;
    let wrong = (account.0.clone(), "0".repeat(32));
    for attempt in 0..limit {
        let (status, body, _) =
            twilio(&app, &wrong, reqwest::Method::GET, "/v2/Services", &[]).await;
        assert_eq!(
            (status, body["code"].as_i64()),
            (401, Some(20003)),
            "{attempt}: {body}"
        );
    }
    let (status, body, retry_after) =
        twilio(&app, &wrong, reqwest::Method::GET, "/v2/Services", &[]).await;
    assert_eq!(
        (status, body["code"].as_i64()),
        (429, Some(20429)),
        "{body}"
    );
    let wait: u64 = retry_after.expect("Retry-After").parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    // The held address is held for its right credentials too, and for bearer keys.
    let (status, _, _) = twilio(&app, &account, reqwest::Method::GET, "/v2/Services", &[]).await;
    assert_eq!(status, 429);
    let bearer = app
        .request(
            app.client
                .post(app.url(paths::OTP_SEND))
                .bearer_auth(KEY)
                .json(&SendRequest::new(random_phone())),
        )
        .await;
    assert_eq!((bearer.status, bearer.code()), (429, 42902), "{bearer:?}");

    // Another address (behind a trusted proxy) with the right credentials is not slowed.
    let (proxied, account) = app_with_tenants(backend, |s| {
        s.abuse.trusted_proxies = vcode::client_ip::TrustedProxies::parse("127.0.0.1/32").unwrap();
    })
    .await;
    let from = |address: &'static str, credentials: &(String, String)| {
        proxied
            .client
            .get(proxied.url("/v2/Services"))
            .basic_auth(&credentials.0, Some(&credentials.1))
            .header("x-forwarded-for", address)
    };
    let wrong = (account.0.clone(), "0".repeat(32));
    for _ in 0..=limit {
        from("198.51.100.1", &wrong).send().await.unwrap();
    }
    let held = from("198.51.100.1", &wrong).send().await.unwrap();
    assert_eq!(held.status().as_u16(), 429);
    let other = from("198.51.100.2", &account).send().await.unwrap();
    assert_eq!(other.status().as_u16(), 200);
}

/// Twilio's bounds: a `Page` past the last is 60200 (not an offset that wraps), and an
/// account's Services are bounded.
async fn pages_and_services_are_bounded(backend: Backend) {
    let (app, account) =
        app_with_tenants(backend, |s| s.abuse.twilio_services_per_account = 2).await;
    for path in [
        "/v2/Services?Page=18446744073709551615",
        "/v2/Services?Page=1&PageSize=50",
    ] {
        let (status, body, _) = twilio(&app, &account, reqwest::Method::GET, path, &[]).await;
        assert_eq!(
            (status, body["code"].as_i64()),
            (400, Some(60200)),
            "{path}: {body}"
        );
    }
    let (status, body, _) = twilio(
        &app,
        &account,
        reqwest::Method::GET,
        "/v2/Services?Page=0",
        &[],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    for name in ["One", "Two"] {
        let (status, body, _) = twilio(
            &app,
            &account,
            reqwest::Method::POST,
            "/v2/Services",
            &[("FriendlyName", name)],
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let (status, body, _) = twilio(
        &app,
        &account,
        reqwest::Method::POST,
        "/v2/Services",
        &[("FriendlyName", "Three")],
    )
    .await;
    assert_eq!(
        (status, body["code"].as_i64()),
        (403, Some(20403)),
        "{body}"
    );
    let (_, listed, _) = twilio(
        &app,
        &account,
        reqwest::Method::GET,
        "/v2/Services?PageSize=1&Page=1",
        &[],
    )
    .await;
    assert_eq!(listed["services"].as_array().unwrap().len(), 1, "{listed}");
}

/// A tenant's own budget, set on its credential entry, in place of the default: an API key's
/// and a Twilio account's, each alone.
async fn a_tenants_entry_sets_its_own_budget(backend: Backend) {
    let (account, token, line) = accounts::generate();
    let entries = format!(
        "shop:{} hour=3\nother:{}",
        hex::encode(Sha256::digest(KEY)),
        hex::encode(Sha256::digest(OTHER_KEY))
    );
    let app = spawn_app_with(backend, |s| {
        s.api_key = ApiKeySettings {
            required: vec![Operation::Send],
        };
        s.api_keys = Some(ApiKeys::parse(&entries).unwrap());
        s.twilio_accounts = Some(TwilioAccounts::parse(&format!("{line} hour=2")).unwrap());
    })
    .await;
    for _ in 0..3 {
        let sent = keyed(&app, paths::OTP_SEND, &SendRequest::new(random_phone())).await;
        assert_eq!(sent.status, 200, "{sent:?}");
    }
    let refused = keyed(&app, paths::OTP_SEND, &SendRequest::new(random_phone())).await;
    assert_eq!(
        (refused.status, refused.code()),
        (429, 42902),
        "{refused:?}"
    );
    let other = app
        .request(
            app.client
                .post(app.url(paths::OTP_SEND))
                .bearer_auth(OTHER_KEY)
                .json(&SendRequest::new(random_phone())),
        )
        .await;
    assert_eq!(other.status, 200, "{other:?}");
    let credentials = (account, token);
    let service = create_service(&app, &credentials).await;
    let start = format!("/v2/Services/{service}/Verifications");
    for _ in 0..2 {
        let (status, body, _) = twilio(
            &app,
            &credentials,
            reqwest::Method::POST,
            &start,
            &[("To", &random_phone()), ("Channel", "sms")],
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let (status, body, retry_after) = twilio(
        &app,
        &credentials,
        reqwest::Method::POST,
        &start,
        &[("To", &random_phone()), ("Channel", "sms")],
    )
    .await;
    assert_eq!(
        (status, body["code"].as_i64()),
        (429, Some(20429)),
        "{body}"
    );
    assert!(retry_after.is_some());
}

/// Twilio's Service Rate Limits: an end user past a Bucket of 3 is refused (20429, nothing
/// sent) while another goes on; concurrent starts of one end user take exactly the Bucket's
/// `Max`; the resources are created, read, listed, changed and deleted as Twilio's are.
async fn service_rate_limits_meter_each_end_user(backend: Backend) {
    let (app, account) = app_with_tenants(backend, |_| {}).await;
    let (app, account) = (&app, &account);
    let post = |path: String, form: Vec<(&'static str, String)>| async move {
        let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
        twilio(app, account, reqwest::Method::POST, &path, &form).await
    };
    let (_, service, _) = post("/v2/Services".into(), vec![("FriendlyName", "Shop".into())]).await;
    let service = service["sid"].as_str().unwrap().to_owned();
    let limits = format!("/v2/Services/{service}/RateLimits");
    let (status, limit, _) = post(
        limits.clone(),
        vec![
            ("UniqueName", "end_user_ip_address".into()),
            ("Description", "per address".into()),
        ],
    )
    .await;
    assert_eq!(status, 201, "{limit}");
    let rk = limit["sid"].as_str().unwrap().to_owned();
    assert!(rk.starts_with("RK") && rk.len() == 34, "{rk}");
    let buckets = format!("{limits}/{rk}/Buckets");
    let (status, bucket, _) = post(
        buckets.clone(),
        vec![("Max", "3".into()), ("Interval", "3600".into())],
    )
    .await;
    assert_eq!(
        (status, bucket["max"].as_i64(), bucket["interval"].as_i64()),
        (201, Some(3), Some(3600)),
        "{bucket}"
    );
    let bl = bucket["sid"].as_str().unwrap().to_owned();
    let start = format!("/v2/Services/{service}/Verifications");
    let start_for = |user: &'static str| {
        let start = start.clone();
        let post = &post;
        async move {
            let to = random_phone();
            let answer = post(
                start,
                vec![
                    ("To", to.clone()),
                    ("Channel", "sms".into()),
                    (
                        "RateLimits",
                        format!(r#"{{"end_user_ip_address": "{user}"}}"#),
                    ),
                ],
            )
            .await;
            (to, answer)
        }
    };
    for _ in 0..3 {
        let (_, (status, body, _)) = start_for("203.0.113.7").await;
        assert_eq!(status, 201, "{body}");
    }
    let (to, (status, body, retry_after)) = start_for("203.0.113.7").await;
    assert_eq!(
        (status, body["code"].as_i64()),
        (429, Some(20429)),
        "{body}"
    );
    assert!(retry_after.is_some());
    assert!(
        app.inbox(&to).await.is_empty(),
        "a refused start sends nothing"
    );
    let (_, (status, body, _)) = start_for("203.0.113.8").await;
    assert_eq!(status, 201, "{body}");
    // A name the Service did not define, or no JSON object, is 60200.
    for bad in [r#"{"unknown": "x"}"#, "not json"] {
        let (status, body, _) = post(
            start.clone(),
            vec![
                ("To", random_phone()),
                ("Channel", "sms".into()),
                ("RateLimits", bad.into()),
            ],
        )
        .await;
        assert_eq!(
            (status, body["code"].as_i64()),
            (400, Some(60200)),
            "{bad}: {body}"
        );
    }
    // Concurrent starts of one end user take exactly the Bucket's Max.
    let concurrent: Vec<_> = (0..10).map(|_| start_for("203.0.113.9")).collect();
    let accepted = futures_util::future::join_all(concurrent)
        .await
        .into_iter()
        .filter(|(_, (status, _, _))| *status == 201)
        .count();
    assert_eq!(accepted, 3);

    // Read, list, change, delete.
    let get =
        |path: String| async move { twilio(app, account, reqwest::Method::GET, &path, &[]).await };
    let (_, fetched, _) = get(format!("{limits}/{rk}")).await;
    assert_eq!(fetched["unique_name"], "end_user_ip_address", "{fetched}");
    let (_, listed, _) = get(limits.clone()).await;
    assert_eq!(
        listed["rate_limits"].as_array().unwrap().len(),
        1,
        "{listed}"
    );
    let (_, listed, _) = get(buckets.clone()).await;
    assert_eq!(listed["buckets"][0]["sid"], bl.as_str(), "{listed}");
    let (_, changed, _) = post(format!("{buckets}/{bl}"), vec![("Max", "5".into())]).await;
    assert_eq!(
        (changed["max"].as_i64(), changed["interval"].as_i64()),
        (Some(5), Some(3600))
    );
    let (_, changed, _) = post(
        format!("{limits}/{rk}"),
        vec![("Description", "by IP".into())],
    )
    .await;
    assert_eq!(changed["description"], "by IP");
    let (status, body, _) = post(
        buckets.clone(),
        vec![("Max", "0".into()), ("Interval", "60".into())],
    )
    .await;
    assert_eq!(
        (status, body["code"].as_i64()),
        (400, Some(60200)),
        "{body}"
    );
    let (status, body, _) = post(
        limits.clone(),
        vec![("UniqueName", "end_user_ip_address".into())],
    )
    .await;
    assert_eq!(
        (status, body["code"].as_i64()),
        (400, Some(60200)),
        "a name twice: {body}"
    );
    let delete = |path: String| async move {
        twilio(app, account, reqwest::Method::DELETE, &path, &[])
            .await
            .0
    };
    assert_eq!(delete(format!("{buckets}/{bl}")).await, 204);
    assert_eq!(get(format!("{buckets}/{bl}")).await.0, 404);
    // With no Bucket left, the end user past its old Max starts again.
    let (_, (status, body, _)) = start_for("203.0.113.7").await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(delete(format!("{limits}/{rk}")).await, 204);
    let (status, body, _) = get(format!("{limits}/{rk}")).await;
    assert_eq!(
        (status, body["code"].as_i64()),
        (404, Some(20404)),
        "{body}"
    );
}

on_every_store!(
    service_rate_limits_meter_each_end_user,
    a_tenants_entry_sets_its_own_budget,
    an_api_key_tenant_is_not_limited_by_its_server_address,
    an_end_user_is_limited_as_a_browser_and_alone,
    end_user_fields_need_an_api_key_and_a_valid_value,
    a_guesser_through_a_tenant_locks_no_one_out,
    a_named_guesser_is_stopped_alone,
    a_tenants_verifications_belong_to_it,
    wrong_credentials_are_slowed,
    pages_and_services_are_bounded,
);
