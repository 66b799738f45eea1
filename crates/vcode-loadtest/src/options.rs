//! What a load test does: targets, scenario, size, when to stop, seed and output (the
//! `vcode loadtest` flags).

use std::time::Duration;

use clap::{Args, ValueEnum};
use reqwest::Url;
use serde::{Deserialize, Serialize};

use crate::pumping::numbers::{BOT_PREFIXES, BUSY_DOMAIN, BUSY_PREFIX, Prefix};

/// What one virtual user's login looks like.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, ValueEnum, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// Tap "send" several times at once (double clicks, retries), then type the code of the
    /// first SMS received.
    ResendStorm,
    /// Send once; then one device verifies that code while a second device of the same user
    /// asks for a new code and, if one comes, types it.
    LoginVsResend,
    /// Send once, then submit the same correct code several times at once.
    DoubleSubmit,
    /// Each login picks one of the others at random (seeded).
    Mixed,
    /// Not logins: an SMS pumping bot beside honest users, to see the conversion guard stop
    /// it (see the "Pumping scenario" flags and `crate::pumping`).
    Pumping,
}

impl Scenario {
    /// The scenarios `mixed` picks from.
    pub const CONCRETE: [Self; 3] = [Self::ResendStorm, Self::LoginVsResend, Self::DoubleSubmit];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::ResendStorm => "resend-storm",
            Self::LoginVsResend => "login-vs-resend",
            Self::DoubleSubmit => "double-submit",
            Self::Mixed => "mixed",
            Self::Pumping => "pumping",
        }
    }
}

impl std::fmt::Display for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When the load test stops starting new logins (logins under way finish).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    After(Duration),
    Requests(u64),
}

pub const DEFAULT_USERS: usize = 100;
pub const DEFAULT_CONCURRENCY: usize = 32;
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);
pub const DEFAULT_SEED: u64 = 1;
pub const DEFAULT_TAPS: usize = 3;
pub const DEFAULT_SUBMITS: usize = 3;

/// Plays virtual users against running vcode instances (dev mode, one shared Redis) and counts
/// what went wrong for them: codes they received that were refused, codes accepted twice. The
/// service's settings (code lifetime, attempt limit) are not options: its answers tell them.
#[derive(Clone, Debug, Args)]
pub struct Options {
    /// Base URL of a vcode instance in dev mode; repeat for several instances sharing one
    /// Redis (requests are spread over them in turn).
    #[arg(long = "target", value_name = "URL", required = true, value_parser = parse_target)]
    pub targets: Vec<Url>,
    #[arg(long, value_enum, default_value_t = Scenario::Mixed)]
    pub scenario: Scenario,
    /// Virtual users, each with its own phone number.
    #[arg(long, default_value_t = DEFAULT_USERS)]
    pub users: usize,
    /// How many users are logging in at the same time.
    #[arg(long, default_value_t = DEFAULT_CONCURRENCY)]
    pub concurrency: usize,
    /// Stop starting logins after this long (`10s`, `1500ms`, `2m`; 10s unless --requests);
    /// in the pumping scenario, how long the bot pumps (150s unless set).
    #[arg(long, value_parser = parse_duration, conflicts_with = "requests")]
    pub duration: Option<Duration>,
    /// Stop starting logins once this many API requests (sends and verifies) were made.
    #[arg(long)]
    pub requests: Option<u64>,
    /// Seed for the phone numbers and the users' choices: the same seed plays the same users.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// Sends per login in resend-storm.
    #[arg(long, default_value_t = DEFAULT_TAPS)]
    pub taps: usize,
    /// Simultaneous submissions of the code in double-submit.
    #[arg(long, default_value_t = DEFAULT_SUBMITS)]
    pub submits: usize,
    /// A name for this run in reports (e.g. the strategy under test).
    #[arg(long)]
    pub label: Option<String>,
    /// Print the report as JSON on stdout (and no progress bar).
    #[arg(long)]
    pub json: bool,
    /// Exit non-zero if any anomaly was seen (or any request failed, which could hide one).
    #[arg(long)]
    pub expect_clean: bool,
    /// No progress bar (no progress lines in the pumping scenario).
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub pumping: PumpingOptions,
}

