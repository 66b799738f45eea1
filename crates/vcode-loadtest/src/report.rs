//! A run's report: the figures and anomalies, as a terminal table, as JSON, and side by side
//! with other runs' reports.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::options::{Options, Scenario};
use crate::tally::{Announced, ScenarioFigures, Sends, Tally, Verifies};

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// Rejections that were right, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Excused {
    /// The code had been (or may just have been) accepted.
    pub used: u64,
    pub expired: u64,
    pub attempt_limit: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// `--label`, e.g. the strategy under test.
    pub label: Option<String>,
    pub scenario: Scenario,
    pub targets: usize,
    pub users: usize,
    pub concurrency: usize,
    pub seed: u64,
    /// The service's settings as its answers gave them (absent from older reports).
    #[serde(default)]
    pub announced: Announced,
    pub elapsed_secs: f64,
    /// Sends and verifies.
    pub requests: u64,
    pub throughput_per_sec: f64,
    pub latency_ms: Latency,
    /// Logins played.
    pub logins: u64,
    /// Logins in which no SMS came, so there was nothing to type.
    pub logins_without_code: u64,
    /// The figures of each scenario played.
    pub scenarios: BTreeMap<Scenario, ScenarioFigures>,
    pub sends: Sends,
    pub verifies: Verifies,
    pub outbox_reads: u64,
    /// SMS delivered to the users (each one a paid SMS).
    pub sms_sent: u64,
    /// Codes accepted (each counted once).
    pub successful_verifications: u64,
    pub sms_per_verification: Option<f64>,
    /// Delivered, unexpired, unused codes within the attempt limit that were refused.
    pub false_rejections: u64,
    /// Acceptances of a code that was already accepted.
    pub double_accepts: u64,
    pub excused_rejections: Excused,
    /// Calls without a usable answer, by kind.
    pub failures: BTreeMap<String, u64>,
}

/// Milliseconds, to the microsecond the histogram records.
fn millis(duration: Duration) -> f64 {
    round_to(duration.as_secs_f64() * 1000.0, 3)
}

/// `value` with at most `decimals` decimals, so that JSON shows no float noise.
fn round_to(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}

impl Report {
    pub fn new(options: &Options, tally: Tally, elapsed: Duration) -> Self {
        let elapsed_secs = elapsed.as_secs_f64();
        let verified = tally.findings.verified;
        Self {
            label: options.label.clone(),
            scenario: options.scenario,
            targets: options.targets.len(),
            users: options.users,
            // More slots than users would stay empty.
            concurrency: options.concurrency.min(options.users),
            seed: options.seed,
            announced: tally.announced,
            elapsed_secs: round_to(elapsed_secs, 3),
            requests: tally.requests,
            throughput_per_sec: if elapsed_secs > 0.0 {
                round_to(tally.requests as f64 / elapsed_secs, 1)
            } else {
                0.0
            },
            latency_ms: Latency {
                p50: millis(tally.latency(0.5)),
                p99: millis(tally.latency(0.99)),
                max: millis(tally.latency(1.0)),
            },
            logins: tally.scenarios.values().map(|f| f.logins).sum(),
            logins_without_code: tally
                .scenarios
                .values()
                .map(|f| f.logins_without_code)
                .sum(),
            scenarios: tally.scenarios,
            sends: tally.sends,
            verifies: tally.verifies,
            outbox_reads: tally.outbox_reads,
            sms_sent: tally.sms_sent,
            successful_verifications: verified,
            sms_per_verification: (verified > 0)
                .then(|| round_to(tally.sms_sent as f64 / verified as f64, 3)),
            false_rejections: tally.findings.false_rejections,
            double_accepts: tally.findings.double_accepts,
            excused_rejections: Excused {
                used: tally.findings.excused_used,
                expired: tally.findings.excused_expired,
                attempt_limit: tally.findings.excused_attempt_limit,
            },
            failures: tally.failures,
        }
    }

    pub fn anomalies(&self) -> u64 {
        self.false_rejections + self.double_accepts
    }

    pub fn failed_calls(&self) -> u64 {
        self.failures.values().sum()
    }

    /// No anomaly, and no failed call that could have hidden one.
    pub fn is_clean(&self) -> bool {
        self.anomalies() == 0 && self.failed_calls() == 0
    }

    /// The name of the run in tables: its label, or its scenario.
    pub fn name(&self) -> String {
        self.label
            .clone()
            .unwrap_or_else(|| self.scenario.to_string())
    }

