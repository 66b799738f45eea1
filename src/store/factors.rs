//! The authenticator-app (TOTP) role: each identity's entity, factors and challenges, by scope
//! (a Twilio Service's SID, or `key:<API key name>` for `/api/v1`). Records are text the TOTP
//! use cases own (`crate::totp`), each with its revision (1 when created, one more at each
//! write), so that every change is a compare-and-set on one record: a code's step recorded as
//! used, a failure counted, a lock set are each one atomic step, and two concurrent checks of
//! one code never both pass (the second's write finds the revision moved, reads again, and
//! sees the step used).

use async_trait::async_trait;

use super::{OutboxEntry, Revised, StoreError};

/// The record of an identity's entity itself, beside its factors and challenges (whose SIDs
/// are never empty).
pub const ENTITY: &str = "";

#[async_trait]
pub trait FactorStore: Send + Sync + 'static {
    /// The scope's entities: each identity with its entity record, in no particular order.
    async fn totp_entities(&self, scope: &str) -> Result<Vec<(String, Revised)>, StoreError>;

    /// Every record of one identity (its entity under [`ENTITY`], its factors and challenges
    /// by SID), in no particular order.
    async fn totp_records(
        &self,
        scope: &str,
        identity: &str,
    ) -> Result<Vec<(String, Revised)>, StoreError>;

    /// One record of an identity ([`ENTITY`]: the entity).
    async fn totp_record(
        &self,
        scope: &str,
        identity: &str,
        sid: &str,
    ) -> Result<Option<Revised>, StoreError>;

    /// Writes the record if its revision is still `expected` (`None`: only if there is none);
    /// true if written. One atomic step, which appends `event` to the outbox if written (and
    /// events are on; on a Redis Cluster, to the outbox of the scope's slot).
    async fn put_totp_record(
        &self,
        scope: &str,
        identity: &str,
        sid: &str,
        expected: Option<u64>,
        body: &str,
        event: Option<&OutboxEntry>,
    ) -> Result<bool, StoreError>;

    /// Removes one record (not the entity: [`Self::delete_totp_identity`]); true if it existed,
    /// `event` appended in the same step if so.
    async fn delete_totp_record(
        &self,
        scope: &str,
        identity: &str,
        sid: &str,
        event: Option<&OutboxEntry>,
    ) -> Result<bool, StoreError>;

    /// Removes the identity's entity and every record of it, in one step; true if its entity
    /// existed.
    async fn delete_totp_identity(&self, scope: &str, identity: &str) -> Result<bool, StoreError>;
}