impl Options {
    /// The defaults of `vcode loadtest --target ...`.
    pub fn new(targets: Vec<Url>) -> Self {
        Self {
            targets,
            scenario: Scenario::Mixed,
            users: DEFAULT_USERS,
            concurrency: DEFAULT_CONCURRENCY,
            duration: None,
            requests: None,
            seed: DEFAULT_SEED,
            taps: DEFAULT_TAPS,
            submits: DEFAULT_SUBMITS,
            label: None,
            json: false,
            expect_clean: false,
            quiet: false,
            pumping: PumpingOptions::default(),
        }
    }

    pub fn stop(&self) -> Stop {
        match (self.requests, self.duration) {
            (Some(requests), _) => Stop::Requests(requests),
            (None, duration) => Stop::After(duration.unwrap_or(DEFAULT_DURATION)),
        }
    }

    /// Refuses option values that make no load test.
    pub fn check(&self) -> Result<(), String> {
        let rules: [(bool, &str); 5] = [
            (!self.targets.is_empty(), "at least one --target"),
            (self.users >= 1, "--users of at least 1"),
            (self.concurrency >= 1, "--concurrency of at least 1"),
            ((1..=20).contains(&self.taps), "--taps from 1 to 20"),
            ((2..=20).contains(&self.submits), "--submits from 2 to 20"),
        ];
        if self.scenario == Scenario::Pumping {
            if self.requests.is_some() {
                return Err(
                    "--requests does not apply to pumping: --duration says how long the bot pumps"
                        .to_owned(),
                );
            }
            self.pumping.check()?;
        }
        match rules.into_iter().find(|(ok, _)| !ok) {
            Some((_, expected)) => Err(format!("expected {expected}")),
            None => match self.stop() {
                Stop::After(duration) if duration.is_zero() => {
                    Err("expected a --duration above 0".to_owned())
                }
                Stop::Requests(0) => Err("expected --requests of at least 1".to_owned()),
                _ => Ok(()),
            },
        }
    }
}

/// An `http://` or `https://` base URL.
pub fn parse_target(raw: &str) -> Result<Url, String> {
    let url = Url::parse(raw).map_err(|e| format!("{raw:?}: {e}"))?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        _ => Err(format!("{raw:?}: expected an http:// or https:// URL")),
    }
}

/// `1500ms`, `10s`, `2m`, or a bare number of seconds.
pub fn parse_duration(raw: &str) -> Result<Duration, String> {
    let raw = raw.trim();
    let split = raw
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(raw.len());
    let (number, unit) = raw.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{raw:?}: expected a duration such as 10s, 1500ms or 2m"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        _ => return Err(format!("{raw:?}: the unit must be ms, s or m")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{raw:?}: {e}"))
}

/// The quickest an honest user types a code.
pub const MIN_TYPING: Duration = Duration::from_secs(2);

pub const DEFAULT_HONEST_RATE: f64 = 1.0;
pub const DEFAULT_HONEST_ABANDON: f64 = 10.0;
pub const DEFAULT_TYPING_DELAY: Duration = Duration::from_secs(20);
pub const DEFAULT_BOT_RATE: f64 = 3.0;
pub const DEFAULT_BOT_PREFIXES: usize = 3;
pub const DEFAULT_BOT_START: Duration = Duration::from_secs(30);
/// The service's default `VCODE_QUOTA_IP_HOUR`.
pub const DEFAULT_CLIENT_BUDGET: u32 = 20;

