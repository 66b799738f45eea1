//! What every handler can reach: the use cases, and the few settings the HTTP layer applies
//! itself (which proxies to believe, the operator token, the SMS prices the console shows).

use std::sync::Arc;

use crate::api_keys::ApiKeyGate;
use crate::captcha::CaptchaService;
use crate::client_ip::TrustedProxies;
use crate::config::secret::Secret;
use crate::credential_failures::CredentialFailures;
use crate::events::EventOperations;
use crate::fraud::{FraudGuard, SafeList};
use crate::health::Readiness;
use crate::otp::{OtpService, ReceiptService};
use crate::pow::PowService;
use crate::sms::SmsPrices;
use crate::stats::Stats;
use crate::token::TokenIssuer;
use crate::twilio_compat::TwilioCompat;

pub struct AppState {
    pub otp: Arc<OtpService>,
    /// The SMS providers' delivery receipts.
    pub receipts: Arc<ReceiptService>,
    /// The fraud guard's operator side: suspensions, lifts, traffic.
    pub fraud: Arc<FraudGuard>,
    /// The guard's safe list as operators change it (the guard reads the same one).
    pub safe_list: Arc<SafeList>,
    /// The event outbox's operator side: failed events, replays.
    pub events: Arc<EventOperations>,
    pub captcha: Arc<CaptchaService>,
    pub pow: Arc<PowService>,
    /// The token keys' public halves, for the JWKS route.
    pub tokens: Arc<TokenIssuer>,
    pub stats: Arc<Stats>,
    pub readiness: Arc<Readiness>,
    pub trusted_proxies: TrustedProxies,
    /// IPv6 clients count per network of this length.
    pub client_ipv6_prefix: u8,
    pub admin_token: Option<Secret>,
    /// Which operations need an API key, and the keys.
    pub api_keys: ApiKeyGate,
    /// Addresses whose credentials failed too often lately (API keys and Twilio accounts).
    pub credential_failures: Arc<CredentialFailures>,
    /// What one SMS costs per region, for the console's spend estimate.
    pub sms_prices: SmsPrices,
    /// The Twilio Verify-compatible API over `otp` (and `totp`, its Entities).
    pub twilio: Arc<TwilioCompat>,
    /// Authenticator apps' TOTP factors, for both APIs.
    pub totp: Arc<crate::totp::TotpService>,
}
