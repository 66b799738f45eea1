//! The guard's answers to the operator: the prefixes and levels blocked now, a lift, and the
//! traffic report (the series per minute and country, the busiest prefixes, the spend caps).

use super::*;

/// An active suspension or hold, as the operator sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Suspension {
    pub prefix: String,
    pub country: String,
    pub reason: Reason,
    pub since_ms: u64,
    pub until_ms: u64,
    pub strikes: u32,
    pub sends: u64,
    pub conversions: u64,
    pub evidence: String,
}

/// What the guard does about a prefix now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrefixState {
    Ok,
    /// Blocked, but the level only monitors.
    Monitored,
    Held,
    Suspended,
}

impl PrefixState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Monitored => "monitored",
            Self::Held => "held",
            Self::Suspended => "suspended",
        }
    }
}

/// One minute of the service's traffic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrafficBucket {
    pub t_ms: u64,
    pub sends: u64,
    pub verified: u64,
    pub refused: u64,
    /// Sends a delivery receipt called undelivered (counted in `sends` too).
    pub undelivered: u64,
    /// Country → sends, verified and undelivered.
    pub by_country: BTreeMap<String, Counts>,
}

/// A prefix's traffic over the report's span.
#[derive(Clone, Debug, PartialEq)]
pub struct PrefixTraffic {
    pub prefix: String,
    pub country: String,
    pub sends: u64,
    pub verified: u64,
    /// Sends a delivery receipt called undelivered: neither converted nor unconverted.
    pub undelivered: u64,
    /// Sends past grace that were not verified (nor undelivered).
    pub unconverted: u64,
    /// Of the sends past grace, the share verified.
    pub conversion: Option<f64>,
    pub state: PrefixState,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TrafficReport {
    pub bucket_secs: u64,
    pub level: Level,
    /// The service's conversion over the guard's window, past grace.
    pub baseline_conversion: Option<f64>,
    /// Oldest first, one per minute of the span.
    pub series: Vec<TrafficBucket>,
    pub top_prefixes: Vec<PrefixTraffic>,
    /// Each spend cap and what was spent against it.
    pub spend: Vec<SpendLine>,
}

impl FraudGuard {
    /// The prefixes suspended or held back now.
    pub async fn suspensions(&self) -> Result<Vec<Suspension>, FraudError> {
        let now = now_ms();
        let mut active: Vec<Suspension> = self
            .store
            .prefix_blocks()
            .await?
            .into_iter()
            .filter(|block| block.is_active(now))
            .map(|block| Suspension {
                prefix: block.prefix,
                country: block.country,
                reason: block.reason,
                since_ms: block.since_ms,
                until_ms: block.until_ms,
                strikes: block.strikes,
                sends: block.sends,
                conversions: block.conversions,
                evidence: block.evidence,
            })
            .collect();
        active.sort_by(|a, b| b.since_ms.cmp(&a.since_ms).then(a.prefix.cmp(&b.prefix)));
        Ok(active)
    }

    /// Ends `prefix`'s suspension or hold now; false if it had none. The range is not judged
    /// again for an hour; its strikes stay, so a range that goes on pumping is suspended for
    /// longer next time.
    pub async fn lift(&self, prefix: &str) -> Result<bool, FraudError> {
        let lifted = self.store.lift_block(prefix, now_ms()).await?;
        if lifted {
            self.stats.record(Event::FraudLifted);
            tracing::warn!(%prefix, "fraud guard: prefix lifted by an operator");
        }
        Ok(lifted)
    }

    /// The last `minutes` minutes: the service's series per minute and per country, and the
    /// prefixes with most sends. This instance's counts are flushed first (so what it counted
    /// is in); the other instances' arrive with their next flush, within about a second.
    pub async fn traffic(&self, minutes: u64) -> Result<TrafficReport, FraudError> {
        let now = now_ms();
        self.traffic.flush(&*self.store, now).await?;
        let span = Window::at(now, self.settings.grace, minutes);
        let traffic = self.store.fraud_traffic(span.from, span.minute).await?;
        let mut series: Vec<TrafficBucket> = (span.from..=span.minute)
            .map(|minute| TrafficBucket {
                t_ms: minute * BUCKET_MS,
                sends: 0,
                verified: 0,
                refused: 0,
                undelivered: 0,
                by_country: BTreeMap::new(),
            })
            .collect();
        let slot = |minute: u64| (minute.checked_sub(span.from)).map(|i| i as usize);
        for counts in &traffic.service {
            if let Some(bucket) = slot(counts.minute).and_then(|i| series.get_mut(i)) {
                bucket.sends = counts.sends;
                bucket.verified = counts.conversions;
                bucket.refused = counts.refused;
                bucket.undelivered = counts.undelivered;
            }
        }
        for (country, minutes) in &traffic.countries {
            for counts in minutes {
                if let Some(bucket) = slot(counts.minute).and_then(|i| series.get_mut(i))
                    && (counts.sends > 0 || counts.conversions > 0)
                {
                    bucket.by_country.insert(country.clone(), counts_of(counts));
                }
            }
        }
        let blocks: BTreeMap<String, PrefixBlock> = self
            .store
            .prefix_blocks()
            .await?
            .into_iter()
            .filter(|block| block.is_active(now))
            .map(|block| (block.prefix.clone(), block))
            .collect();
        let mut prefixes: Vec<PrefixTraffic> = traffic
            .prefixes
            .iter()
            .map(|(prefix, country, minutes)| {
                let mut tally = Tally::default();
                for counts in minutes {
                    span.tally(&mut tally, counts.minute, counts_of(counts));
                }
                PrefixTraffic {
                    prefix: prefix.clone(),
                    country: country.clone(),
                    sends: tally.judged.sends + tally.unjudged.sends,
                    verified: tally.judged.conversions + tally.unjudged.conversions,
                    undelivered: tally.judged.undelivered + tally.unjudged.undelivered,
                    unconverted: tally.judged.unconverted(),
                    conversion: tally.judged.conversion(),
                    state: self.state_of(blocks.get(prefix)),
                }
            })
            .filter(|prefix| prefix.sends > 0)
            .collect();
        prefixes.sort_by(|a, b| b.sends.cmp(&a.sends).then(a.prefix.cmp(&b.prefix)));
        prefixes.truncate(TOP_PREFIXES);
        // The baseline as the guard judges with it: the last hour past grace.
        let judged = self.window(now);
        let mut service = Tally::default();
        for counts in &traffic.service {
            judged.tally(&mut service, counts.minute, counts_of(counts));
        }
        Ok(TrafficReport {
            bucket_secs: BUCKET_MS / 1000,
            level: self.settings.level,
            baseline_conversion: baseline(&service),
            series,
            top_prefixes: prefixes,
            spend: self.spend_lines(),
        })
    }

    fn state_of(&self, block: Option<&PrefixBlock>) -> PrefixState {
        match block {
            None => PrefixState::Ok,
            Some(_) if !self.settings.level.enforces() => PrefixState::Monitored,
            Some(block) if matches!(block.reason, Reason::Surge | Reason::Spread) => {
                PrefixState::Held
            }
            Some(_) => PrefixState::Suspended,
        }
    }
}

/// A minute's counts as the judgement reads them.
fn counts_of(counts: &MinuteCounts) -> Counts {
    Counts {
        sends: counts.sends,
        conversions: counts.conversions,
        undelivered: counts.undelivered,
    }
}
