//! The operator console's own data route: the SMS price table the console estimates spend
//! with. (The traffic and suspensions it charts are the fraud guard's routes.)

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `GET /api/v1/admin/sms-prices`: what one SMS costs per destination country
/// (`VCODE_SMS_PRICES`), in `currency` (`VCODE_SMS_PRICE_CURRENCY`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SmsPricesData {
    /// ISO 4217, upper case (`USD`).
    pub currency: String,
    /// ISO 3166-1 alpha-2 region → price of one SMS; `*` is every region not listed. Empty when
    /// no table is configured.
    pub prices: BTreeMap<String, f64>,
}
