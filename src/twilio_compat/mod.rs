//! Twilio Verify v2, as a layer over the OTP use cases: accounts (who may call), Services
//! (tenants of one account: a purpose and a code length of their own) and verifications, whose
//! `VE…` SIDs are vcode verification ids in Twilio's form. Every code is sent and checked by
//! `OtpService` (one atomic store, quotas, fraud guard, codes hashed at rest); this module keeps
//! only what Twilio shows and vcode has no word for: the Services' settings and each
//! verification's send log.

pub mod accounts;
mod error;
mod rate_limits;
mod safe_list;
mod services;
pub mod sid;
mod verifications;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::fraud::SafeList;
use crate::otp::OtpService;
use crate::store::TwilioStore;

use self::accounts::RecentCredentials;
pub use self::accounts::TwilioAccounts;
pub use self::error::TwilioError;
pub use self::rate_limits::{Bucket, BucketChanges, RateLimit};
pub use self::safe_list::SafeListNumber;
pub use self::services::{Service, ServiceChanges, ServiceTotp};
pub use self::verifications::{
    CheckTarget, SendAttempt, StartCommand, TwilioStatus, Verification, VerificationCheck,
    push_json_str,
};

pub struct TwilioCompat {
    otp: Arc<OtpService>,
    store: Arc<dyn TwilioStore>,
    /// The fraud guard's safe list: each account's own numbers (`/v2/SafeList/Numbers`).
    safe_list: Arc<SafeList>,
    accounts: TwilioAccounts,
    /// Services one account may have (`VCODE_QUOTA_TWILIO_SERVICES`).
    max_services: usize,
    /// Credentials `accounts` verified lately.
    recent_credentials: RecentCredentials,
    /// Services read in the last `SERVICE_CACHE_TTL`, by (account, SID).
    recent: services::RecentServices,
}

impl TwilioCompat {
    pub fn new(
        otp: Arc<OtpService>,
        store: Arc<dyn TwilioStore>,
        safe_list: Arc<SafeList>,
        accounts: TwilioAccounts,
        max_services: usize,
    ) -> Self {
        Self {
            otp,
            store,
            safe_list,
            accounts,
            max_services,
            recent_credentials: RecentCredentials::default(),
            recent: services::RecentServices::default(),
        }
    }

    /// The account HTTP Basic's `encoded` credentials (base64 of `user:secret`) act for.
    pub fn authenticate_basic(&self, encoded: &str) -> Result<&str, TwilioError> {
        self.accounts
            .authenticate_basic(encoded, &self.recent_credentials)
            .ok_or(TwilioError::Unauthenticated)
    }
}

/// The wall clock in unix ms, for the dates Twilio shows.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}
