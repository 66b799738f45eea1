//! `vcode loadtest --scenario pumping`: an SMS pumping attack beside honest traffic, against
//! live instances, to see whether the conversion guard stops the bot before it is paid much
//! and without refusing an honest user (issue 25's goals).
//!
//! Honest users arrive at `--honest-rate` a second from the start, each with a fresh mobile
//! number in one of twelve ranges of four countries (CN, GB, US, DE) and a client address of
//! its own; most read their code from the dev inbox and type it 2 s to `--typing-delay` later,
//! `--honest-abandon` percent never do. After `--bot-start` of honest traffic (a fresh store
//! has no baseline to compare with), the bot sends `--bot-rate` a second for `--duration`
//! (150 s unless set), to fresh numbers in the first `--bot-prefixes` ranges of
//! [`numbers::BOT_PREFIXES`], from many IPv4 addresses and IPv6 /64s, each within
//! `--client-budget` sends, and never verifies. Every send is answered or fails on its own
//! (open load: a slow answer does not slow the attack).
//!
//! The instances: dev mode (the outbox), this load generator trusted as their proxy (the client
//! addresses travel in `X-Forwarded-For`), the honest users' and the bot's countries served,
//! every other setting at its default; one store shared by every instance:
//!
//! ```text
//! VCODE_DEV_MODE=1 VCODE_TRUSTED_PROXIES=127.0.0.1/32 VCODE_ALLOWED_REGIONS=CN,DE,GB,US \
//!   VCODE_REDIS_URL=redis://127.0.0.1:6380 VCODE_BIND=127.0.0.1:8080 vcode
//! vcode loadtest --target http://127.0.0.1:8080 --scenario pumping --bot-rate 3
//! ```
//!
//! `scripts/pumping.sh` starts its own Redis and PostgreSQL and runs 3, 10 and 30 a second
//! on each. The report says what the bot was paid per prefix before the guard's first `40300`
//! and in all, when that first refusal came, and the honest refusals and conversion; the run
//! fails (exit status 1) if a goal was missed.

mod clients;
pub(crate) mod numbers;
mod report;

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use self::clients::{BotClients, honest_address};
use self::numbers::{BOT_PREFIXES, HONEST_PREFIXES, Prefix, SPREAD_PREFIXES};
use self::report::{Answer, BotSend, GUARD_REFUSAL, HonestLogin};
pub use self::report::{
    BotFigures, Goals, HonestFigures, PrefixFigures, PumpingReport, Setup, pumping_table,
};
use crate::client::Client;
pub use crate::options::PumpingOptions;
use crate::options::{MIN_TYPING, Options};

/// How long the bot pumps unless `--duration` says.
pub const DEFAULT_ATTACK: Duration = Duration::from_secs(150);
/// How often the progress line is printed.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// `vcode loadtest --scenario pumping`: runs, prints the report (a table, or JSON with
/// `--json`) on stdout, and fails if a goal was missed.
pub async fn run_cli(options: &Options) -> anyhow::Result<()> {
    let report = run(options).await?;
    if options.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table());
    }
    if !report.goals.met() {
        bail!("goals missed: {}", report.goals.missed.join("; "));
    }
    Ok(())
}

