//! The guard's second round (issue 39): a send is judged at each of its levels, number ranges
//! at several depths (the calling code and 3, 5 and 7 digits), its country and the service
//! (for mail: its domain and all mail), each against its own history. A level is anomalous when
//! its recent unconverted sends exceed what its conversion explains by more than a handful and
//! a share of its own honest volume: a busy range absorbs a burst far smaller than its traffic,
//! a range without history is stopped after a handful. The narrowest anomalous range is
//! refused; a country or the service that is anomalous while no range of it is refuses the
//! sends into ranges with no converting history of their own (spread pumping), and lets the
//! ranges whose users convert go on. Pure functions of decayed counts: no clock, no store.

use std::borrow::Cow;

use crate::domain::traffic::{Decayed, HISTORY_HALF_LIFE, LevelCounts, RECENT_HALF_LIFE, Reason};
use crate::domain::{Destination, EMAIL_COUNTRY};

/// The recent memory's span over the history's: how much of a scope's history volume the
/// recent memory holds at a steady rate.
fn recent_share_of_history() -> f64 {
    RECENT_HALF_LIFE.as_secs_f64() / HISTORY_HALF_LIFE.as_secs_f64()
}

/// What a level is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LevelKind {
    /// The calling code and this many digits.
    Range(u8),
    /// A mail domain.
    Domain,
    /// A country.
    Country,
    /// All mail: judged with a mail domain's share (a mail costs nothing to send; when one
    /// provider carries most of the mail, all mail is that domain, whose honest history must
    /// absorb a burst: with a country's share, 80 of a burst of 200 mails into gmail.com were
    /// sent before every new Gmail user was refused, 2026-12-06).
    Mail,
    /// Every SMS.
    Service,
}

impl LevelKind {
    /// A range or a domain: a level whose anomaly refuses every send into it.
    fn is_range(self) -> bool {
        matches!(self, Self::Range(_) | Self::Domain)
    }

    /// A country, all mail or the service: a level most sends share, counted per instance
    /// between flushes (`wide_levels`).
    pub fn is_wide(self) -> bool {
        matches!(self, Self::Country | Self::Mail | Self::Service)
    }

    pub fn name(self) -> String {
        match self {
            Self::Range(digits) => format!("range{digits}"),
            Self::Domain => "domain".to_owned(),
            Self::Country => "country".to_owned(),
            Self::Mail => "mail".to_owned(),
            Self::Service => "service".to_owned(),
        }
    }
}

/// The levels of one send, narrowest first: what each is and the store's name for its scope
/// (kept side by side: the store takes the names as they are, with no copy on the send's path).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Levels {
    pub kinds: Vec<LevelKind>,
    pub scopes: Vec<String>,
}

impl Levels {
    fn with_capacity(n: usize) -> Self {
        Self {
            kinds: Vec::with_capacity(n),
            scopes: Vec::with_capacity(n),
        }
    }

    fn push(&mut self, kind: LevelKind, tag: &str, name: &str) {
        let mut scope = String::with_capacity(tag.len() + name.len());
        scope.push_str(tag);
        scope.push_str(name);
        self.kinds.push(kind);
        self.scopes.push(scope);
    }

    pub fn len(&self) -> usize {
        self.kinds.len()
    }

    /// How many levels come before the wide ones (which `levels_of` puts last): the ranges or
    /// the domain, which the store counts on every send.
    pub fn narrow(&self) -> usize {
        self.kinds.iter().take_while(|kind| !kind.is_wide()).count()
    }

    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    /// The name the operator sees for `level`: a range's digits, `@domain`, a country, `*`
    /// (made from the scope's name: only a refusal or the console asks).
    pub fn shown(&self, level: usize) -> Cow<'_, str> {
        let name = &self.scopes[level][SCOPE_TAG_LEN.min(self.scopes[level].len())..];
        match self.kinds[level] {
            LevelKind::Service => Cow::Borrowed("*"),
            LevelKind::Domain => Cow::Owned(format!("@{name}")),
            LevelKind::Range(_) | LevelKind::Country | LevelKind::Mail => Cow::Borrowed(name),
        }
    }
}

