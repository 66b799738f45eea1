//! The fraud guard's safe list as operators and tenants change it while vcode runs (issue 39):
//! numbers and number prefixes (digits, without `+`), each with who added it and when, for
//! every send or for one tenant's sends only. Every instance sharing the store reads the same
//! list; the guard keeps a copy in memory (`fraud::SafeList`), so no send reads it here.

use async_trait::async_trait;

use super::StoreError;

/// One entry as the store keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SafeEntry {
    /// `None`: every send to it is exempt (an operator's entry); `Some(tenant)`: only that
    /// tenant's sends (`twilio:AC…`, a Twilio account's `/v2/SafeList/Numbers`).
    pub tenant: Option<String>,
    /// A number or a prefix: 1 to 15 digits, without `+` (the caller checks them).
    pub digits: String,
    /// Who added it, as the caller names them (free text, the caller bounds it).
    pub added_by: String,
    /// When, in unix ms (the adding instance's clock).
    pub added_at_ms: u64,
}

/// The safe list: add, remove, list. Each write is one atomic step on one record: of
/// concurrent adds of one entry (tenant and digits) exactly one adds it, and the others find
/// it there, keeping its first author and time.
#[async_trait]
pub trait SafeListStore: Send + Sync + 'static {
    /// Adds `entry` unless its tenant lists its digits already; true if it was new.
    async fn add_safe_entry(&self, entry: &SafeEntry) -> Result<bool, StoreError>;

    /// Removes `digits` from `tenant`'s entries (`None`: the entries for every send); true if
    /// it was there.
    async fn remove_safe_entry(
        &self,
        tenant: Option<&str>,
        digits: &str,
    ) -> Result<bool, StoreError>;

    /// Every entry, every tenant's included, in no particular order.
    async fn safe_entries(&self) -> Result<Vec<SafeEntry>, StoreError>;
}
