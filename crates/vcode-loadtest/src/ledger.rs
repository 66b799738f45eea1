//! One user's exact account of their codes: which SMS they received, which verifies accepted or
//! refused which code, and from that the anomalies — a refused code that was delivered,
//! unexpired, unused and within the attempt limit (a false rejection), and a code accepted more
//! than once (a double accept).
//!
//! Verifies of one login may overlap, so "unused" is judged as a linearizable service would be:
//! a rejection is excused if an accept of the same code had started before the rejection's
//! answer arrived (the accept may have been applied first). "Unexpired" and "within the attempt
//! limit" are judged by what the service itself answered, not by assumed settings: the codes'
//! lifetime is the send answers' `expires_in`, and the limit was reached when a verify answer
//! left no attempt (`remaining_attempts` down to zero: the code was destroyed).

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How far before its SMS's `sent_at_ms` a code may have been stored: its TTL started then.
const EXPIRY_MARGIN_MS: u64 = 1000;

/// A verify's answer, as far as the accounting cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Accepted,
    Refused(Refusal),
}

/// Why the service refused a code it compared, in its own words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// 40010: a counted failure; the pending code takes `remaining_attempts` more.
    Wrong { remaining_attempts: u32 },
    /// 42901: a counted failure that used the last attempt: the pending code was destroyed.
    Destroyed,
    /// 41000: no code was pending (expired, used or destroyed); nothing was counted.
    Missing,
}

impl Refusal {
    /// The attempts the pending code had left after this answer; `None` if none was counted.
    fn remaining_attempts(self) -> Option<u32> {
        match self {
            Self::Wrong { remaining_attempts } => Some(remaining_attempts),
            Self::Destroyed => Some(0),
            Self::Missing => None,
        }
    }
}

/// One verify that the service answered.
#[derive(Clone, Debug)]
pub struct Attempt {
    pub code: String,
    pub verdict: Verdict,
    pub started: Instant,
    pub started_ms: u64,
    pub ended: Instant,
    pub ended_ms: u64,
}

/// What settling one login found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// Codes accepted for the first time: successful verifications.
    pub verified: u64,
    /// Acceptances of a code that was already accepted.
    pub double_accepts: u64,
    pub false_rejections: u64,
    /// Rejections of a code an accept may already have consumed.
    pub excused_used: u64,
    pub excused_expired: u64,
    pub excused_attempt_limit: u64,
}

impl std::ops::AddAssign for Findings {
    fn add_assign(&mut self, other: Self) {
        self.verified += other.verified;
        self.double_accepts += other.double_accepts;
        self.false_rejections += other.false_rejections;
        self.excused_used += other.excused_used;
        self.excused_expired += other.excused_expired;
        self.excused_attempt_limit += other.excused_attempt_limit;
    }
}

/// A delivered code: when its SMS were sent and when accepts of it started.
#[derive(Debug, Default)]
struct CodeRecord {
    sent_at_ms: Vec<u64>,
    accepts: Vec<Instant>,
}

impl CodeRecord {
    /// When the code's TTL last restarted before `at_ms` (a resend restarts it).
    fn last_sent_before(&self, at_ms: u64) -> Option<u64> {
        let earlier = self
            .sent_at_ms
            .iter()
            .copied()
            .filter(|&t| t <= at_ms)
            .max();
        earlier.or_else(|| self.sent_at_ms.iter().copied().min())
    }

    fn first_sent(&self) -> u64 {
        self.sent_at_ms.iter().copied().min().unwrap_or(0)
    }
}

/// A failed attempt the service counted, and the attempts it said were left after it.
#[derive(Clone, Copy, Debug)]
struct Failure {
    ended: Instant,
    ended_ms: u64,
    remaining_attempts: u32,
}

#[derive(Debug, Default)]
pub struct Ledger {
    /// The codes' lifetime as the latest send answer gave it; unknown until one did.
    code_ttl: Option<Duration>,
    codes: HashMap<String, CodeRecord>,
    /// The most recently delivered code.
    latest: Option<String>,
    /// Counted failures answered after the last accept (earlier ones hit a code that is gone).
    failures: Vec<Failure>,
    last_accept_end: Option<Instant>,
}

impl Ledger {
    /// The codes' lifetime a send answer announced (`expires_in`).
    pub fn code_ttl_announced(&mut self, ttl: Duration) {
        self.code_ttl = Some(ttl);
    }

    /// An SMS the user received. The same digits after an accept are a new code.
    pub fn delivered(&mut self, code: &str, sent_at_ms: u64) {
        let record = self.codes.entry(code.to_owned()).or_default();
        if !record.accepts.is_empty() {
            *record = CodeRecord::default();
        }
        record.sent_at_ms.push(sent_at_ms);
        self.latest = Some(code.to_owned());
    }

