//! The settings' unit tests: every variable, default, range and message, read from a map of
//! variables as start-up reads the environment (`Settings::from_vars`).

mod events;
mod file;
mod names;
mod postgres;
mod redaction;
mod redis;
mod table;

use super::*;
use std::collections::HashMap;
use std::time::Duration;

use secrecy::ExposeSecret;

use crate::domain::Region;
use crate::store::ResendPolicy;
use crate::store::redis::RedisTopology;

/// A key as `openssl rand -hex 32` prints one (a typed one is refused as not random).
pub const KEY: &str = "b6c7a39b21dedc5268f35e51f8a67df3ec9ff0b7cf674b019d240e94f12ad871";

/// Settings from `vars`; a shared store gets a secret key unless `vars` name one.
pub fn settings(vars: &[(&str, &str)]) -> Result<Settings, ConfigError> {
    let mut vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let shared = vars
        .keys()
        .any(|var| var.starts_with("VCODE_REDIS_") || var.starts_with("VCODE_DATABASE_"));
    let keyed = vars.keys().any(|var| var.starts_with("VCODE_SECRET_KEY"));
    if shared && !keyed {
        vars.insert("VCODE_SECRET_KEY".into(), KEY.into());
    }
    Settings::from_vars(vars)
}

/// Every variable name start-up accepts with no config file and the default purposes.
pub fn known() -> Vec<String> {
    known_variables(&sources(&|_| None).unwrap())
}

/// The Redis store's settings, or a panic.
pub fn redis_of(s: &Settings) -> &RedisSettings {
    match &s.store {
        StoreSettings::Redis(redis) => redis,
        _ => panic!("expected the Redis store"),
    }
}

/// Both `Debug` forms (`{:#?}` is what `vcode check-config` prints): none shows a
/// secret, each shows every expected piece.
pub fn assert_debug_hides(s: &Settings, secrets: &[&str], shown: &[&str]) {
    for debug in [format!("{s:?}"), format!("{s:#?}")] {
        for secret in secrets {
            assert!(!debug.contains(secret), "{secret:?} shown in {debug}");
        }
        for piece in shown {
            assert!(debug.contains(piece), "{piece:?} missing from {debug}");
        }
    }
}

/// A file holding `text`, named for the test that uses it.
pub fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("vcode-config-{}-{name}", std::process::id()));
    std::fs::write(&path, text).expect("a temporary file");
    path
}

#[test]
fn a_shared_store_needs_a_secret_key_and_keys_are_never_shown() {
    let url = ("VCODE_REDIS_URL", "redis://127.0.0.1:6379");
    let error = settings(&[url, ("VCODE_SECRET_KEY", "")]).unwrap_err();
    assert!(error.to_string().contains("VCODE_SECRET_KEY"), "{error}");
    let error = settings(&[url, ("VCODE_SECRET_KEY", "abcd")]).unwrap_err();
    assert!(error.to_string().contains("VCODE_SECRET_KEY"), "{error}");
    assert!(!error.to_string().contains("abcd"), "{error}");
    let s = settings(&[
        url,
        ("VCODE_SECRET_KEY", KEY),
        ("VCODE_SECRET_KEY_PREVIOUS", KEY),
    ])
    .unwrap();
    assert!(s.secret_key.is_some() && s.secret_key_previous.is_some());
    assert_debug_hides(&s, &[KEY, &KEY[..10]], &["secret_key"]);
    let dir = std::env::temp_dir().join(format!("vcode-key-{}", std::process::id()));
    std::fs::write(&dir, format!("{KEY}\n")).unwrap();
    let from_file = settings(&[url, ("VCODE_SECRET_KEY_FILE", dir.to_str().unwrap())]).unwrap();
    assert!(from_file.secret_key.is_some());
    let both = settings(&[
        url,
        ("VCODE_SECRET_KEY", KEY),
        ("VCODE_SECRET_KEY_FILE", dir.to_str().unwrap()),
    ]);
    assert!(both.is_err());
    std::fs::remove_file(dir).unwrap();
    // Embedded: optional (a random key per process).
    assert!(settings(&[]).unwrap().secret_key.is_none());
}