/// Plays the attack and the honest users against `options.targets` and returns the report.
/// Prints a progress line on stderr every 10 s and when a prefix is first refused, unless
/// `quiet`.
pub async fn run(options: &Options) -> anyhow::Result<PumpingReport> {
    options.check().map_err(anyhow::Error::msg)?;
    let pumping = &options.pumping;
    let attack = options.duration.unwrap_or(DEFAULT_ATTACK);
    let client = Arc::new(Client::new(options.targets.clone())?);
    client.preflight().await?;

    let prefixes = if pumping.bot_spread {
        &SPREAD_PREFIXES[..]
    } else if pumping.busy_prefix {
        std::slice::from_ref(pumping.busy())
    } else {
        &BOT_PREFIXES[..pumping.bot_prefixes]
    };
    // Enough clients for every send the attack plans, and one more round.
    let planned = (pumping.bot_rate * attack.as_secs_f64()).ceil() as u64 + 1;
    let bot_clients = BotClients::new(planned, pumping.client_budget);
    let mut seeds = StdRng::seed_from_u64(options.seed);
    let (honest_rng, bot_rng) = (
        StdRng::seed_from_u64(seeds.random()),
        StdRng::seed_from_u64(seeds.random()),
    );

    let live = Arc::new(Live::new(prefixes, !options.quiet));
    let started = Instant::now();
    let progress = tokio::spawn(live.clone().report_every(PROGRESS_EVERY));
    let honest = tokio::spawn(honest_traffic(
        client.clone(),
        live.clone(),
        pumping.clone(),
        started + pumping.bot_start + attack + pumping.honest_after,
        honest_rng,
        started,
    ));
    let setup = Setup {
        label: options.label.clone(),
        targets: options.targets.len(),
        seed: options.seed,
        honest_rate: pumping.honest_rate,
        honest_abandon_percent: pumping.honest_abandon,
        typing_delay_max_secs: pumping.typing_delay.as_secs_f64(),
        bot_rate: pumping.bot_rate,
        bot_start_secs: pumping.bot_start.as_secs_f64(),
        bot_secs: attack.as_secs_f64(),
        client_budget: pumping.client_budget,
        bot_clients: bot_clients.groups(),
        bot_spread: pumping.bot_spread,
        bot_converts_percent: pumping.bot_converts,
        busy_prefix: pumping.busy_prefix,
        mail: pumping.mail,
        burst: pumping.burst,
    };
    let bot = Bot {
        client,
        live: live.clone(),
        prefixes,
        clients: bot_clients,
        rate: pumping.bot_rate,
        converts: pumping.bot_converts,
        rng: bot_rng,
    };
    live.say(format_args!(
        "honest users of {} from the start, {}/s; the bot pumps {} from {:?}, {}/s for {:?}",
        numbers::regions().join(", "),
        pumping.honest_rate,
        prefixes
            .iter()
            .map(|p| p.e164)
            .collect::<Vec<_>>()
            .join(", "),
        pumping.bot_start,
        pumping.bot_rate,
        attack
    ));
    tokio::time::sleep(pumping.bot_start).await;
    live.bot_started();
    let (bot_sends, skipped) = bot.pump(attack).await?;
    let honest_logins = honest.await.context("the honest users stopped")??;
    progress.abort();
    Ok(PumpingReport::new(
        setup,
        started.elapsed(),
        prefixes,
        &bot_sends,
        skipped,
        &honest_logins,
    ))
}

/// Honest users, one every `1 / honest_rate` seconds until `until`; their logins once all
/// have finished.
async fn honest_traffic(
    client: Arc<Client>,
    live: Arc<Live>,
    options: PumpingOptions,
    until: Instant,
    mut rng: StdRng,
    started: Instant,
) -> anyhow::Result<Vec<HonestLogin>> {
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / options.honest_rate));
    // Late ticks are caught up: the rate is what was asked for, on average.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let mut users = Vec::new();
    // With --busy-prefix: numbers that verified, and when, for returning users to take.
    let verified: Arc<std::sync::Mutex<Vec<(String, Instant)>>> = Arc::default();
    for index in 0.. {
        if ticks.tick().await.into_std() >= until {
            break;
        }
        let returning = options.busy_prefix && rng.random_range(0..2) == 0;
        let reused = returning
            .then(|| {
                let mut verified = verified.lock().expect("verified numbers");
                // At least 70 s since its verify: past the resend cooldown.
                let ready = verified
                    .iter()
                    .position(|(_, at)| at.elapsed() >= Duration::from_secs(70))?;
                Some(verified.swap_remove(ready).0)
            })
            .flatten();
        let prefix = if options.busy_prefix {
            options.busy()
        } else {
            &HONEST_PREFIXES[rng.random_range(..HONEST_PREFIXES.len())]
        };
        let user = HonestUser {
            returning: reused.is_some(),
            phone: reused.unwrap_or_else(|| prefix.draw(&mut rng)),
            started,
            verified: verified.clone(),
            from: honest_address(index),
            types_code: rng.random_range(0.0..100.0) >= options.honest_abandon,
            typing: Duration::from_secs_f64(
                rng.random_range(MIN_TYPING.as_secs_f64()..=options.typing_delay.as_secs_f64()),
            ),
        };
        users.push(tokio::spawn(user.login(client.clone(), live.clone())));
    }
    let mut logins = Vec::with_capacity(users.len());
    for user in users {
        logins.push(joined(user).await?);
    }
    Ok(logins)
}