    /// The newest delivered code not accepted yet: what a user without a new SMS types.
    pub fn latest_unused(&self) -> Option<&str> {
        let code = self.latest.as_deref()?;
        self.codes
            .get(code)
            .is_some_and(|record| record.accepts.is_empty())
            .then_some(code)
    }

    /// Settles the verifies of one login, once all of them have answered.
    pub fn settle(&mut self, attempts: &[Attempt]) -> Findings {
        let mut findings = Findings::default();
        let mut accepts: Vec<&Attempt> = attempts
            .iter()
            .filter(|a| a.verdict == Verdict::Accepted)
            .collect();
        accepts.sort_by_key(|a| a.started);
        for accept in &accepts {
            let record = self.codes.entry(accept.code.clone()).or_default();
            if record.accepts.is_empty() {
                findings.verified += 1;
            } else {
                findings.double_accepts += 1;
            }
            record.accepts.push(accept.started);
        }

        let round_failures: Vec<Failure> = attempts
            .iter()
            .filter_map(|a| match a.verdict {
                Verdict::Refused(refusal) => Some(Failure {
                    ended: a.ended,
                    ended_ms: a.ended_ms,
                    remaining_attempts: refusal.remaining_attempts()?,
                }),
                Verdict::Accepted => None,
            })
            .collect();
        let accept_ends: Vec<Instant> = accepts.iter().map(|a| a.ended).collect();
        for rejection in attempts
            .iter()
            .filter(|a| matches!(a.verdict, Verdict::Refused(_)))
        {
            self.judge(rejection, &round_failures, &accept_ends, &mut findings);
        }

        self.last_accept_end = self.last_accept_end.max(accept_ends.iter().copied().max());
        self.failures.extend(round_failures);
        let reset = self.last_accept_end;
        self.failures.retain(|f| reset.is_none_or(|t| f.ended > t));
        findings
    }

    /// Files one rejection as excused or false.
    fn judge(
        &self,
        rejection: &Attempt,
        round_failures: &[Failure],
        accept_ends: &[Instant],
        findings: &mut Findings,
    ) {
        // Only delivered codes are typed; a code never delivered cannot be falsely refused.
        let Some(record) = self.codes.get(&rejection.code) else {
            return;
        };
        if record.accepts.iter().any(|&start| start < rejection.ended) {
            findings.excused_used += 1;
        } else if self.expired(record, rejection) {
            findings.excused_expired += 1;
        } else if self.attempts_used_up(record, rejection, round_failures, accept_ends) {
            findings.excused_attempt_limit += 1;
        } else {
            findings.false_rejections += 1;
        }
    }

    /// Without an announced lifetime no code counts as expired: nothing excuses the refusal.
    fn expired(&self, record: &CodeRecord, rejection: &Attempt) -> bool {
        let Some(ttl) = self.code_ttl else {
            return false;
        };
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        record
            .last_sent_before(rejection.started_ms)
            .is_some_and(|sent| {
                rejection.started_ms + EXPIRY_MARGIN_MS >= sent.saturating_add(ttl_ms)
            })
    }