#[test]
fn keys_and_tokens_that_do_not_look_random_stop_start_up() {
    let url = ("VCODE_REDIS_URL", "redis://127.0.0.1:6379");
    let zeros = "00".repeat(32);
    let twice = "00112233445566778899aabbccddeeff".repeat(2);
    for (var, weak) in [
        ("VCODE_SECRET_KEY", zeros.as_str()),
        ("VCODE_SECRET_KEY", &"ff".repeat(32)),
        ("VCODE_SECRET_KEY", &"ab".repeat(32)),
        ("VCODE_SECRET_KEY", &twice),
        // 32 zero bytes in base64.
        (
            "VCODE_SECRET_KEY",
            "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        ),
        ("VCODE_SECRET_KEY_PREVIOUS", &zeros),
        ("VCODE_SECRET_KEY_PREVIOUS", &twice),
    ] {
        let mut vars = vec![url, (var, weak)];
        if var == "VCODE_SECRET_KEY_PREVIOUS" {
            vars.push(("VCODE_SECRET_KEY", KEY));
        }
        let error = settings(&vars).unwrap_err().to_string();
        assert!(
            error.starts_with(&format!("{var}=\"***\": not random")),
            "{var}: {error}"
        );
        assert!(!error.contains(&weak[..8]), "{error}");
    }
    for weak in [
        "aaaaaaaaaaaaaaaaaaaa",
        "changemechangeme",
        "abcdefghijklmnopqrstuvwxyz",
    ] {
        let error = settings(&[("VCODE_ADMIN_TOKEN", weak)])
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("VCODE_ADMIN_TOKEN=\"***\": not random"),
            "{weak}: {error}"
        );
    }
}

#[test]
fn debug_shows_whether_the_admin_token_is_set_but_never_the_token() {
    let token = "t0ken-0123456789abcdef";
    let s = settings(&[("VCODE_ADMIN_TOKEN", token)]).unwrap();
    assert_debug_hides(
        &s,
        &[token, "0123456789abcdef"],
        &["admin_token: Some(", "\"***\""],
    );
    assert_eq!(
        s.admin_token.as_ref().map(|t| t.expose_secret()),
        Some(token)
    );

    let unset = settings(&[]).unwrap();
    assert_debug_hides(&unset, &["***"], &["admin_token: None"]);
}

#[test]
fn debug_hides_the_webhook_urls_credentials() {
    let url = "https://sms:hunter2-s3cret@gateway.example:9443/v1/sms?api_key=k3y-s3cret&region=cn&t0ken#frag-s3cret";
    let signing = "whsec-s3cret-0123456789abcdef0123456789";
    let s = settings(&[
        ("VCODE_SMS", "webhook"),
        ("VCODE_SMS_WEBHOOK_URL", url),
        ("VCODE_SMS_WEBHOOK_SECRET", signing),
    ])
    .unwrap();
    assert_debug_hides(
        &s,
        &["hunter2", "k3y-s3cret", "t0ken", "frag-s3cret", signing],
        &["https://sms:***@gateway.example:9443/v1/sms?api_key=***&region=***&***#***"],
    );
    let real = &s.sms.webhook.as_ref().expect("the webhook sender").url;
    assert_eq!(real, url);
}