/// The length of a scope's tag (`r:`, `c:`, `d:`) before its name.
const SCOPE_TAG_LEN: usize = 2;

/// The levels of `destination`, narrowest first: ranges of `depths` digits after the calling
/// code (`depths` deepest first and without repeats: [`range_depths`]; those the number is long
/// enough for), the country and the service; for an address, its domain and all mail.
pub fn levels_of(destination: &Destination, country: &str, depths: &[u8]) -> Levels {
    let mut levels = Levels::with_capacity(depths.len() + 2);
    match destination {
        Destination::Phone(phone) => {
            let digits = &phone.as_e164()[1..];
            let code_len = phone
                .calling_code()
                .checked_ilog10()
                .map_or(1, |l| l as usize + 1);
            for depth in depths {
                let end = code_len + usize::from(*depth);
                // A range as long as the number is the number itself: no range.
                if end >= digits.len() {
                    continue;
                }
                levels.push(LevelKind::Range(*depth), "r:", &digits[..end]);
            }
            levels.push(LevelKind::Country, "c:", country);
            levels.kinds.push(LevelKind::Service);
            levels.scopes.push("s".to_owned());
        }
        Destination::Email(email) => {
            levels.push(LevelKind::Domain, "d:", email.address().domain());
            levels.push(LevelKind::Mail, "c:", EMAIL_COUNTRY);
        }
    }
    levels
}

/// The range depths of the settings as [`levels_of`] takes them: deepest first, each once.
pub fn range_depths(digits: &[u8]) -> Vec<u8> {
    let mut depths = digits.to_vec();
    depths.sort_unstable_by(|a, b| b.cmp(a));
    depths.dedup();
    depths
}

/// How much evidence a level's verdict needs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LevelThresholds {
    /// The handful: unconverted sends beyond what conversion explains that any level may have.
    pub evidence_floor: f64,
    /// …plus this share of the level's honest volume (its recent conversions, or what its
    /// history predicts for the recent span, whichever is more).
    pub evidence_share: f64,
    /// The same share for a mail domain and all mail (a mail costs nothing to send: only a
    /// burst far above a domain's traffic is held).
    pub mail_evidence_share: f64,
    /// A level converting below this fraction of the reference is not trusted as a home range.
    pub min_conversion_ratio: f64,
    /// History sends (before the recent span) from which a level's own conversion is believed
    /// (the history less the recent memory weighs each send by how long ago it was: a pump
    /// going on now is in both, so it barely moves it).
    pub mature_history: f64,
    /// A level whose recent sends are undelivered above this share (and three times its own
    /// history's) is suspect on that alone.
    pub undelivered_share: f64,
}

/// What decided a level's verdict: the counts, and the figures the rule compared.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Evidence {
    pub recent: Decayed,
    pub history: Decayed,
    /// The conversion the level's sends were expected to reach.
    pub expected_conversion: f64,
    /// Recent unconverted sends beyond what that conversion explains.
    pub excess: f64,
    /// The excess the level may have.
    pub allowed: f64,
}

/// A level's verdict on a send: which level (its index in the send's levels), why, and on
/// what evidence.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LevelVerdict {
    pub level: usize,
    pub reason: Reason,
    pub evidence: Evidence,
}

/// How many times its recent sends a level's history before them must hold for a conversion
/// below the reference to be believed as the level's own: about an hour at the current rate.
const HISTORY_OVER_RECENT: f64 = 10.0;

/// Whether the history before the recent span outweighs what happens now. The history less
/// the recent memory still takes in a send at half its weight after one recent half-life, so on
/// a level whose history is mostly now (a new deployment or range, or a pump that has gone on
/// for minutes) a pump would become the level's normal (CI's quick spread run, 2026-12-05: the
/// bot was paid again once the country's own conversion had learnt it).
fn outweighs(before: &Decayed, recent: &Decayed) -> bool {
    before.sends >= HISTORY_OVER_RECENT * recent.sends
}

