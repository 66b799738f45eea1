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
    /// A level (issue 39): its recent unconverted sends exceed what its own history and the
    /// service's conversion explain, by more than that history's volume allows.
    Unconverted,
    /// A level: its recent sends come back undelivered far above its own history.
    Undelivered,
    /// A country or the service is pumped over many ranges: its sends into ranges with no
    /// converting history of their own are refused.
    Spread,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Conversion => "conversion",
            Self::Surge => "surge",
            Self::Unconverted => "unconverted",
            Self::Undelivered => "undelivered",
            Self::Spread => "spread",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "conversion" => Some(Self::Conversion),
            "surge" => Some(Self::Surge),
            "unconverted" => Some(Self::Unconverted),
            "undelivered" => Some(Self::Undelivered),
            "spread" => Some(Self::Spread),
            _ => None,
        }
    }
}

/// One scope's traffic as the guard's levels remember it (issue 39): sends, conversions and
/// undelivered sends, each a sum of the events' weights decayed by their age (an event of age
/// `a` weighs `2^(-a / half_life)`), so that one record of three numbers per half-life holds a
/// scope's rate and conversion over any span, in bounded memory.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Decayed {
    pub sends: f64,
    pub conversions: f64,
    pub undelivered: f64,
}

impl Decayed {
    /// Sends not converted (the undelivered included: they are a signal, not an exemption).
    pub fn unconverted(&self) -> f64 {
        (self.sends - self.conversions).max(0.0)
    }

    /// The share of the sends that converted, if there are any.
    pub fn conversion(&self) -> Option<f64> {
        (self.sends > 0.0).then(|| (self.conversions / self.sends).min(1.0))
    }

    /// `self` and `other` summed (counts not yet added to a record: a refused send taken back
    /// makes them negative, so not floored).
    pub fn plus(&self, other: &Decayed) -> Decayed {
        Decayed {
            sends: self.sends + other.sends,
            conversions: self.conversions + other.conversions,
            undelivered: self.undelivered + other.undelivered,
        }
    }

    /// `self` less `other` (the history before the recent span: an estimate, never negative).
    pub fn less(&self, other: &Decayed) -> Decayed {
        Decayed {
            sends: (self.sends - other.sends).max(0.0),
            conversions: (self.conversions - other.conversions).max(0.0),
            undelivered: (self.undelivered - other.undelivered).max(0.0),
        }
    }
}

/// One scope's two memories: `recent` (a few minutes' half-life: what happens now) and
/// `history` (a day's: what is normal for it).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LevelCounts {
    pub recent: Decayed,
    pub history: Decayed,
}

/// The half-lives of the two memories, in ms; every store decays with the same ones, given
/// with each update, by [`decay`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HalfLives {
    pub recent_ms: f64,
    pub history_ms: f64,
}

/// The recent memory's half-life: long enough to gather a burst's evidence, short enough to
/// forget it within the hour.
pub const RECENT_HALF_LIFE: Duration = Duration::from_secs(5 * 60);
/// The history's half-life: a scope's normal is its last few days.
pub const HISTORY_HALF_LIFE: Duration = Duration::from_secs(24 * 3600);
/// How long a scope's record outlives its last event: three history half-lives (what it held
/// weighs an eighth by then) once its history holds a few sends, an hour before. A record that
/// one send made (a bot's random number makes two: its 5- and 7-digit ranges, refused or not)
/// would otherwise hold 248 bytes of Redis for three days; an hour idle leaves a few sends'
/// recent memory at 2^-12, and a history that short is judged by the service's conversion
/// anyway (`mature_history`). On Redis two to three times each: its expiry is set again only
/// once a third of it has passed, and at once when it grows out of the hour.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RecordLife {
    pub ttl: Duration,
    /// The life of a record whose (decayed) history holds fewer than `young_sends` sends.
    pub young_ttl: Duration,
    pub young_sends: f64,
}

pub const LEVEL_RECORD_LIFE: RecordLife = RecordLife {
    ttl: Duration::from_secs(3 * 24 * 3600),
    young_ttl: Duration::from_secs(3600),
    // Two sends are young, three within a day are not (three over two days decay to 1.75).
    young_sends: 2.5,
};