#[test]
fn defaults_match_the_design() {
    let s = settings(&[]).unwrap();
    assert_eq!(s.bind.to_string(), "127.0.0.1:8080");
    assert!(matches!(s.store, StoreSettings::Embedded));
    assert_eq!(s.sms.default_route, [crate::sms::ProviderName::Log]);
    assert_eq!(s.otp.code_length.get(), 6);
    assert_eq!(s.otp.code_ttl, Duration::from_secs(300));
    assert_eq!(s.otp.resend_cooldown, Duration::from_secs(60));
    assert_eq!(s.otp.max_attempts, 5);
    assert_eq!(s.otp.resend, ResendPolicy::Reuse);
    assert_eq!(s.otp.default_region.as_str(), "CN");
    assert!(!s.dev_mode);
    assert_eq!(s.captcha.ttl, Duration::from_secs(300));
    assert_eq!(s.captcha.length, 5);
    assert_eq!((s.captcha.width, s.captcha.height), (160, 60));
    assert!(!s.captcha.send_requires_captcha);
    assert_eq!(s.abuse.sends_per_phone_hour, 5);
    assert_eq!(s.abuse.sends_per_phone_day, 10);
    assert_eq!(s.abuse.sends_per_ip_hour, 20);
    assert_eq!(s.abuse.failed_verifies_per_phone_day, 100);
    assert_eq!(s.abuse.failed_verifies_per_client_day, 10);
    assert_eq!(s.abuse.client_ipv6_prefix, 64);
    assert_eq!(s.abuse.sends_global_minute, 0);
    assert!(s.abuse.allowed_regions.is_empty());
    assert!(s.abuse.monitored_regions.is_empty());
    assert!(s.abuse.blocked_regions.is_empty());
    assert_eq!(
        s.abuse.allowed_number_types.to_string(),
        "mobile,fixed_line_or_mobile"
    );
    assert!(s.abuse.trusted_proxies.is_empty());
    assert!(s.admin_token.is_none());
}

#[test]
fn abuse_limits_parse() {
    let s = settings(&[
        ("VCODE_QUOTA_PHONE_HOUR", "0"),
        ("VCODE_QUOTA_GLOBAL_MINUTE", "1000"),
        ("VCODE_ALLOWED_REGIONS", "cn, HK"),
        ("VCODE_MONITORED_REGIONS", "us,*"),
        ("VCODE_BLOCKED_REGIONS", "RU"),
        (
            "VCODE_ALLOWED_NUMBER_TYPES",
            "mobile, fixed_line_or_mobile, non_geographic",
        ),
        ("VCODE_TRUSTED_PROXIES", "10.0.0.0/8,::1"),
        ("VCODE_ADMIN_TOKEN", "0123456789abcdef"),
    ])
    .unwrap();
    assert_eq!(s.abuse.sends_per_phone_hour, 0);
    assert_eq!(s.abuse.sends_global_minute, 1000);
    let regions: Vec<&str> = s
        .abuse
        .allowed_regions
        .listed
        .iter()
        .map(Region::as_str)
        .collect();
    assert_eq!(regions, ["CN", "HK"]);
    assert_eq!(s.abuse.monitored_regions.to_string(), "US,*");
    assert_eq!(s.abuse.blocked_regions.to_string(), "RU");
    assert!(s.abuse.allowed_number_types.allows_non_geographic());
    assert!(!s.abuse.trusted_proxies.is_empty());
    assert_eq!(
        s.admin_token.as_ref().map(|t| t.expose_secret()),
        Some("0123456789abcdef")
    );
}

#[test]
fn a_region_with_two_geo_permissions_stops_start_up() {
    for vars in [
        [
            ("VCODE_ALLOWED_REGIONS", "CN,US"),
            ("VCODE_MONITORED_REGIONS", "US"),
        ],
        [
            ("VCODE_MONITORED_REGIONS", "*"),
            ("VCODE_BLOCKED_REGIONS", "RU,*"),
        ],
    ] {
        let error = settings(&vars).unwrap_err().to_string();
        assert!(
            error.contains(vars[0].0) && error.contains(vars[1].0),
            "{error}"
        );
    }
    // The default region is no conflict with a list naming it elsewhere.
    assert!(settings(&[("VCODE_BLOCKED_REGIONS", "CN")]).is_ok());
}

