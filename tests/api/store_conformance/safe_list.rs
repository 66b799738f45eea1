//! The fraud guard's safe list in the store (issue 39): every store adds, lists and removes
//! alike, an add of an entry there already changes nothing (its first author and time stay),
//! removing a missing entry answers false, a tenant's entries are apart from every send's and
//! from another tenant's, and concurrent adds of one entry end with one. The stores are shared
//! by other tests (PostgreSQL's), so each test names tenants and digits of its own.

use std::collections::HashSet;

use super::*;
use vcode::store::{SafeEntry, SafeListStore};

/// Digits no other test (nor another run on the same store) uses: a 15-digit number.
fn digits() -> String {
    format!("9{:014}", rand::random::<u64>() % 100_000_000_000_000)
}

fn tenant() -> String {
    format!("twilio:AC{:032x}", rand::random::<u128>())
}

fn entry(tenant: Option<&str>, digits: &str, added_by: &str, at: u64) -> SafeEntry {
    SafeEntry {
        tenant: tenant.map(str::to_owned),
        digits: digits.to_owned(),
        added_by: added_by.to_owned(),
        added_at_ms: at,
    }
}

fn sorted(mut entries: Vec<SafeEntry>) -> Vec<SafeEntry> {
    entries.sort_by(|a, b| (&a.tenant, &a.digits).cmp(&(&b.tenant, &b.digits)));
    entries
}

/// The entries of the store among `wanted` (other tests' are left out), in `sorted` order.
async fn listed(store: &dyn SafeListStore, wanted: &[&str]) -> Vec<SafeEntry> {
    let entries = store
        .safe_entries()
        .await
        .expect("store answers")
        .into_iter()
        .filter(|entry| wanted.contains(&entry.digits.as_str()))
        .collect();
    sorted(entries)
}

async fn entries_are_added_listed_and_removed(backend: Backend) {
    let under = open(backend);
    let store = &*under.store;
    let (a, b) = (digits(), digits());
    let first = entry(None, &a, "ann", 1_700_000_000_001);
    assert!(store.add_safe_entry(&first).await.unwrap(), "new");
    // The same entry again, by someone else later: nothing changes.
    let again = entry(None, &a, "bob", 1_700_000_000_002);
    assert!(
        !store.add_safe_entry(&again).await.unwrap(),
        "there already"
    );
    let second = entry(None, &b, "bob", 1_700_000_000_003);
    assert!(store.add_safe_entry(&second).await.unwrap());
    assert_eq!(
        listed(store, &[&a, &b]).await,
        sorted(vec![first.clone(), second.clone()])
    );

    assert!(store.remove_safe_entry(None, &a).await.unwrap());
    assert!(
        !store.remove_safe_entry(None, &a).await.unwrap(),
        "removed already"
    );
    assert!(
        !store.remove_safe_entry(None, &digits()).await.unwrap(),
        "never there"
    );
    assert_eq!(listed(store, &[&a, &b]).await, [second]);
    // Removed, it can be added again, with its new author.
    assert!(store.add_safe_entry(&again).await.unwrap());
    assert_eq!(listed(store, &[&a]).await, [again]);
}

async fn a_tenant_s_entries_are_its_own(backend: Backend) {
    let under = open(backend);
    let store = &*under.store;
    let (one, other) = (tenant(), tenant());
    let number = digits();
    let everyone = entry(None, &number, "operator", 1);
    let own = entry(Some(&one), &number, "AC1", 2);
    let others = entry(Some(&other), &number, "AC2", 3);
    for added in [&everyone, &own, &others] {
        assert!(store.add_safe_entry(added).await.unwrap(), "{added:?}");
    }
    assert_eq!(
        listed(store, &[&number]).await,
        sorted(vec![everyone.clone(), own.clone(), others.clone()])
    );
    // Removing one tenant's leaves the others', and the entry for every send.
    assert!(store.remove_safe_entry(Some(&one), &number).await.unwrap());
    assert!(!store.remove_safe_entry(Some(&one), &number).await.unwrap());
    assert_eq!(
        listed(store, &[&number]).await,
        [everyone.clone(), others.clone()]
    );
    assert!(store.remove_safe_entry(None, &number).await.unwrap());
    assert_eq!(listed(store, &[&number]).await, [others]);
}

async fn concurrent_adds_of_one_entry_end_with_one(backend: Backend) {
    let under = open(backend);
    let store = under.store.clone();
    let number = digits();
    let adds = (0..16).map(|i| {
        let store = store.clone();
        let number = number.clone();
        tokio::spawn(async move {
            let added = entry(None, &number, &format!("op{i}"), 1000 + i);
            store.add_safe_entry(&added).await.expect("store answers")
        })
    });
    let added: Vec<bool> = futures::future::join_all(adds)
        .await
        .into_iter()
        .map(|joined| joined.expect("task"))
        .collect();
    assert_eq!(added.iter().filter(|&&new| new).count(), 1, "{added:?}");
    let entries = listed(&*store, &[&number]).await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    // The one that was added is the one kept: its author and time go together.
    let kept = &entries[0];
    assert_eq!(kept.added_by, format!("op{}", kept.added_at_ms - 1000));
    // And a tenant's concurrent adds of its own number end with one too.
    let tenant = tenant();
    let adds = (0..16).map(|i| {
        let store = store.clone();
        let (tenant, number) = (tenant.clone(), number.clone());
        tokio::spawn(async move {
            let added = entry(Some(&tenant), &number, "AC", i);
            store.add_safe_entry(&added).await.expect("store answers")
        })
    });
    let added = futures::future::join_all(adds).await;
    assert_eq!(added.iter().filter(|a| *a.as_ref().unwrap()).count(), 1);
    let tenants: HashSet<Option<String>> = listed(&*store, &[&number])
        .await
        .into_iter()
        .map(|entry| entry.tenant)
        .collect();
    assert_eq!(tenants, HashSet::from([None, Some(tenant)]));
}

/// The Redis layout is part of the contract: one hash, a field per entry.
#[tokio::test]
async fn the_redis_safe_list_is_one_hash_of_entries() {
    let under = open(Backend::Redis);
    let server = under.redis.as_ref().expect("a Redis backend");
    let store = &*under.store;
    store
        .add_safe_entry(&entry(None, "447400123456", "ann", 17))
        .await
        .unwrap();
    store
        .add_safe_entry(&entry(Some("twilio:AC1"), "12025550143", "AC1", 18))
        .await
        .unwrap();
    let mut redis = server.connection().await;
    let fields: std::collections::HashMap<String, String> = ::redis::cmd("HGETALL")
        .arg("verify_code:fraud:{safe}:list")
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(
        fields,
        std::collections::HashMap::from([
            ("/447400123456".to_owned(), "17:ann".to_owned()),
            ("twilio:AC1/12025550143".to_owned(), "18:AC1".to_owned()),
        ])
    );
}

on_every_store!(
    entries_are_added_listed_and_removed,
    a_tenant_s_entries_are_its_own,
    concurrent_adds_of_one_entry_end_with_one,
);
