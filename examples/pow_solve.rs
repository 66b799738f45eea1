//! What the proof-of-work settings cost, on one core: challenges from `PowService` with the
//! settings the `VCODE_POW_*` variables give (the defaults when unset), solved by the `altcha`
//! crate's own solver on one thread, and the server's share (creating and verifying one).
//!
//! `cargo run --release --example pow_solve [-- CHALLENGES]` (20 by default).

use std::sync::Arc;
use std::time::{Duration, Instant};

use altcha::{SolveChallengeOptions, solve_challenge};
use base64::Engine;
use vcode::Settings;
use vcode::pow::PowService;
use vcode::store::MemoryStore;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let challenges: usize = std::env::args().nth(1).map_or(Ok(20), |arg| arg.parse())?;
    let settings = Settings::from_env()?.pow;
    println!(
        "{} cost {}, max counter {} (a challenge takes {}..={} steps), {challenges} challenges",
        settings.algorithm.as_str(),
        settings.cost,
        settings.max_counter,
        settings.max_counter / 2,
        settings.max_counter,
    );
    let store = Arc::new(MemoryStore::default());
    let stats = vcode::stats::Stats::spawn(store.clone(), std::time::Duration::from_secs(3600));
    let key = vcode::pow::random_key();
    let service = Arc::new(PowService::new(store, settings, &key, stats));

    let (mut solves, mut creates, mut verifies, mut steps) = (vec![], vec![], vec![], 0u64);
    for _ in 0..challenges {
        let started = Instant::now();
        let challenge = service.challenge().await?;
        creates.push(started.elapsed());

        let started = Instant::now();
        let solution = solve_challenge(SolveChallengeOptions {
            timeout_ms: 0,
            ..SolveChallengeOptions::new(&challenge)
        })?
        .expect("no timeout");
        solves.push(started.elapsed());
        steps += u64::from(solution.counter) + 1;

        let payload = serde_json::json!({ "challenge": challenge, "solution": solution });
        let payload = base64::engine::general_purpose::STANDARD.encode(payload.to_string());
        let started = Instant::now();
        service.verify(Some(&payload)).await?;
        verifies.push(started.elapsed());
    }
    let total: Duration = solves.iter().sum();
    println!(
        "one step: {:.0} µs",
        total.as_secs_f64() * 1e6 / steps as f64
    );
    report("solve (one core)", &mut solves);
    report("create (server)", &mut creates);
    report("verify (server)", &mut verifies);
    Ok(())
}

fn report(what: &str, times: &mut [Duration]) {
    times.sort();
    let at = |quantile: f64| times[((times.len() - 1) as f64 * quantile).round() as usize];
    let mean = times.iter().sum::<Duration>() / times.len() as u32;
    println!(
        "{what:>17}: mean {mean:.2?}, median {:.2?}, p90 {:.2?}, max {:.2?}",
        at(0.5),
        at(0.9),
        at(1.0),
    );
}
