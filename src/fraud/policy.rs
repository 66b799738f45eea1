//! The guard's judgement as pure functions of counts and time: which minutes are judged
//! (past the grace period), the service's baseline conversion, and whether a prefix is
//! suspended (its judged conversion far below the baseline), held back (its unverified sends
//! still within grace surge far above its own recent rate while few of them convert) or
//! passes. No clock, no store.

use std::time::Duration;

use super::levels::LevelThresholds;

pub use crate::domain::traffic::{
    BUCKET_MS, Counts, RETENTION_MINUTES, Reason, Tally, WINDOW_MINUTES, Window,
};

/// A suspension lasts the cool-off of its strike: 15 min, 1 h, 4 h, then 24 h each time.
pub const COOL_OFFS: [Duration; 4] = [
    Duration::from_secs(15 * 60),
    Duration::from_secs(3600),
    Duration::from_secs(4 * 3600),
    Duration::from_secs(24 * 3600),
];
/// Strikes older than this are forgotten: a prefix suspended again after a quiet day starts
/// over at 15 minutes.
pub const STRIKE_MEMORY: Duration = Duration::from_secs(24 * 3600);
/// The service's baseline conversion is believed from this many judged sends on; below, the
/// floor stands in for it.
pub const BASELINE_MIN_SENDS: u64 = 100;
/// The reference conversion never falls below this: a service whose own traffic is mostly a
/// bot's converts badly everywhere, and must not learn that as normal.
pub const BASELINE_FLOOR: f64 = 0.5;

/// How much the guard does (`VCODE_FRAUD_GUARD`), as Twilio's Fraud Guard levels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Level {
    /// Nothing is counted or judged.
    Off,
    /// Counted and judged; a prefix that would be suspended or held is flagged, logged and
    /// counted, never refused.
    Monitor,
    /// Counted, judged and refused with the standard thresholds.
    #[default]
    Standard,
    /// As standard with tighter thresholds: stops a bot sooner, may hold an honest burst.
    Strict,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Monitor => "monitor",
            Self::Standard => "standard",
            Self::Strict => "strict",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        [Self::Off, Self::Monitor, Self::Standard, Self::Strict]
            .into_iter()
            .find(|level| level.as_str() == raw)
    }

    /// Whether a blocked prefix is refused (rather than flagged).
    pub fn enforces(self) -> bool {
        matches!(self, Self::Standard | Self::Strict)
    }

    /// The thresholds this level judges with unless configured otherwise.
    pub fn thresholds(self) -> Thresholds {
        match self {
            Self::Strict => Thresholds {
                min_judged_sends: 15,
                min_conversion_ratio: 0.5,
                surge_floor: 20,
                surge_factor: 2.0,
            },
            _ => Thresholds {
                min_judged_sends: 30,
                min_conversion_ratio: 0.2,
                // 80 let a bot at 1 SMS a second per prefix run until its first minutes were
                // judged, up to 105 SMS (the pumping simulation); 40 holds it within a minute.
                surge_floor: 40,
                surge_factor: 4.0,
            },
        }
    }
}

impl Level {
    /// How much evidence a level's verdict needs (`levels`).
    pub fn level_thresholds(self) -> LevelThresholds {
        match self {
            Self::Strict => LevelThresholds {
                evidence_floor: 5.0,
                evidence_share: 0.2,
                mail_evidence_share: 1.0,
                min_conversion_ratio: 0.5,
                mature_history: 30.0,
                undelivered_share: 0.3,
            },
            // Off and monitor judge as standard (monitor flags, off never asks).
            _ => LevelThresholds {
                // A range with no history is stopped after this many unexplained sends.
                evidence_floor: 10.0,
                // A busy range (1 honest send a second) may have about 130 more unconverted
                // sends than its conversion explains: a burst of 40 passes, a pump at 5 a
                // second is refused within half a minute.
                evidence_share: 0.35,
                mail_evidence_share: 2.0,
                min_conversion_ratio: 0.2,
                mature_history: 30.0,
                undelivered_share: 0.5,
            },
        }
    }
}

/// When a prefix is suspended or held back.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Thresholds {
    /// Judged sends (past grace, in the window) before the prefix's conversion is judged.
    pub min_judged_sends: u64,
    /// Suspended below this fraction of the reference conversion (the baseline, floored).
    pub min_conversion_ratio: f64,
    /// Held back when more sends than this are within grace and unconverted…
    pub surge_floor: u64,
    /// …and more than this many times what its own recent rate predicts for that span.
    pub surge_factor: f64,
}

