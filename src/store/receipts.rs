//! The receipts role: which provider message carried which send, what the providers later
//! reported of it (a message's delivery, moved only forward), and the hourly delivery counts.

use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;

use super::{Fact, FinalDelivery, SendMark, StoreError, VerificationTarget};
use crate::domain::{Destination, Purpose, VerificationId};

/// What is known of the SMS of an accepted send: what the provider answered the send, then
/// what its delivery receipts said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    #[default]
    Sent,
    /// The request reached the provider and no answer came: the SMS may arrive.
    Unconfirmed,
    /// A receipt: the handset got it.
    Delivered,
    /// A receipt: it will not arrive (the provider's error code says why).
    Undelivered,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sent => "sent",
            Self::Unconfirmed => "unconfirmed",
            Self::Delivered => "delivered",
            Self::Undelivered => "undelivered",
        }
    }

    /// How far along it is: a receipt moves a delivery only forward (a late `sent` after
    /// `delivered` changes nothing), and the first final word stays.
    pub fn rank(self) -> u8 {
        match self {
            Self::Unconfirmed => 0,
            Self::Sent => 1,
            Self::Delivered | Self::Undelivered => 2,
        }
    }
}

/// One delivery receipt, as the store applies it: the provider's message, and what became of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Receipt<'a> {
    pub provider: &'a str,
    pub message_id: &'a str,
    /// `Sent`, `Delivered` or `Undelivered` (a receipt never says `Unconfirmed`).
    pub delivery: DeliveryStatus,
    /// The provider's error code, for `Undelivered`.
    pub error_code: Option<&'a str>,
}

impl Receipt<'_> {
    /// The fact a receipt that changes the delivery records (none for a `Sent`), and its
    /// detail (`provider`, `message_id`, `error_code`): `vcode_receipt` and `receipt.lua`
    /// spell the same.
    pub fn fact(&self) -> Option<(Fact, String)> {
        let delivery = match self.delivery {
            DeliveryStatus::Delivered => FinalDelivery::Delivered,
            DeliveryStatus::Undelivered => FinalDelivery::Undelivered,
            DeliveryStatus::Sent | DeliveryStatus::Unconfirmed => return None,
        };
        let mut detail = format!("provider={};message_id={}", self.provider, self.message_id);
        if let Some(code) = self
            .error_code
            .filter(|_| delivery == FinalDelivery::Undelivered)
        {
            detail.push_str(";error_code=");
            detail.push_str(code);
        }
        Some((Fact::Delivery(delivery), detail))
    }
}

/// What a receipt changed: everything the `verification.delivered` / `.undelivered` event
/// carries. Times are unix milliseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveryTransition {
    pub verification: VerificationId,
    pub target: VerificationTarget,
    pub provider: String,
    pub message_id: String,
    pub previous: DeliveryStatus,
    pub delivery: DeliveryStatus,
    pub error_code: Option<String>,
    /// When the send created the verification.
    pub created_at_ms: u64,
    /// The fraud guard's mark of the message's send (its minute and token), if the guard
    /// counted it: an `undelivered` receipt takes the send out of the guard's judged sends.
    pub guarded: Option<SendMark>,
    /// When the store applied the receipt.
    pub changed_at_ms: u64,
}

/// What one receipt did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReceiptOutcome {
    /// No send recorded this message, or its verification has been forgotten.
    Unknown,
    /// Known, and nothing changed: a repeat, or older news than the delivery holds.
    Unchanged,
    Changed(DeliveryTransition),
}

/// A provider's message that carries the SMS of one send.
#[derive(Clone, Copy, Debug)]
pub struct SentMessage<'a> {
    pub destination: &'a Destination,
    pub purpose: &'a Purpose,
    /// The send's verification.
    pub verification: &'a VerificationId,
    pub provider: &'a str,
    /// The provider's own id of the message.
    pub message_id: &'a str,
    /// The fraud guard's mark of the send, if it judged it (`FraudGuard::undelivered`).
    pub guarded: Option<SendMark>,
}

/// Delivery receipts: which provider message carried which send's SMS, and what the
/// providers later reported of it.
#[async_trait]
pub trait ReceiptStore: Send + Sync + 'static {
    /// Records which send's SMS `message` carries, for `keep` (as long as the verification is
    /// kept), with the fraud guard's mark of that send if the guard counted it, which the
    /// message's transition hands back.
    async fn record_message(
        &self,
        message: &SentMessage<'_>,
        keep: Duration,
    ) -> Result<(), StoreError>;

    /// Moves the delivery of the message's verification to the receipt's, if that is further
    /// along ([`DeliveryStatus::rank`]); keeps the error code with it. One atomic step: of a
    /// receipt delivered twice, or of two racing, only one changes anything. A change to
    /// `Delivered` or `Undelivered` counts, in that same step, in the hour's
    /// [`DeliveryCount`] of the provider and the phone's country.
    async fn apply_receipt(&self, receipt: &Receipt<'_>) -> Result<ReceiptOutcome, StoreError>;

    /// The delivery counts of the hours from `from_hour` (unix hours) on, shared by every
    /// instance on the store; kept [`DELIVERY_COUNTS_KEPT_HOURS`].
    async fn delivery_counts(&self, from_hour: u64) -> Result<Vec<DeliveryCount>, StoreError>;
}

/// Receipts' final words on the SMS of one provider to one country in one hour: the delivery
/// rate's counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeliveryCount {
    /// Unix hour (unix ms / 3,600,000).
    pub hour: u64,
    pub provider: String,
    /// The phone's country (`GB`; `001` non-geographic), [`crate::domain::Phone::country`].
    pub country: String,
    pub delivered: u64,
    pub undelivered: u64,
}

/// How long the delivery counts are kept, in hours (eight days: a week and the day it began).
pub const DELIVERY_COUNTS_KEPT_HOURS: u64 = 8 * 24;

/// The unix hour of `unix_ms`.
pub fn unix_hour(unix_ms: u64) -> u64 {
    unix_ms / 3_600_000
}

/// Adds `delivery` (a final word) to `count`.
pub fn add_delivery(count: &mut DeliveryCount, delivery: DeliveryStatus) {
    match delivery {
        DeliveryStatus::Delivered => count.delivered += 1,
        DeliveryStatus::Undelivered => count.undelivered += 1,
        DeliveryStatus::Sent | DeliveryStatus::Unconfirmed => {}
    }
}