#[test]
fn the_fraud_guard_reads_its_level_safe_list_and_thresholds() {
    let defaults = settings(&[]).unwrap().fraud;
    assert_eq!(defaults.level, crate::fraud::Level::Standard);
    assert_eq!(
        defaults.level_thresholds(),
        crate::fraud::Level::Standard.level_thresholds()
    );
    let read = settings(&[
        ("VCODE_FRAUD_GUARD", "strict"),
        ("VCODE_FRAUD_PREFIX_DIGITS", "4"),
        ("VCODE_FRAUD_GRACE_SECS", "90"),
        ("VCODE_FRAUD_SAFE_LIST", "+447400123456, 1202"),
        ("VCODE_FRAUD_EVIDENCE", "25"),
        ("VCODE_FRAUD_MIN_CONVERSION_PCT", "35"),
    ])
    .unwrap()
    .fraud;
    assert_eq!(read.level, crate::fraud::Level::Strict);
    assert_eq!(read.prefix_digits, 4);
    assert_eq!(read.grace, Duration::from_secs(90));
    assert_eq!(read.safe_list, ["447400123456", "1202"]);
    let thresholds = read.level_thresholds();
    let strict = crate::fraud::Level::Strict.level_thresholds();
    assert_eq!(thresholds.evidence_floor, 25.0);
    assert_eq!(thresholds.min_conversion_ratio, 0.35);
    // Those left at 0 are the level's.
    assert_eq!(thresholds.evidence_share, strict.evidence_share);
    assert_eq!(thresholds.mature_history, strict.mature_history);
}

#[test]
fn the_evidence_reaches_a_billion_and_no_further() {
    // A benchmark's millions of never-verified sends stay under a quarter of it.
    let read = settings(&[("VCODE_FRAUD_EVIDENCE", "1000000000")]).unwrap();
    assert_eq!(read.fraud.level_thresholds().evidence_floor, 1e9);
    let error = settings(&[("VCODE_FRAUD_EVIDENCE", "1000000001")])
        .unwrap_err()
        .to_string();
    assert!(error.contains("VCODE_FRAUD_EVIDENCE"), "{error}");
}

#[test]
fn a_retired_variable_is_refused_with_why() {
    for var in [
        "VCODE_FRAUD_MIN_SENDS",
        "VCODE_FRAUD_SURGE_FLOOR",
        "VCODE_FRAUD_SURGE_FACTOR",
    ] {
        let error = settings(&[(var, "40")]).unwrap_err().to_string();
        assert!(error.starts_with(&format!("{var} is retired: ")), "{error}");
        assert!(error.contains("levels"), "{error}");
    }
    let error = settings(&[("VCODE_REDIS_INDEX_EVERY_ID", "true")])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("renamed VCODE_REDIS_OLDER_INSTANCES"),
        "{error}"
    );
}

