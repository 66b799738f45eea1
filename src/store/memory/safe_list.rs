//! The embedded store's safe list: one map by (tenant, digits) under one lock (it changes
//! seldom, and the guard reads its own copy, never this one).

use async_trait::async_trait;

use super::*;
use crate::store::{SafeEntry, SafeListStore};

/// (tenant, or "" for every send; digits) → (who added it, when).
pub(super) type SafeList = Mutex<BTreeMap<(String, String), (String, u64)>>;

#[async_trait]
impl SafeListStore for MemoryStore {
    async fn add_safe_entry(&self, entry: &SafeEntry) -> Result<bool, StoreError> {
        let key = (
            entry.tenant.clone().unwrap_or_default(),
            entry.digits.clone(),
        );
        let mut list = lock(&self.safe_list);
        if list.contains_key(&key) {
            return Ok(false);
        }
        list.insert(key, (entry.added_by.clone(), entry.added_at_ms));
        Ok(true)
    }

    async fn remove_safe_entry(
        &self,
        tenant: Option<&str>,
        digits: &str,
    ) -> Result<bool, StoreError> {
        let key = (tenant.unwrap_or_default().to_owned(), digits.to_owned());
        Ok(lock(&self.safe_list).remove(&key).is_some())
    }

    async fn safe_entries(&self) -> Result<Vec<SafeEntry>, StoreError> {
        Ok(lock(&self.safe_list)
            .iter()
            .map(|((tenant, digits), (added_by, added_at_ms))| SafeEntry {
                tenant: (!tenant.is_empty()).then(|| tenant.clone()),
                digits: digits.clone(),
                added_by: added_by.clone(),
                added_at_ms: *added_at_ms,
            })
            .collect())
    }
}
