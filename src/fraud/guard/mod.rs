//! The fraud guard as a use case: prepares a send's step (which the store takes within the
//! issue: the prefix's block read, refusing the send before anything is written, and on one
//! Redis node its levels counted) and judges the send's levels; counts a verified code and an
//! undelivered send in them; counts the traffic report per instance (`traffic`); and answers
//! the operator's questions (blocks, lift, traffic). Suspensions, refusals and lifts are
//! logged, counted in the metrics and the daily stats.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::levels::{
    LevelThresholds, LevelVerdict, Levels, assess, judge_levels, levels_of, range_depths,
};
use super::policy::{
    BASELINE_FLOOR, BASELINE_MIN_SENDS, BUCKET_MS, Counts, Level, Reason, Tally, WINDOW_MINUTES,
    Window, baseline, cool_off, remembered_strikes,
};
use super::safe_list::SafeList;
use super::settings::FraudSettings;
use super::spend::{SPEND_REFRESH, SpendGuard, SpendLine};
use super::traffic::{TrafficCounter, TrafficEvent};
use super::wide_levels::{EXACT_FOR_MS, EXACT_NEAR_SHARE, FLUSH_EVERY, WideLevels};
use crate::domain::traffic::{HalfLives, LEVEL_RECORD_LIFE, LevelChange, LevelCounts};
use crate::domain::{Destination, EMAIL_COUNTRY};
use crate::keyring::Keyring;
use crate::stats::{Event, Stats};
use crate::store::{
    Admission, FraudSend, FraudStore, GuardStep, LevelStep, LevelStore, LevelUpdate, MinuteCounts,
    PrefixBlock, SendMark, StoreError,
};

mod names;
mod operator;

use self::names::send_names;
pub use self::names::{country_of, prefix_of};
pub use self::operator::{PrefixState, PrefixTraffic, Suspension, TrafficBucket, TrafficReport};

/// How many prefixes the traffic report ranks.
const TOP_PREFIXES: usize = 20;

#[derive(Debug, thiserror::Error)]
pub enum FraudError {
    /// The destination's prefix is suspended or held back until `retry_after` has passed.
    #[error("sends to this destination are suspended")]
    Refused { retry_after: Duration },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A send the guard let through: what it counts once its SMS went out, and the mark its
/// delivery receipt hands back.
#[derive(Debug)]
pub struct Admitted {
    /// The send's prefix and country one after the other (`prefix()`, `country()`): one
    /// allocation for the two on every send.
    names: String,
    /// Where the prefix ends in `names`.
    prefix_end: usize,
    mark: SendMark,
    now_ms: u64,
}

/// A send before its issue, as the guard will judge it (`FraudGuard::ticket`).
#[derive(Debug)]
pub struct SendTicket {
    admitted: Admitted,
    /// On the safe list: counted, never judged nor refused.
    safe: bool,
    enforce: bool,
    /// Known to have verified before: no suspension refuses it (`FraudGuard::pardon_returning`).
    returning: bool,
    /// Its levels, narrowest first, and their store names (which the store may count in the
    /// issue's own step: `GuardStep::levels`).
    levels: Levels,
}

impl Admitted {
    /// The mark this send leaves (its minute and a token), which its delivery receipt hands
    /// back.
    pub fn mark(&self) -> SendMark {
        self.mark
    }

    fn prefix(&self) -> &str {
        &self.names[..self.prefix_end]
    }

    fn country(&self) -> &str {
        &self.names[self.prefix_end..]
    }

    fn send(&self) -> FraudSend<'_> {
        FraudSend {
            prefix: self.prefix(),
            country: self.country(),
            now_ms: self.now_ms,
        }
    }
}