#[test]
fn bad_values_name_their_variable() {
    for (var, value) in [
        ("VCODE_BIND", "localhost"),
        ("VCODE_REDIS_URL", "http://x"),
        ("VCODE_REDIS_CLUSTER_NODES", "redis://a:7000,b:7000"),
        ("VCODE_REDIS_CLUSTER_NODES", ","),
        ("VCODE_CODE_LENGTH", "3"),
        ("VCODE_CODE_LENGTH", "11"),
        ("VCODE_CODE_TTL_SECS", "0"),
        ("VCODE_CODE_TTL_SECS", "five"),
        ("VCODE_RESEND_COOLDOWN_SECS", "-1"),
        ("VCODE_MAX_ATTEMPTS", "0"),
        ("VCODE_RESEND", "sometimes"),
        ("VCODE_DEFAULT_REGION", "XX"),
        ("VCODE_SMS", "pigeon"),
        ("VCODE_DEV_MODE", "maybe"),
        ("VCODE_CAPTCHA_LENGTH", "3"),
        ("VCODE_CAPTCHA_LENGTH", "7"),
        ("VCODE_CAPTCHA_WIDTH", "20"),
        ("VCODE_CAPTCHA_HEIGHT", "5000"),
        ("VCODE_CAPTCHA_TTL_SECS", "0"),
        ("VCODE_SEND_REQUIRES_CAPTCHA", "sure"),
        ("VCODE_QUOTA_PHONE_HOUR", "-1"),
        ("VCODE_QUOTA_IP_HOUR", "lots"),
        ("VCODE_QUOTA_PHONE_FAILS_DAY", "1.5"),
        ("VCODE_ALLOWED_REGIONS", "CN,XX"),
        ("VCODE_MONITORED_REGIONS", "US;GB"),
        ("VCODE_BLOCKED_REGIONS", "**"),
        ("VCODE_ALLOWED_NUMBER_TYPES", "mobile,landline"),
        ("VCODE_ALLOWED_NUMBER_TYPES", "non_geographic"),
        ("VCODE_TRUSTED_PROXIES", "10.0.0.0/99"),
        ("VCODE_TRUSTED_PROXIES", "0.0.0.0/0"),
        ("VCODE_TRUSTED_PROXIES", "10.0.0.0/8,::/0"),
        ("VCODE_ADMIN_TOKEN", "short"),
        ("VCODE_TOKEN_ISSUER", "has space"),
        ("VCODE_TOKEN_TTL_SECS", "5"),
        (
            "VCODE_TOKEN_KEY",
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----",
        ),
        ("VCODE_REQUIRE_API_KEY", "captcha"),
        ("VCODE_FRAUD_GUARD", "paranoid"),
        ("VCODE_FRAUD_PREFIX_DIGITS", "0"),
        ("VCODE_FRAUD_PREFIX_DIGITS", "9"),
        ("VCODE_FRAUD_GRACE_SECS", "5"),
        ("VCODE_FRAUD_SAFE_LIST", "+44 7400"),
        ("VCODE_FRAUD_SAFE_LIST", "1234567890123456"),
        ("VCODE_FRAUD_MIN_CONVERSION_PCT", "101"),
    ] {
        let error = settings(&[(var, value)]).unwrap_err().to_string();
        assert!(error.contains(var), "{var}={value}: {error}");
    }
}

#[test]
fn an_operator_listener_off_loopback_needs_the_admin_token() {
    let token = ("VCODE_ADMIN_TOKEN", "operator-token-0123456789");
    for exposed in ["0.0.0.0:9091", "[::]:9091", "10.1.2.3:9091"] {
        let error = settings(&[("VCODE_ADMIN_BIND", exposed)])
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with(&format!(
                "VCODE_ADMIN_BIND={exposed} is not a loopback address"
            )) && error.contains("VCODE_ADMIN_TOKEN"),
            "{error}"
        );
        let s = settings(&[("VCODE_ADMIN_BIND", exposed), token]).unwrap();
        assert_eq!(s.admin_bind.to_string(), exposed);
    }
    for loopback in ["127.0.0.1:9091", "127.0.0.2:0", "[::1]:9091"] {
        assert!(
            settings(&[("VCODE_ADMIN_BIND", loopback)]).is_ok(),
            "{loopback}"
        );
    }
}

#[test]
fn trusting_every_address_stops_start_up() {
    let error = settings(&[("VCODE_TRUSTED_PROXIES", "10.0.0.0/8,0.0.0.0/0")])
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with(
            "VCODE_TRUSTED_PROXIES=\"10.0.0.0/8,0.0.0.0/0\": trusts every IPv4 address"
        ),
        "{error}"
    );
}

#[test]
fn webhook_needs_a_valid_url() {
    let missing = settings(&[("VCODE_SMS", "webhook")]).unwrap_err();
    assert!(missing.to_string().contains("VCODE_SMS_WEBHOOK_URL"));
    let bad = settings(&[
        ("VCODE_SMS", "webhook"),
        ("VCODE_SMS_WEBHOOK_URL", "ftp://gateway"),
    ])
    .unwrap_err();
    assert!(bad.to_string().contains("VCODE_SMS_WEBHOOK_URL"));
    let ok = settings(&[
        ("VCODE_SMS", "webhook"),
        ("VCODE_SMS_WEBHOOK_URL", "http://127.0.0.1:9000/sms"),
    ])
    .unwrap();
    assert!(ok.sms.webhook.is_some());
}

