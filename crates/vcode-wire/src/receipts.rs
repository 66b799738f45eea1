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

/// `GET` [`crate::paths::DELIVERY_RATES`]`?hours=N` (1 to 168, 24 by default): the last `N`
/// hours, this one included.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeliveryRatesQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hours: Option<u32>,
}

/// The delivery rate per provider and country, from the receipts every instance counted in
/// the store.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeliveryRates {
    /// The first hour counted (unix hours: unix ms / 3,600,000).
    pub from_hour: u64,
    /// The last (the current one).
    pub to_hour: u64,
    /// One per provider and country that had a receipt, most receipts first.
    pub rates: Vec<DeliveryRate>,
}

/// One provider's receipts for SMS to one country.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeliveryRate {
    /// `twilio`, `aliyun`, `tencent`, `webhook`.
    pub provider: String,
    /// ISO region of the phone (`GB`), `001` for the non-geographic calling codes.
    pub country: String,
    pub delivered: u64,
    pub undelivered: u64,
    /// delivered / (delivered + undelivered).
    pub rate: f64,
    /// The hours with receipts, oldest first.
    pub hours: Vec<DeliveryRateHour>,
}

/// One hour of a [`DeliveryRate`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeliveryRateHour {
    pub hour: u64,
    pub delivered: u64,
    pub undelivered: u64,
}
