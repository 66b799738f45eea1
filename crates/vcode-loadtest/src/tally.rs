//! What users count while they play: requests and their latencies, answers by kind, SMS, what
//! the service announced of its settings, and the ledger's findings. Each user keeps its own
//! tally; the run adds them up at the end.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use vcode_wire::{Delivery, SendData};

use crate::client::{SendAnswer, Timed};
use crate::ledger::Findings;
use crate::options::Scenario;

/// Latencies are recorded in microseconds, up to a minute, to three significant digits.
const LATENCY_MAX_US: u64 = 60_000_000;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sends {
    /// 200: a code stored and its SMS handed to the provider.
    pub delivered: u64,
    /// Of `delivered`, those whose provider never confirmed the SMS (`delivery`
    /// `unconfirmed`); absent from reports written before the field.
    #[serde(default)]
    pub unconfirmed: u64,
    /// 429/42900: refused while a code is pending (vcode's dedup, not an anomaly).
    pub cooldown: u64,
    pub failed: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verifies {
    pub accepted: u64,
    /// Compared and refused (40010, 41000, 42901), rightly or not.
    pub rejected: u64,
    pub failed: u64,
}

/// What the send answers said of the service's settings (the load test assumes none).
/// Targets are meant to share one configuration; should they differ, the largest value is kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Announced {
    /// `expires_in`: how long a code lives.
    pub code_ttl_secs: Option<u64>,
    /// `resend_after`: the resend cooldown.
    pub resend_cooldown_secs: Option<u64>,
}

impl Announced {
    fn heard(&mut self, sent: &SendData) {
        self.merge(Self {
            code_ttl_secs: Some(sent.expires_in),
            resend_cooldown_secs: Some(sent.resend_after),
        });
    }

    fn merge(&mut self, other: Self) {
        self.code_ttl_secs = self.code_ttl_secs.max(other.code_ttl_secs);
        self.resend_cooldown_secs = self.resend_cooldown_secs.max(other.resend_cooldown_secs);
    }
}

/// One scenario's share of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScenarioFigures {
    pub logins: u64,
    /// Logins in which no SMS came, so there was nothing to type.
    pub logins_without_code: u64,
    pub sms_sent: u64,
    pub verified: u64,
    pub false_rejections: u64,
    pub double_accepts: u64,
}

impl std::ops::AddAssign for ScenarioFigures {
    fn add_assign(&mut self, other: Self) {
        self.logins += other.logins;
        self.logins_without_code += other.logins_without_code;
        self.sms_sent += other.sms_sent;
        self.verified += other.verified;
        self.false_rejections += other.false_rejections;
        self.double_accepts += other.double_accepts;
    }
}

#[derive(Clone, Debug)]
pub struct Tally {
    /// Sends and verifies (outbox reads are counted apart: they are the user's phone).
    pub requests: u64,
    pub latency_us: Histogram<u64>,
    pub sends: Sends,
    pub verifies: Verifies,
    pub outbox_reads: u64,
    pub sms_sent: u64,
    pub announced: Announced,
    /// Logins by scenario (`mixed` counts each under the one it picked).
    pub scenarios: BTreeMap<Scenario, ScenarioFigures>,
    pub findings: Findings,
    /// Failed calls by kind, e.g. `send 503/50300`.
    pub failures: BTreeMap<String, u64>,
}

impl Tally {
    pub fn new() -> anyhow::Result<Self> {
        Ok(Self {
            requests: 0,
            latency_us: Histogram::new_with_bounds(1, LATENCY_MAX_US, 3)
                .context("latency histogram")?,
            sends: Sends::default(),
            verifies: Verifies::default(),
            outbox_reads: 0,
            sms_sent: 0,
            announced: Announced::default(),
            scenarios: BTreeMap::new(),
            findings: Findings::default(),
            failures: BTreeMap::new(),
        })
    }

    /// One API request (send or verify) and its latency, if it was answered.
    pub fn request<T>(&mut self, call: &Timed<T>) {
        self.requests += 1;
        if let Some(latency) = call.latency {
            let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
            self.latency_us.saturating_record(micros.max(1));
        }
    }

    pub fn send(&mut self, answer: &SendAnswer) {
        match answer {
            SendAnswer::Delivered(sent) => {
                self.sends.delivered += 1;
                if sent.delivery == Delivery::Unconfirmed {
                    self.sends.unconfirmed += 1;
                }
                self.announced.heard(sent);
            }
            SendAnswer::Cooldown => self.sends.cooldown += 1,
            SendAnswer::Failed(what) => {
                self.sends.failed += 1;
                self.failure(what);
            }
        }
    }

