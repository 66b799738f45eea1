//! `SmsSettings::parse`: variables over the config file, every error naming its variable or
//! key, secrets from `*_FILE` and never shown.

use std::collections::HashMap;
use std::time::Duration;

use secrecy::ExposeSecret;

use super::settings::{ProviderName, SmsSettings, SmsSettingsError, is_sms_variable};
use super::templates::TemplateValue;
use super::twilio::TwilioAuth;

const TWILIO_SID: &str = "AC0123456789abcdef0123456789abcdef";

fn parse(vars: &[(&str, &str)], file: Option<&str>) -> Result<SmsSettings, SmsSettingsError> {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let document = file.map(|text| text.parse::<toml::Table>().expect("valid TOML"));
    SmsSettings::parse(|var| vars.get(var).cloned(), document.as_ref())
}

fn aliyun_vars() -> Vec<(&'static str, &'static str)> {
    vec![
        ("VCODE_SMS", "aliyun"),
        ("VCODE_ALIYUN_ACCESS_KEY_ID", "LTAI-id"),
        ("VCODE_ALIYUN_ACCESS_KEY_SECRET", "aliyun-s3cret"),
        ("VCODE_ALIYUN_SIGN_NAME", "阿里云短信测试"),
        ("VCODE_ALIYUN_TEMPLATE", "SMS_100"),
    ]
}

#[test]
fn defaults_are_the_log_sender_in_chinese() {
    let settings = parse(&[], None).unwrap();
    assert_eq!(settings.default_route, [ProviderName::Log]);
    assert!(settings.routes.is_empty());
    assert_eq!(settings.default_locale.as_str(), "zh-CN");
    assert!(settings.aliyun.is_none() && settings.twilio.is_none());
}

#[test]
fn providers_routes_and_locale_come_from_variables() {
    let mut vars = aliyun_vars();
    vars.extend([
        ("VCODE_SMS", "twilio"),
        ("VCODE_SMS_ROUTES", "+86:aliyun,twilio; +852:twilio"),
        ("VCODE_DEFAULT_LOCALE", "en-us"),
        ("VCODE_TWILIO_ACCOUNT_SID", TWILIO_SID),
        ("VCODE_TWILIO_AUTH_TOKEN", "twilio-s3cret"),
        ("VCODE_TWILIO_FROM", "+15005550006"),
        ("VCODE_TWILIO_TIMEOUT_MS", "1500"),
    ]);
    let settings = parse(&vars, None).unwrap();
    assert_eq!(settings.default_route, [ProviderName::Twilio]);
    assert_eq!(settings.routes.len(), 2);
    assert_eq!(settings.routes[0].calling_code, "+86");
    assert_eq!(
        settings.routes[0].providers,
        [ProviderName::Aliyun, ProviderName::Twilio]
    );
    assert_eq!(settings.default_locale.as_str(), "en-US");
    let twilio = settings.twilio.as_ref().unwrap();
    assert_eq!(twilio.from.as_deref(), Some("+15005550006"));
    assert_eq!(twilio.messaging_service_sid, None);
    assert_eq!(twilio.timeout, Duration::from_millis(1500));
    let TwilioAuth::AuthToken(token) = &twilio.auth else {
        panic!("{:?}", twilio.auth);
    };
    assert_eq!(token.expose_secret(), "twilio-s3cret");
    let aliyun = settings.aliyun.as_ref().unwrap();
    let template = aliyun.templates.get("register").unwrap();
    assert_eq!(template.id, "SMS_100");
    assert_eq!(template.sign_name, "阿里云短信测试");
    assert_eq!(template.params, [("code".to_owned(), TemplateValue::Code)]);
}

