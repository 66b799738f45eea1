//! The delivery receipts' routes: what the webhook gateway posts, and what vcode answers a
//! receipt it took (Aliyun and Tencent get the answers their platforms require instead).

use serde::{Deserialize, Serialize};

/// `POST` [`crate::paths::RECEIPT_WEBHOOK`]: the gateway's word on one message, signed with
/// `X-Vcode-Timestamp` and `X-Vcode-Signature` as vcode signs its requests to the gateway.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct WebhookReceipt {
    /// The `message_id` of vcode's request to the gateway.
    pub message_id: String,
    pub status: WebhookReceiptStatus,
    /// Why it was not delivered, with `undelivered`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum WebhookReceiptStatus {
    /// Handed on; no final word yet.
    Sent,
    Delivered,
    Undelivered,
}

/// What a receipt request did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReceiptsApplied {
    /// Receipts in the request.
    pub receipts: u32,
    /// Those that moved a verification's delivery (a repeat or older news moves nothing).
    pub changed: u32,
    /// Those of a message vcode does not know (never recorded, or forgotten with its
    /// verification).
    pub unknown: u32,
}
