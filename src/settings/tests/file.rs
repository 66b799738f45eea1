//! The config file (`VCODE_CONFIG_FILE`): its top-level keys are the variables' lower-case names
//! without `VCODE_`; variables override it; secrets never come from it.

use super::*;

fn with_file(name: &str, toml: &str, vars: &[(&str, &str)]) -> Result<Settings, String> {
    let path = temp_file(name, toml);
    let mut all = vec![("VCODE_CONFIG_FILE", path.to_str().unwrap())];
    all.extend_from_slice(vars);
    let result = settings(&all).map_err(|error| error.to_string());
    std::fs::remove_file(path).unwrap();
    result
}

#[test]
fn file_keys_set_what_variables_do_and_variables_override_them() {
    let file = "code_length = 8\ndev_mode = true\npurposes = [\"login\", \"pay\"]\n\
                [sms]\ndefault_locale = \"en\"\n";
    let s = with_file("keys.toml", file, &[]).unwrap();
    assert_eq!(s.otp.code_length.get(), 8);
    assert!(s.dev_mode);
    let purposes: Vec<&str> = s.otp.purposes.iter().map(|p| p.as_str()).collect();
    assert_eq!(purposes, ["login", "pay"]);
    assert_eq!(s.sms.locales.default().to_string(), "en");
    let s = with_file("override.toml", file, &[("VCODE_CODE_LENGTH", "4")]).unwrap();
    assert_eq!(s.otp.code_length.get(), 4);
}

#[test]
fn bad_or_unknown_file_keys_are_named_as_keys() {
    assert_eq!(
        with_file("bad.toml", "code_length = 3\n", &[]).unwrap_err(),
        r#"code_length (VCODE_CONFIG_FILE)="3": expected a length from 4 to 10"#
    );
    assert_eq!(
        with_file("typo.toml", "code_lenth = 8\n", &[]).unwrap_err(),
        "unknown key in VCODE_CONFIG_FILE: code_lenth: did you mean code_length?"
    );
    let secret = with_file("secret.toml", "admin_token = \"0123456789abcdef\"\n", &[]);
    let error = secret.unwrap_err();
    assert!(
        error.contains("VCODE_ADMIN_TOKEN") && !error.contains("0123456789"),
        "{error}"
    );
}