impl RecordLife {
    /// How long a record whose history now holds `history_sends` outlives this event.
    pub fn ttl_for(&self, history_sends: f64) -> Duration {
        if history_sends < self.young_sends {
            self.young_ttl
        } else {
            self.ttl
        }
    }
}

impl Default for HalfLives {
    fn default() -> Self {
        Self {
            recent_ms: RECENT_HALF_LIFE.as_millis() as f64,
            history_ms: HISTORY_HALF_LIFE.as_millis() as f64,
        }
    }
}

/// The factor a weight kept since `then_ms` is multiplied by at `now_ms` (1 if the clock went
/// back: instances' clocks differ by a little).
pub fn decay(then_ms: u64, now_ms: u64, half_life_ms: f64) -> f64 {
    let age = now_ms.saturating_sub(then_ms) as f64;
    (-age / half_life_ms).exp2()
}

/// What one event adds to each scope of a send: a send, a conversion or an undelivered send
/// (one of them 1, the others 0), to both memories; or a refused send taken back out of the
/// history alone. The default changes nothing (a read).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LevelChange {
    pub sends: f64,
    pub conversions: f64,
    pub undelivered: f64,
    /// Whether the recent memory takes the change too (the history always does).
    pub recent: bool,
}

impl LevelChange {
    pub const SEND: Self = Self {
        sends: 1.0,
        conversions: 0.0,
        undelivered: 0.0,
        recent: true,
    };
    pub const CONVERSION: Self = Self {
        sends: 0.0,
        conversions: 1.0,
        undelivered: 0.0,
        recent: true,
    };
    pub const UNDELIVERED: Self = Self {
        sends: 0.0,
        conversions: 0.0,
        undelivered: 1.0,
        recent: true,
    };
    /// A send the guard refused leaves the history, not the recent memory: a pump that goes
    /// on stays anomalous now, and never becomes what is normal for its levels (counted in
    /// the history, a pump of about 80 minutes into a level without history would have been
    /// learnt as its normal). Counted first like every admitted send, since the verdict reads
    /// the counts with it; taken back once refused.
    pub const REFUSED: Self = Self {
        sends: -1.0,
        conversions: 0.0,
        undelivered: 0.0,
        recent: false,
    };

    /// A change of `amounts`, to both memories if `recent`, else to the history alone.
    pub fn of(amounts: &Decayed, recent: bool) -> Self {
        Self {
            sends: amounts.sends,
            conversions: amounts.conversions,
            undelivered: amounts.undelivered,
            recent,
        }
    }

    /// What the change adds to each count.
    pub fn amounts(&self) -> Decayed {
        Decayed {
            sends: self.sends,
            conversions: self.conversions,
            undelivered: self.undelivered,
        }
    }

    /// What the recent memory takes: the change, or nothing.
    pub fn to_recent(&self) -> Self {
        if self.recent {
            *self
        } else {
            Self {
                sends: 0.0,
                conversions: 0.0,
                undelivered: 0.0,
                recent: false,
            }
        }
    }
}

impl LevelCounts {
    /// `self` as it stands at `now_ms` after `change`, last changed at `then_ms`: what every
    /// store computes (the memory store with this very function).
    pub fn updated(
        &self,
        then_ms: u64,
        now_ms: u64,
        half: &HalfLives,
        change: &LevelChange,
    ) -> Self {
        // Never below nothing: a refused send is taken back from a history that may have
        // expired since it was counted.
        let step = |kept: &Decayed, factor: f64, change: &LevelChange| Decayed {
            sends: (kept.sends * factor + change.sends).max(0.0),
            conversions: (kept.conversions * factor + change.conversions).max(0.0),
            undelivered: (kept.undelivered * factor + change.undelivered).max(0.0),
        };
        Self {
            recent: step(
                &self.recent,
                decay(then_ms, now_ms, half.recent_ms),
                &change.to_recent(),
            ),
            history: step(
                &self.history,
                decay(then_ms, now_ms, half.history_ms),
                change,
            ),
        }
    }
}
