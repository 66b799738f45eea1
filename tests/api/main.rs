//! Integration tests: the store conformance suite and the HTTP API, each against the embedded
//! store, a real redis-server, a Redis Cluster, Redis Sentinel and PostgreSQL started by the
//! harness.

// The stats test's `json!` of every daily counter nests deeper than the default allows.
#![recursion_limit = "256"]

mod support;

/// Generates, for each listed `module => Backend` pair, a module of one multi-threaded
/// `#[tokio::test]` per `async fn name(Backend)` in `[...]`.
macro_rules! on_stores {
    ($($module:ident => $backend:ident),+ ; $names:tt) => {
        $( on_store!($module, $backend, $names); )+
    };
}

macro_rules! on_store {
    ($module:ident, $backend:ident, [$($name:ident),* $(,)?]) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name(crate::support::Backend::$backend).await
                }
            )*
        }
    };
}

/// Generates one `#[tokio::test]` per backend (`memory`, `redis`, `cluster`, `sentinel`,
/// `postgres`) for each listed `async fn name(Backend)`.
macro_rules! on_every_store {
    ($($name:ident),* $(,)?) => {
        on_stores!(
            memory => Memory, redis => Redis, cluster => Cluster, sentinel => Sentinel,
            postgres => Postgres;
            [$($name),*]
        );
    };
}

mod api_keys;
mod browser;
mod captcha;
mod console;
mod contract;
mod destinations;
mod email;
mod events;
mod events_crash;
mod fraud_conversion;
mod fraud_levels;
mod idempotency;
mod interleavings;
mod loadtest;
mod openapi;
mod otp_concurrency;
mod otp_errors;
mod otp_flow;
mod postgres;
mod pow;
mod quotas;
mod quotas_http;
mod receipts;
mod redis_cluster;
mod redis_outage;
mod redis_sentinel;
mod redis_tls;
mod safe_list;
mod secrets_at_rest;
mod security;
mod server_failures;
mod sms_providers;
mod sms_providers_config;
mod sms_providers_sdk;
mod sms_webhook;
mod stats;
mod store_conformance;
mod tenants;
mod test_numbers;
mod tokens;
mod totp;
mod twilio;
mod twilio_sdk;
mod verifications;