/// What the guard decides about a prefix after counting a send into it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Verdict {
    Pass,
    /// Held back until `until_ms`, then judged again (no strike).
    Hold {
        until_ms: u64,
    },
    /// Suspended until `until_ms`; this is strike `strikes`.
    Suspend {
        until_ms: u64,
        strikes: u32,
    },
}

/// The service's conversion over its judged sends, when there are any.
pub fn baseline(service: &Tally) -> Option<f64> {
    service.judged.conversion()
}

/// The conversion a prefix is compared with: the baseline once it rests on enough sends,
/// never below [`BASELINE_FLOOR`].
pub fn reference(service: &Tally) -> f64 {
    match baseline(service) {
        Some(observed) if service.judged.judged_sends() >= BASELINE_MIN_SENDS => {
            observed.max(BASELINE_FLOOR)
        }
        _ => BASELINE_FLOOR,
    }
}

/// The cool-off of strike `strikes` (1-based; past the last, the last).
pub fn cool_off(strikes: u32) -> Duration {
    let index = (strikes.max(1) as usize - 1).min(COOL_OFFS.len() - 1);
    COOL_OFFS[index]
}

/// Strikes still remembered at `now_ms` of a prefix last suspended at `struck_ms`.
pub fn remembered_strikes(strikes: u32, struck_ms: u64, now_ms: u64) -> u32 {
    if now_ms.saturating_sub(struck_ms) < STRIKE_MEMORY.as_millis() as u64 {
        strikes
    } else {
        0
    }
}

/// Judges a prefix whose counts (this send included) are `prefix`, against the service's,
/// holding a surge back for `grace`.
pub fn judge(
    thresholds: &Thresholds,
    window: &Window,
    grace: Duration,
    prefix: &Tally,
    service: &Tally,
    prior_strikes: u32,
) -> Verdict {
    // Undelivered sends are left out: only sends that reached someone can convert or not.
    if prefix.judged.judged_sends() >= thresholds.min_judged_sends.max(1) {
        let conversion = prefix.judged.conversion().unwrap_or(0.0);
        if conversion < thresholds.min_conversion_ratio * reference(service) {
            let strikes = prior_strikes + 1;
            return Verdict::Suspend {
                until_ms: window.now_ms + cool_off(strikes).as_millis() as u64,
                strikes,
            };
        }
    }
    // A surge is judged on volume, as its conversion cannot be yet; but an honest burst
    // already converts in part (most codes are typed within seconds), a bot's does not.
    let fresh_conversion = prefix.unjudged.conversion().unwrap_or(0.0);
    let converting = fresh_conversion >= thresholds.min_conversion_ratio * reference(service);
    if prefix.unjudged.unconverted() > surge_limit(thresholds, window, prefix) && !converting {
        return Verdict::Hold {
            until_ms: window.now_ms + grace.as_millis() as u64,
        };
    }
    Verdict::Pass
}