    /// The report for a terminal.
    pub fn table(&self) -> String {
        let mut rows: Vec<(&str, String)> = vec![
            (
                "service",
                format!(
                    "codes live {}, resend cooldown {} (as the send answers said)",
                    seconds(self.announced.code_ttl_secs),
                    seconds(self.announced.resend_cooldown_secs)
                ),
            ),
            (
                "requests",
                format!(
                    "{} ({:.0}/s; outbox reads {})",
                    self.requests, self.throughput_per_sec, self.outbox_reads
                ),
            ),
            (
                "latency",
                format!(
                    "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
                    self.latency_ms.p50, self.latency_ms.p99, self.latency_ms.max
                ),
            ),
            ("logins", self.logins_summary()),
            (
                "sends",
                format!(
                    "delivered {} (unconfirmed {}), cooldown {}, failed {}",
                    self.sends.delivered,
                    self.sends.unconfirmed,
                    self.sends.cooldown,
                    self.sends.failed
                ),
            ),
            (
                "verifies",
                format!(
                    "accepted {}, rejected {}, failed {}",
                    self.verifies.accepted, self.verifies.rejected, self.verifies.failed
                ),
            ),
            (
                "successful_verifications",
                self.successful_verifications.to_string(),
            ),
            (
                "sms_sent",
                format!(
                    "{} ({} per successful verification)",
                    self.sms_sent,
                    ratio(self.sms_per_verification)
                ),
            ),
            ("false_rejections", self.false_rejections.to_string()),
            ("double_accepts", self.double_accepts.to_string()),
            (
                "excused rejections",
                format!(
                    "code used {}, expired {}, attempt limit {}",
                    self.excused_rejections.used,
                    self.excused_rejections.expired,
                    self.excused_rejections.attempt_limit
                ),
            ),
        ];
        for (scenario, figures) in &self.scenarios {
            rows.push((scenario.as_str(), scenario_summary(figures)));
        }
        if !self.failures.is_empty() {
            let failures: Vec<String> = self
                .failures
                .iter()
                .map(|(what, n)| format!("{what} x{n}"))
                .collect();
            rows.push(("failed calls", failures.join(", ")));
        }
        let width = rows.iter().map(|(key, _)| key.len()).max().unwrap_or(0);
        let label = self
            .label
            .as_deref()
            .map_or_else(String::new, |label| format!(" {label}"));
        let mut out = format!(
            "vcode loadtest{label}: scenario {}, {} target(s), {} users, concurrency {}, seed {}, {:.1} s\n",
            self.scenario, self.targets, self.users, self.concurrency, self.seed, self.elapsed_secs
        );
        for (key, value) in rows {
            let _ = writeln!(out, "  {key:<width$}  {value}");
        }
        let verdict = if self.is_clean() {
            "clean: no anomaly".to_owned()
        } else {
            format!(
                "NOT CLEAN: {} anomalies, {} failed calls",
                self.anomalies(),
                self.failed_calls()
            )
        };
        let _ = writeln!(out, "  {verdict}");
        out
    }

    fn logins_summary(&self) -> String {
        let by_scenario: Vec<String> = self
            .scenarios
            .iter()
            .map(|(scenario, figures)| format!("{scenario} {}", figures.logins))
            .collect();
        format!(
            "{} ({}; {} without a code)",
            self.logins,
            by_scenario.join(", "),
            self.logins_without_code
        )
    }
}

fn scenario_summary(figures: &ScenarioFigures) -> String {
    format!(
        "logins {}, sms_sent {}, verified {}, false_rejections {}, double_accepts {}",
        figures.logins,
        figures.sms_sent,
        figures.verified,
        figures.false_rejections,
        figures.double_accepts
    )
}

fn seconds(value: Option<u64>) -> String {
    value.map_or_else(|| "-".to_owned(), |secs| format!("{secs} s"))
}

fn ratio(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"))
}

/// Reports side by side, one row each, as Markdown tables (readable as is on a terminal): the
/// figures, then the anomalies by scenario.
pub fn comparison_table(reports: &[Report]) -> String {
    let header = [
        "run",
        "requests",
        "req/s",
        "p50 ms",
        "p99 ms",
        "verified",
        "sms_sent",
        "sms/verified",
        "false_rejections",
        "double_accepts",
        "failed calls",
    ];
    let rows = reports.iter().map(|r| {
        vec![
            r.name(),
            r.requests.to_string(),
            format!("{:.0}", r.throughput_per_sec),
            format!("{:.2}", r.latency_ms.p50),
            format!("{:.2}", r.latency_ms.p99),
            r.successful_verifications.to_string(),
            r.sms_sent.to_string(),
            ratio(r.sms_per_verification),
            r.false_rejections.to_string(),
            r.double_accepts.to_string(),
            r.failed_calls().to_string(),
        ]
    });
    let mut out = markdown(header.map(str::to_owned).to_vec(), rows.collect());

    let scenarios: Vec<Scenario> = Scenario::CONCRETE
        .into_iter()
        .filter(|s| reports.iter().any(|r| r.scenarios.contains_key(s)))
        .collect();
    if !scenarios.is_empty() {
        let header = std::iter::once("run".to_owned())
            .chain(scenarios.iter().map(|s| s.to_string()))
            .collect();
        let rows = reports.iter().map(|r| {
            let cells = scenarios.iter().map(|s| {
                let f = r.scenarios.get(s).copied().unwrap_or_default();
                format!(
                    "{} / {} of {}",
                    f.false_rejections, f.double_accepts, f.logins
                )
            });
            std::iter::once(r.name()).chain(cells).collect()
        });
        out.push_str("\nfalse_rejections / double_accepts of logins, by scenario:\n\n");
        out.push_str(&markdown(header, rows.collect()));
    }
    out
}

