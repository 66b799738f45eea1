//! The SMS settings as start-up reads them (`Settings::from_vars`): variables over the config
//! file, every error naming its variable or key, unknown names refused with the nearest known
//! one, secrets from `*_FILE` and never shown, languages by region, templates per purpose,
//! locale and route.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use secrecy::ExposeSecret;

use super::settings::{ProviderName, SmsSettings};
use super::templates::{ProviderTemplate, TemplateValue};
use super::twilio::TwilioAuth;
use crate::domain::{Locale, Phone, Region};
use crate::settings::Settings;

const TWILIO_SID: &str = "AC0123456789abcdef0123456789abcdef";
const TWILIO_KEY_SID: &str = "SK0123456789abcdef0123456789abcdef";
const MESSAGING_SERVICE: &str = "MG0123456789abcdef0123456789abcdef";

/// The SMS settings for `vars` and, if given, a config file holding `file`.
fn parse(vars: &[(&str, &str)], file: Option<&str>) -> Result<SmsSettings, String> {
    static FILES: AtomicUsize = AtomicUsize::new(0);
    let path = std::env::temp_dir().join(format!(
        "vcode-sms-settings-{}-{}.toml",
        std::process::id(),
        FILES.fetch_add(1, Ordering::Relaxed)
    ));
    let mut all: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if let Some(file) = file {
        std::fs::write(&path, file).unwrap();
        all.push(("VCODE_CONFIG_FILE".into(), path.to_str().unwrap().into()));
    }
    let settings = Settings::from_vars(all).map(|settings| settings.sms);
    let _ = std::fs::remove_file(&path);
    settings.map_err(|error| error.to_string())
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

fn twilio_vars() -> Vec<(&'static str, &'static str)> {
    vec![
        ("VCODE_SMS", "twilio"),
        ("VCODE_TWILIO_ACCOUNT_SID", TWILIO_SID),
        ("VCODE_TWILIO_AUTH_TOKEN", "twilio-s3cret"),
        ("VCODE_TWILIO_FROM", "+15005550006"),
    ]
}

fn locale(tag: &str) -> Locale {
    Locale::parse(tag).unwrap()
}

fn phone(number: &str) -> Phone {
    Phone::parse(number, Region::default()).unwrap()
}

/// The template `templates` give `purpose` in `tag`.
fn template<'a>(
    templates: &'a super::templates::ProviderTemplates,
    purpose: &str,
    tag: Option<&str>,
) -> &'a ProviderTemplate {
    let locale = tag.map(locale);
    templates.find(purpose, locale.as_ref()).unwrap()
}

#[test]
fn defaults_are_the_log_sender_in_the_numbers_language() {
    let settings = parse(&[], None).unwrap();
    assert_eq!(settings.default_route, [ProviderName::Log]);
    assert!(settings.routes.is_empty());
    assert!(settings.aliyun.is_none() && settings.twilio.is_none());
    // The issue: a +1 number without a locale got the Chinese text.
    let locales = &settings.locales;
    assert_eq!(
        locales.for_phone(&phone("+8613800138000")),
        &locale("zh-CN")
    );
    assert_eq!(locales.for_phone(&phone("+12025550123")), &locale("en"));
    assert_eq!(locales.for_phone(&phone("+886912345678")), &locale("zh-TW"));
    // Japanese has no text: English, until one is configured.
    assert_eq!(locales.for_phone(&phone("+819012345678")), &locale("en"));
    let file = "[sms.texts.login]\nja = \"ログインコード {code}\"";
    let with_japanese = parse(&[], Some(file)).unwrap();
    let japan = with_japanese.locales.for_phone(&phone("+819012345678"));
    assert_eq!(japan, &locale("ja"));
}

