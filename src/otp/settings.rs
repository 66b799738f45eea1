//! What the OTP use cases are configured with: the codes' life-cycle and the abuse limits.

use std::time::Duration;

use crate::client_ip::TrustedProxies;
use crate::domain::{CodeLength, Purpose, Region};
use crate::store::ResendPolicy;

#[derive(Clone, Debug)]
pub struct OtpSettings {
    pub code_length: CodeLength,
    pub code_ttl: Duration,
    pub resend_cooldown: Duration,
    pub max_attempts: u32,
    pub resend: ResendPolicy,
    pub default_region: Region,
    /// The purposes a code may be for (`VCODE_PURPOSES`); any other is refused. The first is
    /// the default unless `login` is listed.
    pub purposes: Vec<Purpose>,
}

/// Limits against SMS pumping and guessing. A limit of 0 is off.
#[derive(Clone, Debug)]
pub struct AbuseSettings {
    pub sends_per_phone_hour: u32,
    pub sends_per_phone_day: u32,
    pub sends_per_ip_hour: u32,
    /// A ceiling per phone that no one client reaches alone.
    pub failed_verifies_per_phone_day: u32,
    /// Failed verifies per (phone, client): what stops a guesser.
    pub failed_verifies_per_client_day: u32,
    /// IPv6 clients count per network of this prefix length (IPv4 ones per address).
    pub client_ipv6_prefix: u8,
    /// Captchas one client may create per minute (`VCODE_QUOTA_CAPTCHA_IP_MINUTE`).
    pub captchas_per_client_minute: u32,
    pub sends_global_minute: u32,
    /// Regions whose numbers may receive codes; empty allows all.
    pub allowed_regions: Vec<Region>,
    pub trusted_proxies: TrustedProxies,
    /// How long an `Idempotency-Key` answer is kept for repeats.
    pub idempotency_ttl: Duration,
    /// How long a repeat waits for the first request with its key before answering 409.
    pub idempotency_wait: Duration,
}

impl Default for AbuseSettings {
    fn default() -> Self {
        Self {
            sends_per_phone_hour: 5,
            sends_per_phone_day: 10,
            sends_per_ip_hour: 20,
            failed_verifies_per_phone_day: 100,
            failed_verifies_per_client_day: 10,
            client_ipv6_prefix: 64,
            captchas_per_client_minute: 30,
            sends_global_minute: 0,
            allowed_regions: Vec::new(),
            trusted_proxies: TrustedProxies::default(),
            idempotency_ttl: Duration::from_secs(600),
            idempotency_wait: Duration::from_secs(5),
        }
    }
}

impl AbuseSettings {
    /// Every limit off: for load tests, which must measure the service, not its brakes.
    pub fn unlimited() -> Self {
        Self {
            sends_per_phone_hour: 0,
            sends_per_phone_day: 0,
            sends_per_ip_hour: 0,
            failed_verifies_per_phone_day: 0,
            failed_verifies_per_client_day: 0,
            captchas_per_client_minute: 0,
            sends_global_minute: 0,
            ..Self::default()
        }
    }
}

impl Default for OtpSettings {
    fn default() -> Self {
        Self {
            code_length: CodeLength::default(),
            code_ttl: Duration::from_secs(300),
            resend_cooldown: Duration::from_secs(60),
            max_attempts: 5,
            resend: ResendPolicy::Reuse,
            default_region: Region::default(),
            purposes: ["login", "register", "reset_password", "bind_phone"]
                .into_iter()
                .filter_map(Purpose::parse)
                .collect(),
        }
    }
}