/// A Markdown table, columns padded to their widest cell; the first column left-aligned, the
/// others right-aligned.
fn markdown(header: Vec<String>, rows: Vec<Vec<String>>) -> String {
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .chain([&header])
                .map(|row| row.get(i).map_or(0, String::len))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        let cells: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (cell, &w))| {
                if i == 0 {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        format!("| {} |\n", cells.join(" | "))
    };
    let rule: Vec<String> = widths
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            let dashes = "-".repeat(w.saturating_sub(1));
            if i == 0 {
                format!("{dashes}-")
            } else {
                format!("{dashes}:")
            }
        })
        .collect();
    let mut out = line(&header);
    let _ = writeln!(out, "| {} |", rule.join(" | "));
    for row in &rows {
        out.push_str(&line(row));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::parse_target;

    fn report(label: &str, false_rejections: u64, double_accepts: u64) -> Report {
        let mut options = Options::new(vec![parse_target("http://127.0.0.1:1").unwrap()]);
        options.label = Some(label.to_owned());
        let mut tally = Tally::new().unwrap();
        tally.requests = 200;
        tally.sms_sent = 30;
        tally.findings.verified = 20;
        tally.findings.false_rejections = false_rejections;
        tally.findings.double_accepts = double_accepts;
        tally.announced = Announced {
            code_ttl_secs: Some(300),
            resend_cooldown_secs: Some(60),
        };
        let figures = tally.scenarios.entry(Scenario::ResendStorm).or_default();
        figures.logins = 25;
        figures.false_rejections = false_rejections;
        Report::new(&options, tally, Duration::from_secs(2))
    }

    #[test]
    fn figures_are_derived_from_the_tally() {
        let r = report("atomic", 0, 0);
        assert_eq!(r.throughput_per_sec, 100.0);
        assert_eq!(r.sms_per_verification, Some(1.5));
        assert!(r.is_clean());
        assert!(!report("legacy", 1, 0).is_clean());
        assert!(!report("legacy", 0, 1).is_clean());
        let mut failed = report("atomic", 0, 0);
        failed.failures.insert("send 503/50300".into(), 1);
        assert!(!failed.is_clean(), "a failed call may hide an anomaly");
    }

    #[test]
    fn json_round_trips_with_the_documented_field_names() {
        let r = report("legacy-original", 7, 2);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["false_rejections"], 7);
        assert_eq!(json["double_accepts"], 2);
        assert_eq!(json["sms_sent"], 30);
        assert_eq!(json["logins"], 25);
        assert_eq!(json["scenarios"]["resend-storm"]["logins"], 25);
        assert_eq!(json["scenarios"]["resend-storm"]["false_rejections"], 7);
        assert!(json["latency_ms"]["p99"].is_number());
        assert_eq!(json["announced"]["code_ttl_secs"], 300);
        let back: Report = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back, r);
        // Reports written before the service's settings were read still load.
        let mut older = json;
        older.as_object_mut().unwrap().remove("announced");
        let back: Report = serde_json::from_value(older).unwrap();
        assert_eq!(back.announced, Announced::default());
    }

    #[test]
    fn the_terminal_table_names_every_anomaly() {
        let table = report("legacy-original", 7, 2).table();
        for needle in [
            "false_rejections  ",
            "double_accepts",
            "sms_sent",
            "p99",
            "codes live 300 s, resend cooldown 60 s",
            "NOT CLEAN",
        ] {
            assert!(table.contains(needle), "{needle:?} missing:\n{table}");
        }
        assert!(report("atomic", 0, 0).table().contains("clean: no anomaly"));
    }

    #[test]
    fn the_comparison_has_one_aligned_row_per_report_in_each_table() {
        let table = comparison_table(&[report("atomic", 0, 0), report("legacy-original", 123, 4)]);
        let (figures, by_scenario) = table.split_once("\n\n").expect("two tables");
        let lines: Vec<&str> = figures.lines().collect();
        assert_eq!(lines.len(), 4, "{table}");
        assert!(lines[0].starts_with("| run "));
        assert!(lines[1].starts_with("| ---"));
        assert!(lines[2].starts_with("| atomic "));
        assert!(lines[3].contains(" 123 |"), "{table}");
        let width = lines[0].len();
        assert!(lines.iter().all(|l| l.len() == width), "{table}");
        assert!(by_scenario.contains(" resend-storm |"), "{table}");
        assert!(by_scenario.contains("123 / 0 of 25"), "{table}");
    }
}
