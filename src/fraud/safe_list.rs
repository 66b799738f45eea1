//! The fraud guard's safe list (issue 39): the numbers and number prefixes whose sends the guard
//! counts but never judges nor refuses. Three sources: `VCODE_FRAUD_SAFE_LIST` (read at start,
//! read-only here), the entries operators add and remove while vcode runs (the operator API, the
//! console), and each Twilio account's own numbers (`/v2/SafeList/Numbers`), which exempt only
//! that account's sends. The last two live in the store (`SafeListStore`), shared by every
//! instance.
//!
//! No send reads the store: each instance keeps the whole list in memory, behind one atomic
//! pointer (`arc_swap`), rebuilt from the store every `VCODE_FRAUD_SAFE_LIST_REFRESH_SECS` and
//! changed at once on the instance that changed the store. A send's lookup is one pointer load
//! and a scan of at most 16 entries, or for a larger list one hash lookup per distinct entry
//! length that fits the number (at most 15, usually one to three), whatever the list's size
//! (docs/performance.md has the figures).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;

use crate::domain::{Destination, masked_e164};
use crate::store::{SafeEntry, SafeListStore, StoreError};

/// The most digits an entry has: an E.164 number's.
pub const MAX_DIGITS: usize = 15;
/// A scope with at most this many entries is scanned (a few comparisons of short strings cost
/// less than one hash lookup); a larger one is looked up by length.
const SCAN_AT_MOST: usize = 16;
/// The longest "added by" an entry keeps.
pub const MAX_ADDED_BY: usize = 64;
/// The entries one tenant may have (a Twilio account's numbers).
pub const MAX_TENANT_ENTRIES: usize = 1000;

#[derive(Debug, thiserror::Error)]
pub enum SafeListError {
    /// The entry or its author is malformed; the message says which rule.
    #[error("{0}")]
    Invalid(String),
    /// The entry is `VCODE_FRAUD_SAFE_LIST`'s, not the store's.
    #[error(
        "+{0} is in VCODE_FRAUD_SAFE_LIST: it is read at start and cannot be removed here; change the setting"
    )]
    Configured(String),
    /// The tenant has `MAX_TENANT_ENTRIES` already.
    #[error("at most {0} safe-list entries")]
    Full(usize),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One entry as the operator sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedEntry {
    /// Digits without `+`.
    pub digits: String,
    /// `None`: it exempts every send; else only this tenant's (`twilio:AC…`).
    pub tenant: Option<String>,
    /// `VCODE_FRAUD_SAFE_LIST`'s: read-only here, no author or time.
    pub configured: bool,
    pub added_by: Option<String>,
    pub added_at_ms: Option<u64>,
}

impl From<SafeEntry> for ListedEntry {
    fn from(entry: SafeEntry) -> Self {
        Self {
            digits: entry.digits,
            tenant: entry.tenant,
            configured: false,
            added_by: Some(entry.added_by),
            added_at_ms: Some(entry.added_at_ms),
        }
    }
}

/// The digits of an entry as an operator or the settings write it: 1 to 15 digits, `+`
/// optional, surrounding spaces ignored.
pub fn parse_entry(raw: &str) -> Result<String, String> {
    let digits = raw.trim();
    let digits = digits.strip_prefix('+').unwrap_or(digits);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err("a safe-list entry is digits (a number or a prefix), + optional".to_owned());
    }
    if digits.len() > MAX_DIGITS {
        return Err(format!(
            "a safe-list entry has at most {MAX_DIGITS} digits (an E.164 number's)"
        ));
    }
    Ok(digits.to_owned())
}

/// Who added an entry: 1 to 64 printable characters, no control character.
fn check_added_by(added_by: &str) -> Result<(), SafeListError> {
    let length = added_by.chars().count();
    if !(1..=MAX_ADDED_BY).contains(&length) || added_by.chars().any(char::is_control) {
        return Err(SafeListError::Invalid(format!(
            "added_by is 1 to {MAX_ADDED_BY} characters, none a control character"
        )));
    }
    Ok(())
}

