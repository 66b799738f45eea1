//! vcode's provider requests against the providers' own code: for the fixed inputs of
//! `tests/sdk/fixtures.json` (clock and nonce included), the official Python SDKs
//! (`tests/sdk/reference_signatures.py`) send the same parameters and sign the same bytes to
//! the same `Authorization`. The recorded SDK answers are checked on every run; the SDKs
//! themselves run when `python3` has them (`python3 -m pip install -r tests/sdk/requirements.txt`),
//! and a missing SDK is skipped loudly, or fails with `TEST_REQUIRE_SDK=1` (CI).
//! `TEST_UPDATE_SDK_FIXTURES=1` rewrites the fixtures from a live run.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use secrecy::SecretString;
use serde_json::{Value, json};
use vcode::domain::{Code, CodeLength, Locale, Phone, Purpose, Region};
use vcode::sms::SmsMessage;
use vcode::sms::aliyun::{self, AliyunSender, AliyunSettings};
use vcode::sms::http::PreparedRequest;
use vcode::sms::templates::{ProviderTemplate, ProviderTemplates, TemplateValue, TextTemplates};
use vcode::sms::tencent::{self, TencentSender, TencentSettings};
use vcode::sms::twilio::{TwilioAuth, TwilioSettings, TwilioSmsSender};

fn fixtures_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/fixtures.json")
}

fn load_fixtures() -> Value {
    let text = std::fs::read_to_string(fixtures_path()).expect("tests/sdk/fixtures.json");
    serde_json::from_str(&text).expect("fixtures are JSON")
}

fn text(value: &Value, key: &str) -> String {
    value[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} in {value}"))
        .to_owned()
}

fn template_value(kind: &Value) -> TemplateValue {
    TemplateValue::parse(kind.as_str().expect("a value kind")).expect("code or minutes")
}

/// The request vcode builds for a case's inputs.
fn our_request(provider: &str, inputs: &Value) -> PreparedRequest {
    let phone_input = text(inputs, if provider == "twilio" { "to" } else { "phone" });
    let phone = Phone::parse(&phone_input, Region::default()).expect("valid phone");
    let purpose = Purpose::parse(&text(inputs, "purpose")).expect("valid purpose");
    let digits = text(inputs, "code");
    let length = CodeLength::new(digits.len() as u8).expect("valid length");
    let code = Code::parse(&digits, length).expect("valid code");
    let locale = inputs["locale"].as_str().map(|l| Locale::parse(l).unwrap());
    let message = SmsMessage {
        phone: &phone,
        purpose: &purpose,
        code: &code,
        expires_in: Duration::from_secs(inputs["minutes"].as_u64().unwrap() * 60),
        locale: locale.as_ref(),
        tenant: None,
    };
    let unix_secs = inputs["unix_secs"].as_u64().unwrap_or_default();
    let mut templates = ProviderTemplates::default();
    match provider {
        "aliyun" => {
            let params = inputs["params"].as_array().unwrap().iter();
            templates.insert(
                purpose.as_str(),
                None,
                ProviderTemplate {
                    id: text(inputs, "template_code"),
                    sign_name: text(inputs, "sign_name"),
                    params: params
                        .map(|p| (p[0].as_str().unwrap().to_owned(), template_value(&p[1])))
                        .collect(),
                },
            );
            let sender = AliyunSender::new(AliyunSettings {
                access_key_id: text(inputs, "access_key_id"),
                access_key_secret: SecretString::from(text(inputs, "access_key_secret")),
                endpoint: format!("https://{}", text(inputs, "host")),
                timeout: Duration::from_secs(1),
                templates,
            })
            .unwrap();
            sender
                .build_request(&message, unix_secs, &text(inputs, "nonce"))
                .unwrap()
        }
        "tencent" => {
            let params = inputs["params"].as_array().unwrap().iter();
            templates.insert(
                purpose.as_str(),
                None,
                ProviderTemplate {
                    id: text(inputs, "template_id"),
                    sign_name: text(inputs, "sign_name"),
                    params: params
                        .enumerate()
                        .map(|(i, p)| ((i + 1).to_string(), template_value(p)))
                        .collect(),
                },
            );
            let sender = TencentSender::new(TencentSettings {
                secret_id: text(inputs, "secret_id"),
                secret_key: SecretString::from(text(inputs, "secret_key")),
                sdk_app_id: text(inputs, "sdk_app_id"),
                region: text(inputs, "region"),
                endpoint: format!("https://{}", text(inputs, "host")),
                timeout: Duration::from_secs(1),
                templates,
            })
            .unwrap();
            sender.build_request(&message, unix_secs).unwrap()
        }
        "twilio" => {
            let mut texts = TextTemplates::default();
            let locale = locale.clone().expect("twilio cases name a locale");
            texts
                .set(purpose.as_str(), locale.clone(), text(inputs, "text"))
                .unwrap();
            // An API key (`Client(key_sid, key_secret, account_sid)`) or the auth token.
            let auth = match inputs["api_key_sid"].as_str() {
                Some(sid) => TwilioAuth::ApiKey {
                    sid: sid.to_owned(),
                    secret: SecretString::from(text(inputs, "api_key_secret")),
                },
                None => TwilioAuth::AuthToken(SecretString::from(text(inputs, "auth_token"))),
            };
            let optional = |key: &str| inputs[key].as_str().map(str::to_owned);
            let sender = TwilioSmsSender::new(
                TwilioSettings {
                    account_sid: text(inputs, "account_sid"),
                    auth,
                    from: optional("from"),
                    messaging_service_sid: optional("messaging_service_sid"),
                    endpoint: "https://api.twilio.com".to_owned(),
                    timeout: Duration::from_secs(1),
                    status_callback: optional("status_callback"),
                },
                Arc::new(texts),
                locale,
            )
            .unwrap();
            sender.build_request(&message)
        }
        other => panic!("unknown provider {other}"),
    }
}

