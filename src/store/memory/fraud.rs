//! The embedded store's fraud-guard counts: per-minute counters per scope (prefix, country,
//! service), the sends' attributions and the prefixes' blocks, all under one lock, so that a
//! send's check and count is one critical section (which the issue takes under its own lock:
//! `issue_guarded`, codes.rs). Old minutes and expired attributions are dropped once a minute,
//! by the first send of the minute.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;

use super::*;
use crate::domain::traffic::{Counts, RETENTION_MINUTES, Tally, Window};
use crate::store::events::block_detail;
use crate::store::{
    Admission, FraudSend, FraudStore, GuardStep, MinuteCounts, PrefixBlock, SendMark, TrafficCounts,
};

/// Every counter of one scope, by minute.
type Minutes = BTreeMap<u64, MinuteCounts>;

#[derive(Default)]
pub(super) struct FraudState {
    service: Minutes,
    countries: HashMap<String, Minutes>,
    /// Each prefix's country and minutes.
    prefixes: HashMap<String, (String, Minutes)>,
    /// Attribution → (its last send's mark, expiry in the caller's ms).
    attributions: HashMap<String, (SendMark, u64)>,
    blocks: HashMap<String, PrefixBlock>,
    pruned_minute: u64,
}

fn bump(minutes: &mut Minutes, minute: u64, change: impl FnOnce(&mut MinuteCounts)) {
    let counts = minutes.entry(minute).or_insert(MinuteCounts {
        minute,
        ..MinuteCounts::default()
    });
    change(counts);
}

fn tally(minutes: &Minutes, window: &Window) -> Tally {
    let mut tally = Tally::default();
    for counts in minutes.range(window.from..=window.minute).map(|(_, c)| c) {
        let sends = Counts {
            sends: counts.sends,
            conversions: counts.conversions,
            undelivered: counts.undelivered,
        };
        window.tally(&mut tally, counts.minute, sends);
    }
    tally
}

fn span(minutes: &Minutes, from: u64, to: u64) -> Vec<MinuteCounts> {
    minutes.range(from..=to).map(|(_, c)| *c).collect()
}

impl FraudState {
    /// Drops minutes past retention and expired attributions, once a minute.
    fn prune(&mut self, now_ms: u64, minute: u64) {
        if self.pruned_minute == minute {
            return;
        }
        self.pruned_minute = minute;
        let oldest = minute.saturating_sub(RETENTION_MINUTES);
        let keep = |minutes: &mut Minutes| *minutes = minutes.split_off(&oldest);
        keep(&mut self.service);
        self.countries.values_mut().for_each(keep);
        self.countries.retain(|_, minutes| !minutes.is_empty());
        self.prefixes.values_mut().for_each(|(_, m)| keep(m));
        self.prefixes.retain(|_, (_, minutes)| !minutes.is_empty());
        self.attributions
            .retain(|_, (_, expires_at_ms)| *expires_at_ms > now_ms);
    }

    /// Every scope a send counts in, changed alike.
    fn each_scope(
        &mut self,
        send: &FraudSend<'_>,
        minute: u64,
        change: impl Fn(&mut MinuteCounts),
    ) {
        bump(&mut self.service, minute, &change);
        // Looked up before any entry is made: a scope counted already (nearly every send's)
        // needs no owned copy of its name.
        if let Some(minutes) = self.countries.get_mut(send.country) {
            bump(minutes, minute, &change);
        } else {
            let mut minutes = Minutes::new();
            bump(&mut minutes, minute, &change);
            self.countries.insert(send.country.to_owned(), minutes);
        }
        if let Some((_, minutes)) = self.prefixes.get_mut(send.prefix) {
            bump(minutes, minute, &change);
        } else {
            let mut minutes = Minutes::new();
            bump(&mut minutes, minute, &change);
            let scope = (send.country.to_owned(), minutes);
            self.prefixes.insert(send.prefix.to_owned(), scope);
        }
    }
}

impl MemoryStore {
    /// The guard's step of a send, if there is one (the issue takes it under its lock).
    pub(super) fn admit_locked(&self, step: Option<&GuardStep<'_>>) -> Option<Admission> {
        let step = step?;
        Some(self.admit_now(&step.send, step.window, step.enforce, step.attribution_ttl))
    }

    fn admit_now(
        &self,
        send: &FraudSend<'_>,
        window: &Window,
        enforce: bool,
        attribution_ttl: Duration,
    ) -> Admission {
        let mut state = lock(&self.fraud);
        state.prune(send.now_ms, window.minute);
        let block = state.blocks.get(send.prefix).cloned();
        if let Some(block) = block
            .as_ref()
            .filter(|b| enforce && b.is_active(send.now_ms))
        {
            bump(&mut state.service, window.minute, |c| c.refused += 1);
            return Admission::Refused(block.clone());
        }
        state.each_scope(send, window.minute, |c| c.sends += 1);
        let expires_at_ms = send.now_ms.saturating_add(duration_ms(attribution_ttl));
        let mark = SendMark {
            minute: window.minute,
            token: send.token,
        };
        let previous = state
            .attributions
            .insert(send.attribution.to_owned(), (mark, expires_at_ms))
            .filter(|(_, expiry)| *expiry > send.now_ms)
            .map(|(mark, _)| mark);
        let prefix = tally(&state.prefixes[send.prefix].1, window);
        let service = tally(&state.service, window);
        Admission::Admitted {
            prefix,
            service,
            block,
            previous,
            mark,
            levels: None,
        }
    }
}