/// The service's conversion as the reference: its history's once it rests on enough sends,
/// never below `floor` (a service mostly pumped must not learn that as normal).
pub fn reference(service: &LevelCounts, min_sends: f64, floor: f64) -> f64 {
    // The history before the recent span: a pump going on now is in both memories, so it
    // drags neither this nor a level's own expected conversion down.
    let before = service.history.less(&service.recent);
    match before.conversion() {
        Some(conversion) if before.sends >= min_sends => conversion.max(floor),
        _ => floor,
    }
}

/// The level's evidence, and whether it is anomalous (and why).
pub fn assess(
    thresholds: &LevelThresholds,
    kind: LevelKind,
    counts: &LevelCounts,
    reference: f64,
) -> (Evidence, Option<Reason>) {
    let recent = counts.recent;
    let before = counts.history.less(&recent);
    // Its own conversion once its history is long enough (and not itself far below the
    // reference: a range pumped for days is not normal), else the service's. A conversion below
    // the reference only once that history outweighs what happens now (a pump drags it down
    // within minutes); one above it at once (a busy range's honest users judge a pump into it
    // by their own conversion: the busy scenario paid 149 SMS before its first refusal, not 86,
    // when its 5 minutes of history were not believed).
    let expected_conversion = match before.conversion() {
        Some(own)
            if before.sends >= thresholds.mature_history
                && (own >= reference || outweighs(&before, &recent)) =>
        {
            own.clamp(thresholds.min_conversion_ratio * reference, 1.0)
        }
        _ => reference,
    };
    let volume = recent
        .conversions
        .max(before.conversions * recent_share_of_history());
    let share = if matches!(kind, LevelKind::Domain | LevelKind::Mail) {
        thresholds.mail_evidence_share
    } else {
        thresholds.evidence_share
    };
    let allowed = thresholds.evidence_floor + share * volume;
    let explained = recent.conversions * (1.0 - expected_conversion) / expected_conversion;
    let excess = recent.unconverted() - explained;
    let evidence = Evidence {
        recent,
        history: counts.history,
        expected_conversion,
        excess,
        allowed,
    };
    let usual_undelivered = before
        .conversion()
        .map_or(0.0, |_| before.undelivered / before.sends);
    let undelivered = recent.undelivered > thresholds.evidence_floor
        && recent.undelivered / recent.sends
            > thresholds.undelivered_share.max(3.0 * usual_undelivered);
    let reason = if excess > allowed {
        Some(Reason::Unconverted)
    } else if undelivered {
        Some(Reason::Undelivered)
    } else {
        None
    };
    (evidence, reason)
}

/// Whether a range may go on while its country or the service is pumped: before this send,
/// its unconverted sends were (nearly) all explained by its users' conversions. A bot's range
/// is refused from its third unexplained send; an honest range, whose codes are typed within
/// seconds, rarely has two outstanding (a refusal counts as a send: a range wrongly refused
/// stays so while the pump lasts, which is why the margin is not zero).
fn trusted(thresholds: &LevelThresholds, evidence: &Evidence) -> bool {
    evidence.excess - 1.0 < thresholds.evidence_floor / 4.0
}

