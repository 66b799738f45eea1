//! `vcode check-config`'s table: every setting, its value and its origin; secrets as `***`.

use super::*;
use crate::settings::table::{Row, render, rows};

fn table(vars: &[(&str, &str)]) -> Vec<Row> {
    rows(vars.iter().map(|(k, v)| (k.to_string(), v.to_string()))).unwrap()
}

fn row<'a>(rows: &'a [Row], variable: &str) -> &'a Row {
    rows.iter()
        .find(|row| row.variable == variable)
        .unwrap_or_else(|| panic!("no row for {variable}"))
}

#[test]
fn every_setting_has_a_row_with_its_value_and_origin() {
    let rows = table(&[
        ("VCODE_CODE_LENGTH", "8"),
        ("VCODE_ALLOWED_REGIONS", "CN,HK"),
    ]);
    let code_length = row(&rows, "VCODE_CODE_LENGTH");
    assert_eq!(
        (code_length.value.as_str(), code_length.origin),
        ("8", "set")
    );
    let bind = row(&rows, "VCODE_BIND");
    assert_eq!(
        (bind.value.as_str(), bind.origin),
        ("127.0.0.1:8080", "default")
    );
    let ttl = row(&rows, "VCODE_CODE_TTL_SECS");
    assert_eq!((ttl.value.as_str(), ttl.origin), ("300", "default"));
    assert_eq!(
        row(&rows, "VCODE_PURPOSES").value,
        "login,register,reset_password,bind_phone"
    );
    assert_eq!(row(&rows, "VCODE_REDIS_URL").value, "(unset)");
    assert_eq!(row(&rows, "VCODE_TRUSTED_PROXIES").value, "(none)");
    assert_eq!(row(&rows, "VCODE_SMS").value, "log");
    assert_eq!(row(&rows, "RUST_LOG").value, "info");
    for name in known() {
        let listed = rows.iter().any(|row| row.variable == name);
        let twin = name.ends_with("_FILE") && name != "VCODE_CONFIG_FILE";
        // Per-purpose template ids have a row once given.
        let per_purpose = name.contains("_TEMPLATE_");
        assert!(listed || twin || per_purpose, "{name}");
    }
}

#[test]
fn secrets_and_url_passwords_are_masked() {
    let vars = [
        ("VCODE_REDIS_URL", "redis://:r3dis-s3cret@10.0.0.1:6379"),
        ("VCODE_SECRET_KEY", KEY),
        ("VCODE_ADMIN_TOKEN", "t0ken-0123456789abcdef"),
        ("VCODE_SMS", "twilio"),
        (
            "VCODE_TWILIO_ACCOUNT_SID",
            "AC00000000000000000000000000000000",
        ),
        ("VCODE_TWILIO_AUTH_TOKEN", "tw1lio-s3cret"),
        ("VCODE_TWILIO_FROM", "+15005550006"),
        ("VCODE_TWILIO_ENDPOINT", "https://127.0.0.1:9"),
        (
            "VCODE_SMS_WEBHOOK_URL",
            "https://u:hook-pass@gw.example/sms?t=hook-query",
        ),
        ("VCODE_TWILIO_TIMEOUT_MS", "3000"),
        (
            "VCODE_SMS_WEBHOOK_SECRET",
            "w3bhook-s3cret-0123456789abcdef0123",
        ),
    ];
    let rows = table(&vars);
    let text = render(&rows);
    for secret in [
        "r3dis-s3cret",
        "0011223344",
        "t0ken",
        "tw1lio-s3cret",
        "hook-pass",
        "hook-query",
        "w3bhook-s3cret",
    ] {
        assert!(!text.contains(secret), "{secret} shown in\n{text}");
    }
    assert_eq!(
        row(&rows, "VCODE_REDIS_URL").value,
        "redis://:***@10.0.0.1:6379"
    );
    for secret in [
        "VCODE_SECRET_KEY",
        "VCODE_ADMIN_TOKEN",
        "VCODE_TWILIO_AUTH_TOKEN",
        "VCODE_SMS_WEBHOOK_SECRET",
    ] {
        assert_eq!(row(&rows, secret).value, "***");
        assert_eq!(row(&rows, secret).origin, "set");
    }
    // What is not secret shows as set, so an operator can check it.
    assert_eq!(row(&rows, "VCODE_TWILIO_FROM").value, "+15005550006");
    assert_eq!(row(&rows, "VCODE_TWILIO_TIMEOUT_MS").value, "3000");
    assert_eq!(
        row(&rows, "VCODE_TWILIO_ACCOUNT_SID").value,
        "AC00000000000000000000000000000000"
    );
    assert_eq!(
        row(&rows, "VCODE_TWILIO_ENDPOINT").value,
        "https://127.0.0.1:9"
    );
    assert_eq!(
        row(&rows, "VCODE_SMS_WEBHOOK_URL").value,
        "https://u:***@gw.example/sms?t=***"
    );
    assert_eq!(row(&rows, "VCODE_SMS").value, "twilio");
    assert_eq!(row(&rows, "VCODE_SECRET_KEY_PREVIOUS").value, "(unset)");
}

#[test]
fn the_table_is_aligned_under_a_header() {
    let text = render(&table(&[("VCODE_DEV_MODE", "1")]));
    let lines: Vec<&str> = text.lines().collect();
    let columns: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(columns, ["VARIABLE", "VALUE", "ORIGIN"]);
    let dev_mode = lines
        .iter()
        .find(|line| line.starts_with("VCODE_DEV_MODE "))
        .unwrap();
    assert_eq!(
        dev_mode.find(" 1 ").map(|at| at + 1),
        lines[0].find("VALUE")
    );
    assert_eq!(dev_mode.rfind("set"), lines[0].find("ORIGIN"));
}

#[test]
fn a_value_from_the_config_file_says_so() {
    let path = temp_file("table.toml", "code_length = 8\ncode_ttl_secs = 600\n");
    let rows = table(&[
        ("VCODE_CONFIG_FILE", path.to_str().unwrap()),
        ("VCODE_CODE_TTL_SECS", "120"),
    ]);
    std::fs::remove_file(path).unwrap();
    let code_length = row(&rows, "VCODE_CODE_LENGTH");
    assert_eq!(
        (code_length.value.as_str(), code_length.origin),
        ("8", "file")
    );
    let ttl = row(&rows, "VCODE_CODE_TTL_SECS");
    assert_eq!((ttl.value.as_str(), ttl.origin), ("120", "set"));
}

#[test]
fn a_bad_setting_gives_no_table_but_its_error() {
    let error = rows([("VCODE_CODE_LENTH".to_owned(), "8".to_owned())]).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("did you mean VCODE_CODE_LENGTH?")
    );
    // The issue: an unknown SMS variable's value was printed in clear.
    let secret = "unknown-but-s3cret";
    let vars = [("VCODE_TWILIO_API_SECRET".to_owned(), secret.to_owned())];
    let error = rows(vars).unwrap_err().to_string();
    assert!(
        error.contains("VCODE_TWILIO_API_SECRET") && !error.contains(secret),
        "{error}"
    );
}

#[test]
fn test_numbers_are_shown_masked_without_their_codes() {
    let table = render(&table(&[("VCODE_TEST_NUMBERS", "+8613800000000=123456")]));
    assert!(table.contains("+86138****0000=***"), "{table}");
    assert!(
        !table.contains("123456") && !table.contains("13800000000"),
        "{table}"
    );
}