/// How many sends within grace may be unconverted: the floor, or `surge_factor` times what
/// the prefix's judged rate predicts for the minutes within grace, whichever is more.
fn surge_limit(thresholds: &Thresholds, window: &Window, prefix: &Tally) -> u64 {
    let judged_minutes = window.judged_minutes();
    let expected = if judged_minutes == 0 {
        0.0
    } else {
        prefix.judged.sends as f64 * window.unjudged_minutes() as f64 / judged_minutes as f64
    };
    (thresholds.surge_factor * expected).max(thresholds.surge_floor as f64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_secs(60);
    /// 10:00:30 on some day, in ms.
    const NOW: u64 = 29_000_000 * BUCKET_MS + 30_000;

    fn window() -> Window {
        Window::at(NOW, GRACE, WINDOW_MINUTES)
    }

    fn counts(sends: u64, conversions: u64) -> Counts {
        Counts {
            sends,
            conversions,
            undelivered: 0,
        }
    }

    fn undelivered(sends: u64, conversions: u64, undelivered: u64) -> Counts {
        Counts {
            undelivered,
            ..counts(sends, conversions)
        }
    }

    fn tally(judged: Counts, unjudged: Counts) -> Tally {
        Tally { judged, unjudged }
    }

    /// A service converting 80 % of 1,000 judged sends.
    fn healthy_service() -> Tally {
        tally(counts(1000, 800), counts(50, 30))
    }

    #[test]
    fn a_minute_is_judged_once_its_last_send_is_past_grace() {
        let window = window();
        assert_eq!(window.minute, 29_000_000);
        assert_eq!(window.from, 29_000_000 - 59);
        // At 10:00:30 with 60 s of grace, 09:58 (ended 09:59:00) is judged, 09:59 is not.
        assert_eq!(window.judged_before, 29_000_000 - 1);
        let mut t = Tally::default();
        window.tally(&mut t, 29_000_000 - 2, counts(3, 1));
        window.tally(&mut t, 29_000_000 - 1, counts(5, 0));
        window.tally(&mut t, 29_000_000, counts(7, 2));
        window.tally(&mut t, 29_000_000 - 60, counts(100, 0));
        assert_eq!(t, tally(counts(3, 1), counts(12, 2)));
        // Exactly at the boundary the minute turns judged.
        let later = Window::at(29_000_000 * BUCKET_MS + 60_000, GRACE, WINDOW_MINUTES);
        assert_eq!(later.judged_before, 29_000_000);
    }

    #[test]
    fn sends_within_grace_are_neither_converted_nor_unconverted() {
        // 30 fresh sends, none verified yet: none judged, and under the surge floor.
        let prefix = tally(counts(0, 0), counts(30, 0));
        let standard = Level::Standard.thresholds();
        assert_eq!(
            judge(&standard, &window(), GRACE, &prefix, &healthy_service(), 0),
            Verdict::Pass
        );
        // The same sends past grace are judged: 0 % is suspended.
        let judged = tally(counts(30, 0), counts(0, 0));
        assert!(matches!(
            judge(&standard, &window(), GRACE, &judged, &healthy_service(), 0),
            Verdict::Suspend { strikes: 1, .. }
        ));
    }

    #[test]
    fn conversion_far_below_the_baseline_suspends_once_there_is_volume() {
        let standard = Level::Standard.thresholds();
        let service = healthy_service();
        // Reference 0.8, ratio 0.2: below 16 % is suspended.
        let poor = tally(counts(100, 15), Counts::default());
        let fair = tally(counts(100, 17), Counts::default());
        let few = tally(counts(29, 0), Counts::default());
        assert!(matches!(
            judge(&standard, &window(), GRACE, &poor, &service, 0),
            Verdict::Suspend { .. }
        ));
        assert_eq!(
            judge(&standard, &window(), GRACE, &fair, &service, 0),
            Verdict::Pass
        );
        assert_eq!(
            judge(&standard, &window(), GRACE, &few, &service, 0),
            Verdict::Pass
        );
        // Strict judges from 15 sends and half the reference.
        let strict = Level::Strict.thresholds();
        let middling = tally(counts(20, 7), Counts::default());
        assert!(matches!(
            judge(&strict, &window(), GRACE, &middling, &service, 0),
            Verdict::Suspend { .. }
        ));
        assert_eq!(
            judge(&standard, &window(), GRACE, &middling, &service, 0),
            Verdict::Pass
        );
    }

    #[test]
    fn the_baseline_has_a_floor_when_traffic_is_thin_or_pumped() {
        // Little traffic: the floor stands in.
        assert_eq!(
            reference(&tally(counts(10, 10), counts(0, 0))),
            BASELINE_FLOOR
        );
        assert_eq!(reference(&Tally::default()), BASELINE_FLOOR);
        assert_eq!(baseline(&Tally::default()), None);
        // A service mostly pumped (converting 20 %) still expects half.
        assert_eq!(reference(&tally(counts(1000, 200), counts(0, 0))), 0.5);
        // A healthy one expects what it sees.
        assert_eq!(reference(&healthy_service()), 0.8);
        // So a prefix at 8 % is suspended even when the service itself converts 20 %.
        let prefix = tally(counts(100, 8), Counts::default());
        let pumped = tally(counts(1000, 200), counts(0, 0));
        assert!(matches!(
            judge(
                &Level::Standard.thresholds(),
                &window(),
                GRACE,
                &prefix,
                &pumped,
                0
            ),
            Verdict::Suspend { .. }
        ));
    }

    #[test]
    fn a_surge_above_the_prefix_own_rate_is_held_for_the_grace_period() {
        let standard = Level::Standard.thresholds();
        let service = healthy_service();
        // A new prefix: the floor (80 unconverted within grace) decides.
        let burst = tally(Counts::default(), counts(81, 0));
        let busy = tally(Counts::default(), counts(120, 45));
        assert_eq!(
            judge(&standard, &window(), GRACE, &burst, &service, 0),
            Verdict::Hold {
                until_ms: NOW + 60_000
            }
        );
        assert_eq!(
            judge(&standard, &window(), GRACE, &busy, &service, 0),
            Verdict::Pass
        );
        // A prefix that sends 100 a minute all hour (5,800 judged over 58 minutes): its two
        // minutes within grace predict 200, so up to four times that may be outstanding.
        let steady = tally(counts(5800, 5000), counts(700, 0));
        assert_eq!(
            judge(&standard, &window(), GRACE, &steady, &service, 0),
            Verdict::Pass
        );
        let surging = tally(counts(5800, 5000), counts(801, 0));
        assert!(matches!(
            judge(&standard, &window(), GRACE, &surging, &service, 0),
            Verdict::Hold { .. }
        ));
    }

    #[test]
    fn a_burst_that_converts_in_part_is_not_held() {
        let standard = Level::Standard.thresholds();
        let service = healthy_service();
        // 400 fresh sends at a cold start, 100 not verified yet: the verified 75 % say honest
        // users are typing their codes. Reference 0.8, ratio 0.2: below 16 % would be held.
        let honest = tally(Counts::default(), counts(400, 300));
        assert_eq!(
            judge(&standard, &window(), GRACE, &honest, &service, 0),
            Verdict::Pass
        );
        let pumped = tally(Counts::default(), counts(400, 60));
        assert!(matches!(
            judge(&standard, &window(), GRACE, &pumped, &service, 0),
            Verdict::Hold { .. }
        ));
    }

    #[test]
    fn undelivered_sends_are_neither_converted_nor_unconverted() {
        let standard = Level::Standard.thresholds();
        let service = healthy_service();
        // 100 judged sends never verified: suspended when they arrived, not when a receipt
        // said every one of them never did (a dead route), nor when 90 did not and the other
        // ten converted.
        let pumped = tally(counts(100, 0), Counts::default());
        let dead_route = tally(undelivered(100, 0, 100), Counts::default());
        let outage = tally(undelivered(100, 10, 90), Counts::default());
        assert!(matches!(
            judge(&standard, &window(), GRACE, &pumped, &service, 0),
            Verdict::Suspend { .. }
        ));
        for prefix in [dead_route, outage] {
            assert_eq!(
                judge(&standard, &window(), GRACE, &prefix, &service, 0),
                Verdict::Pass,
                "{prefix:?}"
            );
        }
        assert_eq!(outage.judged.conversion(), Some(1.0));
        assert_eq!(dead_route.judged.conversion(), None);
        // Undelivered sends still count against a prefix's delivered ones: 40 delivered, none
        // verified, is suspended whatever else was undelivered.
        let mixed = tally(undelivered(140, 0, 100), Counts::default());
        assert!(matches!(
            judge(&standard, &window(), GRACE, &mixed, &service, 0),
            Verdict::Suspend { .. }
        ));
        // Within grace: a burst whose receipts say undelivered is no surge to hold.
        let burst = tally(Counts::default(), undelivered(120, 0, 100));
        assert_eq!(burst.unjudged.unconverted(), 20);
        assert_eq!(
            judge(&standard, &window(), GRACE, &burst, &service, 0),
            Verdict::Pass
        );
        let held = tally(Counts::default(), counts(120, 0));
        assert!(matches!(
            judge(&standard, &window(), GRACE, &held, &service, 0),
            Verdict::Hold { .. }
        ));
        // The baseline too rests on the sends that arrived.
        assert_eq!(
            reference(&tally(undelivered(1000, 90, 901), counts(0, 0))),
            BASELINE_FLOOR
        );
        assert_eq!(
            reference(&tally(undelivered(1100, 90, 1000), counts(0, 0))),
            0.9
        );
    }

    #[test]
    fn cool_offs_grow_with_strikes_remembered_for_a_day() {
        assert_eq!(cool_off(1), Duration::from_secs(900));
        assert_eq!(cool_off(2), Duration::from_secs(3600));
        assert_eq!(cool_off(3), Duration::from_secs(4 * 3600));
        assert_eq!(cool_off(4), Duration::from_secs(24 * 3600));
        assert_eq!(cool_off(9), Duration::from_secs(24 * 3600));
        let day = STRIKE_MEMORY.as_millis() as u64;
        assert_eq!(remembered_strikes(2, NOW - day + 1, NOW), 2);
        assert_eq!(remembered_strikes(2, NOW - day, NOW), 0);
        let prefix = tally(counts(100, 0), Counts::default());
        let verdict = judge(
            &Level::Standard.thresholds(),
            &window(),
            GRACE,
            &prefix,
            &healthy_service(),
            2,
        );
        assert_eq!(
            verdict,
            Verdict::Suspend {
                until_ms: NOW + 4 * 3600 * 1000,
                strikes: 3
            }
        );
    }

    #[test]
    fn levels_parse_and_only_standard_and_strict_refuse() {
        for level in [Level::Off, Level::Monitor, Level::Standard, Level::Strict] {
            assert_eq!(Level::parse(level.as_str()), Some(level));
        }
        assert_eq!(Level::parse("STANDARD"), None);
        assert!(!Level::Monitor.enforces());
        assert!(!Level::Off.enforces());
        assert!(Level::Standard.enforces() && Level::Strict.enforces());
        assert_eq!(Level::default(), Level::Standard);
    }
}