#[test]
fn the_operator_maps_regions_to_languages_and_sets_the_default() {
    let settings = parse(
        &[
            ("VCODE_REGION_LOCALES", "US:es, CN:en"),
            ("VCODE_DEFAULT_LOCALE", "fr"),
        ],
        None,
    )
    .unwrap();
    let locales = &settings.locales;
    assert_eq!(locales.for_phone(&phone("+12025550123")), &locale("es"));
    assert_eq!(locales.for_phone(&phone("+8613800138000")), &locale("en"));
    assert_eq!(locales.for_phone(&phone("+442071838750")), &locale("fr"));
    let file = "[sms.region_locales]\nGB = \"en-GB\"\n";
    let from_file = parse(&[], Some(file)).unwrap();
    let london = from_file.locales.for_phone(&phone("+442071838750"));
    assert_eq!(london, &locale("en-GB"));
    for bad in ["XX:en", "US:english", "US"] {
        let error = parse(&[("VCODE_REGION_LOCALES", bad)], None).unwrap_err();
        assert!(error.starts_with("VCODE_REGION_LOCALES="), "{error}");
    }
}

#[test]
fn the_price_table_comes_from_a_variable_or_the_file() {
    let none = parse(&[], None).unwrap();
    assert_eq!(none.prices.currency(), "USD");
    assert!(none.prices.table().is_empty());
    let given = parse(
        &[
            ("VCODE_SMS_PRICES", "CN=0.045, gb=0.04, *=0.05"),
            ("VCODE_SMS_PRICE_CURRENCY", "eur"),
        ],
        None,
    )
    .unwrap();
    assert_eq!(given.prices.currency(), "EUR");
    assert_eq!(given.prices.price_of("GB"), Some(0.04));
    assert_eq!(given.prices.price_of("US"), Some(0.05));
    let file = "[sms]\nprice_currency = \"CNY\"\n[sms.prices]\nCN = 0.3\n\"*\" = 1\n";
    let from_file = parse(&[], Some(file)).unwrap();
    assert_eq!(from_file.prices.currency(), "CNY");
    assert_eq!(from_file.prices.price_of("CN"), Some(0.3));
    assert_eq!(from_file.prices.price_of("JP"), Some(1.0));
    let over_file = parse(&[("VCODE_SMS_PRICES", "CN=0.2")], Some(file)).unwrap();
    assert_eq!(over_file.prices.price_of("JP"), None);
    for bad in ["XX=0.1", "CN=-1", "CN", "CN=0.1,CN=0.2"] {
        let error = parse(&[("VCODE_SMS_PRICES", bad)], None).unwrap_err();
        assert!(
            error.starts_with(&format!("VCODE_SMS_PRICES=\"{bad}\"")),
            "{error}"
        );
    }
    let error = parse(&[], Some("[sms.prices]\nXX = 0.1\n")).unwrap_err();
    assert!(
        error.starts_with("sms.prices (VCODE_CONFIG_FILE)"),
        "{error}"
    );
    let error = parse(&[("VCODE_SMS_PRICE_CURRENCY", "dollars")], None).unwrap_err();
    assert!(error.starts_with("VCODE_SMS_PRICE_CURRENCY="), "{error}");
}

