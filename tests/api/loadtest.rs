//! A short `vcode loadtest` (the `vcode-loadtest` crate) against two in-process instances sharing
//! one harness-started redis-server, as the postmortem's servers shared theirs: `atomic` shows
//! no anomaly, the legacy strategies refuse codes their users were sent.

use std::time::Duration;

use vcode::Settings;
use vcode::config::AbuseSettings;
use vcode::postmortem::VerifyStrategy;
use vcode_loadtest::{Options, Report, Scenario};

use crate::support::{Backend, spawn_app_with, spawn_second_instance};

/// Two instances of `strategy` on one Redis, load-tested for a moment with every scenario.
async fn load(strategy: VerifyStrategy) -> Report {
    let configure = |settings: &mut Settings| {
        // Quotas would refuse the load itself; the load test measures the strategy.
        settings.abuse = AbuseSettings::unlimited();
        settings.verify_strategy = strategy;
        if strategy.is_legacy() {
            // The Go service knew no verification ids.
            settings.otp.verify_by = vcode::otp::VerifyBy::Phone;
        }
        settings.legacy_gap = Duration::from_millis(5);
    };
    let first = spawn_app_with(Backend::Redis, configure).await;
    let second = spawn_second_instance(&first, configure).await;
    let targets = [&first, &second]
        .map(|app| reqwest::Url::parse(&app.address).expect("an URL"))
        .to_vec();
    let mut options = Options::new(targets);
    options.scenario = Scenario::Mixed;
    options.users = 16;
    options.concurrency = 8;
    options.duration = Some(Duration::from_millis(1500));
    options.seed = 4;
    options.label = Some(strategy.to_string());
    options.quiet = true;
    vcode_loadtest::run(&options)
        .await
        .expect("the load test runs")
}

fn played_every_scenario(report: &Report) -> bool {
    Scenario::CONCRETE
        .iter()
        .all(|scenario| report.scenarios.get(scenario).is_some_and(|f| f.logins > 0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn atomic_has_no_anomaly_and_one_sms_per_login() {
    let report = load(VerifyStrategy::Atomic).await;
    let table = report.table();
    assert!(report.successful_verifications >= 20, "{table}");
    assert!(played_every_scenario(&report), "{table}");
    assert_eq!(report.false_rejections, 0, "{table}");
    assert_eq!(report.double_accepts, 0, "{table}");
    assert!(report.failures.is_empty(), "{table}");
    assert!(report.is_clean(), "{table}");
    // Duplicate sends were refused (429), so every SMS paid for exactly one login.
    assert!(report.sends.cooldown > 0, "{table}");
    assert_eq!(report.sms_sent, report.successful_verifications, "{table}");
    assert_eq!(report.logins_without_code, 0, "{table}");
    // The service's settings came from its answers, not from the load generator's defaults.
    let otp = Settings::default().otp;
    let announced = report.announced;
    assert_eq!(announced.code_ttl_secs, Some(otp.code_ttl.as_secs()));
    assert_eq!(
        announced.resend_cooldown_secs,
        Some(otp.resend_cooldown.as_secs())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn legacy_original_refuses_delivered_codes() {
    let report = load(VerifyStrategy::LegacyOriginal).await;
    let table = report.table();
    assert!(played_every_scenario(&report), "{table}");
    assert!(report.false_rejections > 0, "{table}");
    assert!(!report.is_clean(), "{table}");
    // No dedup: every tap is a paid SMS, more than one per login.
    assert_eq!(report.sends.cooldown, 0, "{table}");
    assert!(report.sms_sent > report.successful_verifications, "{table}");
    assert!(report.failures.is_empty(), "{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn legacy_postmortem_fix_still_refuses_delivered_codes() {
    let report = load(VerifyStrategy::LegacyPostmortemFix).await;
    let table = report.table();
    assert!(report.false_rejections > 0, "{table}");
    assert!(report.failures.is_empty(), "{table}");
}
