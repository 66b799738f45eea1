//! `PowReplayStore` conformance: the embedded store and Redis record a solved challenge once,
//! until its expiry, atomically.

use std::time::Duration;

use futures::future::join_all;

use super::on_memory_and_redis;
use crate::store_conformance::open;
use crate::support::Backend;

/// A digest no other test uses.
fn digest() -> String {
    format!("{:032x}", rand::random::<u128>())
}

const MINUTE: Duration = Duration::from_secs(60);

async fn a_digest_is_new_once(backend: Backend) {
    let t = open(backend);
    let (first, second) = (digest(), digest());
    assert!(t.store.record_solved_pow(&first, MINUTE).await.unwrap());
    assert!(!t.store.record_solved_pow(&first, MINUTE).await.unwrap());
    assert!(!t.store.record_solved_pow(&first, MINUTE).await.unwrap());
    assert!(t.store.record_solved_pow(&second, MINUTE).await.unwrap());
}

async fn a_digest_is_kept_until_its_expiry_only(backend: Backend) {
    let t = open(backend);
    let digest = digest();
    let ttl = Duration::from_millis(300);
    assert!(t.store.record_solved_pow(&digest, ttl).await.unwrap());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!t.store.record_solved_pow(&digest, ttl).await.unwrap());
    // The refused attempt did not extend the record.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(t.store.record_solved_pow(&digest, ttl).await.unwrap());
}

async fn fifty_concurrent_records_of_one_digest_find_it_new_once(backend: Backend) {
    let t = open(backend);
    let digest = digest();
    let records = (0..50).map(|_| {
        let (store, digest) = (t.store.clone(), digest.clone());
        tokio::spawn(async move { store.record_solved_pow(&digest, MINUTE).await.unwrap() })
    });
    let new = join_all(records)
        .await
        .into_iter()
        .filter(|new| *new.as_ref().expect("task"))
        .count();
    assert_eq!(new, 1);
}

on_memory_and_redis!(
    a_digest_is_new_once,
    a_digest_is_kept_until_its_expiry_only,
    fifty_concurrent_records_of_one_digest_find_it_new_once,
);

/// The Redis layout is part of the contract (DESIGN.md): `verify_code:pow:{<digest>}`, with
/// the challenge's remaining life as its TTL.
#[tokio::test]
async fn redis_keeps_a_used_challenge_under_its_documented_key_until_expiry() {
    let t = open(Backend::Redis);
    let digest = digest();
    assert!(t.store.record_solved_pow(&digest, MINUTE).await.unwrap());
    let server = t.redis.as_ref().expect("a Redis backend");
    let mut redis = server.connection().await;
    let ttl_ms: i64 = ::redis::cmd("PTTL")
        .arg(format!("verify_code:pow:{{{digest}}}"))
        .query_async(&mut redis)
        .await
        .unwrap();
    assert!((50_000..=60_000).contains(&ttl_ms), "{ttl_ms}");
}