/// The pumping scenario's own flags.
#[derive(Clone, Debug, Args)]
#[command(next_help_heading = "Pumping scenario (--scenario pumping)")]
pub struct PumpingOptions {
    /// Honest logins started per second, from the start to the end of the attack.
    #[arg(long, default_value_t = DEFAULT_HONEST_RATE)]
    pub honest_rate: f64,
    /// Percent of honest users who never type their code.
    #[arg(long, default_value_t = DEFAULT_HONEST_ABANDON)]
    pub honest_abandon: f64,
    /// Honest users type their code between 2 s and this long after their send.
    #[arg(long, value_parser = parse_duration, default_value = "20s")]
    pub typing_delay: Duration,
    /// Bot sends started per second.
    #[arg(long, default_value_t = DEFAULT_BOT_RATE)]
    pub bot_rate: f64,
    /// How many ranges the bot pumps, 1 to 6 (+447537, +491779, +861709, +13057, +447588,
    /// +861992, in that order).
    #[arg(long, default_value_t = DEFAULT_BOT_PREFIXES)]
    pub bot_prefixes: usize,
    /// Spread pumping (issue 39): the bot sends into 40 Chinese mobile ranges at random
    /// instead of --bot-prefixes; its goals are then on the whole attack (at most 200 SMS
    /// paid, none in its last minute).
    #[arg(long)]
    pub bot_spread: bool,
    /// A busy prefix (issue 39): every honest user is of +86138, half of them returning
    /// (a number that verified earlier in the run, at least 70 s before), and the bot pumps
    /// random numbers of +86138. Honest traffic goes on for --honest-after past the attack.
    /// Goals: at most 150 SMS paid, no returning user refused.
    #[arg(long)]
    pub busy_prefix: bool,
    /// With --busy-prefix: the busy "prefix" is the mail domain gmail.com, its honest users'
    /// mailboxes and the bot's random addresses of it sent by mail (the service in dev mode).
    #[arg(long)]
    pub mail: bool,
    /// With --busy-prefix: the bot is a burst far smaller than the prefix's own traffic
    /// (issue 39: a prefix or domain with history is not held by one), so the goal is that no
    /// honest user, returning or new, is refused by the guard; what the burst is paid is
    /// reported, not judged.
    #[arg(long)]
    pub burst: bool,
    /// Honest traffic goes on this long after the bot stops (to see how long new users of a
    /// refused prefix are refused after the pump).
    #[arg(long, value_parser = parse_duration, default_value = "0s")]
    pub honest_after: Duration,
    /// Percent of its paid sends the bot verifies (SIMs it owns), 2 to 10 s after the send.
    #[arg(long, default_value_t = 0.0)]
    pub bot_converts: f64,
    /// Honest traffic alone for this long before the bot's first send.
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    pub bot_start: Duration,
    /// Sends per client (IPv4 address or IPv6 /64) the bot allows itself: the service's
    /// VCODE_QUOTA_IP_HOUR, so that no per-client limit stops it.
    #[arg(long, default_value_t = DEFAULT_CLIENT_BUDGET)]
    pub client_budget: u32,
}

impl Default for PumpingOptions {
    fn default() -> Self {
        Self {
            honest_rate: DEFAULT_HONEST_RATE,
            honest_abandon: DEFAULT_HONEST_ABANDON,
            typing_delay: DEFAULT_TYPING_DELAY,
            bot_rate: DEFAULT_BOT_RATE,
            bot_prefixes: DEFAULT_BOT_PREFIXES,
            bot_spread: false,
            busy_prefix: false,
            mail: false,
            burst: false,
            honest_after: Duration::ZERO,
            bot_converts: 0.0,
            bot_start: DEFAULT_BOT_START,
            client_budget: DEFAULT_CLIENT_BUDGET,
        }
    }
}

