//! Load that keeps sending and verifying codes while a test fails a Redis primary over, and
//! what it saw: how long requests failed, how many, how slow the slowest was, and how many
//! acknowledged codes the failover lost (Redis replication is asynchronous).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};
use vcode::Settings;
use vcode::settings::{AbuseSettings, StoreSettings};
use vcode_wire::{DevInboxData, DevInboxQuery, SendRequest, VerifyRequest, paths};

use super::{Backend, TestApp, random_phone, spawn_app_with};

/// Concurrent virtual users.
const USERS: usize = 8;
/// Load before the disruption, so connections, scripts and lazy statics are warm: every user
/// has verified a code, and at least this long has passed.
const WARM_UP: Duration = Duration::from_millis(500);
/// Recovered: the topology changed and no request failed for this long.
const CALM: Duration = Duration::from_millis(1500);
/// The load stops this long after the disruption even if it never recovered.
const GIVE_UP: Duration = Duration::from_secs(30);

/// vcode (dev mode, quotas off: the load measures the store) on `store`.
pub async fn spawn_app_on(store: StoreSettings) -> TestApp {
    spawn_app_with(Backend::Memory, |settings: &mut Settings| {
        settings.store = store;
        // These tests send to many numbers and verify few: no limit of the service's, the
        // fraud guard's neither, may answer for the store under test.
        settings.abuse = AbuseSettings::unlimited();
        settings.fraud.level = vcode::fraud::Level::Off;
    })
    .await
}

/// Documented in the README: after a primary fails, requests succeed again within this.
const RECOVERY_BOUND: Duration = Duration::from_secs(10);
/// Scheduling noise on a busy 2-core machine, on top of the command timeout.
const SLACK: Duration = Duration::from_millis(300);

/// The failover claims: only 503s, recovery within the documented bound, and no request
/// waiting past the command timeout.
pub fn assert_failed_fast_and_recovered(command_timeout: Duration, report: &FailoverReport) {
    assert!(report.unexpected.is_empty(), "{:?}", report.unexpected);
    assert!(report.recovery < RECOVERY_BOUND, "{report:?}");
    assert!(
        report.slowest_failure <= command_timeout + SLACK,
        "a failing request waited past the command timeout: {report:?}"
    );
    // A send makes two store calls (the code, the dev inbox), each bounded on its own.
    assert!(report.slowest <= command_timeout * 2 + SLACK, "{report:?}");
}

#[derive(Debug, Default)]
pub struct FailoverReport {
    pub requests: usize,
    /// Answered 5xx, or not at all.
    pub failed: usize,
    /// From the disruption to the end of the last failed request.
    pub recovery: Duration,
    pub slowest: Duration,
    pub slowest_failure: Duration,
    /// Which request it was (send, outbox, verify).
    pub slowest_failure_step: &'static str,
    /// Sent (200 and in the outbox) but unknown at verify (410, or 404 for its id): a write the
    /// failover lost.
    pub lost_codes: usize,
    /// Sent (200) but missing from the dev inbox: its write was lost, or failed (only logged).
    pub lost_outbox: usize,
    /// Answers no flow should give (status and body).
    pub unexpected: Vec<String>,
}

impl FailoverReport {
    pub fn print(&self, what: &str) {
        eprintln!(
            "{what}: {} requests, {} failed, recovered {:.2} s after the disruption; slowest \
             request {} ms, slowest failure {} ms ({}); codes lost {}, outbox entries lost {}",
            self.requests,
            self.failed,
            self.recovery.as_secs_f64(),
            self.slowest.as_millis(),
            self.slowest_failure.as_millis(),
            self.slowest_failure_step,
            self.lost_codes,
            self.lost_outbox
        );
    }
}