#[test]
fn dev_mode_refuses_a_non_loopback_bind() {
    // The log sender chosen, so that the refusal is dev mode's own.
    let error = settings(&[
        ("VCODE_DEV_MODE", "1"),
        ("VCODE_BIND", "0.0.0.0:8080"),
        ("VCODE_SMS", "log"),
    ])
    .unwrap_err()
    .to_string();
    assert!(error.contains("VCODE_DEV_MODE"), "{error}");
    assert!(settings(&[("VCODE_DEV_MODE", "1"), ("VCODE_BIND", "[::1]:8080")]).is_ok());
}

#[test]
fn verify_strategy_is_atomic_by_default_and_legacy_only_in_dev_mode_on_redis() {
    let s = settings(&[]).unwrap();
    assert_eq!(s.verify_strategy, VerifyStrategy::Atomic);
    assert_eq!(s.legacy_gap, Duration::ZERO);

    let redis = ("VCODE_REDIS_URL", "redis://127.0.0.1:6390");
    let dev = ("VCODE_DEV_MODE", "1");
    let by_phone = ("VCODE_VERIFY_BY", "phone");
    for strategy in ["legacy-original", "legacy-postmortem-fix"] {
        let chosen = ("VCODE_VERIFY_STRATEGY", strategy);
        let s = settings(&[chosen, dev, redis, by_phone, ("VCODE_LEGACY_GAP_MS", "25")]).unwrap();
        assert_eq!(s.verify_strategy.as_str(), strategy);
        assert_eq!(s.legacy_gap, Duration::from_millis(25));
        for refused in [
            vec![chosen, redis, by_phone],
            vec![chosen, dev, by_phone],
            vec![chosen, dev, redis],
        ] {
            let error = settings(&refused).unwrap_err().to_string();
            assert!(error.contains("VCODE_VERIFY_STRATEGY"), "{error}");
        }
    }
    let atomic = settings(&[("VCODE_VERIFY_STRATEGY", "atomic")]).unwrap();
    assert_eq!(atomic.verify_strategy, VerifyStrategy::Atomic);
}

#[test]
fn bad_verify_strategy_values_name_their_variable() {
    for (var, value) in [
        ("VCODE_VERIFY_STRATEGY", "legacy"),
        ("VCODE_VERIFY_STRATEGY", "ATOMIC"),
        ("VCODE_LEGACY_GAP_MS", "-1"),
        ("VCODE_LEGACY_GAP_MS", "10001"),
        ("VCODE_LEGACY_GAP_MS", "soon"),
    ] {
        let error = settings(&[(var, value)]).unwrap_err().to_string();
        assert!(error.contains(var), "{var}={value}: {error}");
    }
}

#[test]
fn the_code_printing_log_sender_needs_a_loopback_bind_or_an_explicit_choice() {
    let public = ("VCODE_BIND", "0.0.0.0:8080");
    let error = settings(&[public]).unwrap_err().to_string();
    assert!(error.contains("VCODE_SMS"), "{error}");
    assert!(settings(&[public, ("VCODE_SMS", "log")]).is_ok());
    assert!(settings(&[("VCODE_BIND", "127.0.0.1:8080")]).is_ok());
    // The issue: through a route, every +86 code went to the log of a public instance.
    let webhook = [
        public,
        ("VCODE_SMS", "webhook"),
        ("VCODE_SMS_WEBHOOK_URL", "http://127.0.0.1:9000/sms"),
    ];
    let routed = [&webhook[..], &[("VCODE_SMS_ROUTES", "+86:log")]].concat();
    let error = settings(&routed).unwrap_err().to_string();
    assert!(
        error.contains("VCODE_SMS_ROUTES") && error.contains("0.0.0.0:8080"),
        "{error}"
    );
    assert!(settings(&webhook).is_ok());
    let chosen = [
        public,
        ("VCODE_SMS", "log"),
        ("VCODE_SMS_ROUTES", "+86:log"),
    ];
    assert!(settings(&chosen).is_ok());
}

