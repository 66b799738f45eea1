//! Runs a load test: one task per virtual user, at most `concurrency` of them logging in at a
//! time, until the stop rule says so; then their tallies are added up into the report.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tokio::sync::Semaphore;

use crate::client::Client;
use crate::options::{Options, Scenario, Stop};
use crate::progress::{Live, Progress};
use crate::report::Report;
use crate::tally::Tally;
use crate::user::{Shape, VirtualUser};

/// When users stop starting logins.
struct Budget {
    deadline: Option<Instant>,
    requests: Option<u64>,
    live: Arc<Live>,
}

impl Budget {
    fn new(stop: Stop, started: Instant, live: Arc<Live>) -> Self {
        match stop {
            Stop::After(duration) => Self {
                deadline: Some(started + duration),
                requests: None,
                live,
            },
            Stop::Requests(requests) => Self {
                deadline: None,
                requests: Some(requests),
                live,
            },
        }
    }

    fn spent(&self) -> bool {
        self.deadline
            .is_some_and(|deadline| Instant::now() >= deadline)
            || self
                .requests
                .is_some_and(|budget| self.live.requests() >= budget)
    }
}

/// Runs the load test described by `options` and returns its report. Nothing is printed but
/// the progress bar (unless `quiet` or `json`).
pub async fn run(options: &Options) -> anyhow::Result<Report> {
    options.check().map_err(anyhow::Error::msg)?;
    if options.scenario == Scenario::Pumping {
        anyhow::bail!("the pumping scenario plays no logins: it is run by pumping::run");
    }
    let client = Arc::new(Client::new(options.targets.clone())?);
    client.preflight().await?;

    let live = Arc::new(Live::default());
    let stop = options.stop();
    let progress = Progress::start(stop, live.clone(), !(options.quiet || options.json));
    let started = Instant::now();
    let budget = Arc::new(Budget::new(stop, started, live.clone()));
    let gate = Arc::new(Semaphore::new(options.concurrency));
    let shape = Shape {
        taps: options.taps,
        submits: options.submits,
    };

    let mut rng = StdRng::seed_from_u64(options.seed);
    let template = Tally::new()?;
    let mut users = Vec::with_capacity(options.users);
    for phone in phones(&mut rng, options.users) {
        let user = VirtualUser::new(
            phone,
            rng.random(),
            client.clone(),
            live.clone(),
            shape,
            template.clone(),
        );
        users.push(tokio::spawn(play(
            user,
            options.scenario,
            gate.clone(),
            budget.clone(),
        )));
    }

    let mut total = template;
    for user in users {
        total.merge(user.await.context("a virtual user stopped")?)?;
    }
    let elapsed = started.elapsed();
    progress.finish();
    Ok(Report::new(options, total, elapsed))
}

/// One user's life: log in whenever a slot is free, until the budget is spent.
async fn play(
    mut user: VirtualUser,
    scenario: Scenario,
    gate: Arc<Semaphore>,
    budget: Arc<Budget>,
) -> Tally {
    let mut inbox_open = false;
    // The semaphore is never closed; an error would only mean there is nothing left to do.
    while let Ok(_slot) = gate.acquire().await {
        if budget.spent() {
            break;
        }
        if !inbox_open {
            user.open_inbox().await;
            inbox_open = true;
        }
        user.login(scenario).await;
    }
    user.into_tally()
}

/// `count` distinct valid Chinese mobile numbers (E.164), drawn from `rng`: the same seed
/// gives the same users.
fn phones(rng: &mut StdRng, count: usize) -> Vec<String> {
    let mut seen = HashSet::with_capacity(count);
    let mut phones = Vec::with_capacity(count);
    while phones.len() < count {
        let phone = format!("+86139{:08}", rng.random_range(0..100_000_000u32));
        if seen.insert(phone.clone()) {
            phones.push(phone);
        }
    }
    phones
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn phones_are_valid_distinct_and_follow_the_seed() {
        let a = phones(&mut StdRng::seed_from_u64(7), 500);
        let b = phones(&mut StdRng::seed_from_u64(7), 500);
        let c = phones(&mut StdRng::seed_from_u64(8), 500);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.iter().collect::<HashSet<_>>().len(), 500);
        for phone in &a {
            let parsed = phonenumber::parse(None, phone).expect("a phone number");
            assert!(parsed.is_valid(), "{phone}");
            let e164 = parsed.format().mode(phonenumber::Mode::E164).to_string();
            assert_eq!(&e164, phone);
        }
    }

    #[test]
    fn the_budget_is_spent_by_time_or_by_requests() {
        let live = Arc::new(Live::default());
        let past = Instant::now() - Duration::from_secs(1);
        assert!(Budget::new(Stop::After(Duration::ZERO), past, live.clone()).spent());
        assert!(!Budget::new(Stop::After(Duration::from_secs(60)), past, live.clone()).spent());
        let by_requests = Budget::new(Stop::Requests(2), past, live.clone());
        assert!(!by_requests.spent());
        live.request();
        live.request();
        assert!(by_requests.spent());
    }
}