/// One honest user: a fresh number (or, returning, one that verified before) and address,
/// and whether and when the code is typed.
struct HonestUser {
    phone: String,
    returning: bool,
    started: Instant,
    /// Where a verified number goes for a later returning user.
    verified: Arc<std::sync::Mutex<Vec<(String, Instant)>>>,
    from: IpAddr,
    types_code: bool,
    typing: Duration,
}

impl HonestUser {
    /// Sends; if an SMS came and the user means to, reads it and types its code.
    async fn login(self, client: Arc<Client>, live: Arc<Live>) -> HonestLogin {
        let reply = client.send_from(&self.phone, self.from).await;
        let answered_after = self.started.elapsed();
        let verification_id = reply.as_ref().ok().and_then(|(_, id)| id.clone());
        let send = Answer::of(reply.map(|(code, _)| code));
        live.honest(&send);
        let verify = if send == Answer::Ok && self.types_code {
            tokio::time::sleep(self.typing).await;
            Some(match client.outbox(&self.phone).await {
                // The newest SMS is this send's (the number is fresh; a rerun's are older).
                Ok(messages) => match messages.last() {
                    Some(sms) => Answer::of(
                        client
                            .verify_from(
                                verification_id.as_deref(),
                                &self.phone,
                                &sms.code,
                                self.from,
                            )
                            .await,
                    ),
                    None => Answer::Failed("outbox: no SMS after a 200".to_owned()),
                },
                Err(error) => Answer::Failed(error.to_string()),
            })
        } else {
            None
        };
        if verify == Some(Answer::Ok) {
            let mut verified = self.verified.lock().expect("verified numbers");
            verified.push((self.phone.clone(), Instant::now()));
        }
        HonestLogin {
            send,
            returning: self.returning,
            answered_after,
            types_code: self.types_code,
            verify,
        }
    }
}

/// The pumping bot: fresh numbers of its prefixes, sent from its clients in turn, verified
/// (`converts` percent of those paid) only as SIMs it owns would be.
struct Bot<'a> {
    client: Arc<Client>,
    live: Arc<Live>,
    prefixes: &'a [Prefix],
    clients: BotClients,
    rate: f64,
    converts: f64,
    rng: StdRng,
}

impl Bot<'_> {
    /// Sends `rate` a second for `attack`; every send's answer, and how many sends were skipped
    /// because every client had spent its budget.
    async fn pump(mut self, attack: Duration) -> anyhow::Result<(Vec<BotSend>, u64)> {
        let started = Instant::now();
        let until = started + attack;
        let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / self.rate));
        ticks.set_missed_tick_behavior(MissedTickBehavior::Burst);
        let mut sends: Vec<JoinHandle<BotSend>> = Vec::new();
        let mut skipped = 0;
        while ticks.tick().await.into_std() < until {
            let Some(from) = self.clients.next(&mut self.rng) else {
                skipped += 1;
                continue;
            };
            let prefix = self.rng.random_range(..self.prefixes.len());
            let phone = self.prefixes[prefix].draw(&mut self.rng);
            let (client, live) = (self.client.clone(), self.live.clone());
            let verifies = self.rng.random_range(0.0..100.0) < self.converts;
            let typing = Duration::from_secs_f64(self.rng.random_range(2.0..10.0));
            sends.push(tokio::spawn(async move {
                let reply = client.send_from(&phone, from).await;
                let id = reply.as_ref().ok().and_then(|(_, id)| id.clone());
                let answer = Answer::of(reply.map(|(code, _)| code));
                let answered_after = started.elapsed();
                live.bot(prefix, &answer, answered_after);
                if verifies && answer == Answer::Ok {
                    tokio::time::sleep(typing).await;
                    if let Ok(messages) = client.outbox(&phone).await
                        && let Some(sms) = messages.last()
                    {
                        let _ = client
                            .verify_from(id.as_deref(), &phone, &sms.code, from)
                            .await;
                    }
                }
                BotSend {
                    prefix,
                    answered_after,
                    answer,
                }
            }));
        }
        let mut answered = Vec::with_capacity(sends.len());
        for send in sends {
            answered.push(joined(send).await?);
        }
        Ok((answered, skipped))
    }
}

