//! The embedded store's fraud-guard records: the prefixes' blocks, which a send's step reads
//! (under the issue's own lock: `issue_guarded`, codes.rs), and the traffic report's counters
//! per minute per scope (prefix, country, service), which the instances' flushes add to. Old
//! minutes are dropped by the first flush of each minute.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;

use super::*;
use crate::domain::traffic::{BUCKET_MS, RETENTION_MINUTES};
use crate::store::events::block_detail;
use crate::store::{
    Admission, FraudSend, FraudStore, GuardStep, MinuteCounts, PrefixBlock, TrafficChange,
    TrafficCounts,
};

/// Every counter of one scope, by minute.
type Minutes = BTreeMap<u64, MinuteCounts>;

#[derive(Default)]
pub(super) struct FraudState {
    service: Minutes,
    countries: HashMap<String, Minutes>,
    /// Each prefix's country and minutes.
    prefixes: HashMap<String, (String, Minutes)>,
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

fn span(minutes: &Minutes, from: u64, to: u64) -> Vec<MinuteCounts> {
    minutes.range(from..=to).map(|(_, c)| *c).collect()
}

/// Adds `by` to a count, never below 0 (a send given back on a minute already pruned).
fn add(count: &mut u64, by: i64) {
    *count = count.saturating_add_signed(by);
}

impl FraudState {
    /// Drops minutes past retention, once a minute.
    fn prune(&mut self, minute: u64) {
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
    }

    /// One instance's change of one prefix's minute.
    fn add_change(&mut self, change: &TrafficChange) {
        let minute = change.minute;
        let scope = |counts: &mut MinuteCounts| {
            add(&mut counts.sends, change.sends);
            add(&mut counts.conversions, change.conversions);
            add(&mut counts.undelivered, change.undelivered);
        };
        bump(&mut self.service, minute, |counts| {
            scope(counts);
            add(&mut counts.refused, change.refused);
        });
        let country = self.countries.entry(change.country.clone()).or_default();
        bump(country, minute, scope);
        let (_, prefix) = self
            .prefixes
            .entry(change.prefix.clone())
            .or_insert_with(|| (change.country.clone(), Minutes::new()));
        bump(prefix, minute, scope);
    }
}

impl MemoryStore {
    /// The guard's step of a send, if there is one (the issue takes it under its lock).
    pub(super) fn admit_locked(&self, step: Option<&GuardStep<'_>>) -> Option<Admission> {
        let step = step?;
        Some(self.admit_now(&step.send, step.enforce))
    }

    fn admit_now(&self, send: &FraudSend<'_>, enforce: bool) -> Admission {
        let state = lock(&self.fraud);
        let block = state.blocks.get(send.prefix).cloned();
        match block {
            Some(block) if enforce && block.is_active(send.now_ms) => Admission::Refused(block),
            block => Admission::Admitted {
                block,
                levels: None,
            },
        }
    }
}

#[async_trait]
impl FraudStore for MemoryStore {
    async fn admit_send(
        &self,
        send: &FraudSend<'_>,
        enforce: bool,
    ) -> Result<Admission, StoreError> {
        Ok(self.admit_now(send, enforce))
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

    async fn add_traffic(&self, changes: &[TrafficChange]) -> Result<(), StoreError> {
        let mut state = lock(&self.fraud);
        state.prune(unix_now_ms() / BUCKET_MS);
        for change in changes {
            state.add_change(change);
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
