//! `vcode check-config` as an operator runs it: the built binary with a clean environment and a
//! few variables. It prints a table of every setting (secrets as `***`), or stops naming the
//! variable that is wrong, as start-up does.

use std::process::{Command, Output};

/// Runs `vcode check-config` with exactly `vars` in its environment.
fn check_config(vars: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vcode"))
        .arg("check-config")
        .env_clear()
        .envs(vars.iter().copied())
        .output()
        .expect("the vcode binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The table's line for `variable`, split into its columns.
fn columns(stdout: &str, variable: &str) -> Vec<String> {
    let line = stdout
        .lines()
        .find(|line| line.split_whitespace().next() == Some(variable))
        .unwrap_or_else(|| panic!("no line for {variable} in\n{stdout}"));
    line.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn check_config_prints_a_table_with_secrets_masked() {
    let token = "t0ken-0123456789abcdef";
    let output = check_config(&[
        ("VCODE_CODE_LENGTH", "8"),
        ("VCODE_ADMIN_TOKEN", token),
        ("VCODE_REDIS_URL", "redis://:r3dis-s3cret@127.0.0.1:6379/0"),
        (
            "VCODE_SECRET_KEY",
            "f47e0980390012a7e0496c971eb69bff40c0f40c64ce0b6bb83f2f1c0a5a1fc0",
        ),
    ]);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert!(output.status.success(), "{stderr}");
    assert_eq!(
        stdout
            .lines()
            .next()
            .map(|l| l.split_whitespace().collect::<Vec<_>>()),
        Some(vec!["VARIABLE", "VALUE", "ORIGIN"])
    );
    assert_eq!(
        columns(&stdout, "VCODE_CODE_LENGTH"),
        ["VCODE_CODE_LENGTH", "8", "set"]
    );
    assert_eq!(
        columns(&stdout, "VCODE_CODE_TTL_SECS"),
        ["VCODE_CODE_TTL_SECS", "300", "default"]
    );
    assert_eq!(
        columns(&stdout, "VCODE_ADMIN_TOKEN"),
        ["VCODE_ADMIN_TOKEN", "***", "set"]
    );
    assert_eq!(
        columns(&stdout, "VCODE_SECRET_KEY"),
        ["VCODE_SECRET_KEY", "***", "set"]
    );
    assert_eq!(
        columns(&stdout, "VCODE_REDIS_URL"),
        ["VCODE_REDIS_URL", "redis://:***@127.0.0.1:6379/0", "set"]
    );
    for secret in [token, "r3dis-s3cret", "0011223344"] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{secret} shown"
        );
    }
    // Not a Rust `Debug` dump.
    assert!(!stdout.contains("Settings {"), "{stdout}");
}

#[test]
fn check_config_stops_naming_the_variable_that_is_wrong() {
    for (vars, expected) in [
        (
            vec![("VCODE_CODE_LENTH", "8")],
            "unknown variable VCODE_CODE_LENTH: did you mean VCODE_CODE_LENGTH?",
        ),
        (vec![("RUST_LOG", "vcode=loud")], "RUST_LOG=\"vcode=loud\""),
        (
            vec![("VCODE_LOG_FORMAT", "xml")],
            "VCODE_LOG_FORMAT=\"xml\": expected text or json",
        ),
        (vec![("VCODE_ADMIN_TOKEN", "  ")], "VCODE_ADMIN_TOKEN=\"\""),
        (
            vec![("VCODE_CODE_LENGTH", "3")],
            "VCODE_CODE_LENGTH=\"3\": expected a length from 4 to 10",
        ),
    ] {
        let output = check_config(&vars);
        let stderr = text(&output.stderr);
        assert!(!output.status.success(), "{vars:?} passed");
        assert!(stderr.contains(expected), "{vars:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{vars:?}: a table was printed");
    }
}

#[test]
fn help_says_what_vcode_is_now() {
    let output = Command::new(env!("CARGO_BIN_EXE_vcode"))
        .arg("--help")
        .env_clear()
        .output()
        .expect("the vcode binary runs");
    let help = text(&output.stdout);
    assert!(output.status.success(), "{help}");
    for said in [
        "SMS and email",
        "proof of work",
        "Twilio Verify",
        "PostgreSQL",
    ] {
        assert!(help.contains(said), "--help lacks {said:?}:\n{help}");
    }
}
