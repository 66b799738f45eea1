//! The dev inbox role (dev mode only): the messages "sent", kept per destination so that
//! tests and the demo read them as their recipient would. Not the event outbox (`events`).

use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;

use super::StoreError;
use crate::domain::Destination;

/// One SMS as the dev inbox shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct DevMessage {
    pub phone: String,
    pub purpose: String,
    pub code: String,
    pub sent_at_ms: u64,
}

/// How many messages the dev inbox keeps per phone, and for how long.
pub const DEV_INBOX_CAPACITY: usize = 100;
pub const DEV_INBOX_TTL: Duration = Duration::from_secs(3600);

/// Dev mode only: the SMS "sent", so that tests read them as a user would.
#[async_trait]
pub trait DevInboxStore: Send + Sync + 'static {
    /// Remembers a delivered SMS.
    async fn keep_dev_message(&self, message: &DevMessage) -> Result<(), StoreError>;

    /// The SMS delivered to `phone`, oldest first.
    async fn dev_messages(&self, destination: &Destination) -> Result<Vec<DevMessage>, StoreError>;
}