/// Runs the load, calls `disrupt` after the warm-up, and stops once `failed_over` says the
/// topology changed and requests have stopped failing for a while.
pub async fn run_through(
    app: &TestApp,
    disrupt: impl FnOnce(),
    mut failed_over: impl FnMut() -> bool,
) -> FailoverReport {
    let shared = Arc::new(Shared::new(app));
    let users: Vec<_> = (0..USERS)
        .map(|_| tokio::spawn(user(shared.clone())))
        .collect();
    let started = Instant::now();
    while started.elapsed() < WARM_UP || shared.verified() < USERS {
        assert!(started.elapsed() < GIVE_UP, "the load never got going");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let disrupted_at = Instant::now();
    // Blocking calls to Redis: the users' tasks move to other workers meanwhile, so their
    // timings stay true.
    tokio::task::block_in_place(disrupt);
    let mut topology_changed = false;
    while disrupted_at.elapsed() < GIVE_UP {
        tokio::time::sleep(Duration::from_millis(100)).await;
        topology_changed = topology_changed || tokio::task::block_in_place(&mut failed_over);
        let quiet_since = shared.last_failure().unwrap_or(disrupted_at);
        if topology_changed && quiet_since.max(disrupted_at).elapsed() >= CALM {
            break;
        }
    }
    shared.stop.store(true, Ordering::Relaxed);
    for user in users {
        user.await.expect("a virtual user");
    }
    assert!(topology_changed, "the primary was never replaced");
    shared.report(disrupted_at)
}

struct Sample {
    step: &'static str,
    ended: Instant,
    latency: Duration,
    /// 0: no answer.
    status: u16,
}

struct Shared {
    address: String,
    client: reqwest::Client,
    stop: AtomicBool,
    samples: Mutex<Vec<Sample>>,
    tally: Mutex<FailoverReport>,
}

impl Shared {
    fn new(app: &TestApp) -> Self {
        Self {
            address: app.address.clone(),
            client: app.client.clone(),
            stop: AtomicBool::new(false),
            samples: Mutex::new(Vec::new()),
            tally: Mutex::new(FailoverReport::default()),
        }
    }

    async fn post(&self, step: &'static str, path: &str, body: impl Serialize) -> (u16, Value) {
        self.timed(
            step,
            self.client
                .post(format!("{}{path}", self.address))
                .json(&body),
        )
        .await
    }

    async fn timed(&self, step: &'static str, request: reqwest::RequestBuilder) -> (u16, Value) {
        let started = Instant::now();
        let (status, body) = match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                (status, response.json().await.unwrap_or(Value::Null))
            }
            Err(_) => (0, Value::Null),
        };
        let sample = Sample {
            step,
            ended: Instant::now(),
            latency: started.elapsed(),
            status,
        };
        self.samples
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(sample);
        (status, body)
    }

    fn tally(&self, count: impl FnOnce(&mut FailoverReport)) {
        count(&mut self.tally.lock().unwrap_or_else(PoisonError::into_inner));
    }

    fn verified(&self) -> usize {
        let samples = self.samples.lock().unwrap_or_else(PoisonError::into_inner);
        samples
            .iter()
            .filter(|sample| sample.step == "verify" && sample.status == 200)
            .count()
    }

    fn last_failure(&self) -> Option<Instant> {
        let samples = self.samples.lock().unwrap_or_else(PoisonError::into_inner);
        samples
            .iter()
            .filter(|sample| failed(sample.status))
            .map(|sample| sample.ended)
            .max()
    }

    fn report(&self, disrupted_at: Instant) -> FailoverReport {
        let samples = self.samples.lock().unwrap_or_else(PoisonError::into_inner);
        let mut report =
            std::mem::take(&mut *self.tally.lock().unwrap_or_else(PoisonError::into_inner));
        let failures = samples.iter().filter(|sample| failed(sample.status));
        report.requests = samples.len();
        report.failed = failures.clone().count();
        report.recovery = failures
            .clone()
            .map(|sample| sample.ended.saturating_duration_since(disrupted_at))
            .max()
            .unwrap_or_default();
        if let Some(slowest) = failures.max_by_key(|sample| sample.latency) {
            report.slowest_failure = slowest.latency;
            report.slowest_failure_step = slowest.step;
        }
        report.slowest = samples.iter().map(|s| s.latency).max().unwrap_or_default();
        report
    }
}

fn failed(status: u16) -> bool {
    status == 0 || status >= 500
}

/// A user who asks for a code, reads it from the outbox and verifies it, again and again.
async fn user(shared: Arc<Shared>) {
    while !shared.stop.load(Ordering::Relaxed) {
        let phone = random_phone();
        let (status, body) = shared
            .post("send", paths::OTP_SEND, SendRequest::new(&phone))
            .await;
        if status != 200 {
            expect_failure(&shared, "send", status, &body);
            continue;
        }
        let Some(id) = body["data"]["verification_id"].as_str().map(str::to_owned) else {
            shared.tally(|report| {
                report
                    .unexpected
                    .push(format!("send without an id: {body}"))
            });
            continue;
        };
        let outbox = shared
            .client
            .get(format!("{}{}", shared.address, paths::DEV_INBOX))
            .query(&DevInboxQuery {
                phone: Some(phone.clone()),
                email: None,
            });
        let (status, body) = shared.timed("outbox", outbox).await;
        if status != 200 {
            expect_failure(&shared, "outbox", status, &body);
            continue;
        }
        let first_sms = serde_json::from_value::<DevInboxData>(body["data"].clone())
            .ok()
            .and_then(|outbox| outbox.messages.into_iter().next());
        let Some(sms) = first_sms else {
            shared.tally(|report| report.lost_outbox += 1);
            continue;
        };
        let verify = VerifyRequest::with_id(id, sms.code);
        match shared.post("verify", paths::OTP_VERIFY, verify).await {
            (200, _) => {}
            // The code, or its verification, is gone.
            (410, _) | (404, _) => shared.tally(|report| report.lost_codes += 1),
            (status, body) => expect_failure(&shared, "verify", status, &body),
        }
    }
}

/// During a failover a request may fail with 503/50300 (or not be answered); anything else
/// is noted as unexpected.
fn expect_failure(shared: &Shared, step: &str, status: u16, body: &Value) {
    let store_unavailable = status == 503 && body["code"] == json!(50300);
    if !store_unavailable {
        shared.tally(|report| report.unexpected.push(format!("{step}: {status} {body}")));
    }
}
