//! vcode on a Redis Cluster: a phone's keys share one slot and phones spread over every
//! primary; a crashed primary and a demoted one are ridden out within the documented bound,
//! with requests failing fast (503) meanwhile. The suites run on a cluster too
//! (`on_every_store!`).

use std::collections::HashMap;
use std::time::Duration;

use redis::cmd;
use vcode::settings::StoreSettings;

use crate::support::failover::{assert_failed_fast_and_recovered, run_through, spawn_app_on};
use crate::support::{ClusterLease, RedisCluster, random_phone};

const COMMAND_TIMEOUT: Duration = Duration::from_millis(500);
/// How long a silent node takes to be failed; short, to keep the test short.
const NODE_TIMEOUT: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn codes_for_many_phones_spread_over_every_primary() {
    let cluster = ClusterLease::take();
    let app = spawn_app_on(StoreSettings::Redis(cluster.settings(COMMAND_TIMEOUT))).await;
    let owners = cluster.slot_owners();
    let owner = |slot: u16| {
        owners
            .iter()
            .find(|(first, last, _)| (*first..=*last).contains(&slot))
            .map(|(_, _, port)| *port)
            .expect("every slot has a primary")
    };
    let mut codes_per_primary: HashMap<u16, usize> = HashMap::new();
    for _ in 0..60 {
        let phone = random_phone();
        assert_eq!(app.send(&phone).await.status, 200);
        let code = format!("verify_code:{{{phone}}}:login");
        let slot = cluster.keyslot(&code);
        for key in [
            format!("verify_code:quota:{{{phone}}}:sends"),
            format!("verify_code:quota:{{{phone}}}:fails"),
            format!("verify_code:dev-outbox:{{{phone}}}"),
        ] {
            assert_eq!(cluster.keyslot(&key), slot, "{key} and {code}");
        }
        let primary = owner(slot);
        let stored: bool = cluster.node(primary).must(cmd("EXISTS").arg(&code));
        assert!(stored, "{code} is on the primary of slot {slot}");
        *codes_per_primary.entry(primary).or_default() += 1;
    }
    assert_eq!(codes_per_primary.len(), 3, "{codes_per_primary:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crashed_primary_is_replaced_and_requests_fail_fast_meanwhile() {
    let cluster = RedisCluster::start(3, true, NODE_TIMEOUT);
    let app = spawn_app_on(StoreSettings::Redis(cluster.settings(COMMAND_TIMEOUT))).await;
    let victim = &cluster.primaries()[0];
    let slot = 0;
    assert_eq!(cluster.owner_of(slot), victim.port());

    let report = run_through(
        &app,
        || victim.crash(),
        || cluster.owner_of(slot) != victim.port(),
    )
    .await;
    report.print("Cluster, primary crashed");
    assert_failed_fast_and_recovered(COMMAND_TIMEOUT, &report);
    assert_eq!(cluster.owner_of(slot), cluster.replicas()[0].port());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_primary_is_left_once_the_cluster_replaces_it() {
    let cluster = RedisCluster::start(3, true, NODE_TIMEOUT);
    let app = spawn_app_on(StoreSettings::Redis(cluster.settings(COMMAND_TIMEOUT))).await;
    let victim = &cluster.primaries()[0];
    let slot = 0;

    // Its connections stay open and silent: only timeouts tell that something is wrong.
    let report = run_through(
        &app,
        || victim.freeze(),
        || cluster.owner_of(slot) != victim.port(),
    )
    .await;
    report.print("Cluster, primary frozen");
    assert_failed_fast_and_recovered(COMMAND_TIMEOUT, &report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_demoted_primary_hands_its_slots_over_without_a_restart() {
    let cluster = RedisCluster::start(3, true, NODE_TIMEOUT);
    let app = spawn_app_on(StoreSettings::Redis(cluster.settings(COMMAND_TIMEOUT))).await;
    let (old, new) = (&cluster.primaries()[0], &cluster.replicas()[0]);
    let slot = 0;

    let report = run_through(
        &app,
        || new.must::<()>(cmd("CLUSTER").arg("FAILOVER")),
        || cluster.owner_of(slot) == new.port(),
    )
    .await;
    report.print("Cluster, manual failover");
    assert_failed_fast_and_recovered(COMMAND_TIMEOUT, &report);
    // The old primary still answers, as a replica: writes reach the new one.
    let role: Vec<redis::Value> = old.must(&cmd("ROLE"));
    assert_eq!(role[0], redis::Value::BulkString(b"slave".to_vec()));
    assert_eq!(report.lost_codes, 0, "a manual failover loses no write");
}