/// How logs show an entry: a prefix as it is, a number masked as a phone is.
fn shown(digits: &str) -> String {
    let e164 = ["+", digits].concat();
    if digits.len() < 8 {
        e164
    } else {
        masked_e164(&e164)
    }
}

/// Entries of one scope, for the send's lookup: the entries, and which lengths occur (bit `n`:
/// an entry of `n` digits), so that a number is looked up only at those lengths.
#[derive(Clone, Debug, Default)]
struct Prefixes {
    entries: HashSet<Box<str>>,
    lengths: u16,
}

impl Prefixes {
    fn insert(&mut self, digits: &str) {
        debug_assert!((1..=MAX_DIGITS).contains(&digits.len()));
        self.lengths |= 1 << digits.len();
        self.entries.insert(digits.into());
    }

    fn remove(&mut self, digits: &str) {
        self.entries.remove(digits);
        self.lengths = self
            .entries
            .iter()
            .fold(0, |lengths, e| lengths | 1 << e.len());
    }

    /// Whether `digits` (a number's, without `+`) is, or starts with, an entry.
    fn matches(&self, digits: &str) -> bool {
        if self.entries.len() <= SCAN_AT_MOST {
            return self
                .entries
                .iter()
                .any(|entry| digits.starts_with(&**entry));
        }
        let fitting = match digits.len() {
            n if n >= MAX_DIGITS => u16::MAX,
            n => (1u16 << (n + 1)) - 1,
        };
        let mut lengths = self.lengths & fitting;
        while lengths != 0 {
            let length = lengths.trailing_zeros() as usize;
            lengths &= lengths - 1;
            if self.entries.contains(&digits[..length]) {
                return true;
            }
        }
        false
    }
}

/// The list as every send reads it, rebuilt whole on a change.
#[derive(Clone, Debug, Default)]
struct Snapshot {
    /// The configured entries and the operators'.
    everyone: Prefixes,
    /// Each tenant's own.
    tenants: HashMap<String, Prefixes>,
}

impl Snapshot {
    fn of<'a>(configured: &[String], stored: impl IntoIterator<Item = &'a SafeEntry>) -> Self {
        let mut snapshot = Self::default();
        for digits in configured {
            snapshot.everyone.insert(digits);
        }
        for entry in stored {
            snapshot.add(entry.tenant.as_deref(), &entry.digits);
        }
        snapshot
    }

    fn add(&mut self, tenant: Option<&str>, digits: &str) {
        match tenant {
            None => self.everyone.insert(digits),
            Some(tenant) => self
                .tenants
                .entry(tenant.to_owned())
                .or_default()
                .insert(digits),
        }
    }

    fn remove(&mut self, tenant: Option<&str>, digits: &str, configured: &[String]) {
        match tenant {
            // A configured entry stays, whatever the store had.
            None if configured.iter().any(|entry| entry == digits) => {}
            None => self.everyone.remove(digits),
            Some(tenant) => {
                if let Some(own) = self.tenants.get_mut(tenant) {
                    own.remove(digits);
                }
            }
        }
    }

    fn exempts(&self, digits: &str, tenant: Option<&str>) -> bool {
        self.everyone.matches(digits)
            || (!self.tenants.is_empty()
                && tenant
                    .and_then(|tenant| self.tenants.get(tenant))
                    .is_some_and(|own| own.matches(digits)))
    }
}

pub struct SafeList {
    /// `VCODE_FRAUD_SAFE_LIST`, digits without `+`.
    configured: Vec<String>,
    /// `None`: the configured entries only (a guard built without a store).
    store: Option<Arc<dyn SafeListStore>>,
    current: ArcSwap<Snapshot>,
    /// Held while the store is read and `current` replaced, and while a change is applied:
    /// a refresh that read the store before a change cannot put the older list back after it.
    changing: tokio::sync::Mutex<()>,
    refresh: Duration,
}

impl std::fmt::Debug for SafeList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SafeList")
            .field("configured", &self.configured.len())
            .field("refresh", &self.refresh)
            .finish()
    }
}

