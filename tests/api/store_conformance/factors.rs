//! The TOTP role on every store: an identity's entity and records by scope, compare-and-set
//! writes (concurrent writers from one revision: exactly one wins, which is what keeps a code
//! from being accepted twice), an identity deleted whole, scopes and identities apart.

use std::sync::Arc;

use std::time::Duration;

use vcode::store::{ENTITY, Fact, OutboxEntry, Store, TotpFact};

use super::open;
use crate::support::Backend;

fn scope() -> String {
    format!("VA{:032x}", rand::random::<u128>())
}

async fn records_belong_to_their_scope_and_identity_and_change_by_revision(backend: Backend) {
    let t = open(backend);
    let store = &t.store;
    let (scope, other_scope) = (scope(), scope());
    assert!(
        store
            .put_totp_record(&scope, "alice", ENTITY, None, "entity", None)
            .await
            .unwrap()
    );
    assert!(
        !store
            .put_totp_record(&scope, "alice", ENTITY, None, "again", None)
            .await
            .unwrap()
    );
    assert!(
        store
            .put_totp_record(&scope, "alice", "YF1", None, "f:1", None)
            .await
            .unwrap()
    );
    assert!(
        store
            .put_totp_record(&scope, "alice", "YC1", None, "c:1", None)
            .await
            .unwrap()
    );
    assert!(
        store
            .put_totp_record(&scope, "bob", ENTITY, None, "bob", None)
            .await
            .unwrap()
    );
    assert!(
        store
            .put_totp_record(&other_scope, "alice", ENTITY, None, "x", None)
            .await
            .unwrap()
    );

    let read = store
        .totp_record(&scope, "alice", "YF1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((read.revision, read.body.as_str()), (1, "f:1"));
    assert!(
        !store
            .put_totp_record(&scope, "alice", "YF1", Some(2), "stale", None)
            .await
            .unwrap()
    );
    assert!(
        store
            .put_totp_record(&scope, "alice", "YF1", Some(1), "f:2 with: colons", None)
            .await
            .unwrap()
    );
    let read = store
        .totp_record(&scope, "alice", "YF1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((read.revision, read.body.as_str()), (2, "f:2 with: colons"));
    assert_eq!(store.totp_record(&scope, "bob", "YF1").await.unwrap(), None);
    assert_eq!(
        store
            .totp_record(&other_scope, "alice", "YF1")
            .await
            .unwrap(),
        None
    );

    let mut records: Vec<(String, String)> = store
        .totp_records(&scope, "alice")
        .await
        .unwrap()
        .into_iter()
        .map(|(sid, record)| (sid, record.body))
        .collect();
    records.sort();
    assert_eq!(
        records,
        [
            (String::new(), "entity".to_owned()),
            ("YC1".to_owned(), "c:1".to_owned()),
            ("YF1".to_owned(), "f:2 with: colons".to_owned()),
        ]
    );
    let mut entities: Vec<String> = store
        .totp_entities(&scope)
        .await
        .unwrap()
        .into_iter()
        .map(|(identity, _)| identity)
        .collect();
    entities.sort();
    assert_eq!(entities, ["alice", "bob"]);

    assert!(
        !store
            .delete_totp_record(&scope, "alice", ENTITY, None)
            .await
            .unwrap(),
        "not the entity"
    );
    assert!(
        store
            .delete_totp_record(&scope, "alice", "YC1", None)
            .await
            .unwrap()
    );
    assert!(
        !store
            .delete_totp_record(&scope, "alice", "YC1", None)
            .await
            .unwrap()
    );
    assert!(store.delete_totp_identity(&scope, "alice").await.unwrap());
    assert!(!store.delete_totp_identity(&scope, "alice").await.unwrap());
    assert!(
        store
            .totp_records(&scope, "alice")
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.totp_record(&scope, "alice", "YF1").await.unwrap(),
        None
    );
    assert_eq!(
        store.totp_entities(&scope).await.unwrap().len(),
        1,
        "bob stays"
    );
    assert_eq!(store.totp_entities(&other_scope).await.unwrap().len(), 1);
    // A new record after the delete starts again at revision 1.
    assert!(
        store
            .put_totp_record(&scope, "alice", "YF1", None, "new", None)
            .await
            .unwrap()
    );
}

async fn concurrent_factor_writers_from_one_revision_exactly_one_wins(backend: Backend) {
    let t = open(backend);
    let store: Arc<dyn Store> = t.store.clone();
    let scope = scope();
    store
        .put_totp_record(&scope, "racer", "YF1", None, "0", None)
        .await
        .unwrap();
    let writers = (0..16).map(|n| {
        let (store, scope) = (store.clone(), scope.clone());
        tokio::spawn(async move {
            store
                .put_totp_record(&scope, "racer", "YF1", Some(1), &n.to_string(), None)
                .await
                .unwrap()
        })
    });
    let won: Vec<bool> = futures::future::join_all(writers)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(won.iter().filter(|won| **won).count(), 1, "{won:?}");
    let read = store
        .totp_record(&scope, "racer", "YF1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.revision, 2);
}

/// A write's event goes with it, in the same step: a put or a delete that happens appends its
/// fact, one that does not (a stale revision, nothing to delete) appends nothing.
async fn a_factors_event_is_written_with_its_change_only(backend: Backend) {
    let t = open(backend);
    let store = &t.store;
    store.record_events(true).await.unwrap();
    let scope = scope();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let created = OutboxEntry::of_factor(
        TotpFact::FactorCreated,
        "YF1",
        now,
        format!("identity=alice;service_sid={scope}"),
    );
    assert!(
        store
            .put_totp_record(&scope, "alice", "YF1", None, "a", Some(&created))
            .await
            .unwrap()
    );
    assert!(
        !store
            .put_totp_record(&scope, "alice", "YF1", None, "b", Some(&created))
            .await
            .unwrap()
    );
    let verified = OutboxEntry::of_factor(TotpFact::FactorVerified, "YF1", now + 1, String::new());
    assert!(
        !store
            .put_totp_record(&scope, "alice", "YF1", Some(7), "c", Some(&verified))
            .await
            .unwrap()
    );
    let deleted = OutboxEntry::of_factor(TotpFact::FactorDeleted, "YF1", now + 2, String::new());
    assert!(
        store
            .delete_totp_record(&scope, "alice", "YF1", Some(&deleted))
            .await
            .unwrap()
    );
    assert!(
        !store
            .delete_totp_record(&scope, "alice", "YF1", Some(&deleted))
            .await
            .unwrap()
    );
    let mut facts = Vec::new();
    for _ in 0..20 {
        let claimed = store
            .claim_events(100, Duration::from_secs(30))
            .await
            .unwrap();
        for entry in &claimed {
            if entry.event.subject == "YF1" {
                facts.push((entry.event.fact, entry.event.detail.clone()));
            }
            store
                .settle_event(entry, &vcode::store::Settlement::Done)
                .await
                .unwrap();
        }
        if facts.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        facts,
        [
            (
                Fact::Totp(TotpFact::FactorCreated),
                format!("identity=alice;service_sid={scope}")
            ),
            (Fact::Totp(TotpFact::FactorDeleted), String::new()),
        ]
    );
}

on_every_store!(
    a_factors_event_is_written_with_its_change_only,
    records_belong_to_their_scope_and_identity_and_change_by_revision,
    concurrent_factor_writers_from_one_revision_exactly_one_wins,
);