fn request_json(request: &PreparedRequest) -> Value {
    json!({
        "method": request.method.as_str(),
        "url": request.url,
        "headers": request.headers,
        "body": String::from_utf8(request.body.clone()).expect("UTF-8 body"),
    })
}

/// Decoded query or form pairs, sorted.
fn pairs(encoded: &str) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = reqwest::Url::parse(&format!("http://x/?{encoded}"))
        .unwrap()
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    pairs.sort();
    pairs
}

fn query_of(url: &str) -> &str {
    url.split_once('?').map_or("", |(_, query)| query)
}

/// Every claim for one case: vcode's request has the SDK's parameters, vcode's signer gives
/// the SDK's signature over the SDK's request, and the SDK's signer gives vcode's signature
/// over vcode's request.
fn check_case(case: &Value, ours: &PreparedRequest, sdk: &Value) {
    let name = text(case, "name");
    let inputs = &case["inputs"];
    let sdk_request = &sdk["sdk_request"];
    let sdk_headers = &sdk_request["headers"];
    let sdk_header = |h: &str| text(sdk_headers, h);
    let our_header = |h: &str| ours.header(h).unwrap_or_else(|| panic!("{h}")).to_owned();
    match text(case, "provider").as_str() {
        "aliyun" => {
            assert_eq!(
                pairs(query_of(&text(sdk_request, "url"))),
                pairs(query_of(&ours.url)),
                "{name}: SendSms parameters"
            );
            for header in [
                "x-acs-action",
                "x-acs-version",
                "x-acs-date",
                "x-acs-signature-nonce",
                "x-acs-content-sha256",
                "host",
                // The SDK states the empty body's length; a POST without one may be refused.
                "content-length",
            ] {
                assert_eq!(our_header(header), sdk_header(header), "{name}: {header}");
            }
            let sdk_authorization = sdk_header("authorization");
            let signed: Vec<(String, String)> = sdk_authorization
                .split("SignedHeaders=")
                .nth(1)
                .and_then(|rest| rest.split(',').next())
                .unwrap()
                .split(';')
                .map(|h| (h.to_owned(), sdk_header(h)))
                .collect();
            let recomputed = aliyun::authorization(
                "POST",
                "/",
                &pairs(query_of(&text(sdk_request, "url"))),
                &signed,
                &sdk_header("x-acs-content-sha256"),
                &text(inputs, "access_key_id"),
                &text(inputs, "access_key_secret"),
            );
            assert_eq!(
                recomputed, sdk_authorization,
                "{name}: our signer, SDK's request"
            );
        }
        "tencent" => {
            let body = |raw: &str| serde_json::from_str::<Value>(raw).expect("JSON body");
            let our_body = String::from_utf8(ours.body.clone()).unwrap();
            assert_eq!(
                body(&our_body),
                body(&text(sdk_request, "body")),
                "{name}: SendSms body"
            );
            for header in [
                "x-tc-action",
                "x-tc-version",
                "x-tc-region",
                "x-tc-timestamp",
                "content-type",
                "host",
            ] {
                assert_eq!(our_header(header), sdk_header(header), "{name}: {header}");
            }
            let recomputed = tencent::authorization(
                &text(inputs, "secret_id"),
                &text(inputs, "secret_key"),
                &sdk_header("host"),
                inputs["unix_secs"].as_u64().unwrap(),
                text(sdk_request, "body").as_bytes(),
            );
            assert_eq!(
                recomputed,
                sdk_header("authorization"),
                "{name}: our signer, SDK's request"
            );
        }
        "twilio" => {
            // The account SID in the path, whichever credential authenticates.
            assert_eq!(ours.url, text(sdk_request, "url"), "{name}: URL");
            assert_eq!(
                our_header("authorization"),
                sdk_header("authorization"),
                "{name}: Basic credentials"
            );
            assert_eq!(
                our_header("content-type"),
                sdk_header("content-type"),
                "{name}"
            );
            let our_body = String::from_utf8(ours.body.clone()).unwrap();
            assert_eq!(
                pairs(&our_body),
                pairs(&text(sdk_request, "body")),
                "{name}: form"
            );
        }
        other => panic!("unknown provider {other}"),
    }
    if let Some(signature) = sdk["sdk_signature_of_ours"].as_str() {
        assert_eq!(
            ours.header("authorization"),
            Some(signature),
            "{name}: the SDK's signer over our request"
        );
    }
}

