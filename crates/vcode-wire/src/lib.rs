//! vcode's HTTP contract, defined once for the server, its tests and the load generator: route
//! paths ([`paths`]), the `Idempotency-Key` header name ([`headers`]), the envelope every JSON
//! answer is wrapped in ([`Envelope`]), the stable error codes ([`ErrorCode`]), and the request
//! and answer bodies of each area. Only serde: no server or client code lives here.
//!
//! Optional fields are left out when they are `None`, so the JSON is what the service has
//! always written; unknown fields are ignored when reading, so either side can grow first.

mod captcha;
mod console;
mod dev;
mod envelope;
mod error_code;
mod events;
mod fraud;
pub mod headers;
mod health;
mod otp;
pub mod paths;
mod pow;
mod receipts;
mod stats;
mod totp;

pub use captcha::{CaptchaCreated, CaptchaVerifyRequest, Verified};
pub use console::SmsPricesData;
pub use dev::{CaptchaAnswer, DevInboxData, DevInboxQuery, DevMessage};
pub use envelope::{Envelope, OK, OK_MESSAGE};
pub use error_code::ErrorCode;
pub use events::{FailedEvent, FailedEvents, FailedEventsQuery, ReplayRequest, Replayed};
pub use fraud::{
    FraudCountryCounts, FraudLevel, FraudLifted, FraudPrefixState, FraudPrefixTraffic, FraudReason,
    FraudSafeList, FraudSafeListAdd, FraudSafeListAdded, FraudSafeListEntry, FraudSafeListQuery,
    FraudSafeListRemoved, FraudSafeListSource, FraudSpend, FraudSuspension, FraudSuspensions,
    FraudTraffic, FraudTrafficBucket, FraudTrafficQuery,
};
pub use health::{Health, HealthStatus};
pub use otp::{
    Delivery, RetryAfterData, SendData, SendRequest, VerificationData, VerificationStatus,
    VerifyData, VerifyRequest, WrongCodeData,
};
pub use pow::PowVerifyRequest;
pub use receipts::{
    DeliveryRate, DeliveryRateHour, DeliveryRates, DeliveryRatesQuery, ReceiptsApplied,
    WebhookReceipt, WebhookReceiptStatus,
};
pub use stats::StatsQuery;
pub use totp::{
    TotpConfirmRequest, TotpEnrolData, TotpEnrolRequest, TotpFactorData, TotpFactorsData,
    TotpVerifyRequest,
};
