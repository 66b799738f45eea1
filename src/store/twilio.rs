//! The Twilio-compatible API's role: each account's Services and each (Service, destination)
//! send log, every write a compare-and-set on one record.

use std::time::Duration;

use async_trait::async_trait;

use super::StoreError;
use crate::domain::Destination;

/// A record of the Twilio-compatible API (src/twilio_compat) as the store keeps it: text the
/// compat layer owns, and its revision (1 when created, one more at each write), so that a
/// write based on a read is a compare-and-set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Revised {
    pub revision: u64,
    pub body: String,
}

/// The Twilio-compatible API's own state: each account's Services, and the send log of each
/// (Service, destination) verification (a phone's or an email address's, by its `key`). Every write is a compare-and-set on one record, one atomic
/// step; the codes themselves are the `CodeStore`'s, whose issue creates a first start's log
/// where the backend can (`CodeStore::writes_send_logs`).
#[async_trait]
pub trait TwilioStore: Send + Sync + 'static {
    /// The account's Services, in no particular order.
    async fn twilio_services(&self, account: &str) -> Result<Vec<(String, Revised)>, StoreError>;

    /// One of the account's Services (another account's is `None`).
    async fn twilio_service(&self, account: &str, sid: &str)
    -> Result<Option<Revised>, StoreError>;

    /// Writes the Service if its revision is still `expected` (`None`: only if it does not
    /// exist); true if written.
    async fn put_twilio_service(
        &self,
        account: &str,
        sid: &str,
        expected: Option<u64>,
        body: &str,
    ) -> Result<bool, StoreError>;

    /// Removes the Service; true if it existed.
    async fn delete_twilio_service(&self, account: &str, sid: &str) -> Result<bool, StoreError>;

    /// The send log of (Service, destination), while it lives.
    async fn twilio_sends(
        &self,
        service: &str,
        destination: &Destination,
    ) -> Result<Option<Revised>, StoreError>;

    /// Writes the send log if its revision is still `expected` (`None`: only if there is none),
    /// to live `ttl` from now; true if written.
    async fn put_twilio_sends(
        &self,
        service: &str,
        destination: &Destination,
        expected: Option<u64>,
        body: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError>;
}
