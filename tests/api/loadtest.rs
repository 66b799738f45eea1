//! A short `vcode loadtest` (the `vcode-loadtest` crate) against two in-process instances sharing
//! one harness-started redis-server, as the postmortem's servers shared theirs: `atomic` shows
//! no anomaly, the legacy strategies refuse codes their users were sent. And a short pumping
//! scenario against the same: its bot's client fan-out stays within the service's own
//! per-client budget, and its honest users get and type their codes.

use std::time::Duration;

use vcode::Settings;
use vcode::client_ip::TrustedProxies;
use vcode::otp::VerifyBy;
use vcode::postmortem::VerifyStrategy;
use vcode::settings::{AbuseSettings, Regions};
use vcode_loadtest::pumping::PumpingReport;
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
            settings.otp.verify_by = VerifyBy::Phone;
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

/// The service's per-client budget in the pumping runs: small, so that a short run reaches it.
const CLIENT_BUDGET: u32 = 2;

/// Two instances on one Redis with the per-client budget at [`CLIENT_BUDGET`], trusting the
/// load generator as their proxy and serving the simulation's countries, the fraud guard's
/// levels refusing past `evidence` unexplained sends (`None`: the harness's, out of reach); a
/// pumping run of 4 s at 50 sends a second, the bot allowing itself `bot_budget` sends per
/// client.
async fn pump(bot_budget: u32, evidence: Option<u64>) -> PumpingReport {
    let configure = |settings: &mut Settings| {
        // The service's own default, whatever the harness's: honest users must carry the id
        // their send answered.
        settings.otp.verify_by = VerifyBy::default();
        if let Some(evidence) = evidence {
            settings.fraud.evidence = evidence;
        }
        settings.abuse.sends_per_ip_hour = CLIENT_BUDGET;
        settings.abuse.trusted_proxies = TrustedProxies::parse("127.0.0.1/32").unwrap();
        settings.abuse.allowed_regions = Regions::parse("CN,DE,GB,US").unwrap();
    };
    let first = spawn_app_with(Backend::Redis, configure).await;
    let second = spawn_second_instance(&first, configure).await;
    let targets = [&first, &second]
        .map(|app| reqwest::Url::parse(&app.address).expect("an URL"))
        .to_vec();
    let mut options = Options::new(targets);
    options.scenario = Scenario::Pumping;
    options.duration = Some(Duration::from_secs(4));
    options.quiet = true;
    let pumping = &mut options.pumping;
    pumping.bot_rate = 50.0;
    pumping.bot_start = Duration::from_secs(1);
    pumping.client_budget = bot_budget;
    pumping.honest_rate = 5.0;
    pumping.honest_abandon = 0.0;
    pumping.typing_delay = Duration::from_secs(2);
    vcode_loadtest::pumping::run(&options)
        .await
        .expect("the simulation runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_pumping_bot_stays_within_the_per_client_budget_and_honest_users_verify() {
    // The guard's levels out of reach (the harness's): this run is about the client quota.
    let report = pump(CLIENT_BUDGET, None).await;
    let table = report.table();
    let bot = &report.bot;
    // 200 sends from 101 clients, two each at most: not one refused by the client quota.
    assert_eq!(report.setup.bot_clients, 101, "{table}");
    assert_eq!(bot.sends, 200, "{table}");
    assert_eq!(bot.skipped, 0, "{table}");
    assert!(!bot.refused.contains_key(&42902), "{table}");
    assert!(bot.failures.is_empty(), "{table}");
    assert_eq!(
        bot.prefixes.iter().map(|p| p.sends).sum::<u64>(),
        200,
        "{table}"
    );
    // Every honest user was sent a code, read it from the outbox and typed it.
    let honest = &report.honest;
    assert!(honest.logins >= 20, "{table}");
    assert_eq!(honest.sent, honest.logins, "{table}");
    assert!(honest.refused.is_empty(), "{table}");
    assert!(honest.failures.is_empty(), "{table}");
    assert_eq!(honest.verified, honest.sent, "{table}");
    assert_eq!(honest.conversion, Some(1.0), "{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_bot_that_overspends_its_clients_is_refused_by_the_client_quota() {
    // The control: a third send per client is over the service's budget of two.
    let report = pump(CLIENT_BUDGET + 1, None).await;
    let table = report.table();
    let over_quota = report.bot.refused.get(&42902).copied().unwrap_or(0);
    assert!(over_quota > 0, "{table}");
    assert_eq!(report.honest.sent, report.honest.logins, "{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_report_counts_what_the_guard_let_through_before_it_refused() {
    // The levels at the standard handful (10): each of the bot's ranges, which no honest user
    // shares and which have no history, is refused by its 11th unexplained send at the latest
    // (its own level, counted exactly in the store), sooner if its country or the service is
    // found pumped first (the bot's three ranges together), well within the run; honest users
    // (verifying in 2 s) are never refused. None of the bot's sends is paid after its range's
    // first refusal: a refused send stays in its levels' recent counts.
    let report = pump(CLIENT_BUDGET, Some(10)).await;
    let table = report.table();
    let bot = &report.bot;
    for prefix in &bot.prefixes {
        assert!(prefix.first_refusal_after_secs.is_some(), "{table}");
        assert!(
            (1..=10).contains(&prefix.paid_before_first_refusal),
            "{table}"
        );
        assert_eq!(prefix.paid, prefix.paid_before_first_refusal, "{table}");
        assert_eq!(
            prefix.refused_by_guard,
            prefix.sends - prefix.paid,
            "{table}"
        );
    }
    assert_eq!(
        bot.paid,
        bot.prefixes.iter().map(|p| p.paid).sum::<u64>(),
        "{table}"
    );
    assert!(bot.paid <= 30, "{table}");
    assert_eq!(report.honest.refused_by_guard, 0, "{table}");
    assert_eq!(report.honest.verified, report.honest.sent, "{table}");
    assert!(report.goals.met(), "{table}");
}