    /// Whether the service had answered, before `rejection` was sent, that the pending code had
    /// no attempt left. Only failures that may have counted against the code are heard: answered
    /// before the rejection, after the code's first SMS, and after the last accept (an accept
    /// removes the pending code and its count).
    fn attempts_used_up(
        &self,
        record: &CodeRecord,
        rejection: &Attempt,
        round_failures: &[Failure],
        accept_ends: &[Instant],
    ) -> bool {
        let round_reset = accept_ends
            .iter()
            .copied()
            .filter(|&end| end < rejection.started)
            .max();
        let reset = self.last_accept_end.max(round_reset);
        let first_sent = record.first_sent();
        self.failures
            .iter()
            .chain(round_failures)
            .filter(|f| f.ended < rejection.started)
            .filter(|f| reset.is_none_or(|t| f.ended > t))
            .filter(|f| f.ended_ms >= first_sent)
            .any(|f| f.remaining_attempts == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ledger whose codes were announced to live 300 s.
    fn new_ledger() -> Ledger {
        let mut ledger = Ledger::default();
        ledger.code_ttl_announced(Duration::from_secs(300));
        ledger
    }

    /// A clock for tests: instants and wall-clock ms that advance together.
    struct Clock {
        origin: Instant,
        origin_ms: u64,
    }

    impl Clock {
        fn new() -> Self {
            Self {
                origin: Instant::now(),
                origin_ms: 1_700_000_000_000,
            }
        }

        fn ms(&self, at: u64) -> u64 {
            self.origin_ms + at
        }

        /// A verify of `code` sent at `from` ms and answered at `to` ms.
        fn attempt(&self, code: &str, verdict: Verdict, from: u64, to: u64) -> Attempt {
            Attempt {
                code: code.to_owned(),
                verdict,
                started: self.origin + Duration::from_millis(from),
                started_ms: self.ms(from),
                ended: self.origin + Duration::from_millis(to),
                ended_ms: self.ms(to),
            }
        }
    }

    const ACCEPTED: Verdict = Verdict::Accepted;
    const DESTROYED: Verdict = Verdict::Refused(Refusal::Destroyed);
    const MISSING: Verdict = Verdict::Refused(Refusal::Missing);

    /// 40010 with the attempts the service said were left.
    fn wrong(remaining_attempts: u32) -> Verdict {
        Verdict::Refused(Refusal::Wrong { remaining_attempts })
    }

    #[test]
    fn a_delivered_unused_code_refused_is_a_false_rejection() {
        let clock = Clock::new();
        let mut ledger = new_ledger();
        ledger.delivered("111111", clock.ms(0));
        ledger.delivered("222222", clock.ms(1));
        // The user types the first SMS; the service only knows the second (overwritten).
        let found = ledger.settle(&[clock.attempt("111111", wrong(4), 10, 12)]);
        assert_eq!(found.false_rejections, 1);
        assert_eq!(found.verified, 0);
    }

    #[test]
    fn a_code_accepted_twice_is_one_login_and_one_double_accept() {
        let clock = Clock::new();
        let mut ledger = new_ledger();
        ledger.delivered("111111", clock.ms(0));
        let found = ledger.settle(&[
            clock.attempt("111111", ACCEPTED, 10, 15),
            clock.attempt("111111", ACCEPTED, 10, 16),
            clock.attempt("111111", ACCEPTED, 11, 16),
        ]);
        assert_eq!(found.verified, 1);
        assert_eq!(found.double_accepts, 2);
        assert_eq!(found.false_rejections, 0);
        // A later accept of the same code, in another login, is a double accept too.
        let later = ledger.settle(&[clock.attempt("111111", ACCEPTED, 50, 51)]);
        assert_eq!((later.verified, later.double_accepts), (0, 1));
    }

    #[test]
    fn refusals_overlapping_or_after_an_accept_are_excused() {
        let clock = Clock::new();
        let mut ledger = new_ledger();
        ledger.delivered("111111", clock.ms(0));
        let found = ledger.settle(&[
            clock.attempt("111111", MISSING, 10, 14), // answered before the accept started
            clock.attempt("111111", ACCEPTED, 12, 15),
            clock.attempt("111111", MISSING, 11, 13), // overlaps: may come after the accept
            clock.attempt("111111", MISSING, 16, 17),
        ]);
        assert_eq!(found.verified, 1);
        assert_eq!(found.excused_used, 3, "{found:?}");
        assert_eq!(found.false_rejections, 0);

        let mut ledger = new_ledger();
        ledger.delivered("111111", clock.ms(0));
        let found = ledger.settle(&[
            clock.attempt("111111", MISSING, 10, 11), // answered before the accept started
            clock.attempt("111111", ACCEPTED, 12, 15),
        ]);
        assert_eq!(found.false_rejections, 1, "{found:?}");
    }

    #[test]
    fn refusals_of_expired_codes_are_excused() {
        let clock = Clock::new();
        let mut ledger = new_ledger();
        ledger.delivered("111111", clock.ms(0));
        let found = ledger.settle(&[clock.attempt("111111", MISSING, 300_000, 300_001)]);
        assert_eq!(found.excused_expired, 1);
        // A resend of the same code restarts its TTL.
        ledger.delivered("222222", clock.ms(400_000));
        ledger.delivered("222222", clock.ms(600_000));
        let found = ledger.settle(&[clock.attempt("222222", MISSING, 800_000, 800_001)]);
        assert_eq!(found.false_rejections, 1, "{found:?}");
    }

    #[test]
    fn expiry_follows_the_lifetime_the_service_announced() {
        let clock = Clock::new();
        let mut ledger = Ledger::default();
        ledger.delivered("111111", clock.ms(0));
        let unknown = ledger.settle(&[clock.attempt("111111", MISSING, 300_000, 300_001)]);
        assert_eq!(
            unknown.false_rejections, 1,
            "no lifetime announced, no excuse"
        );

        ledger.code_ttl_announced(Duration::from_secs(60));
        ledger.delivered("222222", clock.ms(400_000));
        let alive = ledger.settle(&[clock.attempt("222222", MISSING, 450_000, 450_001)]);
        assert_eq!(alive.false_rejections, 1, "{alive:?}");
        let expired = ledger.settle(&[clock.attempt("222222", MISSING, 460_000, 460_001)]);
        assert_eq!(expired.excused_expired, 1, "{expired:?}");
    }

    #[test]
    fn refusals_beyond_the_attempt_limit_are_excused() {
        let clock = Clock::new();
        let mut ledger = new_ledger();
        ledger.delivered("111111", clock.ms(0));
        ledger.delivered("999999", clock.ms(1));
        // The user types the lost code; the service counts each failure against the pending one
        // and destroys it at the third (42901), before the verify of the pending code is sent.
        let first = ledger.settle(&[
            clock.attempt("111111", wrong(2), 10, 11),
            clock.attempt("111111", wrong(1), 12, 13),
        ]);
        assert_eq!(first.false_rejections, 2);
        let found = ledger.settle(&[
            clock.attempt("111111", DESTROYED, 20, 21),
            clock.attempt("999999", MISSING, 30, 31),
        ]);
        assert_eq!(found.false_rejections, 1, "{found:?}");
        assert_eq!(found.excused_attempt_limit, 1, "{found:?}");
    }

    #[test]
    fn failures_that_left_attempts_excuse_nothing() {
        let clock = Clock::new();
        let mut ledger = new_ledger();
        ledger.delivered("111111", clock.ms(0));
        ledger.delivered("999999", clock.ms(1));
        // A service that never lowers `remaining_attempts` (the legacy strategies) never
        // destroys the code, however many failures it answered.
        for at in [10, 20, 30, 40, 50, 60] {
            ledger.settle(&[clock.attempt("111111", wrong(5), at, at + 1)]);
        }
        let found = ledger.settle(&[clock.attempt("999999", MISSING, 70, 71)]);
        assert_eq!(found.false_rejections, 1, "{found:?}");
        assert_eq!(found.excused_attempt_limit, 0, "{found:?}");
        // A destruction answered only after the verify was sent does not excuse it either.
        ledger.delivered("888888", clock.ms(100));
        let found = ledger.settle(&[
            clock.attempt("000000", DESTROYED, 110, 130),
            clock.attempt("888888", MISSING, 120, 121),
        ]);
        assert_eq!(found.excused_attempt_limit, 0, "{found:?}");
    }

    #[test]
    fn an_accept_resets_the_failure_count_and_failures_before_a_code_do_not_count() {
        let clock = Clock::new();
        let mut ledger = new_ledger();
        ledger.delivered("111111", clock.ms(0));
        for (at, verdict) in [(10, wrong(2)), (20, wrong(1)), (30, DESTROYED)] {
            ledger.settle(&[clock.attempt("000000", verdict, at, at + 1)]);
        }
        ledger.settle(&[clock.attempt("111111", ACCEPTED, 40, 41)]);
        ledger.delivered("222222", clock.ms(50));
        let found = ledger.settle(&[clock.attempt("222222", MISSING, 60, 61)]);
        assert_eq!(found.false_rejections, 1, "{found:?}");

        let mut ledger = new_ledger();
        for (at, verdict) in [(10, wrong(2)), (20, wrong(1)), (30, DESTROYED)] {
            ledger.settle(&[clock.attempt("000000", verdict, at, at + 1)]);
        }
        ledger.delivered("333333", clock.ms(35));
        let found = ledger.settle(&[clock.attempt("333333", MISSING, 40, 41)]);
        assert_eq!(found.false_rejections, 1, "{found:?}");
    }

    #[test]
    fn the_latest_unused_code_is_what_a_user_without_new_sms_types() {
        let clock = Clock::new();
        let mut ledger = new_ledger();
        assert_eq!(ledger.latest_unused(), None);
        ledger.delivered("111111", clock.ms(0));
        assert_eq!(ledger.latest_unused(), Some("111111"));
        ledger.settle(&[clock.attempt("111111", ACCEPTED, 10, 11)]);
        assert_eq!(ledger.latest_unused(), None);
        // The same digits delivered again after the accept are a new, unused code.
        ledger.delivered("111111", clock.ms(20));
        assert_eq!(ledger.latest_unused(), Some("111111"));
        let found = ledger.settle(&[clock.attempt("111111", ACCEPTED, 30, 31)]);
        assert_eq!((found.verified, found.double_accepts), (1, 0));
    }
}
