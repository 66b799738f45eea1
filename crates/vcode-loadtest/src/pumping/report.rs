//! What a pumping run found: the bot's paid SMS per attacked prefix before the conversion guard
//! first refused it and in all, how long that took, the honest users' refusals and conversion,
//! and whether issue 25's goals were met; as a table, as JSON, and side by side with other runs.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use vcode_wire::ErrorCode;

use super::numbers::Prefix;

/// The envelope code of the conversion guard's refusal: `403`, a suspended or held-back prefix.
pub const GUARD_REFUSAL: u32 = ErrorCode::DestinationSuspended.code();

/// The goals: the bot is paid at most this many SMS per prefix it attacks...
pub const MAX_PAID_PER_PREFIX: u64 = 100;
/// ...and is first refused within this long of its first send, while the guard refuses no
/// honest send.
pub const MAX_TIME_TO_STOP: Duration = Duration::from_secs(120);
/// Issue 39's goal for a bot spread over 40 ranges: at most this many SMS in all…
pub const MAX_PAID_SPREAD: u64 = 200;
/// …for a bot that verifies a share of its own sends, into one range: at most this many…
pub const MAX_PAID_CONVERTING: u64 = 150;
/// …for a bot pumping a busy prefix with random numbers of it: at most this many…
pub const MAX_PAID_BUSY: u64 = 150;
/// …and stopped, not only slowed: none paid in the attack's last this long.
pub const STOPPED_FOR: Duration = Duration::from_secs(60);

/// How the service answered one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// 200: for a send, an SMS paid for.
    Ok,
    /// An error envelope, by its code.
    Refused(u32),
    /// No usable answer: what went wrong, kind only.
    Failed(String),
}

impl Answer {
    /// The answer to a call that came back with envelope `code` (or did not come back).
    pub fn of(reply: Result<u32, String>) -> Self {
        match reply {
            Ok(200) => Self::Ok,
            Ok(code) => Self::Refused(code),
            Err(kind) => Self::Failed(kind),
        }
    }
}

/// One send of the bot.
#[derive(Clone, Debug)]
pub struct BotSend {
    /// Index into the attacked prefixes.
    pub prefix: usize,
    /// When the answer came, counted from the bot's first send.
    pub answered_after: Duration,
    pub answer: Answer,
}

/// One honest user's login.
#[derive(Clone, Debug)]
pub struct HonestLogin {
    pub send: Answer,
    /// A number that verified before (`--busy-prefix`).
    pub returning: bool,
    /// When the send was answered, from the run's start.
    pub answered_after: Duration,
    /// Whether the user meant to type the code (some never do).
    pub types_code: bool,
    /// The verify, if the user got an SMS and typed its code.
    pub verify: Option<Answer>,
}

/// What a run was set up as (the options, with what the run made of them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Setup {
    pub label: Option<String>,
    pub targets: usize,
    pub seed: u64,
    /// Honest logins started per second.
    pub honest_rate: f64,
    /// Percent of honest users who never type their code.
    pub honest_abandon_percent: f64,
    /// Honest users type their code this long after the send, at most.
    pub typing_delay_max_secs: f64,
    /// Bot sends started per second.
    pub bot_rate: f64,
    /// Honest traffic alone before the bot's first send.
    pub bot_start_secs: f64,
    /// How long the bot pumped.
    pub bot_secs: f64,
    /// Sends per client (IPv4 address or IPv6 /64) the bot allowed itself.
    pub client_budget: u32,
    /// IPv4 addresses and IPv6 /64s the bot's sends came from.
    pub bot_clients: u64,
    /// Spread over 40 ranges (`--bot-spread`).
    #[serde(default)]
    pub bot_spread: bool,
    /// Percent of its paid sends the bot verified.
    #[serde(default)]
    pub bot_converts_percent: f64,
    /// Honest users and the bot in one busy prefix, half the honest users returning.
    #[serde(default)]
    pub busy_prefix: bool,
    /// The busy prefix is the mail domain gmail.com.
    #[serde(default)]
    pub mail: bool,
    /// The bot is a burst into the busy prefix: no honest user may be refused.
    #[serde(default)]
    pub burst: bool,
}

