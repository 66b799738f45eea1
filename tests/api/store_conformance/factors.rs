//! The TOTP role on every store: an identity's entity and records by scope, compare-and-set
//! writes (concurrent writers from one revision: exactly one wins, which is what keeps a code
//! from being accepted twice), an identity deleted whole, scopes and identities apart.

use std::sync::Arc;

use vcode::store::{ENTITY, Store};

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
            .put_totp_record(&scope, "alice", ENTITY, None, "entity")
            .await
            .unwrap()
    );
    assert!(
        !store
            .put_totp_record(&scope, "alice", ENTITY, None, "again")
            .await
            .unwrap()
    );
    assert!(
        store
            .put_totp_record(&scope, "alice", "YF1", None, "f:1")
            .await
            .unwrap()
    );
    assert!(
        store
            .put_totp_record(&scope, "alice", "YC1", None, "c:1")
            .await
            .unwrap()
    );
    assert!(
        store
            .put_totp_record(&scope, "bob", ENTITY, None, "bob")
            .await
            .unwrap()
    );
    assert!(
        store
            .put_totp_record(&other_scope, "alice", ENTITY, None, "x")
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
            .put_totp_record(&scope, "alice", "YF1", Some(2), "stale")
            .await
            .unwrap()
    );
    assert!(
        store
            .put_totp_record(&scope, "alice", "YF1", Some(1), "f:2 with: colons")
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
            .delete_totp_record(&scope, "alice", ENTITY)
            .await
            .unwrap(),
        "not the entity"
    );
    assert!(
        store
            .delete_totp_record(&scope, "alice", "YC1")
            .await
            .unwrap()
    );
    assert!(
        !store
            .delete_totp_record(&scope, "alice", "YC1")
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
            .put_totp_record(&scope, "alice", "YF1", None, "new")
            .await
            .unwrap()
    );
}

async fn concurrent_factor_writers_from_one_revision_exactly_one_wins(backend: Backend) {
    let t = open(backend);
    let store: Arc<dyn Store> = t.store.clone();
    let scope = scope();
    store
        .put_totp_record(&scope, "racer", "YF1", None, "0")
        .await
        .unwrap();
    let writers = (0..16).map(|n| {
        let (store, scope) = (store.clone(), scope.clone());
        tokio::spawn(async move {
            store
                .put_totp_record(&scope, "racer", "YF1", Some(1), &n.to_string())
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

on_every_store!(
    records_belong_to_their_scope_and_identity_and_change_by_revision,
    concurrent_factor_writers_from_one_revision_exactly_one_wins,
);