#[test]
fn the_send_gate_is_none_captcha_pow_or_both_and_the_old_flag_an_alias() {
    let gate = |vars: &[(&str, &str)]| {
        let s = settings(vars).unwrap();
        (s.captcha.send_requires_captcha, s.pow.send_requires_pow)
    };
    assert_eq!(gate(&[]), (false, false));
    assert_eq!(gate(&[("VCODE_SEND_GATE", "captcha")]), (true, false));
    assert_eq!(gate(&[("VCODE_SEND_GATE", "pow")]), (false, true));
    assert_eq!(gate(&[("VCODE_SEND_GATE", "pow,captcha")]), (true, true));
    assert_eq!(
        gate(&[("VCODE_SEND_REQUIRES_CAPTCHA", "true")]),
        (true, false)
    );
    assert_eq!(
        gate(&[
            ("VCODE_SEND_GATE", "captcha"),
            ("VCODE_SEND_REQUIRES_CAPTCHA", "true")
        ]),
        (true, false)
    );
    for bad in [
        vec![("VCODE_SEND_GATE", "sms")],
        vec![
            ("VCODE_SEND_GATE", "pow"),
            ("VCODE_SEND_REQUIRES_CAPTCHA", "true"),
        ],
        vec![("VCODE_POW_ALGORITHM", "MD5")],
        vec![("VCODE_POW_COST", "0")],
    ] {
        let error = settings(&bad).unwrap_err().to_string();
        assert!(
            error.contains(bad[0].0) || error.contains(bad[bad.len() - 1].0),
            "{error}"
        );
    }
}

#[test]
fn token_keys_come_from_a_pem_file_and_the_first_signs() {
    // `openssl genpkey -algorithm ed25519`, twice.
    let first = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIKhtKqKblhAECRb3HOMpdAadd+jKYzZH4EHJkeozM5Pn\n-----END PRIVATE KEY-----\n";
    let second = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEID1K8CdtbG515FHdfBEPg6F61XJLI0Z8HJDhRx0iV2yt\n-----END PRIVATE KEY-----\n";
    let path = temp_file("token-keys.pem", &format!("{first}{second}"));
    let s = settings(&[
        ("VCODE_TOKEN_KEY_FILE", path.to_str().unwrap()),
        ("VCODE_TOKEN_ISSUER", "https://vcode.example"),
        ("VCODE_TOKEN_TTL_SECS", "120"),
    ])
    .unwrap();
    let keys = s.token_keys.as_ref().expect("keys");
    assert_eq!(keys.len(), 2);
    assert_eq!(s.token.issuer, "https://vcode.example");
    assert_eq!(s.token.ttl, Duration::from_secs(120));
    assert_debug_hides(
        &s,
        &[
            "KhtKqKblhAECRb3HOMpdAadd+jKYzZH4EHJkeozM5Pn",
            "D1K8CdtbG515FHdfBEPg6F61XJLI0Z8HJDhRx0iV2yt",
        ],
        &[&keys[0].kid],
    );
    let error = settings(&[("VCODE_TOKEN_KEY_FILE", "/nonexistent/keys.pem")])
        .unwrap_err()
        .to_string();
    assert!(error.contains("VCODE_TOKEN_KEY_FILE"), "{error}");
    let path = temp_file("token-keys-bad.pem", &format!("{first}garbage"));
    let error = settings(&[("VCODE_TOKEN_KEY_FILE", path.to_str().unwrap())])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("VCODE_TOKEN_KEY_FILE") && error.contains("block 2"),
        "{error}"
    );
    assert!(
        !error.contains("KhtKqKblhAECRb3HOMpdAadd+jKYzZH4EHJkeozM5Pn"),
        "{error}"
    );
}

#[test]
fn api_keys_parse_and_go_with_a_requirement() {
    let entry = format!("shop:{}", "ab".repeat(32));
    let s = settings(&[
        ("VCODE_API_KEYS", &entry),
        ("VCODE_REQUIRE_API_KEY", "Verify, send"),
    ])
    .unwrap();
    use crate::api_keys::Operation;
    assert_eq!(s.api_key.required, [Operation::Verify, Operation::Send]);
    assert_debug_hides(&s, &[&"ab".repeat(32)], &["shop"]);
    let none = settings(&[("VCODE_REQUIRE_API_KEY", "none")]).unwrap();
    assert!(none.api_key.required.is_empty());
}