/// One attacked prefix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrefixFigures {
    pub prefix: String,
    pub region: String,
    pub sends: u64,
    /// Sends answered 200 over the whole run: SMS the operator paid for.
    pub paid: u64,
    /// Of `paid`, those answered before the prefix's first guard refusal (all of them if none).
    pub paid_before_first_refusal: u64,
    /// Seconds from the bot's first send to the prefix's first guard refusal.
    pub first_refusal_after_secs: Option<f64>,
    pub refused_by_guard: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BotFigures {
    pub sends: u64,
    pub paid: u64,
    pub paid_before_first_refusal: u64,
    /// Refusals by envelope code (40300: the guard).
    pub refused: BTreeMap<u32, u64>,
    /// Calls without an answer, by kind.
    pub failures: BTreeMap<String, u64>,
    /// Sends the bot did not make: every client had spent its budget.
    pub skipped: u64,
    /// The guard's first refusal of any of the bot's sends, into the attack.
    #[serde(default)]
    pub first_refusal_after_secs: Option<f64>,
    /// The last SMS paid to the bot, into the attack.
    #[serde(default)]
    pub last_paid_after_secs: Option<f64>,
    pub prefixes: Vec<PrefixFigures>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HonestFigures {
    pub logins: u64,
    /// Sends answered 200.
    pub sent: u64,
    /// Sends refused, by envelope code.
    pub refused: BTreeMap<u32, u64>,
    /// Of `refused`, by the conversion guard (40300): the goal is 0.
    pub refused_by_guard: u64,
    /// Calls (sends, outbox reads, verifies) without a usable answer, by kind.
    pub failures: BTreeMap<String, u64>,
    /// Users who got an SMS and meant to type it.
    pub typed: u64,
    /// Codes accepted.
    pub verified: u64,
    /// `verified / sent`: what the guard sees of honest traffic.
    pub conversion: Option<f64>,
    /// Returning users' sends (`--busy-prefix`), and those the guard refused (the goal: 0).
    #[serde(default)]
    pub returning: u64,
    #[serde(default)]
    pub returning_refused_by_guard: u64,
    /// New users' sends the guard refused, and the last such refusal, from the run's start.
    #[serde(default)]
    pub new_refused_by_guard: u64,
    #[serde(default)]
    pub last_new_refusal_secs: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Goals {
    pub max_paid_per_prefix: u64,
    pub max_secs_to_stop: f64,
    /// Each goal missed, said in a sentence; empty when every goal was met.
    pub missed: Vec<String>,
}

impl Goals {
    pub fn met(&self) -> bool {
        self.missed.is_empty()
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PumpingReport {
    pub setup: Setup,
    pub elapsed_secs: f64,
    pub bot: BotFigures,
    pub honest: HonestFigures,
    pub goals: Goals,
}

fn round_to(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}

fn secs(duration: Duration) -> f64 {
    round_to(duration.as_secs_f64(), 1)
}

impl PrefixFigures {
    /// The figures of `prefix` from every bot send (of any prefix).
    fn of(index: usize, prefix: &Prefix, sends: &[BotSend]) -> Self {
        let mut mine: Vec<&BotSend> = sends.iter().filter(|s| s.prefix == index).collect();
        mine.sort_by_key(|send| send.answered_after);
        let first_refusal = mine
            .iter()
            .find(|send| send.answer == Answer::Refused(GUARD_REFUSAL))
            .map(|send| send.answered_after);
        let paid = |send: &&&BotSend| send.answer == Answer::Ok;
        Self {
            prefix: prefix.e164.to_owned(),
            region: prefix.region.to_owned(),
            sends: mine.len() as u64,
            paid: mine.iter().filter(paid).count() as u64,
            paid_before_first_refusal: mine
                .iter()
                .filter(|send| first_refusal.is_none_or(|at| send.answered_after < at))
                .filter(paid)
                .count() as u64,
            first_refusal_after_secs: first_refusal.map(secs),
            refused_by_guard: mine
                .iter()
                .filter(|send| send.answer == Answer::Refused(GUARD_REFUSAL))
                .count() as u64,
        }
    }
}

impl BotFigures {
    pub fn new(prefixes: &[Prefix], sends: &[BotSend], skipped: u64) -> Self {
        let mut figures = Self {
            skipped,
            prefixes: prefixes
                .iter()
                .enumerate()
                .map(|(index, prefix)| PrefixFigures::of(index, prefix, sends))
                .collect(),
            ..Self::default()
        };
        for send in sends {
            figures.sends += 1;
            let at = secs(send.answered_after);
            match &send.answer {
                Answer::Ok => {
                    let last = figures.last_paid_after_secs.unwrap_or(0.0);
                    figures.last_paid_after_secs = Some(last.max(at));
                }
                Answer::Refused(GUARD_REFUSAL)
                    if figures
                        .first_refusal_after_secs
                        .is_none_or(|first| at < first) =>
                {
                    figures.first_refusal_after_secs = Some(at);
                }
                _ => {}
            }
            match &send.answer {
                Answer::Ok => figures.paid += 1,
                Answer::Refused(code) => *figures.refused.entry(*code).or_default() += 1,
                Answer::Failed(kind) => *figures.failures.entry(kind.clone()).or_default() += 1,
            }
        }
        figures.paid_before_first_refusal = figures
            .prefixes
            .iter()
            .map(|p| p.paid_before_first_refusal)
            .sum();
        figures
    }
}

impl HonestFigures {
    pub fn new(logins: &[HonestLogin]) -> Self {
        let mut figures = Self::default();
        for login in logins {
            figures.logins += 1;
            let by_guard = login.send == Answer::Refused(GUARD_REFUSAL);
            if login.returning {
                figures.returning += 1;
                figures.returning_refused_by_guard += u64::from(by_guard);
            } else if by_guard {
                figures.new_refused_by_guard += 1;
                let at = secs(login.answered_after);
                let last = figures.last_new_refusal_secs.unwrap_or(0.0);
                figures.last_new_refusal_secs = Some(last.max(at));
            }
            match &login.send {
                Answer::Ok => figures.sent += 1,
                Answer::Refused(code) => *figures.refused.entry(*code).or_default() += 1,
                Answer::Failed(kind) => *figures.failures.entry(kind.clone()).or_default() += 1,
            }
            if login.send == Answer::Ok && login.types_code {
                figures.typed += 1;
            }
            match &login.verify {
                Some(Answer::Ok) => figures.verified += 1,
                Some(Answer::Refused(code)) => {
                    *figures
                        .failures
                        .entry(format!("verify {code}"))
                        .or_default() += 1;
                }
                Some(Answer::Failed(kind)) => {
                    *figures.failures.entry(kind.clone()).or_default() += 1;
                }
                None => {}
            }
        }
        figures.refused_by_guard = figures.refused.get(&GUARD_REFUSAL).copied().unwrap_or(0);
        figures.conversion =
            (figures.sent > 0).then(|| round_to(figures.verified as f64 / figures.sent as f64, 3));
        figures
    }
}

impl Goals {
    /// Issue 25's goals against the figures of a run whose bot pumped for `attack_secs`.
    pub fn judge(bot: &BotFigures, honest: &HonestFigures, setup: &Setup) -> Self {
        let attack_secs = setup.bot_secs;
        let mut missed = Vec::new();
        // Issue 39: a spread bot, or one converting a share of its sends, is judged on the
        // whole attack: what it was paid in all, and whether it was stopped.
        let whole = match (setup.bot_spread, setup.bot_converts_percent > 0.0) {
            (true, _) => Some(MAX_PAID_SPREAD),
            (false, true) => Some(MAX_PAID_CONVERTING),
            (false, false) if setup.burst => None,
            (false, false) if setup.busy_prefix => Some(MAX_PAID_BUSY),
            (false, false) => None,
        };
        if let Some(max_paid) = whole {
            if bot.paid > max_paid {
                missed.push(format!(
                    "the bot was paid {} SMS in all (at most {max_paid})",
                    bot.paid
                ));
            }
            let stopped_by = attack_secs - STOPPED_FOR.as_secs_f64();
            if let Some(last) = bot.last_paid_after_secs.filter(|last| *last > stopped_by) {
                missed.push(format!(
                    "the bot was still paid {last} s into the attack (stopped: none in its last {} s)",
                    STOPPED_FOR.as_secs()
                ));
            }
        }
        // A burst is judged by what it costs the honest users, below.
        for prefix in bot
            .prefixes
            .iter()
            .filter(|_| whole.is_none() && !setup.burst)
        {
            if prefix.paid > MAX_PAID_PER_PREFIX {
                missed.push(format!(
                    "the bot was paid {} SMS into {} (at most {MAX_PAID_PER_PREFIX})",
                    prefix.paid, prefix.prefix
                ));
            }
            match prefix.first_refusal_after_secs {
                Some(after) if after <= MAX_TIME_TO_STOP.as_secs_f64() => {}
                Some(after) => missed.push(format!(
                    "{} was first refused {after} s into the attack (within {} s)",
                    prefix.prefix,
                    MAX_TIME_TO_STOP.as_secs()
                )),
                None => missed.push(format!(
                    "{} was never refused by the guard in {attack_secs} s of attack (the goal: \
                     within {} s)",
                    prefix.prefix,
                    MAX_TIME_TO_STOP.as_secs()
                )),
            }
        }
        // Other refusals (a quota, a store that timed out) are listed by the report, and are
        // not the guard's to answer for.
        // A busy prefix refused for its pump refuses its new users too (the report says how
        // many, and until when); its returning users never.
        if setup.busy_prefix && !setup.burst {
            if honest.returning_refused_by_guard > 0 {
                missed.push(format!(
                    "{} returning users were refused by the guard (none may be)",
                    honest.returning_refused_by_guard
                ));
            }
        } else if honest.refused_by_guard > 0 {
            missed.push(format!(
                "{} honest sends were refused by the guard (none may be)",
                honest.refused_by_guard
            ));
        }
        Self {
            max_paid_per_prefix: MAX_PAID_PER_PREFIX,
            max_secs_to_stop: MAX_TIME_TO_STOP.as_secs_f64(),
            missed,
        }
    }
}

impl PumpingReport {
    pub fn new(
        setup: Setup,
        elapsed: Duration,
        prefixes: &[Prefix],
        bot_sends: &[BotSend],
        skipped: u64,
        honest_logins: &[HonestLogin],
    ) -> Self {
        let bot = BotFigures::new(prefixes, bot_sends, skipped);
        let honest = HonestFigures::new(honest_logins);
        let goals = Goals::judge(&bot, &honest, &setup);
        Self {
            setup,
            elapsed_secs: secs(elapsed),
            bot,
            honest,
            goals,
        }
    }

    /// The report for a terminal.
    pub fn table(&self) -> String {
        let (setup, bot, honest) = (&self.setup, &self.bot, &self.honest);
        let mut out = String::new();
        let label = setup
            .label
            .as_deref()
            .map_or(String::new(), |l| format!(" ({l})"));
        let _ = writeln!(
            out,
            "pumping{label}: {} target(s), {:.1} s; honest users {}/s from the start, the bot {}/s \
             from {} s for {} s, from {} clients (IPv4 addresses and IPv6 /64s) of at most {} \
             sends each",
            setup.targets,
            self.elapsed_secs,
            setup.honest_rate,
            setup.bot_rate,
            setup.bot_start_secs,
            setup.bot_secs,
            setup.bot_clients,
            setup.client_budget,
        );
        let _ = writeln!(
            out,
            "\n{:<12} {:>6} {:>6} {:>18} {:>20} {:>8}",
            "bot prefix", "sends", "paid", "paid before 40300", "first 40300 after", "40300s"
        );
        for p in &bot.prefixes {
            let after = p
                .first_refusal_after_secs
                .map_or("never".to_owned(), |s| format!("{s:.1} s"));
            let _ = writeln!(
                out,
                "{:<12} {:>6} {:>6} {:>18} {:>20} {:>8}",
                format!("{} {}", p.prefix, p.region),
                p.sends,
                p.paid,
                p.paid_before_first_refusal,
                after,
                p.refused_by_guard
            );
        }
        let _ = writeln!(
            out,
            "{:<12} {:>6} {:>6} {:>18}",
            "total", bot.sends, bot.paid, bot.paid_before_first_refusal
        );
        let _ = writeln!(
            out,
            "bot refusals: {}; failed calls: {}; sends skipped (clients spent): {}",
            by_code(&bot.refused),
            by_kind(&bot.failures),
            bot.skipped
        );
        let conversion = honest
            .conversion
            .map_or("-".to_owned(), |c| format!("{:.1} %", c * 100.0));
        let _ = writeln!(
            out,
            "\nhonest: {} logins, {} sent, refused: {} (by the guard: {}); {} typed their code, \
             {} verified; conversion {conversion}; failed calls: {}",
            honest.logins,
            honest.sent,
            by_code(&honest.refused),
            honest.refused_by_guard,
            honest.typed,
            honest.verified,
            by_kind(&honest.failures),
        );
        if setup.busy_prefix {
            let attack_end = setup.bot_start_secs + setup.bot_secs;
            let after = honest
                .last_new_refusal_secs
                .map_or("-".to_owned(), |last| format!("{:.0} s", last - attack_end));
            let _ = writeln!(
                out,
                "busy prefix: {} returning users (refused by the guard: {}); new users refused by \
                 the guard: {} of {}, the last {after} after the pump stopped",
                honest.returning,
                honest.returning_refused_by_guard,
                honest.new_refused_by_guard,
                honest.logins - honest.returning,
            );
        }
        if self.goals.met() && setup.burst {
            let _ = writeln!(
                out,
                "\ngoals met: no honest user, returning or new, refused by the guard for the burst"
            );
        } else if self.goals.met() {
            let _ = writeln!(
                out,
                "\ngoals met: at most {} SMS paid per prefix, each stopped within {} s, no honest \
                 send refused by the guard",
                self.goals.max_paid_per_prefix, self.goals.max_secs_to_stop
            );
        } else {
            let _ = writeln!(out, "\ngoals missed:");
            for missed in &self.goals.missed {
                let _ = writeln!(out, "  - {missed}");
            }
        }
        out
    }
}

fn by_code(counts: &BTreeMap<u32, u64>) -> String {
    if counts.is_empty() {
        return "none".to_owned();
    }
    let parts: Vec<String> = counts.iter().map(|(c, n)| format!("{c} × {n}")).collect();
    parts.join(", ")
}

fn by_kind(counts: &BTreeMap<String, u64>) -> String {
    if counts.is_empty() {
        return "none".to_owned();
    }
    let parts: Vec<String> = counts.iter().map(|(k, n)| format!("{k} × {n}")).collect();
    parts.join(", ")
}

/// Several runs' reports, one line each: the script's summary.
pub fn pumping_table(reports: &[PumpingReport]) -> String {
    let label = |report: &PumpingReport| report.setup.label.clone().unwrap_or("-".to_owned());
    let width = reports
        .iter()
        .map(|r| label(r).chars().count())
        .max()
        .unwrap_or(0)
        .max(3);
    let mut out = format!(
        "{:<width$} {:>6} {:>8} {:>11} {:>13} {:>12} {:>9} {:>9} {:>10}  {}\n",
        "run",
        "bot/s",
        "prefixes",
        "paid (max)",
        "before 40300",
        "stopped by",
        "honest",
        "refused",
        "converted",
        "goals"
    );
    for report in reports {
        let bot = &report.bot;
        let max_paid = bot.prefixes.iter().map(|p| p.paid).max().unwrap_or(0);
        let max_before = bot
            .prefixes
            .iter()
            .map(|p| p.paid_before_first_refusal)
            .max()
            .unwrap_or(0);
        // The slowest prefix; "never" if one was not refused at all.
        let stopped = bot
            .prefixes
            .iter()
            .map(|p| p.first_refusal_after_secs)
            .try_fold(0f64, |slowest, after| after.map(|a| slowest.max(a)))
            .map_or("never".to_owned(), |s| format!("{s:.1} s"));
        let refused: u64 = report.honest.refused.values().sum();
        let conversion = report
            .honest
            .conversion
            .map_or("-".to_owned(), |c| format!("{:.1} %", c * 100.0));
        let _ = writeln!(
            out,
            "{:<width$} {:>6} {:>8} {:>11} {:>13} {:>12} {:>9} {:>9} {:>10}  {}",
            label(report),
            report.setup.bot_rate,
            bot.prefixes.len(),
            format!("{} ({max_paid})", bot.paid),
            max_before,
            stopped,
            report.honest.sent,
            format!("{refused} ({})", report.honest.refused_by_guard),
            conversion,
            if report.goals.met() { "met" } else { "MISSED" }
        );
    }
    out.push_str(
        "\npaid: SMS paid to the bot in all (the most into one prefix); before 40300: the most \
         paid into one prefix before its first guard refusal; stopped by: the slowest prefix's \
         first refusal, from the bot's first send; refused: honest sends refused (by the guard)\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFIXES: [Prefix; 2] = [
        Prefix {
            region: "GB",
            e164: "+447537",
            digits: 12,
        },
        Prefix {
            region: "DE",
            e164: "+491779",
            digits: 13,
        },
    ];

    fn send(prefix: usize, at_ms: u64, answer: Answer) -> BotSend {
        BotSend {
            prefix,
            answered_after: Duration::from_millis(at_ms),
            answer,
        }
    }

    fn login(send: Answer, types_code: bool, verify: Option<Answer>) -> HonestLogin {
        HonestLogin {
            returning: false,
            answered_after: Duration::ZERO,
            send,
            types_code,
            verify,
        }
    }

    /// Prefix 0: paid 3 times, refused at 5 s, then paid once more (a send answered after the
    /// refusal) and refused again. Prefix 1: paid twice, never refused. Answers are out of order,
    /// as concurrent sends finish.
    fn bot_sends() -> Vec<BotSend> {
        vec![
            send(0, 6_000, Answer::Refused(GUARD_REFUSAL)),
            send(0, 1_000, Answer::Ok),
            send(1, 1_500, Answer::Ok),
            send(0, 5_000, Answer::Refused(GUARD_REFUSAL)),
            send(0, 2_000, Answer::Ok),
            send(0, 4_999, Answer::Ok),
            send(0, 5_500, Answer::Ok),
            send(1, 3_000, Answer::Refused(ErrorCode::QuotaExceeded.code())),
            send(1, 3_500, Answer::Ok),
            send(1, 4_000, Answer::Failed("send: timeout".into())),
        ]
    }

    #[test]
    fn bot_figures_count_paid_sms_before_the_first_refusal_by_answer_time() {
        let bot = BotFigures::new(&PREFIXES, &bot_sends(), 7);
        let first = &bot.prefixes[0];
        assert_eq!(first.prefix, "+447537");
        assert_eq!(first.sends, 6);
        assert_eq!(first.paid, 4);
        assert_eq!(first.paid_before_first_refusal, 3);
        assert_eq!(first.first_refusal_after_secs, Some(5.0));
        assert_eq!(first.refused_by_guard, 2);
        let second = &bot.prefixes[1];
        assert_eq!(second.sends, 4);
        assert_eq!(second.paid, 2);
        assert_eq!(second.paid_before_first_refusal, 2, "never refused: all");
        assert_eq!(second.first_refusal_after_secs, None);
        assert_eq!(bot.sends, 10);
        assert_eq!(bot.paid, 6);
        assert_eq!(bot.paid_before_first_refusal, 5);
        assert_eq!(
            bot.refused,
            BTreeMap::from([(42902, 1), (GUARD_REFUSAL, 2)])
        );
        assert_eq!(bot.failures, BTreeMap::from([("send: timeout".into(), 1)]));
        assert_eq!(bot.skipped, 7);
    }

    #[test]
    fn honest_figures_count_refusals_by_code_and_conversion_of_sent_codes() {
        let logins = vec![
            login(Answer::Ok, true, Some(Answer::Ok)),
            login(Answer::Ok, true, Some(Answer::Ok)),
            login(Answer::Ok, true, Some(Answer::Ok)),
            login(Answer::Ok, true, Some(Answer::Refused(41000))),
            login(Answer::Ok, false, None),
            login(Answer::Refused(GUARD_REFUSAL), true, None),
            login(Answer::Refused(42902), false, None),
            login(Answer::Failed("send: timeout".into()), true, None),
        ];
        let honest = HonestFigures::new(&logins);
        assert_eq!(honest.logins, 8);
        assert_eq!(honest.sent, 5);
        assert_eq!(honest.typed, 4);
        assert_eq!(honest.verified, 3);
        assert_eq!(honest.conversion, Some(0.6));
        assert_eq!(honest.refused_by_guard, 1);
        assert_eq!(
            honest.refused,
            BTreeMap::from([(GUARD_REFUSAL, 1), (42902, 1)])
        );
        assert_eq!(
            honest.failures,
            BTreeMap::from([("send: timeout".into(), 1), ("verify 41000".into(), 1)])
        );
        assert_eq!(HonestFigures::new(&[]).conversion, None);
    }

    fn attack(bot_secs: f64, bot_spread: bool, bot_converts_percent: f64) -> Setup {
        Setup {
            label: None,
            targets: 1,
            seed: 1,
            honest_rate: 1.0,
            honest_abandon_percent: 10.0,
            typing_delay_max_secs: 20.0,
            bot_rate: 3.0,
            bot_start_secs: 30.0,
            bot_secs,
            client_budget: 20,
            bot_clients: 100,
            bot_spread,
            bot_converts_percent,
            busy_prefix: false,
            mail: false,
            burst: false,
        }
    }

    #[test]
    fn a_burst_is_judged_by_the_honest_users_it_costs_not_by_its_pay() {
        let burst = Setup {
            busy_prefix: true,
            burst: true,
            ..attack(10.0, false, 0.0)
        };
        // Paid in full and never refused: a burst into a prefix with history is no pump.
        let paid = BotFigures {
            paid: 50,
            prefixes: vec![PrefixFigures {
                prefix: "+86138".into(),
                region: "CN".into(),
                sends: 50,
                paid: 50,
                paid_before_first_refusal: 50,
                first_refusal_after_secs: None,
                refused_by_guard: 0,
            }],
            ..BotFigures::default()
        };
        assert!(Goals::judge(&paid, &HonestFigures::default(), &burst).met());
        // One new user refused by the guard is a miss (a pump may refuse new users; a burst not).
        let refused = HonestFigures {
            refused_by_guard: 1,
            new_refused_by_guard: 1,
            ..HonestFigures::default()
        };
        let missed = Goals::judge(&paid, &refused, &burst).missed;
        assert_eq!(
            missed,
            ["1 honest sends were refused by the guard (none may be)"]
        );
        let pump = Setup {
            burst: false,
            ..burst.clone()
        };
        assert!(Goals::judge(&paid, &refused, &pump).met());
    }

    #[test]
    fn a_spread_or_converting_bot_is_judged_on_the_whole_attack() {
        let bot = |paid, last_paid| BotFigures {
            paid,
            last_paid_after_secs: Some(last_paid),
            ..BotFigures::default()
        };
        let clean = HonestFigures::default();
        let spread = attack(360.0, true, 0.0);
        assert!(Goals::judge(&bot(200, 299.0), &clean, &spread).met());
        let missed = Goals::judge(&bot(201, 100.0), &clean, &spread).missed;
        assert_eq!(missed, ["the bot was paid 201 SMS in all (at most 200)"]);
        let missed = Goals::judge(&bot(150, 301.0), &clean, &spread).missed;
        assert!(missed[0].contains("still paid 301 s"), "{missed:?}");
        let converting = attack(300.0, false, 12.0);
        assert!(Goals::judge(&bot(150, 10.0), &clean, &converting).met());
        assert!(!Goals::judge(&bot(151, 10.0), &clean, &converting).met());
    }

    #[test]
    fn goals_are_missed_by_pay_by_time_and_by_the_guard_refusing_an_honest_send() {
        let stopped = |paid, after| PrefixFigures {
            prefix: "+447537".into(),
            region: "GB".into(),
            sends: 1_000,
            paid,
            paid_before_first_refusal: paid,
            first_refusal_after_secs: after,
            refused_by_guard: 1,
        };
        let bot = |prefixes| BotFigures {
            prefixes,
            ..BotFigures::default()
        };
        let clean = HonestFigures::default();
        let met = Goals::judge(
            &bot(vec![stopped(100, Some(120.0))]),
            &clean,
            &attack(150.0, false, 0.0),
        );
        assert!(met.met(), "{:?}", met.missed);
        let cases = [
            (stopped(101, Some(30.0)), "paid 101 SMS into +447537"),
            (stopped(10, Some(120.1)), "first refused 120.1 s"),
            (
                stopped(10, None),
                "never refused by the guard in 150 s of attack",
            ),
        ];
        for (prefix, expected) in cases {
            let goals = Goals::judge(&bot(vec![prefix]), &clean, &attack(150.0, false, 0.0));
            assert_eq!(goals.missed.len(), 1, "{:?}", goals.missed);
            assert!(goals.missed[0].contains(expected), "{:?}", goals.missed);
        }
        let refused = |codes: &[(u32, u64)]| {
            let refused = BTreeMap::from_iter(codes.iter().copied());
            HonestFigures {
                refused_by_guard: refused.get(&GUARD_REFUSAL).copied().unwrap_or(0),
                refused,
                ..HonestFigures::default()
            }
        };
        let by_others = refused(&[(42902, 1), (50300, 2)]);
        let goals = Goals::judge(
            &bot(vec![stopped(1, Some(1.0))]),
            &by_others,
            &attack(150.0, false, 0.0),
        );
        assert!(goals.met(), "listed, not the guard's: {:?}", goals.missed);
        let by_the_guard = refused(&[(GUARD_REFUSAL, 2), (50300, 2)]);
        let goals = Goals::judge(
            &bot(vec![stopped(1, Some(1.0))]),
            &by_the_guard,
            &attack(150.0, false, 0.0),
        );
        assert_eq!(
            goals.missed,
            ["2 honest sends were refused by the guard (none may be)"]
        );
    }

    #[test]
    fn reports_round_trip_through_json_and_print() {
        let setup = Setup {
            label: Some("Redis 3/s".into()),
            targets: 2,
            seed: 1,
            honest_rate: 1.0,
            honest_abandon_percent: 10.0,
            typing_delay_max_secs: 20.0,
            bot_rate: 3.0,
            bot_start_secs: 30.0,
            bot_secs: 150.0,
            client_budget: 20,
            bot_clients: 23,
            bot_spread: false,
            bot_converts_percent: 0.0,
            busy_prefix: false,
            mail: false,
            burst: false,
        };
        let logins = [login(Answer::Ok, true, Some(Answer::Ok))];
        let report = PumpingReport::new(
            setup,
            Duration::from_secs(181),
            &PREFIXES,
            &bot_sends(),
            0,
            &logins,
        );
        let json = serde_json::to_string(&report).unwrap();
        let back: PumpingReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back, report);
        let table = report.table();
        assert!(table.contains("+447537 GB"), "{table}");
        assert!(table.contains("never"), "{table}");
        assert!(table.contains("goals missed"), "{table}");
        let summary = pumping_table(&[report]);
        assert!(summary.contains("Redis 3/s"), "{summary}");
        assert!(summary.contains("6 (4)"), "{summary}");
        assert!(summary.contains("MISSED"), "{summary}");
    }
}
