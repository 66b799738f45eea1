//! Twilio-compatible accounts as an operator sets them up: `vcode twilio-account` prints an
//! Account SID, its Auth Token and the `VCODE_TWILIO_COMPAT_ACCOUNTS` entry (the token's digest,
//! never the token); the entry authenticates that token only; a malformed entry stops
//! `check-config` naming the variable and not showing the value, from the variable or its file.

use std::process::Command;

use vcode::twilio_compat::TwilioAccounts;

fn vcode() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_vcode"));
    command.env_clear();
    command
}

#[test]
fn a_generated_account_authenticates_its_token_and_the_entry_holds_no_secret() {
    let output = vcode().arg("twilio-account").output().expect("vcode runs");
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    let value = |prefix: &str| {
        stdout
            .lines()
            .find_map(|line| line.strip_prefix(prefix).map(str::to_owned))
            .unwrap_or_else(|| panic!("no {prefix:?} in {stdout}"))
    };
    let account = value("Account SID: ");
    let token = value("Auth Token (give it to the application; it is not shown again): ");
    let entry = value("VCODE_TWILIO_COMPAT_ACCOUNTS entry: ");
    assert!(
        account.starts_with("AC") && account.len() == 34,
        "{account}"
    );
    assert_eq!(token.len(), 32);
    assert!(!entry.contains(&token), "{entry}");
    let accounts = TwilioAccounts::parse(&entry).unwrap();
    assert_eq!(
        accounts.authenticate(&account, &token),
        Some(account.as_str())
    );
    assert_eq!(accounts.authenticate(&account, &token[1..]), None);
    // Through the settings, from the variable and from its file.
    let file = std::env::temp_dir().join(format!("vcode-twilio-{account}"));
    std::fs::write(&file, format!("# one account\n{entry}\n")).unwrap();
    for (name, value) in [
        ("VCODE_TWILIO_COMPAT_ACCOUNTS", entry.clone()),
        (
            "VCODE_TWILIO_COMPAT_ACCOUNTS_FILE",
            file.display().to_string(),
        ),
    ] {
        let checked = vcode()
            .arg("check-config")
            .env(name, &value)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&checked.stdout);
        assert!(checked.status.success(), "{name}: {text}");
        assert!(
            !text.contains(&entry[35..]),
            "{name} shows the digest: {text}"
        );
    }
    std::fs::remove_file(file).unwrap();
}

#[test]
fn a_malformed_entry_stops_start_up_naming_the_variable_only() {
    let secret_looking = "AC0123456789abcdef0123456789abcdef:not-a-digest-9f8e7d";
    let checked = vcode()
        .arg("check-config")
        .env("VCODE_TWILIO_COMPAT_ACCOUNTS", secret_looking)
        .output()
        .unwrap();
    assert!(!checked.status.success());
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    assert!(said.contains("VCODE_TWILIO_COMPAT_ACCOUNTS"), "{said}");
    assert!(!said.contains("not-a-digest-9f8e7d"), "{said}");
}