#[test]
fn typed_api_keys_and_account_tokens_stop_start_up_named() {
    use sha2::{Digest, Sha256};
    let digest = |secret: &str| hex::encode(Sha256::digest(secret));
    let key = format!("shop:{}", digest("changeme"));
    let error = settings(&[("VCODE_API_KEYS", &key), ("VCODE_REQUIRE_API_KEY", "send")])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("VCODE_API_KEYS") && error.contains("shop") && error.contains("typed"),
        "{error}"
    );
    let sid = format!("AC{}", "0123456789abcdef".repeat(2));
    let account = format!("{sid}:{}", digest(&"0".repeat(32)));
    let error = settings(&[("VCODE_TWILIO_COMPAT_ACCOUNTS", &account)])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("VCODE_TWILIO_COMPAT_ACCOUNTS") && error.contains(&sid),
        "{error}"
    );
    let drawn = format!("{sid}:{}", digest("3b9e1f0c6a7d4e2b8f5a9c1d0e7b6a43"));
    assert!(settings(&[("VCODE_TWILIO_COMPAT_ACCOUNTS", &drawn)]).is_ok());
}

#[test]
fn test_numbers_read_from_a_variable_or_the_file_and_are_checked() {
    let read = settings(&[(
        "VCODE_TEST_NUMBERS",
        "+8613800000000=123456, +14155552671=000000",
    )])
    .unwrap();
    let numbers = read.otp.test_numbers().unwrap();
    let shown: Vec<(&str, &str)> = numbers
        .iter()
        .map(|(phone, code)| (phone.as_e164(), code.expose()))
        .collect();
    assert_eq!(
        shown,
        [("+8613800000000", "123456"), ("+14155552671", "000000")]
    );
    assert_eq!(
        read.otp.test_numbers_masked(),
        "+86138****0000=***,+141****2671=***"
    );
    let file = temp_file(
        "test-numbers.toml",
        "[test_numbers]\n\"+8613800000000\" = \"654321\"\n",
    );
    let from_file = settings(&[("VCODE_CONFIG_FILE", file.to_str().unwrap())]).unwrap();
    assert_eq!(
        from_file.otp.test_numbers().unwrap()[0].1.expose(),
        "654321"
    );
    for (bad, reason) in [
        ("+86138=123456", "not a valid phone"),
        ("+8613800000000=12345", "not 6 digits"),
        ("+8613800000000=12345a", "not 6 digits"),
        ("+8613800000000", "phone=code"),
        ("+8613800000000=123456,13800000000=111111", "twice"),
    ] {
        let error = settings(&[("VCODE_TEST_NUMBERS", bad)])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("VCODE_TEST_NUMBERS") && error.contains(reason),
            "{bad}: {error}"
        );
        assert!(
            !error.contains("123456") || bad.contains("=123456,"),
            "{error}"
        );
    }
    // Eight digits when codes are eight long.
    assert!(
        settings(&[
            ("VCODE_CODE_LENGTH", "8"),
            ("VCODE_TEST_NUMBERS", "+8613800000000=12345678"),
        ])
        .is_ok()
    );
}

#[test]
fn test_numbers_need_a_loopback_bind_or_an_explicit_choice() {
    let public = [
        ("VCODE_TEST_NUMBERS", "+8613800000000=123456"),
        ("VCODE_BIND", "0.0.0.0:8080"),
        ("VCODE_SMS", "log"),
    ];
    let error = settings(&public).unwrap_err().to_string();
    assert!(
        error.contains("VCODE_TEST_NUMBERS_ON_PUBLIC_BIND"),
        "{error}"
    );
    let allowed = [
        &public[..],
        &[("VCODE_TEST_NUMBERS_ON_PUBLIC_BIND", "true")],
    ]
    .concat();
    assert!(settings(&allowed).is_ok());
}
