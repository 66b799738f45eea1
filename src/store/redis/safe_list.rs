//! The Redis store's safe list: one hash (`keys::SAFE_LIST`, one key and so one Cluster slot),
//! a field per entry (`<tenant>/<digits>`, `/<digits>` for every send) holding
//! `<added at ms>:<added by>`. An add is `HSETNX` (of concurrent adds of one entry exactly one
//! sets it), a removal `HDEL`, the list `HGETALL`: each one command, atomic on its own.

use async_trait::async_trait;

use super::*;
use crate::store::{SafeEntry, SafeListStore};

fn field(tenant: Option<&str>, digits: &str) -> String {
    [tenant.unwrap_or_default(), "/", digits].concat()
}

/// An entry from its field and value; `None` for one this version cannot read.
fn entry(field: &str, value: &str) -> Option<SafeEntry> {
    // Digits hold no `/`, a tenant may.
    let (tenant, digits) = field.rsplit_once('/')?;
    let (added_at_ms, added_by) = value.split_once(':')?;
    Some(SafeEntry {
        tenant: (!tenant.is_empty()).then(|| tenant.to_owned()),
        digits: digits.to_owned(),
        added_by: added_by.to_owned(),
        added_at_ms: added_at_ms.parse().ok()?,
    })
}

#[async_trait]
impl SafeListStore for RedisStore {
    async fn add_safe_entry(&self, entry: &SafeEntry) -> Result<bool, StoreError> {
        let value = format!("{}:{}", entry.added_at_ms, entry.added_by);
        let command = redis::cmd("HSETNX")
            .arg(keys::SAFE_LIST)
            .arg(field(entry.tenant.as_deref(), &entry.digits))
            .arg(value)
            .to_owned();
        let mut connection = self.connections.get();
        let added: i64 = self.bounded(command.query_async(&mut connection)).await?;
        Ok(added == 1)
    }

    async fn remove_safe_entry(
        &self,
        tenant: Option<&str>,
        digits: &str,
    ) -> Result<bool, StoreError> {
        let command = redis::cmd("HDEL")
            .arg(keys::SAFE_LIST)
            .arg(field(tenant, digits))
            .to_owned();
        let mut connection = self.connections.get();
        let removed: i64 = self.bounded(command.query_async(&mut connection)).await?;
        Ok(removed == 1)
    }

    async fn safe_entries(&self) -> Result<Vec<SafeEntry>, StoreError> {
        let command = redis::cmd("HGETALL").arg(keys::SAFE_LIST).to_owned();
        let mut connection = self.connections.get();
        let fields: Vec<(String, String)> =
            self.bounded(command.query_async(&mut connection)).await?;
        fields
            .iter()
            .map(|(field, value)| {
                entry(field, value).ok_or_else(|| {
                    StoreError::Protocol(format!("a safe-list entry not understood: {field}"))
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_reads_back_from_its_field_and_value() {
        let read = entry(&field(Some("key:a/b"), "4474"), "17:ops:ann").unwrap();
        assert_eq!(read.tenant.as_deref(), Some("key:a/b"));
        assert_eq!(
            (read.digits.as_str(), read.added_by.as_str()),
            ("4474", "ops:ann")
        );
        assert_eq!(read.added_at_ms, 17);
        let everyone = entry(&field(None, "1202"), "1:operator").unwrap();
        assert_eq!(everyone.tenant, None);
        assert!(entry("1202", "1:x").is_none());
        assert!(entry("/1202", "x").is_none());
    }
}