    pub fn failure(&mut self, what: &str) {
        *self.failures.entry(what.to_owned()).or_default() += 1;
    }

    /// Adds another user's tally.
    pub fn merge(&mut self, other: Tally) -> anyhow::Result<()> {
        self.requests += other.requests;
        self.latency_us
            .add(&other.latency_us)
            .context("merging latencies")?;
        self.sends.delivered += other.sends.delivered;
        self.sends.unconfirmed += other.sends.unconfirmed;
        self.sends.cooldown += other.sends.cooldown;
        self.sends.failed += other.sends.failed;
        self.verifies.accepted += other.verifies.accepted;
        self.verifies.rejected += other.verifies.rejected;
        self.verifies.failed += other.verifies.failed;
        self.outbox_reads += other.outbox_reads;
        self.sms_sent += other.sms_sent;
        self.announced.merge(other.announced);
        for (scenario, figures) in other.scenarios {
            *self.scenarios.entry(scenario).or_default() += figures;
        }
        self.findings += other.findings;
        for (what, n) in other.failures {
            *self.failures.entry(what).or_default() += n;
        }
        Ok(())
    }

    /// The latency at quantile `q` (0..=1); zero when nothing was recorded.
    pub fn latency(&self, q: f64) -> Duration {
        if self.latency_us.is_empty() {
            return Duration::ZERO;
        }
        Duration::from_micros(self.latency_us.value_at_quantile(q))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn answered<T>(answer: T, latency_ms: u64) -> Timed<T> {
        let now = Instant::now();
        Timed {
            answer,
            started: now,
            started_ms: 0,
            ended: now,
            ended_ms: 0,
            latency: Some(Duration::from_millis(latency_ms)),
        }
    }

    #[test]
    fn tallies_add_up_and_percentiles_come_from_all_users() {
        let mut a = Tally::new().unwrap();
        let mut b = Tally::new().unwrap();
        let sent = SendData {
            verification_id: "q3Vd0m9YyTnJkqW8cXoB4A".into(),
            expires_in: 300,
            resend_after: 60,
            delivery: Delivery::Sent,
        };
        for ms in 1..=99 {
            let call = answered(SendAnswer::Delivered(sent.clone()), ms);
            a.request(&call);
            a.send(&call.answer);
        }
        let slow = answered(SendAnswer::Failed("send 503/50300".into()), 1000);
        b.request(&slow);
        b.send(&slow.answer);
        b.scenarios
            .entry(Scenario::DoubleSubmit)
            .or_default()
            .logins += 2;
        a.scenarios
            .entry(Scenario::DoubleSubmit)
            .or_default()
            .logins += 1;
        b.findings.false_rejections = 3;
        let mut longer_lived = Tally::new().unwrap();
        longer_lived.send(&SendAnswer::Delivered(SendData {
            expires_in: 600,
            delivery: Delivery::Unconfirmed,
            ..sent
        }));
        assert_eq!(
            b.announced,
            Announced::default(),
            "no delivery, nothing heard"
        );
        a.merge(b).unwrap();
        assert_eq!(a.announced.code_ttl_secs, Some(300));
        assert_eq!(a.announced.resend_cooldown_secs, Some(60));
        a.merge(longer_lived).unwrap();

        assert_eq!(a.requests, 100);
        assert_eq!(a.sends.delivered, 100);
        assert_eq!(
            a.sends.unconfirmed, 1,
            "the unconfirmed one is still a delivery"
        );
        assert_eq!(a.announced.code_ttl_secs, Some(600), "the largest is kept");
        assert_eq!(a.sends.failed, 1);
        assert_eq!(a.failures.get("send 503/50300"), Some(&1));
        assert_eq!(a.scenarios[&Scenario::DoubleSubmit].logins, 3);
        assert_eq!(a.findings.false_rejections, 3);
        let p50 = a.latency(0.5).as_secs_f64() * 1000.0;
        assert!((49.0..=51.0).contains(&p50), "p50 {p50} ms");
        let p99 = a.latency(0.99).as_secs_f64() * 1000.0;
        assert!((98.0..=100.0).contains(&p99), "p99 {p99} ms");
        assert!(a.latency(1.0) >= Duration::from_millis(999));
    }

    #[test]
    fn an_empty_tally_has_zero_latency() {
        assert_eq!(Tally::new().unwrap().latency(0.99), Duration::ZERO);
    }
}