#[test]
fn providers_routes_and_locale_come_from_variables() {
    let mut vars = aliyun_vars();
    vars.extend(twilio_vars());
    vars.extend([
        ("VCODE_SMS", "twilio"),
        ("VCODE_SMS_ROUTES", "+86:aliyun,twilio; +852:twilio"),
        ("VCODE_DEFAULT_LOCALE", "en-us"),
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
    assert_eq!(settings.locales.default().as_str(), "en-US");
    let twilio = settings.twilio.as_ref().unwrap();
    assert_eq!(twilio.from.as_deref(), Some("+15005550006"));
    assert_eq!(twilio.messaging_service_sid, None);
    assert_eq!(twilio.timeout, Duration::from_millis(1500));
    let TwilioAuth::AuthToken(token) = &twilio.auth else {
        panic!("{:?}", twilio.auth);
    };
    assert_eq!(token.expose_secret(), "twilio-s3cret");
    let aliyun = settings.aliyun.as_ref().unwrap();
    let register = template(&aliyun.templates, "register", None);
    assert_eq!(register.id, "SMS_100");
    assert_eq!(register.sign_name, "阿里云短信测试");
    assert_eq!(register.params, [("code".to_owned(), TemplateValue::Code)]);
}

#[test]
fn twilio_takes_an_api_key_and_from_with_a_messaging_service() {
    let mut vars: Vec<(&str, &str)> = twilio_vars()
        .into_iter()
        .filter(|(k, _)| *k != "VCODE_TWILIO_AUTH_TOKEN")
        .collect();
    vars.extend([
        ("VCODE_TWILIO_API_KEY_SID", TWILIO_KEY_SID),
        ("VCODE_TWILIO_API_KEY_SECRET", "key-s3cret"),
        ("VCODE_TWILIO_MESSAGING_SERVICE_SID", MESSAGING_SERVICE),
    ]);
    let settings = parse(&vars, None).unwrap();
    let twilio = settings.twilio.unwrap();
    let TwilioAuth::ApiKey { sid, secret } = &twilio.auth else {
        panic!("{:?}", twilio.auth);
    };
    assert_eq!(
        (sid.as_str(), secret.expose_secret()),
        (TWILIO_KEY_SID, "key-s3cret")
    );
    assert_eq!(twilio.from.as_deref(), Some("+15005550006"));
    assert_eq!(
        twilio.messaging_service_sid.as_deref(),
        Some(MESSAGING_SERVICE)
    );

    let mut both = vars.clone();
    both.push(("VCODE_TWILIO_AUTH_TOKEN", "twilio-s3cret"));
    let error = parse(&both, None).unwrap_err();
    assert!(
        error.contains("not both") && !error.contains("s3cret"),
        "{error}"
    );
    let mut bad_sid = vars.clone();
    bad_sid.retain(|(k, _)| *k != "VCODE_TWILIO_API_KEY_SID");
    bad_sid.push(("VCODE_TWILIO_API_KEY_SID", TWILIO_SID));
    let error = parse(&bad_sid, None).unwrap_err();
    assert!(error.starts_with("VCODE_TWILIO_API_KEY_SID="), "{error}");
    let mut no_secret = vars.clone();
    no_secret.retain(|(k, _)| *k != "VCODE_TWILIO_API_KEY_SECRET");
    let error = parse(&no_secret, None).unwrap_err();
    assert!(error.contains("VCODE_TWILIO_API_KEY_SECRET"), "{error}");
    let mut no_sender: Vec<(&str, &str)> = twilio_vars();
    no_sender.retain(|(k, _)| *k != "VCODE_TWILIO_FROM");
    let error = parse(&no_sender, None).unwrap_err();
    assert!(
        error.contains("VCODE_TWILIO_MESSAGING_SERVICE_SID"),
        "{error}"
    );
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
    assert_eq!(settings.locales.default().as_str(), "en");
    let aliyun = settings.aliyun.unwrap();
    assert_eq!(aliyun.access_key_id, "from-env");
    assert_eq!(aliyun.timeout, Duration::from_millis(2500));
    let login = template(&aliyun.templates, "login", None);
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
    let reset = template(&aliyun.templates, "reset_password", None);
    assert_eq!(reset.id, "SMS_FILE");
    assert_eq!(reset.params, [("otp".to_owned(), TemplateValue::Code)]);
    assert_eq!(
        template(&aliyun.templates, "bind_phone", None).id,
        "SMS_FILE"
    );
}

#[test]
fn templates_follow_the_locale_and_a_route_may_have_its_own() {
    // The issue: a route +1 → tencent sent the domestic template and sign name abroad.
    let file = r#"
        [sms]
        providers = ["tencent"]
        [sms.tencent]
        secret_id = "AKID"
        sdk_app_id = "1400006666"
        sign_name = "腾讯云"
        template = "1110"
        [sms.tencent.templates.register]
        template = "1111"
        [sms.tencent.templates.register.locales.en]
        template = "2221"
        [sms.tencent.locales.en]
        template = "2220"
        sign_name = ""
        [sms.routes."+1"]
        providers = ["tencent"]
        [sms.routes."+1".tencent]
        template = "3330"
        sign_name = ""
        [sms.routes."+1".tencent.templates.login]
        template = "3331"
    "#;
    let settings = parse(&[("VCODE_TENCENT_SECRET_KEY", "s3cret")], Some(file)).unwrap();
    let tencent = &settings.tencent.as_ref().unwrap().templates;
    let pick = |purpose, tag| {
        let t = template(tencent, purpose, tag);
        (t.id.as_str(), t.sign_name.as_str())
    };
    assert_eq!(pick("login", Some("zh-CN")), ("1110", "腾讯云"));
    assert_eq!(pick("login", None), ("1110", "腾讯云"));
    assert_eq!(pick("register", Some("zh-CN")), ("1111", "腾讯云"));
    // In English: the international templates, without the domestic sign name.
    assert_eq!(pick("login", Some("en-GB")), ("2220", ""));
    assert_eq!(pick("register", Some("en")), ("2221", ""));
    let route = &settings.routes[0];
    assert_eq!(route.calling_code, "+1");
    let (provider, own) = &route.templates[0];
    assert_eq!(*provider, ProviderName::Tencent);
    assert_eq!(template(own, "login", Some("en")).id, "3331");
    assert_eq!(template(own, "register", Some("en")).id, "3330");

    let elsewhere = file.replace(
        "providers = [\"tencent\"]\n        [sms.routes",
        "providers = [\"log\"]\n        [sms.routes",
    );
    let error = parse(&[("VCODE_TENCENT_SECRET_KEY", "s3cret")], Some(&elsewhere)).unwrap_err();
    assert!(error.contains("sms.routes.\"+1\".tencent"), "{error}");
}

#[test]
fn secrets_come_from_files_and_never_from_the_config_file() {
    let dir = std::env::temp_dir().join(format!("vcode-sms-secrets-{}", std::process::id()));
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
    let both = parse(&vars, None).unwrap_err();
    assert!(
        both.contains("VCODE_ALIYUN_ACCESS_KEY_SECRET_FILE"),
        "{both}"
    );

    let in_file = parse(
        &aliyun_vars(),
        Some("[sms.aliyun]\naccess_key_secret = \"committed-s3cret\""),
    )
    .unwrap_err();
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
        // Bad values are refused although no route names the provider.
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
            "sms.aliyun.templates",
        ),
        (
            vec![],
            Some("[sms.routes]\n\"+86\" = \"aliyun\""),
            "sms.routes",
        ),
        (
            vec![],
            Some("[sms.twilio]\naccount_sidd = \"AC\""),
            "sms.twilio.account_sid",
        ),
    ];
    for (vars, file, named) in cases {
        let error = parse(&vars, file).unwrap_err();
        assert!(error.contains(named), "{vars:?} {file:?}: {error}");
    }
    let mut no_sign = aliyun_vars();
    no_sign.retain(|(k, _)| *k != "VCODE_ALIYUN_SIGN_NAME");
    let error = parse(&no_sign, None).unwrap_err();
    assert!(error.contains("sign name"), "{error}");
}

