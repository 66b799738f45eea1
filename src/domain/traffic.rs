//! The traffic the fraud guard counts, as the store keeps it and the policy reads it: sends and
//! their conversions per minute, the window a judgement reads (split at the grace period), and
//! why a prefix is refused. Vocabulary only: the judgement is `fraud::policy`'s.

use std::time::Duration;

/// The counters are per minute: the traffic series' bucket, and the grain of every window.
pub const BUCKET_MS: u64 = 60_000;
/// The window a prefix and the service are judged over: the last hour.
pub const WINDOW_MINUTES: u64 = 60;
/// How long the per-minute counters are kept (and how far back the traffic route reaches).
pub const RETENTION_MINUTES: u64 = 1440;
/// Sends, the conversions of those sends, and those a delivery receipt said never arrived
/// (both attributed to the send's minute).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub sends: u64,
    pub conversions: u64,
    /// Sends a receipt called undelivered: neither converted nor unconverted, as a carrier
    /// outage or a dead route is not pumping (pumped SMS are reported delivered). Counted in
    /// `sends` too; a store may answer a send's judgement net of them instead (`sends` without
    /// them, this 0: the same judgement), as Redis and PostgreSQL do.
    pub undelivered: u64,
}

impl Counts {
    pub fn add(&mut self, other: Counts) {
        self.sends += other.sends;
        self.conversions += other.conversions;
        self.undelivered += other.undelivered;
    }

    /// Sends the judgement counts: all but the undelivered.
    pub fn judged_sends(self) -> u64 {
        self.sends.saturating_sub(self.undelivered)
    }

    /// The share of the sends it counts that converted, if it counts any.
    pub fn conversion(self) -> Option<f64> {
        let sends = self.judged_sends();
        (sends > 0).then(|| self.conversions.min(sends) as f64 / sends as f64)
    }

    /// Sends not (yet) converted, and not undelivered.
    pub fn unconverted(self) -> u64 {
        self.judged_sends().saturating_sub(self.conversions)
    }
}

/// One scope's counts over the window, split at the grace period.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Minutes every send of which is older than the grace period: judged.
    pub judged: Counts,
    /// Minutes with sends still within grace: neither converted nor unconverted yet.
    pub unjudged: Counts,
}

/// Which minutes a judgement at `now_ms` reads: `[from, judged_before)` judged,
/// `[judged_before, minute]` within grace. Minutes are `unix ms / BUCKET_MS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub now_ms: u64,
    pub minute: u64,
    pub from: u64,
    pub judged_before: u64,
}

impl Window {
    /// The window of `minutes` minutes ending with the current one.
    pub fn at(now_ms: u64, grace: Duration, minutes: u64) -> Self {
        let minute = now_ms / BUCKET_MS;
        let from = (minute + 1).saturating_sub(minutes);
        // Minute m is judged once its last send, at (m + 1) * BUCKET_MS, is `grace` old.
        let judged_before =
            (now_ms.saturating_sub(grace.as_millis() as u64) / BUCKET_MS).clamp(from, minute + 1);
        Self {
            now_ms,
            minute,
            from,
            judged_before,
        }
    }

    pub fn judged_minutes(&self) -> u64 {
        self.judged_before - self.from
    }

    pub fn unjudged_minutes(&self) -> u64 {
        self.minute + 1 - self.judged_before
    }

    /// Adds one minute's counts to the side of the split it falls on (minutes outside the
    /// window are left out).
    pub fn tally(&self, tally: &mut Tally, minute: u64, counts: Counts) {
        if minute < self.from || minute > self.minute {
            return;
        }
        if minute < self.judged_before {
            tally.judged.add(counts);
        } else {
            tally.unjudged.add(counts);
        }
    }
}

/// Why a prefix is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Its judged sends convert far below the service's baseline.
    Conversion,
    /// Its sends within grace surge far above its own recent rate.
    Surge,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Conversion => "conversion",
            Self::Surge => "surge",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "conversion" => Some(Self::Conversion),
            "surge" => Some(Self::Surge),
            _ => None,
        }
    }
}
