//! The sample config file of docs/sms.md (`docs/vcode.example.toml`) is valid as committed:
//! with its secrets given as variables, the whole service's settings accept it.

use std::collections::HashMap;

#[test]
fn the_example_config_file_passes_the_settings_check() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/vcode.example.toml");
    let secrets: HashMap<&str, &str> = [
        ("VCODE_CONFIG_FILE", path),
        ("VCODE_ALIYUN_ACCESS_KEY_SECRET", "s3cret"),
        ("VCODE_TENCENT_SECRET_KEY", "s3cret"),
        ("VCODE_TWILIO_AUTH_TOKEN", "s3cret"),
    ]
    .into_iter()
    .collect();
    let settings = vcode::Settings::from_lookup(|var| secrets.get(var).map(|v| v.to_string()))
        .expect("docs/vcode.example.toml with its secrets set is valid");
    let sms = &settings.sms;
    assert_eq!(sms.routes.len(), 1);
    assert_eq!(sms.routes[0].calling_code, "+86");
    assert!(sms.aliyun.is_some() && sms.tencent.is_some() && sms.twilio.is_some());
    for purpose in ["login", "register", "reset_password", "bind_phone"] {
        assert!(
            sms.aliyun
                .as_ref()
                .unwrap()
                .templates
                .find(purpose, None)
                .is_some()
        );
        assert!(
            sms.tencent
                .as_ref()
                .unwrap()
                .templates
                .find(purpose, None)
                .is_some()
        );
    }
    let debug = format!("{settings:#?}");
    assert!(!debug.contains("s3cret"), "{debug}");
    // Without the secrets it names the first one missing.
    let error =
        vcode::Settings::from_lookup(|var| (var == "VCODE_CONFIG_FILE").then(|| path.to_owned()))
            .unwrap_err()
            .to_string();
    assert!(
        error.contains("_SECRET") || error.contains("_TOKEN"),
        "{error}"
    );
}