#[test]
fn misspelt_provider_variables_stop_start_up_naming_the_nearest() {
    // The issue's three, which a prefix match let through.
    for (misspelt, nearest) in [
        ("VCODE_TWILIO_ACOUNT_SID", "VCODE_TWILIO_ACCOUNT_SID"),
        ("VCODE_TWILIO_TIMEOUT", "VCODE_TWILIO_TIMEOUT_MS"),
        (
            "VCODE_ALIYUN_TEMPLATE_RESET_PASWORD",
            "VCODE_ALIYUN_TEMPLATE_RESET_PASSWORD",
        ),
        ("VCODE_TWILIO_API_SECRET", "VCODE_TWILIO_API_KEY_SECRET"),
    ] {
        let error = parse(&[(misspelt, "hunter2-s3cret")], None).unwrap_err();
        assert_eq!(
            error,
            format!("unknown variable {misspelt}: did you mean {nearest}?")
        );
    }
    // A configured purpose has its template variable.
    let purposes = [("VCODE_PURPOSES", "login,pay")];
    let error = parse(&[purposes[0], ("VCODE_TENCENT_TEMPLATE_PAY", "9")], None);
    assert!(error.is_ok(), "{error:?}");
    let error = parse(&[("VCODE_TENCENT_TEMPLATE_PAY", "9")], None).unwrap_err();
    assert!(
        error.starts_with("unknown variable VCODE_TENCENT_TEMPLATE_PAY"),
        "{error}"
    );
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