impl PumpingOptions {
    /// The busy prefix's range, or its mail domain with `--mail`.
    pub fn busy(&self) -> &'static Prefix {
        if self.mail {
            &BUSY_DOMAIN
        } else {
            &BUSY_PREFIX
        }
    }

    /// Refuses values that make no attack.
    pub fn check(&self) -> Result<(), String> {
        let rate = |r: f64| r.is_finite() && (0.01..=1000.0).contains(&r);
        let busy_only = self.busy_prefix || !(self.mail || self.burst);
        let rules: [(bool, &str); 7] = [
            (rate(self.honest_rate), "--honest-rate from 0.01 to 1000"),
            (rate(self.bot_rate), "--bot-rate from 0.01 to 1000"),
            (
                (0.0..=100.0).contains(&self.honest_abandon),
                "--honest-abandon from 0 to 100",
            ),
            (
                self.typing_delay >= MIN_TYPING,
                "a --typing-delay of at least 2s",
            ),
            (
                (1..=BOT_PREFIXES.len()).contains(&self.bot_prefixes),
                "--bot-prefixes from 1 to 6",
            ),
            (
                (0.0..=100.0).contains(&self.bot_converts),
                "--bot-converts from 0 to 100",
            ),
            (busy_only, "--mail and --burst only with --busy-prefix"),
        ];
        match rules.into_iter().find(|(ok, _)| !ok) {
            Some((_, expected)) => Err(format!("expected {expected}")),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        options: Options,
    }

    fn parse(args: &[&str]) -> Result<Options, clap::Error> {
        Cli::try_parse_from(std::iter::once("loadtest").chain(args.iter().copied()))
            .map(|cli| cli.options)
    }

    #[test]
    fn durations_take_ms_s_and_m() {
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("0.5s"), Ok(Duration::from_millis(500)));
        for bad in ["", "s", "10h", "-1s", "ten"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn flags_match_the_library_defaults() {
        let options = parse(&["--target", "http://127.0.0.1:8080"]).unwrap();
        let defaults = Options::new(options.targets.clone());
        assert_eq!(format!("{options:?}"), format!("{defaults:?}"));
        assert_eq!(options.stop(), Stop::After(DEFAULT_DURATION));
        assert_eq!(options.check(), Ok(()));
    }

    #[test]
    fn targets_repeat_and_requests_replace_the_duration() {
        let options = parse(&[
            "--target",
            "http://127.0.0.1:1",
            "--target",
            "http://127.0.0.1:2",
            "--requests",
            "500",
            "--scenario",
            "double-submit",
        ])
        .unwrap();
        assert_eq!(options.targets.len(), 2);
        assert_eq!(options.stop(), Stop::Requests(500));
        assert_eq!(options.scenario, Scenario::DoubleSubmit);
        assert!(
            parse(&[
                "--target",
                "http://x",
                "--requests",
                "1",
                "--duration",
                "1s"
            ])
            .is_err()
        );
        assert!(parse(&["--target", "ftp://x"]).is_err());
        assert!(parse(&[]).is_err(), "a target is required");
    }

    #[test]
    fn check_refuses_empty_loads() {
        let base = Options::new(vec![parse_target("http://127.0.0.1:1").unwrap()]);
        let cases: [fn(&mut Options); 5] = [
            |o| o.users = 0,
            |o| o.concurrency = 0,
            |o| o.submits = 1,
            |o| o.duration = Some(Duration::ZERO),
            |o| o.requests = Some(0),
        ];
        for change in cases {
            let mut options = base.clone();
            change(&mut options);
            assert!(options.check().is_err(), "{options:?}");
        }
    }

    #[test]
    fn scenario_names_are_the_flag_values() {
        for scenario in Scenario::CONCRETE
            .into_iter()
            .chain([Scenario::Mixed, Scenario::Pumping])
        {
            let parsed = Scenario::from_str(scenario.as_str(), false).unwrap();
            assert_eq!(parsed, scenario);
            let json = serde_json::to_string(&scenario).unwrap();
            assert_eq!(json, format!("\"{}\"", scenario.as_str()));
        }
    }
}