/// A spawned task's result; its panic re-raised here.
async fn joined<T>(handle: JoinHandle<T>) -> anyhow::Result<T> {
    match handle.await {
        Ok(value) => Ok(value),
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        Err(_) => bail!("a task was cancelled"),
    }
}

/// Counters the progress lines read while the run goes.
struct Live {
    visible: bool,
    started: Instant,
    bot_started: std::sync::OnceLock<Instant>,
    honest_sent: AtomicU64,
    honest_refused: AtomicU64,
    bot_sends: AtomicU64,
    bot_paid: AtomicU64,
    bot_refused_by_guard: AtomicU64,
    /// Per attacked prefix: SMS paid so far, and whether the guard has refused it yet.
    prefixes: Vec<(String, AtomicU64, AtomicBool)>,
}

impl Live {
    fn new(prefixes: &[Prefix], visible: bool) -> Self {
        Self {
            visible,
            started: Instant::now(),
            bot_started: std::sync::OnceLock::new(),
            honest_sent: AtomicU64::new(0),
            honest_refused: AtomicU64::new(0),
            bot_sends: AtomicU64::new(0),
            bot_paid: AtomicU64::new(0),
            bot_refused_by_guard: AtomicU64::new(0),
            prefixes: prefixes
                .iter()
                .map(|p| (p.e164.to_owned(), AtomicU64::new(0), AtomicBool::new(false)))
                .collect(),
        }
    }

    fn bot_started(&self) {
        let _ = self.bot_started.set(Instant::now());
        self.say(format_args!("the bot starts"));
    }

    fn honest(&self, send: &Answer) {
        let counter = match send {
            Answer::Ok => &self.honest_sent,
            Answer::Refused(_) => &self.honest_refused,
            Answer::Failed(_) => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn bot(&self, prefix: usize, answer: &Answer, after: Duration) {
        self.bot_sends.fetch_add(1, Ordering::Relaxed);
        let (name, paid, refused) = &self.prefixes[prefix];
        match answer {
            Answer::Ok => {
                self.bot_paid.fetch_add(1, Ordering::Relaxed);
                paid.fetch_add(1, Ordering::Relaxed);
            }
            Answer::Refused(GUARD_REFUSAL) => {
                self.bot_refused_by_guard.fetch_add(1, Ordering::Relaxed);
                if !refused.swap(true, Ordering::Relaxed) {
                    self.say(format_args!(
                        "{name} first refused by the guard, {:.1} s into the attack, {} SMS paid \
                         into it so far",
                        after.as_secs_f64(),
                        paid.load(Ordering::Relaxed)
                    ));
                }
            }
            Answer::Refused(_) | Answer::Failed(_) => {}
        }
    }

    /// A line on stderr, stamped with the time since the start.
    fn say(&self, what: std::fmt::Arguments<'_>) {
        if self.visible {
            eprintln!("{:>6.1} s  {what}", self.started.elapsed().as_secs_f64());
        }
    }

    async fn report_every(self: Arc<Self>, period: Duration) {
        let mut ticks = tokio::time::interval(period);
        ticks.tick().await;
        loop {
            ticks.tick().await;
            let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
            let bot = match self.bot_started.get() {
                Some(_) => format!(
                    "bot: {} sends, {} paid, {} refused by the guard",
                    load(&self.bot_sends),
                    load(&self.bot_paid),
                    load(&self.bot_refused_by_guard)
                ),
                None => "bot: not yet".to_owned(),
            };
            self.say(format_args!(
                "honest: {} sent, {} refused; {bot}",
                load(&self.honest_sent),
                load(&self.honest_refused)
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_refuses_attacks_that_make_no_sense() {
        assert_eq!(PumpingOptions::default().check(), Ok(()));
        let cases: [fn(&mut PumpingOptions); 9] = [
            |o| o.mail = true,
            |o| o.burst = true,
            |o| o.honest_rate = 0.0,
            |o| o.bot_rate = f64::NAN,
            |o| o.bot_rate = 1e6,
            |o| o.honest_abandon = 101.0,
            |o| o.typing_delay = Duration::from_secs(1),
            |o| o.bot_prefixes = 0,
            |o| o.bot_prefixes = 7,
        ];
        for change in cases {
            let mut options = PumpingOptions::default();
            change(&mut options);
            assert!(options.check().is_err(), "{options:?}");
        }
    }
}