impl SafeList {
    /// The configured entries only, never changed: a guard without a store (unit tests).
    pub fn configured(configured: Vec<String>) -> Self {
        Self {
            current: ArcSwap::from_pointee(Snapshot::of(&configured, [])),
            configured,
            store: None,
            changing: tokio::sync::Mutex::new(()),
            refresh: Duration::ZERO,
        }
    }

    /// The list of `store` and the configured entries, reloaded from the store every
    /// `refresh` by a task that ends with the list. The first load is [`Self::reload`]'s
    /// (start-up calls it before serving).
    pub fn spawn(
        store: Arc<dyn SafeListStore>,
        configured: Vec<String>,
        refresh: Duration,
    ) -> Arc<Self> {
        let list = Arc::new(Self {
            store: Some(store),
            refresh,
            ..Self::configured(configured)
        });
        tokio::spawn(refresh_forever(Arc::downgrade(&list), refresh));
        list
    }

    /// How often the store is read again: how stale another instance's change may be here.
    pub fn refresh_period(&self) -> Duration {
        self.refresh
    }

    /// Whether the guard leaves a send to `destination` by `tenant` (`twilio:AC…`, `None` for
    /// a browser) unjudged: its number is, or starts with, an entry for every send, or one of
    /// that tenant's. Never for an email address. No store round trip.
    pub fn exempts(&self, destination: &Destination, tenant: Option<&str>) -> bool {
        let Some(phone) = destination.phone() else {
            return false;
        };
        self.current.load().exempts(&phone.as_e164()[1..], tenant)
    }

    /// Reads the store's entries and makes them the list; the list in place stays if the
    /// store fails.
    pub async fn reload(&self) -> Result<(), StoreError> {
        self.read_store().await.map(drop)
    }

    /// The store's entries, made the list.
    async fn read_store(&self) -> Result<Vec<SafeEntry>, StoreError> {
        let Some(store) = &self.store else {
            return Ok(Vec::new());
        };
        let _changing = self.changing.lock().await;
        let stored = store.safe_entries().await?;
        self.current
            .store(Arc::new(Snapshot::of(&self.configured, &stored)));
        Ok(stored)
    }

    /// Every entry: the configured ones first, then the store's by tenant (every send's
    /// first), each by digits. Read from the store (and made this instance's list).
    pub async fn entries(&self) -> Result<Vec<ListedEntry>, StoreError> {
        let mut stored: Vec<ListedEntry> = self
            .read_store()
            .await?
            .into_iter()
            .map(ListedEntry::from)
            .collect();
        stored.sort_by(|a, b| (&a.tenant, &a.digits).cmp(&(&b.tenant, &b.digits)));
        let mut listed: Vec<ListedEntry> = self
            .configured
            .iter()
            .map(|digits| ListedEntry {
                digits: digits.clone(),
                tenant: None,
                configured: true,
                added_by: None,
                added_at_ms: None,
            })
            .collect();
        listed.append(&mut stored);
        Ok(listed)
    }

    /// `tenant`'s entry of `digits` in the store, if it has one.
    pub async fn tenant_entry(
        &self,
        tenant: &str,
        digits: &str,
    ) -> Result<Option<ListedEntry>, StoreError> {
        Ok(self
            .read_store()
            .await?
            .into_iter()
            .find(|entry| entry.tenant.as_deref() == Some(tenant) && entry.digits == digits)
            .map(ListedEntry::from))
    }