#[test]
fn variables_override_the_file() {
    let file = r#"
        [sms]
        providers = ["aliyun"]
        default_locale = "en"
        [sms.aliyun]
        access_key_id = "from-file"
        sign_name = "FileSign"
        template = "SMS_FILE"
        timeout_ms = 2500
        params = { code = "code", ttl = "minutes" }
        [sms.aliyun.templates.login]
        template = "SMS_LOGIN_FILE"
        [sms.aliyun.templates.reset_password]
        params = { otp = "code" }
    "#;
    let vars = [
        ("VCODE_ALIYUN_ACCESS_KEY_SECRET", "s3cret"),
        ("VCODE_ALIYUN_ACCESS_KEY_ID", "from-env"),
        ("VCODE_ALIYUN_TEMPLATE_LOGIN", "SMS_LOGIN_ENV"),
    ];
    let settings = parse(&vars, Some(file)).unwrap();
    assert_eq!(settings.default_locale.as_str(), "en");
    let aliyun = settings.aliyun.unwrap();
    assert_eq!(aliyun.access_key_id, "from-env");
    assert_eq!(aliyun.timeout, Duration::from_millis(2500));
    let login = aliyun.templates.get("login").unwrap();
    assert_eq!(
        (login.id.as_str(), login.sign_name.as_str()),
        ("SMS_LOGIN_ENV", "FileSign")
    );
    assert_eq!(
        login.params,
        [
            ("code".to_owned(), TemplateValue::Code),
            ("ttl".to_owned(), TemplateValue::Minutes)
        ]
    );
    // Its own parameters on the provider-wide template code.
    let reset = aliyun.templates.get("reset_password").unwrap();
    assert_eq!(reset.id, "SMS_FILE");
    assert_eq!(reset.params, [("otp".to_owned(), TemplateValue::Code)]);
    assert_eq!(aliyun.templates.get("bind_phone").unwrap().id, "SMS_FILE");
}

