//! What the use cases keep, as narrow roles, one file each, and the backends that play them:
//! `memory` (embedded, one process), `redis` and `postgres` (shared by any number of
//! instances), each with files named as the roles they play. Every operation that reads,
//! compares and writes is one atomic step in each.
//!
//! The roles: `codes` (pending codes and their verifications), `fused` (a send's issue with
//! the fraud guard's step, a verify with its conversion), `quotas`, `receipts`, `captchas`,
//! `idempotency`, `stats`, `dev_inbox`, `pow`, `fraud`, `levels` (the guard's history), `events` (the event outbox),
//! `twilio`, `safe_list` (the guard's safe list as operators change it), `factors` (authenticator
//! apps' TOTP factors) and `health`.

mod captchas;
mod codes;
pub mod deadline;
mod dev_inbox;
mod events;
mod factors;
mod fraud;
mod fused;
mod health;
mod idempotency;
mod levels;
mod memory;
pub mod postgres;
mod pow;
mod quotas;
mod receipts;
pub mod redis;
mod safe_list;
mod stats;
mod tls;
mod twilio;

use std::sync::Arc;
use std::time::Duration;

pub use self::captchas::*;
pub use self::codes::*;
pub use self::dev_inbox::*;
pub use self::events::{
    ClaimedEntry, Ending, EventStore, Fact, FailedEntry, FinalDelivery, OutboxEntry, OutboxStatus,
    Settlement, TotpFact,
};
pub use self::factors::*;
pub use self::fraud::*;
pub use self::fused::*;
pub use self::health::*;
pub use self::idempotency::*;
pub use self::levels::*;
pub use self::memory::MemoryStore;
pub use self::postgres::PostgresStore;
pub use self::pow::*;
pub use self::quotas::*;
pub use self::receipts::*;
pub use self::redis::RedisStore;
pub use self::safe_list::*;
pub use self::stats::*;
pub use self::twilio::*;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store unreachable: {0}")]
    Unavailable(String),
    #[error("store did not answer within {0:?}")]
    Timeout(Duration),
    #[error("unexpected reply from the store: {0}")]
    Protocol(String),
}

/// A backend that plays every role (the embedded store, Redis, PostgreSQL).
pub trait Store:
    CodeStore
    + FusedSteps
    + QuotaStore
    + CaptchaStore
    + IdempotencyStore
    + StatsStore
    + DevInboxStore
    + HealthCheck
    + PowReplayStore
    + FraudStore
    + LevelStore
    + EventStore
    + TwilioStore
    + ReceiptStore
    + SafeListStore
    + FactorStore
{
}

impl<T> Store for T where
    T: CodeStore
        + FusedSteps
        + QuotaStore
        + CaptchaStore
        + IdempotencyStore
        + StatsStore
        + DevInboxStore
        + HealthCheck
        + PowReplayStore
        + FraudStore
        + LevelStore
        + EventStore
        + TwilioStore
        + ReceiptStore
        + SafeListStore
        + FactorStore
{
}

/// One store per role, as the use cases take them. Usually every role is one backend; a
/// wrapper may swap one (the postmortem reproduction swaps the codes, and the fused steps for
/// `StepByStep` over them).
#[derive(Clone)]
pub struct Stores {
    pub codes: Arc<dyn CodeStore>,
    pub fused: Arc<dyn FusedSteps>,
    pub quotas: Arc<dyn QuotaStore>,
    pub captchas: Arc<dyn CaptchaStore>,
    pub idempotency: Arc<dyn IdempotencyStore>,
    pub stats: Arc<dyn StatsStore>,
    pub dev_inbox: Arc<dyn DevInboxStore>,
    pub health: Arc<dyn HealthCheck>,
    pub pow_replays: Arc<dyn PowReplayStore>,
    pub fraud: Arc<dyn FraudStore>,
    pub levels: Arc<dyn LevelStore>,
    pub events: Arc<dyn EventStore>,
    pub twilio: Arc<dyn TwilioStore>,
    pub receipts: Arc<dyn ReceiptStore>,
    pub safe_list: Arc<dyn SafeListStore>,
    pub factors: Arc<dyn FactorStore>,
}

impl Stores {
    /// Every role played by `backend`.
    pub fn of<S: Store>(backend: Arc<S>) -> Self {
        Self {
            codes: backend.clone(),
            fused: backend.clone(),
            quotas: backend.clone(),
            captchas: backend.clone(),
            idempotency: backend.clone(),
            stats: backend.clone(),
            dev_inbox: backend.clone(),
            pow_replays: backend.clone(),
            fraud: backend.clone(),
            levels: backend.clone(),
            events: backend.clone(),
            twilio: backend.clone(),
            receipts: backend.clone(),
            safe_list: backend.clone(),
            factors: backend.clone(),
            health: backend,
        }
    }
}