pub struct FraudGuard {
    store: Arc<dyn FraudStore>,
    levels: Arc<dyn LevelStore>,
    /// Names the returning destinations (keyed digests).
    keyring: Arc<Keyring>,
    settings: FraudSettings,
    level_thresholds: LevelThresholds,
    /// `VCODE_FRAUD_RANGE_DIGITS` as `levels_of` takes them (sorted once, not on every send).
    range_depths: Vec<u8>,
    stats: Arc<Stats>,
    /// Who is never judged: `VCODE_FRAUD_SAFE_LIST`, and what operators and tenants add.
    safe_list: Arc<SafeList>,
    /// The spend caps (none unless set: `with_spend`).
    spend: Arc<SpendGuard>,
    /// The country's, all mail's and the service's counts on this instance between flushes.
    wide: WideLevels,
    /// The traffic report's counts on this instance between flushes.
    traffic: TrafficCounter,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl FraudGuard {
    pub fn new(
        stores: (Arc<dyn FraudStore>, Arc<dyn LevelStore>),
        keyring: Arc<Keyring>,
        settings: FraudSettings,
        stats: Arc<Stats>,
    ) -> Self {
        let (store, levels) = stores;
        let safe_list = Arc::new(SafeList::configured(settings.safe_list.clone()));
        Self {
            store,
            levels,
            keyring,
            level_thresholds: settings.level_thresholds(),
            range_depths: range_depths(&settings.range_digits),
            settings,
            spend: Arc::new(SpendGuard::new(
                Default::default(),
                Default::default(),
                stats.clone(),
            )),
            stats,
            safe_list,
            wide: WideLevels::new(Self::half_lives(), LEVEL_RECORD_LIFE),
            traffic: TrafficCounter::default(),
        }
    }

    /// The guard with spend caps: refused past them, read again from the shared counts every
    /// `SPEND_REFRESH` (a task of its own, while the guard lives).
    pub fn with_spend(mut self, spend: SpendGuard) -> Self {
        self.spend = Arc::new(spend);
        self
    }

    /// Starts reading the shared counts for the spend caps, if there are any.
    pub fn spawn_spend_refresh(self: &Arc<Self>) {
        if !self.spend.enabled() {
            return;
        }
        let guard = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(SPEND_REFRESH);
            loop {
                ticks.tick().await;
                let Some(guard) = guard.upgrade() else { return };
                guard.spend.refresh(&*guard.store, now_ms()).await;
            }
        });
    }

    /// Starts adding the wide levels and the traffic report counted here to the store every
    /// `FLUSH_EVERY`, while the guard lives. (What an instance counted in its last second
    /// before it stops is lost: a second of a country's days of history, and of the report.)
    pub fn spawn_flushes(self: &Arc<Self>) {
        if self.settings.level == Level::Off {
            return;
        }
        let guard = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(FLUSH_EVERY);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let Some(guard) = guard.upgrade() else { return };
                let now = now_ms();
                guard.wide.flush(&*guard.levels, now).await;
                if let Err(error) = guard.traffic.flush(&*guard.store, now).await {
                    tracing::warn!(%error, "fraud guard: traffic counts kept for the next flush");
                }
            }
        });
    }

    /// Refuses a send whose SMS would pass a spend cap (a safe-listed number never is).
    pub fn check_spend(
        &self,
        destination: &Destination,
        tenant: Option<&str>,
    ) -> Result<(), FraudError> {
        if !self.spend.enabled() || destination.phone().is_none() {
            return Ok(());
        }
        match self.spend.check(&country_of(destination)) {
            Ok(()) => Ok(()),
            Err(_) if self.is_safe(destination, tenant) => Ok(()),
            Err((line, retry_after)) => {
                self.stats.record(Event::FraudRefusedSpend);
                tracing::info!(%destination, scope = %line.scope, window = line.window, spent = line.spent, cap = line.cap, "send refused: spend cap");
                Err(FraudError::Refused { retry_after })
            }
        }
    }

    /// Every spend cap and what was spent against it (the traffic report's).
    pub fn spend_lines(&self) -> Vec<SpendLine> {
        self.spend.lines()
    }

    /// The guard consulting `safe_list` (the store's entries and the configured ones) instead
    /// of the configured entries alone.
    pub fn with_safe_list(mut self, safe_list: Arc<SafeList>) -> Self {
        self.safe_list = safe_list;
        self
    }

    pub fn level(&self) -> Level {
        self.settings.level
    }

    /// What start-up logs: the level and the thresholds in effect.
    pub fn describe(&self) -> String {
        let t = &self.level_thresholds;
        let depths: Vec<String> = self.range_depths.iter().map(u8::to_string).collect();
        format!(
            "{} (ranges: calling code + {} digits, the country and the service, each against its own history; a range refused past {} unexplained unconverted sends or {:.0} % of its history's volume, its conversion below {:.0} % of the reference; blocks recorded per calling code + {} digits; {} safe entries)",
            self.settings.level.as_str(),
            depths.join(", "),
            t.evidence_floor,
            t.evidence_share * 100.0,
            t.min_conversion_ratio * 100.0,
            self.settings.prefix_digits,
            self.settings.safe_list.len()
        )
    }

    fn is_safe(&self, destination: &Destination, tenant: Option<&str>) -> bool {
        self.safe_list.exempts(destination, tenant)
    }

    fn window(&self, now_ms: u64) -> Window {
        Window::at(now_ms, self.settings.grace, WINDOW_MINUTES)
    }

    /// What the guard needs of a send before its issue: its prefix, country, levels, mark and
    /// time. `None` when the guard is off.
    /// `tenant` (`twilio:AC…`) is who asks, for its own safe-list entries.
    pub fn ticket(&self, destination: &Destination, tenant: Option<&str>) -> Option<SendTicket> {
        if self.settings.level == Level::Off {
            return None;
        }
        let now = now_ms();
        let safe = self.is_safe(destination, tenant);
        let prefix = prefix_of(destination, self.settings.prefix_digits);
        let (names, prefix_end) = send_names(&prefix, destination);
        let levels = levels_of(destination, &names[prefix_end..], &self.range_depths);
        Some(SendTicket {
            admitted: Admitted {
                names,
                prefix_end,
                mark: SendMark {
                    minute: now / BUCKET_MS,
                    token: rand::random(),
                },
                now_ms: now,
            },
            safe,
            enforce: self.settings.level.enforces() && !safe,
            returning: false,
            levels,
        })
    }

    /// Whether `destination` verified within the remembered time (issue 39): a suspension of
    /// its range does not refuse it. A store error answers no (the refusal stands).
    pub async fn is_returning(&self, destination: &Destination) -> bool {
        let digests = self.keyring.returning_digests(destination.key());
        match self.levels.is_returning(&digests, now_ms()).await {
            Ok(returning) => returning,
            Err(error) => {
                tracing::warn!(%error, "fraud guard: returning destinations not read");
                false
            }
        }
    }

    /// A send the store refused for its prefix's block, if its destination is a returning
    /// one: its ticket no longer enforces, for the issue to be taken again. `false` if not.
    pub async fn pardon_returning(
        &self,
        destination: &Destination,
        ticket: &mut SendTicket,
    ) -> bool {
        if ticket.returning || !self.is_returning(destination).await {
            return false;
        }
        ticket.returning = true;
        ticket.enforce = false;
        self.stats.record(Event::FraudReturningPassed);
        true
    }

    fn half_lives() -> HalfLives {
        HalfLives::default()
    }

    /// Counts `change` in each of `levels` and answers their counts after it, in order: the
    /// narrow ones in the store (unless `narrow_counted`, what the step counted), with
    /// the destination remembered as `returning` if given, the wide ones here
    /// (`wide_levels`).
    async fn count_levels(
        &self,
        levels: &Levels,
        change: LevelChange,
        returning: Option<u64>,
        narrow_counted: Option<Vec<LevelCounts>>,
    ) -> Result<Vec<LevelCounts>, StoreError> {
        let now = now_ms();
        let narrow = levels.narrow();
        let scopes: Vec<&str> = levels.scopes.iter().map(String::as_str).collect();
        let (narrow_scopes, wide_scopes) = scopes.split_at(narrow);
        let mut counts = match narrow_counted {
            Some(counts) if counts.len() == narrow => counts,
            _ if narrow_scopes.is_empty() && returning.is_none() => Vec::new(),
            _ => {
                let returning_ttl = Duration::from_secs(self.settings.returning_days * 24 * 3600);
                self.levels
                    .count_levels(&LevelUpdate {
                        scopes: narrow_scopes,
                        change,
                        now_ms: now,
                        half_lives: Self::half_lives(),
                        record_life: LEVEL_RECORD_LIFE,
                        returning: returning.map(|digest| (digest, returning_ttl)),
                    })
                    .await?
            }
        };
        counts.extend(
            self.wide
                .count(&*self.levels, wide_scopes, change, now)
                .await?,
        );
        Ok(counts)
    }

    /// The levels' verdict on a send whose levels counted it; a wide level near its own
    /// verdict is counted in the store on every send for a while (`wide_levels`).
    fn judge_levels(&self, levels: &Levels, counts: &[LevelCounts]) -> Option<LevelVerdict> {
        // The reference: the service's (all mail's for an address) history, floored.
        let widest = counts.last()?;
        let reference = super::levels::reference(widest, BASELINE_MIN_SENDS as f64, BASELINE_FLOOR);
        let wide = levels.kinds.iter().zip(&levels.scopes).zip(counts);
        for ((kind, scope), counts) in wide.skip(levels.narrow()) {
            let (evidence, reason) = assess(&self.level_thresholds, *kind, counts, reference);
            if reason.is_some() || evidence.excess > EXACT_NEAR_SHARE * evidence.allowed {
                self.wide.keep_exact(scope, now_ms() + EXACT_FOR_MS);
            }
        }
        judge_levels(&self.level_thresholds, &levels.kinds, counts, reference)
    }

    /// Whether an operator lifted `shown`'s block within the window.
    async fn lifted_recently(&self, shown: &str, now: u64) -> Result<bool, StoreError> {
        Ok(self.store.prefix_blocks().await?.iter().any(|block| {
            block.prefix == shown
                && block.lifted_ms > 0
                && now.saturating_sub(block.lifted_ms) < WINDOW_MINUTES * BUCKET_MS
        }))
    }

    /// The block a level's verdict records, for the cool-off of its strike: a range refused,
    /// or a pumped country or service noted (its untrusted ranges are refused while its counts
    /// say so).
    fn level_block(
        &self,
        levels: &Levels,
        verdict: &LevelVerdict,
        admitted: &Admitted,
        prior: Option<&PrefixBlock>,
    ) -> PrefixBlock {
        let now = admitted.now_ms;
        let shown = levels.shown(verdict.level);
        // Only the admission's prefix has its record at hand: other ranges start at strike 1.
        let prior_strikes = prior
            .filter(|block| block.prefix == shown)
            .map_or(0, |b| remembered_strikes(b.strikes, b.struck_ms, now));
        let strikes = prior_strikes + 1;
        // A spread verdict too lasts its strike's cool-off. Its block names the country, which
        // the store does not enforce: each send into the country is judged again on the counts,
        // and refused while its range has no converting history of its own.
        let until_ms = now + cool_off(strikes).as_millis() as u64;
        let evidence = &verdict.evidence;
        PrefixBlock {
            prefix: shown.into_owned(),
            country: admitted.country().to_owned(),
            reason: verdict.reason,
            since_ms: now,
            until_ms,
            strikes,
            struck_ms: now,
            sends: evidence.recent.sends.round() as u64,
            conversions: evidence.recent.conversions.round() as u64,
            lifted_ms: 0,
            evidence: describe_evidence(levels, verdict),
        }
    }

    /// The send's step as the store takes it within the issue (`FusedSteps::issue_guarded`).
    pub fn step<'a>(&self, ticket: &'a SendTicket) -> GuardStep<'a> {
        GuardStep {
            send: ticket.admitted.send(),
            enforce: ticket.enforce,
            // The wide levels are counted here (`wide_levels`).
            levels: Some(LevelStep {
                scopes: &ticket.levels.scopes[..ticket.levels.narrow()],
                now_ms: ticket.admitted.now_ms,
                half_lives: Self::half_lives(),
                record_life: LEVEL_RECORD_LIFE,
            }),
        }
    }

    /// Judges a send the store admitted (in the step or its own): refuses it if its
    /// prefix was blocked, else judges its levels on their counts, this send included. A send
    /// whose level is refused records the block and is refused, unless the level only monitors,
    /// the destination is on the safe list or verified before; the caller undoes its issue.
    pub async fn judge(
        &self,
        destination: &Destination,
        ticket: SendTicket,
        admission: Admission,
    ) -> Result<Admitted, FraudError> {
        let admitted = ticket.admitted;
        let now = admitted.now_ms;
        let (block, counted_levels) = match admission {
            Admission::Refused(block) => {
                return Err(self.refused(destination, &admitted.send(), &block));
            }
            Admission::Admitted { block, levels } => (block, levels),
        };
        // A safe destination is never judged; a prefix already flagged (monitor) is not
        // judged again until its block is over, nor one an operator lifted until the counts
        // that blocked it have left the window.
        let pardoned = |b: &PrefixBlock| {
            b.lifted_ms > 0 && now.saturating_sub(b.lifted_ms) < WINDOW_MINUTES * BUCKET_MS
        };
        // Every send the store admitted counts in its levels (a safe one too: its conversion
        // will), refused or not: a pump that goes on keeps its levels anomalous. In the issue's
        // own step where the store can (Redis on one node), else here.
        let levels = ticket.levels;
        let level_counts = self
            .count_levels(&levels, LevelChange::SEND, None, counted_levels)
            .await?;
        if ticket.safe
            || block
                .as_ref()
                .is_some_and(|b| b.is_active(now) || pardoned(b))
        {
            return Ok(admitted);
        }
        let new_block = match self.judge_levels(&levels, &level_counts) {
            None => return Ok(admitted),
            // An operator lifted this level's range within the window: not judged again
            // (read only on the way to a refusal).
            Some(verdict)
                if self
                    .lifted_recently(&levels.shown(verdict.level), now)
                    .await? =>
            {
                return Ok(admitted);
            }
            Some(verdict) => self.level_block(&levels, &verdict, &admitted, block.as_ref()),
        };
        if self.store.block_prefix(&new_block, now).await? {
            self.blocked(destination, &new_block);
        }
        if !ticket.enforce {
            return Ok(admitted);
        }
        // A destination that verified before is not refused by its range's suspension.
        if self.is_returning(destination).await {
            self.stats.record(Event::FraudReturningPassed);
            return Ok(admitted);
        }
        // Refused: out of its levels' history (it stays in their recent memory, which keeps a
        // pump that goes on anomalous).
        if let Err(error) = self
            .count_levels(&levels, LevelChange::REFUSED, None, None)
            .await
        {
            tracing::warn!(%error, "fraud guard: a refused send stays in its levels' history");
        }
        Err(self.refused(destination, &admitted.send(), &new_block))
    }

    /// A new suspension or hold: an event in the log, the metrics and the stats.
    fn blocked(&self, destination: &Destination, block: &PrefixBlock) {
        let suspended = !matches!(block.reason, Reason::Surge | Reason::Spread);
        self.stats.record(if suspended {
            Event::FraudSuspended
        } else {
            Event::FraudHeld
        });
        crate::metrics::count_fraud_block(&block.country, suspended);
        tracing::warn!(
            prefix = %block.prefix,
            country = %block.country,
            reason = block.reason.as_str(),
            strikes = block.strikes,
            recent_sends = block.sends,
            recent_conversions = block.conversions,
            until_ms = block.until_ms,
            level = self.settings.level.as_str(),
            %destination,
            "fraud guard: prefix {}",
            if suspended { "suspended" } else { "held back" }
        );
    }

    /// A send the store refused in the step (`ticket`'s): its prefix is blocked.
    pub fn refused_by(
        &self,
        destination: &Destination,
        ticket: &SendTicket,
        block: &PrefixBlock,
    ) -> FraudError {
        self.refused(destination, &ticket.admitted.send(), block)
    }

    /// A refusal: in the stats, the traffic report and the log.
    fn refused(
        &self,
        destination: &Destination,
        send: &FraudSend<'_>,
        block: &PrefixBlock,
    ) -> FraudError {
        self.stats.record(match block.reason {
            Reason::Conversion => Event::FraudRefusedConversion,
            Reason::Surge => Event::FraudRefusedSurge,
            Reason::Unconverted | Reason::Undelivered | Reason::Spread => Event::FraudRefusedLevel,
        });
        let refused = TrafficEvent::REFUSED;
        self.traffic
            .count(send.prefix, send.country, send.now_ms, refused);
        tracing::info!(%destination, prefix = %block.prefix, reason = block.reason.as_str(), "send refused: fraud guard");
        FraudError::Refused {
            retry_after: Duration::from_millis(block.until_ms.saturating_sub(send.now_ms)),
        }
    }

    /// After the send: an SMS that went out (or may have) is counted per country and in the
    /// traffic report; one that did not is counted nowhere but in its levels (which keep what
    /// was tried: a pump whose SMS fail is still a pump).
    pub fn settle(&self, admitted: Option<Admitted>, destination: &Destination, sent: bool) {
        if !sent {
            return;
        }
        if let Some(admitted) = &admitted {
            let send = admitted.send();
            self.traffic
                .count(send.prefix, send.country, send.now_ms, TrafficEvent::SEND);
        }
        if destination.phone().is_some() {
            let country = country_of(destination);
            self.spend.sent(&country);
            crate::metrics::count_sms_by_country(&country);
        }
    }

    /// A code was verified: counted per country, in the traffic report (in the minute it was
    /// verified, most often its send's) and in its levels.
    pub fn converted(self: &Arc<Self>, destination: &Destination) {
        if destination.phone().is_some() {
            crate::metrics::count_verified_by_country(&country_of(destination));
        }
        if self.settings.level == Level::Off {
            return;
        }
        let prefix = prefix_of(destination, self.settings.prefix_digits);
        self.traffic.count(
            &prefix,
            &country_of(destination),
            now_ms(),
            TrafficEvent::CONVERSION,
        );
        // Its levels' conversion, and the destination remembered as returning: in the
        // background, as the answer does not wait for what only later sends read.
        let levels = levels_of(destination, &country_of(destination), &self.range_depths);
        let digest = self.keyring.returning_digests(destination.key())[0];
        let guard = self.clone();
        tokio::spawn(async move {
            if let Err(error) = guard
                .count_levels(&levels, LevelChange::CONVERSION, Some(digest), None)
                .await
            {
                tracing::warn!(%error, "fraud guard: a conversion not counted in its levels");
            }
        });
    }

    /// A delivery receipt said the SMS of a send the guard counted (`mark`) never arrived:
    /// counted in the traffic report (in the send's minute) and in its levels, whatever the
    /// level now, as the send was. An undelivered send is a signal, not an exemption (a range
    /// that never delivers is typical of toll fraud). A store error is logged (it costs the
    /// levels one event, not the receipt).
    pub async fn undelivered(&self, destination: &Destination, mark: SendMark) {
        let prefix = prefix_of(destination, self.settings.prefix_digits);
        let country = country_of(destination);
        self.traffic.count(
            &prefix,
            &country,
            mark.minute * BUCKET_MS,
            TrafficEvent::UNDELIVERED,
        );
        let levels = levels_of(destination, &country, &self.range_depths);
        if let Err(error) = self
            .count_levels(&levels, LevelChange::UNDELIVERED, None, None)
            .await
        {
            tracing::warn!(%error, %prefix, "fraud guard: undelivered send not counted in its levels");
        }
    }
}

/// A level's verdict in words, for the operator: the level, its recent and history counts,
/// what its conversion explains and what it was allowed.
fn describe_evidence(levels: &Levels, verdict: &LevelVerdict) -> String {
    let e = &verdict.evidence;
    let what = match verdict.reason {
        Reason::Spread => "pumped over ranges without converting history",
        Reason::Undelivered => "undelivered far above its own history",
        _ => "unconverted sends beyond what its conversion explains",
    };
    format!(
        "{} {}: {what}; recent {:.0} sends, {:.0} verified, {:.0} undelivered; expected \
         conversion {:.0} %; unexplained {:.1} of {:.1} allowed; history {:.0} sends, {:.0} \
         verified",
        levels.kinds[verdict.level].name(),
        levels.shown(verdict.level),
        e.recent.sends,
        e.recent.conversions,
        e.recent.undelivered,
        e.expected_conversion * 100.0,
        e.excess,
        e.allowed,
        e.history.sends,
        e.history.conversions,
    )
}