    /// Adds `raw` (digits, `+` optional) for every send (`tenant` `None`) or for `tenant`'s,
    /// as `added_by`: the entry as stored now (its first author and time if it was there
    /// already) and whether it is new. This instance's list has it at once, the others' within
    /// [`Self::refresh_period`].
    pub async fn add(
        &self,
        tenant: Option<&str>,
        raw: &str,
        added_by: &str,
    ) -> Result<(ListedEntry, bool), SafeListError> {
        let digits = parse_entry(raw).map_err(SafeListError::Invalid)?;
        check_added_by(added_by)?;
        let store = self.store()?;
        if let Some(tenant) = tenant {
            let stored = store.safe_entries().await?;
            let own = || {
                stored
                    .iter()
                    .filter(|e| e.tenant.as_deref() == Some(tenant))
            };
            if let Some(existing) = own().find(|entry| entry.digits == digits) {
                return Ok((existing.clone().into(), false));
            }
            // Counted before the add: concurrent adds may pass the bound by a few.
            if own().count() >= MAX_TENANT_ENTRIES {
                return Err(SafeListError::Full(MAX_TENANT_ENTRIES));
            }
        }
        let entry = SafeEntry {
            tenant: tenant.map(str::to_owned),
            digits,
            added_by: added_by.to_owned(),
            added_at_ms: now_ms(),
        };
        let added = store.add_safe_entry(&entry).await?;
        let listed = if added {
            tracing::warn!(entry = %shown(&entry.digits), tenant = tenant.unwrap_or("every send"), added_by, "fraud guard: safe-list entry added");
            self.change(|snapshot| snapshot.add(tenant, &entry.digits))
                .await;
            entry.into()
        } else {
            // Someone else's add came first: the stored one, with its author and time.
            self.stored(tenant, &entry.digits)
                .await?
                .unwrap_or_else(|| entry.into())
        };
        Ok((listed, added))
    }

    /// Removes `raw` from the entries for every send (`tenant` `None`) or from `tenant`'s;
    /// false if it was not there. A configured entry cannot be removed here
    /// ([`SafeListError::Configured`]).
    pub async fn remove(&self, tenant: Option<&str>, raw: &str) -> Result<bool, SafeListError> {
        let digits = parse_entry(raw).map_err(SafeListError::Invalid)?;
        let store = self.store()?;
        let removed = store.remove_safe_entry(tenant, &digits).await?;
        if removed {
            tracing::warn!(entry = %shown(&digits), tenant = tenant.unwrap_or("every send"), "fraud guard: safe-list entry removed");
            self.change(|snapshot| snapshot.remove(tenant, &digits, &self.configured))
                .await;
        } else if tenant.is_none() && self.configured.contains(&digits) {
            return Err(SafeListError::Configured(digits));
        }
        Ok(removed)
    }

    fn store(&self) -> Result<&Arc<dyn SafeListStore>, SafeListError> {
        self.store
            .as_ref()
            .ok_or_else(|| SafeListError::Invalid("this safe list is read-only".to_owned()))
    }

    async fn stored(
        &self,
        tenant: Option<&str>,
        digits: &str,
    ) -> Result<Option<ListedEntry>, StoreError> {
        Ok(self
            .read_store()
            .await?
            .into_iter()
            .find(|entry| entry.tenant.as_deref() == tenant && entry.digits == digits)
            .map(ListedEntry::from))
    }

    /// This instance's list after a change it made in the store, before the change is
    /// answered: read from the store again, or, should the store not answer now, the list in
    /// place changed by `apply` (the next refresh reads the store).
    async fn change(&self, apply: impl FnOnce(&mut Snapshot)) {
        if let Err(error) = self.reload().await {
            tracing::warn!(%error, "fraud guard: the safe list not read again after a change; the next refresh will");
            let _changing = self.changing.lock().await;
            let mut changed = Snapshot::clone(&self.current.load());
            apply(&mut changed);
            self.current.store(Arc::new(changed));
        }
    }
}

