//! The dev outbox role (dev mode only): the messages "sent", kept per destination so that
//! tests and the demo read them as their recipient would. Not the event outbox (`events`).

use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;

use super::StoreError;
use crate::domain::Destination;

/// One SMS as the dev outbox shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct OutboxMessage {
    pub phone: String,
    pub purpose: String,
    pub code: String,
    pub sent_at_ms: u64,
}

/// How many messages the dev outbox keeps per phone, and for how long.
pub const OUTBOX_CAPACITY: usize = 100;
pub const OUTBOX_TTL: Duration = Duration::from_secs(3600);

/// Dev mode only: the SMS "sent", so that tests read them as a user would.
#[async_trait]
pub trait OutboxStore: Send + Sync + 'static {
    /// Remembers a delivered SMS.
    async fn push_outbox(&self, message: &OutboxMessage) -> Result<(), StoreError>;

    /// The SMS delivered to `phone`, oldest first.
    async fn outbox(&self, destination: &Destination) -> Result<Vec<OutboxMessage>, StoreError>;
}