/// Judges a send on its levels' counts (narrowest first, as [`levels_of`], this send
/// included), against the reference conversion: the narrowest anomalous range or domain, else
/// a country or the service that is anomalous when the send's widest range is not trusted.
pub fn judge_levels(
    thresholds: &LevelThresholds,
    kinds: &[LevelKind],
    counts: &[LevelCounts],
    reference: f64,
) -> Option<LevelVerdict> {
    let assessed: Vec<(Evidence, Option<Reason>)> = kinds
        .iter()
        .zip(counts)
        .map(|(kind, counts)| assess(thresholds, *kind, counts, reference))
        .collect();
    let verdict = |level: usize, reason: Reason| LevelVerdict {
        level,
        reason,
        evidence: assessed[level].0,
    };
    if let Some(level) = (0..kinds.len()).find(|i| kinds[*i].is_range() && assessed[*i].1.is_some())
    {
        return assessed[level].1.map(|reason| verdict(level, reason));
    }
    let wide = (0..kinds.len()).find(|i| !kinds[*i].is_range() && assessed[*i].1.is_some())?;
    // The send's widest range: its home, whose own users' conversion may vouch for it.
    let home = (0..kinds.len()).rev().find(|i| kinds[*i].is_range());
    match home {
        Some(home) if trusted(thresholds, &assessed[home].0) => None,
        _ => Some(verdict(wide, Reason::Spread)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{EmailAddress, Phone, Region};

    const STANDARD: LevelThresholds = LevelThresholds {
        evidence_floor: 10.0,
        evidence_share: 0.35,
        mail_evidence_share: 2.0,
        min_conversion_ratio: 0.2,
        mature_history: 30.0,
        undelivered_share: 0.5,
    };

    fn decayed(sends: f64, conversions: f64) -> Decayed {
        Decayed {
            sends,
            conversions,
            undelivered: 0.0,
        }
    }

    fn counts(recent: Decayed, older: Decayed) -> LevelCounts {
        LevelCounts {
            recent,
            history: Decayed {
                sends: recent.sends + older.sends,
                conversions: recent.conversions + older.conversions,
                undelivered: recent.undelivered + older.undelivered,
            },
        }
    }

    #[test]
    fn a_number_s_levels_go_from_its_narrowest_range_to_the_service() {
        let phone: Destination = Phone::parse("+8613812345678", Region::default())
            .unwrap()
            .into();
        let levels = levels_of(&phone, "CN", &range_depths(&[3, 7, 5, 3]));
        let shown = |levels: &Levels| -> Vec<String> {
            (0..levels.len())
                .map(|i| levels.shown(i).into_owned())
                .collect()
        };
        assert_eq!(shown(&levels), ["861381234", "8613812", "86138", "CN", "*"]);
        assert_eq!(levels.scopes[0], "r:861381234");
        assert_eq!(levels.scopes[3], "c:CN");
        assert_eq!(levels.scopes[4], "s");
        assert_eq!(levels.kinds[1], LevelKind::Range(5));
        let short: Destination = Phone::parse("+4930123456", Region::default())
            .unwrap()
            .into();
        let levels = levels_of(&short, "DE", &range_depths(&[3, 8, 5]));
        assert_eq!(shown(&levels), ["4930123", "49301", "DE", "*"]);
        let mail = Destination::from(EmailAddress::parse("ann@Gmail.com").unwrap());
        let levels = levels_of(&mail, EMAIL_COUNTRY, &[3]);
        assert_eq!(levels.scopes[0], "d:gmail.com");
        let shown = shown(&levels);
        assert_eq!(shown, ["@gmail.com", EMAIL_COUNTRY]);
        assert_eq!(levels.narrow(), 1, "the domain, then all mail");
    }

    #[test]
    fn the_wide_levels_come_last_where_the_guard_splits_them_off() {
        let phone: Destination = Phone::parse("+8613812345678", Region::default())
            .unwrap()
            .into();
        let mail = Destination::from(EmailAddress::parse("ann@example.org").unwrap());
        for (levels, narrow) in [
            (levels_of(&phone, "CN", &range_depths(&[3, 5, 7])), 3),
            (levels_of(&phone, "CN", &[]), 0),
            (levels_of(&mail, EMAIL_COUNTRY, &[3]), 1),
        ] {
            assert_eq!(levels.narrow(), narrow, "{levels:?}");
            assert!(levels.kinds[..narrow].iter().all(|k| !k.is_wide()));
            assert!(levels.kinds[narrow..].iter().all(|k| k.is_wide()));
        }
    }

    /// A range with days of 1 honest send a second, 80 % converting: its recent memory holds
    /// about 433 sends (the steady state of a 5-minute half-life), its history ~124,650.
    fn busy_range() -> LevelCounts {
        counts(decayed(433.0, 346.0), decayed(124_200.0, 99_360.0))
    }

    #[test]
    fn a_busy_range_absorbs_a_burst_far_smaller_than_its_traffic() {
        let (evidence, reason) = assess(&STANDARD, LevelKind::Range(3), &busy_range(), 0.8);
        assert_eq!(reason, None, "{evidence:?}");
        // 40 unverified sends on top: still within what its volume allows.
        let mut burst = busy_range();
        burst.recent.sends += 40.0;
        burst.history.sends += 40.0;
        assert_eq!(assess(&STANDARD, LevelKind::Range(3), &burst, 0.8).1, None);
        // 120 more (a pump at 5 a second for 24 s) is not.
        burst.recent.sends += 120.0;
        burst.history.sends += 120.0;
        assert_eq!(
            assess(&STANDARD, LevelKind::Range(3), &burst, 0.8).1,
            Some(Reason::Unconverted)
        );
    }

    #[test]
    fn a_range_without_history_is_stopped_after_a_handful() {
        let fresh = counts(decayed(11.0, 0.0), Decayed::default());
        let (evidence, reason) = assess(&STANDARD, LevelKind::Range(7), &fresh, 0.8);
        assert_eq!(reason, Some(Reason::Unconverted), "{evidence:?}");
        assert_eq!(evidence.allowed, 10.0);
        let few = counts(decayed(9.0, 0.0), Decayed::default());
        assert_eq!(assess(&STANDARD, LevelKind::Range(7), &few, 0.8).1, None);
        // A bot that verifies 12 % of its own sends is no better.
        let partial = counts(decayed(30.0, 3.6), Decayed::default());
        assert_eq!(
            assess(&STANDARD, LevelKind::Range(3), &partial, 0.8).1,
            Some(Reason::Unconverted)
        );
        // Honest users of a new range converting as the service does are not.
        let honest = counts(decayed(30.0, 24.0), Decayed::default());
        assert_eq!(assess(&STANDARD, LevelKind::Range(3), &honest, 0.8).1, None);
    }

    #[test]
    fn a_range_that_converts_poorly_for_days_is_judged_on_its_own_conversion() {
        // 40 % for days (a country whose users often give up): not anomalous at 40 %…
        let poor = counts(decayed(400.0, 160.0), decayed(100_000.0, 40_000.0));
        assert_eq!(assess(&STANDARD, LevelKind::Range(3), &poor, 0.8).1, None);
        // …but a range pumped for days does not make pumping its normal.
        let pumped = counts(decayed(400.0, 8.0), decayed(100_000.0, 2_000.0));
        assert_eq!(
            assess(&STANDARD, LevelKind::Range(3), &pumped, 0.8).1,
            Some(Reason::Unconverted)
        );
    }

    #[test]
    fn a_pump_that_has_gone_on_for_minutes_does_not_become_a_new_level_s_normal() {
        // A new deployment's country, 6 minutes into a spread pump at 3 a second beside 0.7
        // honest users a second converting 90 %: at these half-lives its recent memory holds
        // 244 s of the pump, its history before that 116 s (the history less the recent).
        let (honest, bot) = (0.7, 3.0);
        let pumped = counts(
            decayed((honest + bot) * 244.0, honest * 0.9 * 244.0),
            decayed((honest + bot) * 116.0, honest * 0.9 * 116.0),
        );
        // Its own conversion (17 %) would explain the pump; the reference's (the floor) does not.
        let (evidence, reason) = assess(&STANDARD, LevelKind::Country, &pumped, 0.5);
        assert_eq!(evidence.expected_conversion, 0.5);
        assert_eq!(reason, Some(Reason::Unconverted));
        // The service's reference never falls below its floor, however pumped its history.
        assert_eq!(reference(&pumped, 100.0, 0.5), 0.5);
        // A busy range with 5 minutes of honest history converting 80 % (more than the
        // reference), a pump into it going on: judged on its users' own conversion.
        let busy = counts(decayed(900.0, 170.0), decayed(83.0, 66.0));
        let (evidence, _) = assess(&STANDARD, LevelKind::Range(3), &busy, 0.5);
        assert!(
            (evidence.expected_conversion - 66.0 / 83.0).abs() < 1e-9,
            "{evidence:?}"
        );
        // The same level with a day of that honest traffic before the pump: its own conversion.
        let day = decayed(honest * 86_400.0, honest * 0.9 * 86_400.0);
        let known = counts(pumped.recent, day);
        let (evidence, _) = assess(&STANDARD, LevelKind::Country, &known, 0.5);
        assert!(evidence.expected_conversion > 0.8, "{evidence:?}");
    }

    #[test]
    fn undelivered_is_a_signal() {
        let mut dead = counts(decayed(20.0, 8.0), decayed(10_000.0, 8_000.0));
        dead.recent.undelivered = 12.0;
        dead.history.undelivered = 12.0 + 100.0;
        let (_, reason) = assess(&STANDARD, LevelKind::Range(5), &dead, 0.8);
        assert_eq!(reason, Some(Reason::Undelivered));
        // As usual for it: no signal.
        dead.history.undelivered = 12.0 + 7_000.0;
        assert_eq!(assess(&STANDARD, LevelKind::Range(5), &dead, 0.8).1, None);
    }

    #[test]
    fn spread_pumping_refuses_untrusted_ranges_of_the_pumped_country_only() {
        let kinds = [
            LevelKind::Range(5),
            LevelKind::Range(3),
            LevelKind::Country,
            LevelKind::Service,
        ];
        // The country: 30 honest conversions recently, and 150 bot sends.
        let country = counts(decayed(187.0, 30.0), decayed(3_000.0, 2_400.0));
        let service = counts(decayed(600.0, 400.0), decayed(20_000.0, 16_000.0));
        // A bot's range: a few sends, none converted (not anomalous on its own).
        let bot_range = counts(decayed(4.0, 0.0), Decayed::default());
        let verdict = judge_levels(
            &STANDARD,
            &kinds,
            &[bot_range, bot_range, country, service],
            0.8,
        )
        .expect("refused");
        assert_eq!((verdict.level, verdict.reason), (2, Reason::Spread));
        // An honest range of the same country goes on.
        let honest = counts(decayed(40.0, 32.0), decayed(3_000.0, 2_400.0));
        assert_eq!(
            judge_levels(
                &STANDARD,
                &kinds,
                &[bot_range, honest, country, service],
                0.8
            ),
            None
        );
        // A narrow anomaly is refused as itself, the narrowest first.
        let pumped = counts(decayed(30.0, 0.0), Decayed::default());
        let verdict =
            judge_levels(&STANDARD, &kinds, &[pumped, pumped, country, service], 0.8).unwrap();
        assert_eq!((verdict.level, verdict.reason), (0, Reason::Unconverted));
    }

    #[test]
    fn a_burst_of_200_mails_into_a_domain_with_history_holds_no_one() {
        // Five minutes of honest users at 1 a second, all of one domain, 88 % converting (the
        // pumping simulation's burst-mail): 216 sends in the recent memory, 84 before it. Then
        // 200 unverified mails to it in 10 s.
        let honest = decayed(216.0, 190.0);
        let level = counts(
            Decayed {
                sends: honest.sends + 200.0,
                ..honest
            },
            decayed(84.0, 74.0),
        );
        let kinds = [LevelKind::Domain, LevelKind::Mail];
        assert_eq!(judge_levels(&STANDARD, &kinds, &[level, level], 0.5), None);
        // Judged as a country, all mail would have refused the domain's new users (spread).
        let as_country = [LevelKind::Domain, LevelKind::Country];
        let verdict = judge_levels(&STANDARD, &as_country, &[level, level], 0.5).unwrap();
        assert_eq!((verdict.level, verdict.reason), (1, Reason::Spread));
        // A domain without history is still stopped after a handful.
        let fresh = counts(decayed(11.0, 0.0), Decayed::default());
        let verdict = judge_levels(&STANDARD, &kinds, &[fresh, level], 0.5).unwrap();
        assert_eq!((verdict.level, verdict.reason), (0, Reason::Unconverted));
    }

    #[test]
    fn the_reference_rests_on_the_service_s_history_with_a_floor() {
        let thin = counts(decayed(10.0, 10.0), Decayed::default());
        assert_eq!(reference(&thin, 100.0, 0.5), 0.5);
        let healthy = counts(decayed(500.0, 400.0), decayed(10_000.0, 8_000.0));
        assert!((reference(&healthy, 100.0, 0.5) - 0.8).abs() < 1e-9);
        let pumped = counts(decayed(500.0, 40.0), decayed(10_000.0, 800.0));
        assert_eq!(reference(&pumped, 100.0, 0.5), 0.5);
    }
}