#[async_trait]
impl FraudStore for MemoryStore {
    async fn admit_send(
        &self,
        send: &FraudSend<'_>,
        window: &Window,
        enforce: bool,
        attribution_ttl: Duration,
    ) -> Result<Admission, StoreError> {
        Ok(self.admit_now(send, window, enforce, attribution_ttl))
    }

    async fn release_send(
        &self,
        send: &FraudSend<'_>,
        ours: SendMark,
        previous: Option<SendMark>,
        refused: bool,
    ) -> Result<(), StoreError> {
        let mut state = lock(&self.fraud);
        let minute = ours.minute;
        state.each_scope(send, minute, |c| c.sends = c.sends.saturating_sub(1));
        if refused {
            bump(&mut state.service, minute, |c| c.refused += 1);
        }
        let still_ours = state
            .attributions
            .get(send.attribution)
            .is_some_and(|(mark, _)| *mark == ours);
        if still_ours {
            match previous {
                Some(previous) => {
                    if let Some(entry) = state.attributions.get_mut(send.attribution) {
                        entry.0 = previous;
                    }
                }
                None => {
                    state.attributions.remove(send.attribution);
                }
            }
        }
        Ok(())
    }

    async fn count_conversion(
        &self,
        attribution: &str,
        prefix: &str,
        country: &str,
        since_minute: u64,
    ) -> Result<Option<u64>, StoreError> {
        let mut state = lock(&self.fraud);
        let Some((SendMark { minute, .. }, _)) = state.attributions.remove(attribution) else {
            return Ok(None);
        };
        if minute < since_minute {
            return Ok(None);
        }
        let send = FraudSend {
            prefix,
            country,
            attribution,
            token: 0,
            now_ms: 0,
        };
        state.each_scope(&send, minute, |c| c.conversions += 1);
        Ok(Some(minute))
    }

    async fn block_prefix(&self, block: &PrefixBlock, now_ms: u64) -> Result<bool, StoreError> {
        let mut state = lock(&self.fraud);
        if state
            .blocks
            .get(&block.prefix)
            .is_some_and(|active| active.is_active(now_ms))
        {
            return Ok(false);
        }
        state.blocks.insert(block.prefix.clone(), block.clone());
        if self.events.is_on() {
            self.events.append(
                OutboxEntry::of_prefix(Fact::PrefixBlocked, &block.prefix, unix_now_ms())
                    .with_detail(block_detail(block)),
            );
        }
        Ok(true)
    }

    async fn prefix_blocks(&self) -> Result<Vec<PrefixBlock>, StoreError> {
        Ok(lock(&self.fraud).blocks.values().cloned().collect())
    }

    async fn lift_block(&self, prefix: &str, now_ms: u64) -> Result<bool, StoreError> {
        let mut state = lock(&self.fraud);
        match state.blocks.get_mut(prefix) {
            Some(block) if block.is_active(now_ms) => {
                block.until_ms = now_ms;
                block.lifted_ms = now_ms;
                if self.events.is_on() {
                    let detail = block_detail(block);
                    self.events.append(
                        OutboxEntry::of_prefix(Fact::PrefixLifted, prefix, unix_now_ms())
                            .with_detail(detail),
                    );
                }
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn count_undelivered(
        &self,
        prefix: &str,
        country: &str,
        mark: SendMark,
    ) -> Result<(), StoreError> {
        let mut state = lock(&self.fraud);
        let state = &mut *state;
        let scopes = [
            Some(&mut state.service),
            state.countries.get_mut(country),
            state.prefixes.get_mut(prefix).map(|(_, minutes)| minutes),
        ];
        for minutes in scopes.into_iter().flatten() {
            if let Some(counts) = minutes.get_mut(&mark.minute)
                && counts.sends > counts.undelivered
            {
                counts.undelivered += 1;
            }
        }
        Ok(())
    }

    async fn fraud_traffic(&self, from: u64, to: u64) -> Result<TrafficCounts, StoreError> {
        let state = lock(&self.fraud);
        Ok(TrafficCounts {
            service: span(&state.service, from, to),
            countries: state
                .countries
                .iter()
                .map(|(country, minutes)| (country.clone(), span(minutes, from, to)))
                .collect(),
            prefixes: state
                .prefixes
                .iter()
                .map(|(prefix, (country, minutes))| {
                    (prefix.clone(), country.clone(), span(minutes, from, to))
                })
                .collect(),
        })
    }
}
