//! vcode on Redis Sentinel: a crashed primary and a demoted one (which still answers PING) are
//! ridden out within the documented bound without restarting vcode, with requests failing fast
//! (503) meanwhile. The suites run on Sentinel too (`on_every_store!`).

use std::time::Duration;

use redis::cmd;
use vcode::settings::StoreSettings;

use crate::support::failover::{assert_failed_fast_and_recovered, run_through, spawn_app_on};
use crate::support::{RedisSentinel, random_phone};

const COMMAND_TIMEOUT: Duration = Duration::from_millis(500);
/// How long a silent primary takes to be failed; short, to keep the test short.
const DOWN_AFTER: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crashed_primary_is_replaced_and_requests_fail_fast_meanwhile() {
    let deployment = RedisSentinel::start(1, 3, DOWN_AFTER);
    let app = spawn_app_on(StoreSettings::Redis(deployment.settings(COMMAND_TIMEOUT))).await;
    let victim = deployment.primary_port();

    let report = run_through(
        &app,
        || deployment.node(victim).crash(),
        || deployment.primary_port() != victim,
    )
    .await;
    report.print("Sentinel, primary crashed");
    assert_failed_fast_and_recovered(COMMAND_TIMEOUT, &report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_primary_is_left_once_the_sentinels_replace_it() {
    let deployment = RedisSentinel::start(1, 3, DOWN_AFTER);
    let app = spawn_app_on(StoreSettings::Redis(deployment.settings(COMMAND_TIMEOUT))).await;
    let victim = deployment.primary_port();

    // Its connections stay open and silent: only timeouts tell that something is wrong.
    let report = run_through(
        &app,
        || deployment.node(victim).freeze(),
        || deployment.primary_port() != victim,
    )
    .await;
    report.print("Sentinel, primary frozen");
    assert_failed_fast_and_recovered(COMMAND_TIMEOUT, &report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_demoted_primary_that_still_answers_ping_is_left_for_the_new_one() {
    let deployment = RedisSentinel::start(1, 3, DOWN_AFTER);
    let app = spawn_app_on(StoreSettings::Redis(deployment.settings(COMMAND_TIMEOUT))).await;
    let old = deployment.primary_port();

    let report = run_through(
        &app,
        || deployment.failover(),
        || deployment.primary_port() != old,
    )
    .await;
    report.print("Sentinel, manual failover");
    assert_failed_fast_and_recovered(COMMAND_TIMEOUT, &report);

    let new = deployment.primary_port();
    let pong: String = deployment.node(old).must(&cmd("PING"));
    assert_eq!(pong, "PONG", "the demoted primary still answers PING");
    let phone = random_phone();
    assert_eq!(app.send(&phone).await.status, 200);
    let key = format!("verify_code:{{{phone}}}:login");
    let on_new: bool = deployment.node(new).must(cmd("EXISTS").arg(&key));
    assert!(on_new, "the code was written to the new primary");
}