#[test]
fn secrets_come_from_files_and_never_from_the_config_file() {
    let dir = std::env::temp_dir().join(format!("vcode-sms-settings-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("aliyun-secret");
    std::fs::write(&path, "file-s3cret\n").unwrap();
    let path_text = path.to_str().unwrap();
    let mut vars: Vec<(&str, &str)> = aliyun_vars()
        .into_iter()
        .filter(|(k, _)| *k != "VCODE_ALIYUN_ACCESS_KEY_SECRET")
        .collect();
    vars.push(("VCODE_ALIYUN_ACCESS_KEY_SECRET_FILE", path_text));
    let settings = parse(&vars, None).unwrap();
    let secret = &settings.aliyun.as_ref().unwrap().access_key_secret;
    assert_eq!(secret.expose_secret(), "file-s3cret");
    for debug in [format!("{settings:?}"), format!("{settings:#?}")] {
        assert!(!debug.contains("file-s3cret"), "{debug}");
        assert!(debug.contains("LTAI-id"), "{debug}");
    }

    vars.push(("VCODE_ALIYUN_ACCESS_KEY_SECRET", "also-set"));
    let both = parse(&vars, None).unwrap_err().to_string();
    assert!(
        both.contains("VCODE_ALIYUN_ACCESS_KEY_SECRET_FILE"),
        "{both}"
    );

    let in_file = parse(
        &aliyun_vars(),
        Some("[sms.aliyun]\naccess_key_secret = \"committed-s3cret\""),
    )
    .unwrap_err()
    .to_string();
    assert!(
        in_file.contains("sms.aliyun.access_key_secret"),
        "{in_file}"
    );
    assert!(!in_file.contains("committed-s3cret"), "{in_file}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn invalid_settings_name_their_variable_or_key() {
    /// Variables, config file, what the error must name.
    type Case<'a> = (Vec<(&'a str, &'a str)>, Option<&'a str>, &'a str);
    let cases: Vec<Case> = vec![
        (vec![("VCODE_SMS", "pigeon")], None, "VCODE_SMS"),
        (vec![("VCODE_SMS", "log,log")], None, "VCODE_SMS"),
        (
            vec![("VCODE_DEFAULT_LOCALE", "english")],
            None,
            "VCODE_DEFAULT_LOCALE",
        ),
        (
            vec![("VCODE_SMS_ROUTES", "86:log")],
            None,
            "VCODE_SMS_ROUTES",
        ),
        (
            vec![("VCODE_SMS_ROUTES", "+86:pigeon")],
            None,
            "VCODE_SMS_ROUTES",
        ),
        (
            vec![("VCODE_SMS", "aliyun")],
            None,
            "VCODE_ALIYUN_ACCESS_KEY_ID",
        ),
        (
            vec![("VCODE_SMS", "tencent")],
            None,
            "VCODE_TENCENT_SDK_APP_ID",
        ),
        (
            vec![("VCODE_SMS", "twilio")],
            None,
            "VCODE_TWILIO_ACCOUNT_SID",
        ),
        (
            vec![("VCODE_SMS", "webhook")],
            None,
            "VCODE_SMS_WEBHOOK_URL",
        ),
        (
            vec![("VCODE_ALIYUN_TIMEOUT_MS", "5")],
            None,
            "VCODE_ALIYUN_TIMEOUT_MS",
        ),
        (
            vec![("VCODE_TWILIO_ENDPOINT", "http://api.twilio.example")],
            None,
            "VCODE_TWILIO_ENDPOINT",
        ),
        (vec![], Some("[sms]\nprovider = [\"log\"]"), "sms.provider"),
        (
            vec![],
            Some("[sms.texts.login]\nen = \"no placeholder\""),
            "sms.texts.login.en",
        ),
        (
            vec![],
            Some("[sms.aliyun.templates.login]\nparams = { code = \"phone\" }"),
            "sms.aliyun.templates.login.params",
        ),
        (
            vec![],
            Some("[sms.routes]\n\"+86\" = \"aliyun\""),
            "sms.routes.+86",
        ),
    ];
    for (vars, file, named) in cases {
        let error = parse(&vars, file).unwrap_err().to_string();
        assert!(error.contains(named), "{vars:?} {file:?}: {error}");
    }
    let mut no_sign = aliyun_vars();
    no_sign.retain(|(k, _)| *k != "VCODE_ALIYUN_SIGN_NAME");
    let error = parse(&no_sign, None).unwrap_err().to_string();
    assert!(error.contains("VCODE_ALIYUN_SIGN_NAME"), "{error}");
}

#[test]
fn a_provider_no_route_names_need_not_be_complete() {
    let settings = parse(&[("VCODE_ALIYUN_ACCESS_KEY_ID", "LTAI-id")], None).unwrap();
    assert!(settings.aliyun.is_none());
}

#[test]
fn configured_texts_replace_the_built_in_ones() {
    let file = "[sms.texts.login]\nen = \"Login: {code}\"\nfr = \"Connexion : {code}\"";
    let settings = parse(&[], Some(file)).unwrap();
    assert_ne!(*settings.texts, super::templates::TextTemplates::default());
}

#[test]
fn the_sms_variables_are_recognised() {
    for var in [
        "VCODE_SMS",
        "VCODE_SMS_ROUTES",
        "VCODE_DEFAULT_LOCALE",
        "VCODE_CONFIG_FILE",
        "VCODE_SMS_WEBHOOK_TIMEOUT_MS",
        "VCODE_ALIYUN_ACCESS_KEY_SECRET_FILE",
        "VCODE_TENCENT_TEMPLATE_LOGIN",
        "VCODE_TWILIO_FROM",
        "VCODE_TWILIO_API_KEY_SID",
        "VCODE_TWILIO_API_KEY_SECRET",
        "VCODE_TWILIO_API_KEY_SECRET_FILE",
    ] {
        assert!(is_sms_variable(var), "{var}");
    }
    assert!(!is_sms_variable("VCODE_REDIS_URL"));
}

const TWILIO_KEY_SID: &str = "SK0123456789abcdef0123456789abcdef";

fn twilio_vars() -> Vec<(&'static str, &'static str)> {
    vec![
        ("VCODE_SMS", "twilio"),
        ("VCODE_TWILIO_ACCOUNT_SID", TWILIO_SID),
        ("VCODE_TWILIO_FROM", "+15005550006"),
    ]
}

#[test]
fn twilio_takes_an_api_key_instead_of_the_auth_token() {
    let mut vars = twilio_vars();
    vars.extend([
        ("VCODE_TWILIO_API_KEY_SID", TWILIO_KEY_SID),
        ("VCODE_TWILIO_API_KEY_SECRET", "key-s3cret"),
    ]);
    let settings = parse(&vars, None).unwrap();
    let twilio = settings.twilio.as_ref().unwrap();
    assert_eq!(twilio.account_sid, TWILIO_SID);
    let TwilioAuth::ApiKey { sid, secret } = &twilio.auth else {
        panic!("{:?}", twilio.auth);
    };
    assert_eq!(
        (sid.as_str(), secret.expose_secret()),
        (TWILIO_KEY_SID, "key-s3cret")
    );
    assert!(!format!("{settings:?}").contains("key-s3cret"));
    assert_eq!(
        super::settings::shown_value("VCODE_TWILIO_API_KEY_SECRET", "key-s3cret"),
        "***"
    );

    // The SID may come from the file; the secret from a file named by a variable, never from
    // the config file.
    let dir = std::env::temp_dir().join(format!("vcode-twilio-key-{}", std::process::id()));
    std::fs::write(&dir, "file-key-s3cret\n").unwrap();
    let mut vars = twilio_vars();
    vars.push(("VCODE_TWILIO_API_KEY_SECRET_FILE", dir.to_str().unwrap()));
    let file = format!("[sms.twilio]\napi_key_sid = \"{TWILIO_KEY_SID}\"");
    let from_files = parse(&vars, Some(&file));
    std::fs::remove_file(&dir).unwrap();
    let TwilioAuth::ApiKey { secret, .. } = from_files.unwrap().twilio.unwrap().auth else {
        panic!("an API key");
    };
    assert_eq!(secret.expose_secret(), "file-key-s3cret");
    let in_file = format!("{file}\napi_key_secret = \"committed-s3cret\"");
    let error = parse(&twilio_vars(), Some(&in_file))
        .unwrap_err()
        .to_string();
    assert!(error.contains("sms.twilio.api_key_secret"), "{error}");
    assert!(!error.contains("committed-s3cret"), "{error}");
}

#[test]
fn twilio_needs_exactly_one_credential_and_well_formed_sids() {
    let token = ("VCODE_TWILIO_AUTH_TOKEN", "twilio-s3cret");
    let key_sid = ("VCODE_TWILIO_API_KEY_SID", TWILIO_KEY_SID);
    let key_secret = ("VCODE_TWILIO_API_KEY_SECRET", "key-s3cret");
    // Extra variables, what the error must name.
    let cases: [(Vec<(&str, &str)>, &str); 8] = [
        (vec![], "VCODE_TWILIO_AUTH_TOKEN"),
        (vec![token, key_sid, key_secret], "VCODE_TWILIO_AUTH_TOKEN"),
        (vec![token, key_sid], "VCODE_TWILIO_AUTH_TOKEN"),
        (vec![key_sid], "VCODE_TWILIO_API_KEY_SECRET"),
        (vec![key_secret], "VCODE_TWILIO_API_KEY_SID"),
        (
            vec![("VCODE_TWILIO_API_KEY_SID", TWILIO_SID), key_secret],
            "VCODE_TWILIO_API_KEY_SID",
        ),
        (
            vec![
                (
                    "VCODE_TWILIO_API_KEY_SID",
                    "SK0123456789abcdef0123456789abcdeg",
                ),
                key_secret,
            ],
            "VCODE_TWILIO_API_KEY_SID",
        ),
        (
            vec![
                token,
                (
                    "VCODE_TWILIO_ACCOUNT_SID",
                    "AC0123456789abcdef0123456789abcdez",
                ),
            ],
            "VCODE_TWILIO_ACCOUNT_SID",
        ),
    ];
    for (extra, named) in cases {
        let mut vars = twilio_vars();
        vars.extend(extra.iter().copied());
        let error = parse(&vars, None).unwrap_err().to_string();
        assert!(error.starts_with(named), "{extra:?}: {error}");
        assert!(!error.contains("s3cret"), "{error}");
    }
}

#[test]
fn twilio_sends_from_a_number_a_messaging_service_or_both() {
    let token = ("VCODE_TWILIO_AUTH_TOKEN", "twilio-s3cret");
    let service = (
        "VCODE_TWILIO_MESSAGING_SERVICE_SID",
        "MG0123456789abcdef0123456789abcdef",
    );
    let mut both = twilio_vars();
    both.extend([token, service]);
    let twilio = parse(&both, None).unwrap().twilio.unwrap();
    assert_eq!(twilio.from.as_deref(), Some("+15005550006"));
    assert_eq!(twilio.messaging_service_sid.as_deref(), Some(service.1));

    let mut service_only = both.clone();
    service_only.retain(|(k, _)| *k != "VCODE_TWILIO_FROM");
    let twilio = parse(&service_only, None).unwrap().twilio.unwrap();
    assert_eq!(
        (twilio.from, twilio.messaging_service_sid.as_deref()),
        (None, Some(service.1))
    );

    let mut neither = service_only.clone();
    neither.retain(|(k, _)| *k != "VCODE_TWILIO_MESSAGING_SERVICE_SID");
    let error = parse(&neither, None).unwrap_err().to_string();
    assert!(error.starts_with("VCODE_TWILIO_FROM"), "{error}");

    let mut bad_service = both.clone();
    bad_service.push(("VCODE_TWILIO_MESSAGING_SERVICE_SID", "PN0123"));
    let error = parse(&bad_service, None).unwrap_err().to_string();
    assert!(
        error.contains("VCODE_TWILIO_MESSAGING_SERVICE_SID"),
        "{error}"
    );
}