#[test]
fn our_requests_match_the_recorded_official_sdk_requests_and_signatures() {
    let fixtures = load_fixtures();
    let cases = fixtures["cases"].as_array().unwrap();
    assert!(cases.len() >= 5);
    let mut providers = BTreeMap::new();
    for case in cases {
        let ours = our_request(&text(case, "provider"), &case["inputs"]);
        assert_eq!(
            case["ours"],
            request_json(&ours),
            "{}: vcode's request changed; rerun with TEST_UPDATE_SDK_FIXTURES=1",
            text(case, "name")
        );
        assert!(
            case["sdk"]["sdk_request"].is_object(),
            "{}: no recorded SDK request",
            text(case, "name")
        );
        check_case(case, &ours, &case["sdk"]);
        *providers.entry(text(case, "provider")).or_insert(0) += 1;
    }
    assert_eq!(providers.len(), 3, "{providers:?}");
    let twilio_inputs = cases
        .iter()
        .filter(|case| case["provider"] == "twilio")
        .map(|case| &case["inputs"]);
    assert!(
        twilio_inputs
            .clone()
            .any(|inputs| inputs["api_key_sid"].is_string()
                && inputs["from"].is_string()
                && inputs["messaging_service_sid"].is_string()),
        "a Twilio case with an API key, From and MessagingServiceSid"
    );
    assert!(
        twilio_inputs.clone().any(|inputs| inputs["from"].is_null()),
        "a Twilio case with a Messaging Service alone"
    );
}

/// The SDKs' answers for `cases` now, or why they cannot be had.
fn run_official_sdks(cases: &[Value]) -> Result<Value, String> {
    crate::support::sdk::run(
        "tests/sdk/reference_signatures.py",
        &json!({ "cases": cases }),
    )
}

#[test]
fn the_official_sdks_send_and_sign_as_we_do() {
    let mut fixtures = load_fixtures();
    let cases: Vec<Value> = fixtures["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|case| {
            let ours = our_request(&text(case, "provider"), &case["inputs"]);
            let mut case = case.clone();
            case["ours"] = request_json(&ours);
            case
        })
        .collect();
    let live = match run_official_sdks(&cases) {
        Ok(live) => live,
        Err(why) if std::env::var_os("TEST_REQUIRE_SDK").is_none() => {
            eprintln!(
                "\n*** SKIPPED the_official_sdks_send_and_sign_as_we_do: {why}\n*** install the \
                 SDKs: python3 -m pip install -r tests/sdk/requirements.txt (the recorded SDK \
                 answers in tests/sdk/fixtures.json were still checked)\n"
            );
            return;
        }
        Err(why) => panic!("TEST_REQUIRE_SDK is set but the SDKs cannot run: {why}"),
    };
    let live_cases = live["cases"].as_array().unwrap();
    assert_eq!(live_cases.len(), cases.len());
    for (case, sdk) in cases.iter().zip(live_cases) {
        let ours = our_request(&text(case, "provider"), &case["inputs"]);
        check_case(case, &ours, sdk);
    }
    if std::env::var_os("TEST_UPDATE_SDK_FIXTURES").is_some() {
        for (case, sdk) in cases.iter().zip(live_cases) {
            let mut recorded = case.clone();
            let mut sdk = sdk.clone();
            sdk.as_object_mut().unwrap().remove("name");
            recorded["sdk"] = sdk;
            let name = text(case, "name");
            let slot = fixtures["cases"]
                .as_array_mut()
                .unwrap()
                .iter_mut()
                .find(|c| text(c, "name") == name)
                .unwrap();
            *slot = recorded;
        }
        let text = serde_json::to_string_pretty(&fixtures).unwrap() + "\n";
        std::fs::write(fixtures_path(), text).unwrap();
        eprintln!("tests/sdk/fixtures.json rewritten from the official SDKs");
    }
}
