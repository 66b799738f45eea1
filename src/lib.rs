//! vcode: one-time codes by SMS and email, image captchas and proof-of-work gates, and a
//! Twilio Verify-compatible API; every verification one atomic step on the embedded store,
//! Redis or PostgreSQL. `Application::build` assembles the service from `Settings`.

pub mod api_keys;
pub mod captcha;
pub mod client_ip;
pub mod config;
pub mod credential_failures;
pub mod domain;
pub mod email;
pub mod events;
pub mod fraud;
pub(crate) mod health;
pub mod idempotency;
pub mod keyring;
pub mod metrics;
pub mod otp;
pub mod postmortem;
pub mod pow;
pub(crate) mod routes;
pub mod settings;
pub mod sms;
pub mod startup;
pub mod stats;
pub mod store;
pub mod telemetry;
pub mod token;
pub mod totp;
pub mod twilio_compat;
pub(crate) mod weak_secret;

pub use settings::Settings;
pub use startup::Application;
