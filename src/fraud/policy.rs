//! The guard's levels of enforcement, how long a refusal lasts (cool-offs growing with
//! strikes), and the service's baseline conversion (what the levels' reference falls back on,
//! and what the traffic report shows). No clock, no store.

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

/// The service's conversion over its judged sends, when there are any.
pub fn baseline(service: &Tally) -> Option<f64> {
    service.judged.conversion()
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

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_secs(60);
    /// 10:00:30 on some day, in ms.
    const NOW: u64 = 29_000_000 * BUCKET_MS + 30_000;

    fn counts(sends: u64, conversions: u64) -> Counts {
        Counts {
            sends,
            conversions,
            undelivered: 0,
        }
    }

    #[test]
    fn a_minute_is_judged_once_its_last_send_is_past_grace() {
        let window = Window::at(NOW, GRACE, WINDOW_MINUTES);
        assert_eq!(window.minute, 29_000_000);
        assert_eq!(window.from, 29_000_000 - 59);
        // At 10:00:30 with 60 s of grace, 09:58 (ended 09:59:00) is judged, 09:59 is not.
        assert_eq!(window.judged_before, 29_000_000 - 1);
        let mut t = Tally::default();
        window.tally(&mut t, 29_000_000 - 2, counts(3, 1));
        window.tally(&mut t, 29_000_000 - 1, counts(5, 0));
        window.tally(&mut t, 29_000_000, counts(7, 2));
        window.tally(&mut t, 29_000_000 - 60, counts(100, 0));
        assert_eq!(
            t,
            Tally {
                judged: counts(3, 1),
                unjudged: counts(12, 2)
            }
        );
        // Exactly at the boundary the minute turns judged.
        let later = Window::at(29_000_000 * BUCKET_MS + 60_000, GRACE, WINDOW_MINUTES);
        assert_eq!(later.judged_before, 29_000_000);
    }

    #[test]
    fn the_baseline_is_the_judged_conversion_of_the_sends_that_arrived() {
        assert_eq!(baseline(&Tally::default()), None);
        let judged = |counts| Tally {
            judged: counts,
            unjudged: Counts::default(),
        };
        assert_eq!(baseline(&judged(counts(1000, 800))), Some(0.8));
        // Undelivered sends are neither converted nor unconverted.
        let undelivered = Counts {
            undelivered: 900,
            ..counts(1000, 90)
        };
        assert_eq!(baseline(&judged(undelivered)), Some(0.9));
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
