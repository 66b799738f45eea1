//! The embedded store's TOTP records: by scope, then identity, then SID (the entity under
//! `ENTITY`), under one lock; every compare-and-set is one critical section.

use async_trait::async_trait;

use super::*;
use crate::store::{ENTITY, FactorStore, OutboxEntry, Revised};

/// Records by scope, then identity, then SID.
pub(super) type Factors = Mutex<HashMap<String, HashMap<String, BTreeMap<String, Revised>>>>;

#[async_trait]
impl FactorStore for MemoryStore {
    async fn totp_entities(&self, scope: &str) -> Result<Vec<(String, Revised)>, StoreError> {
        let factors = lock(&self.factors);
        Ok(factors
            .get(scope)
            .map(|identities| {
                identities
                    .iter()
                    .filter_map(|(identity, records)| {
                        Some((identity.clone(), records.get(ENTITY)?.clone()))
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn totp_records(
        &self,
        scope: &str,
        identity: &str,
    ) -> Result<Vec<(String, Revised)>, StoreError> {
        let factors = lock(&self.factors);
        Ok(factors
            .get(scope)
            .and_then(|identities| identities.get(identity))
            .map(|records| {
                records
                    .iter()
                    .map(|(sid, record)| (sid.clone(), record.clone()))
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn totp_record(
        &self,
        scope: &str,
        identity: &str,
        sid: &str,
    ) -> Result<Option<Revised>, StoreError> {
        let factors = lock(&self.factors);
        Ok(factors
            .get(scope)
            .and_then(|identities| identities.get(identity))
            .and_then(|records| records.get(sid))
            .cloned())
    }

    async fn put_totp_record(
        &self,
        scope: &str,
        identity: &str,
        sid: &str,
        expected: Option<u64>,
        body: &str,
        event: Option<&OutboxEntry>,
    ) -> Result<bool, StoreError> {
        let mut factors = lock(&self.factors);
        let records = factors
            .entry(scope.to_owned())
            .or_default()
            .entry(identity.to_owned())
            .or_default();
        if records.get(sid).map(|record| record.revision) != expected {
            return Ok(false);
        }
        let record = Revised {
            revision: expected.map_or(1, |revision| revision + 1),
            body: body.to_owned(),
        };
        records.insert(sid.to_owned(), record);
        if let Some(event) = event {
            self.events.append(event.clone());
        }
        Ok(true)
    }

    async fn delete_totp_record(
        &self,
        scope: &str,
        identity: &str,
        sid: &str,
        event: Option<&OutboxEntry>,
    ) -> Result<bool, StoreError> {
        if sid == ENTITY {
            return Ok(false);
        }
        let mut factors = lock(&self.factors);
        let removed = factors
            .get_mut(scope)
            .and_then(|identities| identities.get_mut(identity))
            .is_some_and(|records| records.remove(sid).is_some());
        if removed && let Some(event) = event {
            self.events.append(event.clone());
        }
        Ok(removed)
    }

    async fn delete_totp_identity(&self, scope: &str, identity: &str) -> Result<bool, StoreError> {
        let mut factors = lock(&self.factors);
        let Some(identities) = factors.get_mut(scope) else {
            return Ok(false);
        };
        let removed = identities.remove(identity);
        if identities.is_empty() {
            factors.remove(scope);
        }
        Ok(removed.is_some_and(|records| records.contains_key(ENTITY)))
    }
}
