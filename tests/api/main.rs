//! Integration tests: the store conformance suite and the HTTP API, each against the embedded
//! store, a real redis-server, a Redis Cluster and Redis Sentinel started by the harness.

mod support;

/// Generates one `#[tokio::test]` per backend (`memory`, `redis`, `cluster`, `sentinel`,
/// `postgres`) for
/// each listed `async fn name(Backend)`.
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name(crate::support::Backend::Memory).await
                }
            )*
        }
        mod redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name(crate::support::Backend::Redis).await
                }
            )*
        }
        mod cluster {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name(crate::support::Backend::Cluster).await
                }
            )*
        }
        mod sentinel {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name(crate::support::Backend::Sentinel).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name(crate::support::Backend::Postgres).await
                }
            )*
        }
    };
}

mod captcha;
mod idempotency;
mod interleavings;
mod loadtest;
mod otp_concurrency;
mod otp_errors;
mod otp_flow;
mod postgres;
mod pow;
mod quotas;
mod redis_cluster;
mod redis_outage;
mod redis_sentinel;
mod redis_tls;
mod secrets_at_rest;
mod security;
mod sms_providers;
mod sms_providers_config;
mod sms_providers_sdk;
mod sms_webhook;
mod stats;
mod store_conformance;
