//! The event outbox's operator routes (on the operator listener, behind the admin token): the
//! events given up after the retry period, and their replay.

use serde::{Deserialize, Serialize};

/// `GET /api/v1/admin/events/failed?limit=N`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedEventsQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// One event given up on.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedEvent {
    /// Its number in the outbox: what a replay names.
    pub seq: u64,
    /// The `webhook-id` it was (and will again be) sent with.
    pub webhook_id: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// The verification id, or `prefix:<digits>`.
    pub subject: String,
    pub occurred_at_ms: u64,
    pub attempts: u32,
    /// The last try's failure, per endpoint (URLs without credentials).
    pub error: String,
    pub failed_at_ms: u64,
}

/// The answer of the failed list.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailedEvents {
    pub events: Vec<FailedEvent>,
}

/// `POST /api/v1/admin/events/failed/replay`: these (`seqs`), or every failed event (none
/// given).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayRequest {
    #[serde(default)]
    pub seqs: Vec<u64>,
}

/// How many failed events are due again.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replayed {
    pub replayed: u64,
}