/// Reads the store again every `every` while the list lives; a failure keeps the list in place
/// (logged) until a read succeeds.
async fn refresh_forever(list: Weak<SafeList>, every: Duration) {
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick is at once: the first load is start-up's.
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let Some(list) = list.upgrade() else { return };
        if let Err(error) = list.reload().await {
            tracing::warn!(%error, "fraud guard: the safe list was not read again; the last one read stays in effect");
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{EmailAddress, Phone, Region};

    fn phone(raw: &str) -> Destination {
        Phone::parse(raw, Region::default())
            .unwrap_or_else(|| panic!("{raw} is not valid"))
            .into()
    }

    #[test]
    fn the_safe_list_holds_numbers_and_prefixes() {
        let list = SafeList::configured(vec!["447400123456".to_owned(), "1202".to_owned()]);
        assert!(list.exempts(&phone("+447400123456"), None));
        assert!(!list.exempts(&phone("+447400123457"), None));
        assert!(list.exempts(&phone("+12025550143"), None));
        assert!(!list.exempts(&phone("+12125550123"), None));
        assert!(!SafeList::configured(Vec::new()).exempts(&phone("+12125550123"), None));
        // The safe list holds number prefixes: no address is on it.
        let email = Destination::from(EmailAddress::parse("ann@mail.example.com").unwrap());
        assert!(!SafeList::configured(vec!["1".to_owned()]).exempts(&email, None));
    }

    #[test]
    fn a_tenant_s_entries_exempt_only_its_own_sends() {
        let stored = |tenant: Option<&str>, digits: &str| SafeEntry {
            tenant: tenant.map(str::to_owned),
            digits: digits.to_owned(),
            added_by: "test".to_owned(),
            added_at_ms: 1,
        };
        let entries = [
            stored(Some("twilio:AC1"), "447400123456"),
            stored(None, "8613800138000"),
            stored(Some("twilio:AC2"), "1202"),
        ];
        let snapshot = Snapshot::of(&["86150".to_owned()], &entries);
        assert!(snapshot.exempts("447400123456", Some("twilio:AC1")));
        assert!(!snapshot.exempts("447400123456", Some("twilio:AC2")));
        assert!(!snapshot.exempts("447400123456", None));
        assert!(snapshot.exempts("8613800138000", Some("twilio:AC2")));
        assert!(snapshot.exempts("8613800138000", None));
        assert!(snapshot.exempts("8615000138000", None));
        assert!(snapshot.exempts("12025550143", Some("twilio:AC2")));
        assert!(!snapshot.exempts("12025550143", Some("twilio:AC1")));
    }

    #[test]
    fn a_number_is_looked_up_at_the_lengths_of_the_entries_only() {
        // A few entries are scanned, more are looked up by length: both answer alike.
        for filler in [0, 2 * SCAN_AT_MOST] {
            let mut prefixes = Prefixes::default();
            for digits in ["1", "44740", "861380013800", "123456789012345"] {
                prefixes.insert(digits);
            }
            for n in 0..filler {
                prefixes.insert(&format!("99{n:08}"));
            }
            assert_eq!(prefixes.entries.len() > SCAN_AT_MOST, filler > 0);
            let mut lengths = (1 << 1) | (1 << 5) | (1 << 12) | (1 << 15);
            if filler > 0 {
                lengths |= 1 << 10;
            }
            assert_eq!(prefixes.lengths, lengths);
            assert!(prefixes.matches("12025550143"));
            assert!(prefixes.matches("447400123456"));
            assert!(prefixes.matches("8613800138000"));
            assert!(!prefixes.matches("8613800138100"));
            assert!(prefixes.matches("123456789012345"));
            assert_eq!(prefixes.matches("99000000071234"), filler > 0);
            // Shorter than an entry: that entry is not looked up (no slice past the end).
            assert!(!prefixes.matches("4474"));
            prefixes.remove("861380013800");
            assert!(!prefixes.matches("8613800138000"));
            assert_eq!(prefixes.lengths & (1 << 12), 0);
        }
        assert!(!Prefixes::default().matches("8613800138000"));
    }

    #[test]
    fn entries_are_digits_with_an_optional_plus() {
        assert_eq!(parse_entry(" +447400123456 ").unwrap(), "447400123456");
        assert_eq!(parse_entry("1202").unwrap(), "1202");
        assert_eq!(parse_entry(&"9".repeat(15)).unwrap(), "9".repeat(15));
        for bad in [
            "",
            "+",
            "12a4",
            "+44 7400",
            "++1",
            "-1",
            &"9".repeat(16),
            "٣",
        ] {
            assert!(parse_entry(bad).is_err(), "{bad:?}");
        }
        assert!(check_added_by("ann").is_ok());
        assert!(check_added_by("").is_err());
        assert!(check_added_by("a\nb").is_err());
        assert!(check_added_by(&"a".repeat(65)).is_err());
    }

    #[test]
    fn logs_show_a_number_masked_and_a_prefix_whole() {
        assert_eq!(shown("44740"), "+44740");
        assert!(!shown("447400123456").contains("7400123"));
    }
}
