//! Test harness: real redis-server processes (one node, a Cluster, Sentinel), the application on
//! port 0, a fake SMS gateway.

pub mod app;
pub mod codes;
pub mod deployment;
pub mod event_receiver;
pub mod failover;
pub mod fake_sms_checks;
pub mod fake_sms_provider;
pub mod postgres_server;
pub mod redis_cluster;
pub mod redis_process;
pub mod redis_sentinel;
pub mod redis_server;
pub mod redis_tls;
pub mod sdk;
pub mod sms_gateway;

pub use app::{Backend, TestApp, spawn_app, spawn_app_with, spawn_second_instance};
pub use deployment::Deployment;
pub use postgres_server::PostgresServer;
pub use redis_cluster::{ClusterLease, RedisCluster};
pub use redis_sentinel::RedisSentinel;
pub use redis_server::RedisServer;
pub use sms_gateway::SmsGateway;

use vcode::domain::{Destination, Phone, Region};

/// A loopback port free when asked. A server started on it may still lose it to another test's,
/// so a harness that starts one checks that what answers there is its own (redis-server by its
/// process id, Prism by its own log).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free loopback port")
}

/// A random valid Chinese mobile number (E.164), so tests sharing a store never collide.
pub fn random_phone() -> String {
    use rand::RngExt;
    let mut rng = rand::rng();
    format!("+86138{:08}", rng.random_range(0..100_000_000u32))
}

/// A six-digit code that is not `code`.
pub fn wrong_code(code: &str) -> &'static str {
    if code == "000000" { "111111" } else { "000000" }
}

/// A phone as a Twilio-compatible send log names it (SMS only).
pub fn sms_phone(raw: &str) -> Phone {
    Phone::parse(raw, Region::default()).expect("test phone numbers are valid")
}

/// A phone destination, as the code stores take it.
pub fn phone(raw: &str) -> Destination {
    Phone::parse(raw, Region::default())
        .expect("test phone numbers are valid")
        .into()
}

/// Runs `check` until it returns true or `timeout` passes; true if it ever did.
pub async fn eventually<F, Fut>(timeout: std::time::Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
