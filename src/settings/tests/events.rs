//! The event webhooks' settings: one endpoint from the variables, more from the config file,
//! each URL checked as the SMS webhook's, each secret a `whsec_` one, never shown.

use super::*;
use crate::events::EventKind;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const NEXT: &str = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

#[test]
fn no_endpoint_means_no_events() {
    assert!(!settings(&[]).unwrap().events.is_on());
}

#[test]
fn the_variables_endpoint_takes_a_rotation_and_a_filter() {
    let s = settings(&[
        ("VCODE_EVENTS_WEBHOOK_URL", "https://app.example/hooks"),
        ("VCODE_EVENTS_WEBHOOK_SECRET", &format!("{SECRET} {NEXT}")),
        (
            "VCODE_EVENTS_WEBHOOK_EVENTS",
            "verification.approved,prefix.suspended",
        ),
    ])
    .unwrap();
    let endpoint = &s.events.endpoints[0];
    assert_eq!(endpoint.secrets.len(), 2);
    assert!(endpoint.wants(EventKind::Approved));
    assert!(!endpoint.wants(EventKind::Created));
    assert_debug_hides(
        &s,
        &["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "AAECAwQF"],
        &["whsec_***"],
    );
}

#[test]
fn bad_event_settings_name_their_variable() {
    let error = |vars: &[(&str, &str)]| settings(vars).unwrap_err().to_string();
    let url = ("VCODE_EVENTS_WEBHOOK_URL", "https://app.example/hooks");
    let secret = ("VCODE_EVENTS_WEBHOOK_SECRET", SECRET);
    assert!(error(&[url]).contains("VCODE_EVENTS_WEBHOOK_SECRET"));
    assert!(error(&[secret]).contains("VCODE_EVENTS_WEBHOOK_URL"));
    let plain = error(&[
        ("VCODE_EVENTS_WEBHOOK_URL", "http://app.example/hooks"),
        secret,
    ]);
    assert!(
        plain.contains("VCODE_EVENTS_WEBHOOK_URL") && plain.contains("https"),
        "{plain}"
    );
    let unsigned = error(&[
        url,
        (
            "VCODE_EVENTS_WEBHOOK_SECRET",
            "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        ),
    ]);
    assert!(
        unsigned.contains("whsec_") && !unsigned.contains("MfKQ9"),
        "{unsigned}"
    );
    let kind = error(&[
        url,
        secret,
        ("VCODE_EVENTS_WEBHOOK_EVENTS", "verification.sent"),
    ]);
    assert!(kind.contains("VCODE_EVENTS_WEBHOOK_EVENTS"), "{kind}");
    // A loopback receiver may be plain http.
    let local = settings(&[
        ("VCODE_EVENTS_WEBHOOK_URL", "http://127.0.0.1:9000/hooks"),
        secret,
    ]);
    assert!(local.unwrap().events.is_on());
}

#[test]
fn the_config_file_adds_endpoints_with_their_own_secrets_and_filters() {
    let secret_file = temp_file("events-secret", NEXT);
    let file = temp_file(
        "events.toml",
        &format!(
            "[[events.endpoints]]\nurl = \"https://crm.example/vcode\"\nsecret_file = \"{}\"\nevents = [\"verification.approved\"]\n\n[[events.endpoints]]\nurl = \"https://audit.example/vcode\"\nsecret_file = \"{}\"\n",
            secret_file.display(),
            secret_file.display()
        ),
    );
    let s = settings(&[
        ("VCODE_CONFIG_FILE", file.to_str().unwrap()),
        ("VCODE_EVENTS_WEBHOOK_URL", "https://app.example/hooks"),
        ("VCODE_EVENTS_WEBHOOK_SECRET", SECRET),
    ])
    .unwrap();
    let urls: Vec<&str> = s.events.endpoints.iter().map(|e| e.url.as_str()).collect();
    assert_eq!(
        urls,
        [
            "https://app.example/hooks",
            "https://crm.example/vcode",
            "https://audit.example/vcode"
        ]
    );
    assert!(!s.events.endpoints[1].wants(EventKind::Created));
    assert!(s.events.endpoints[2].wants(EventKind::Created));
}

#[test]
fn a_redis_cluster_takes_events() {
    // Each slot has its outbox (store/redis/events.rs): no refusal at start-up any more.
    let s = settings(&[
        ("VCODE_REDIS_CLUSTER_NODES", "redis://127.0.0.1:7000"),
        ("VCODE_EVENTS_WEBHOOK_URL", "https://app.example/hooks"),
        ("VCODE_EVENTS_WEBHOOK_SECRET", SECRET),
    ])
    .unwrap();
    assert!(s.events.is_on());
}
