//! What every handler can reach: the use cases, and the few settings the HTTP layer applies
//! itself (which proxies to believe, the operator token).

use std::sync::Arc;

use crate::captcha::CaptchaService;
use crate::client_ip::TrustedProxies;
use crate::health::Readiness;
use crate::otp::OtpService;
use crate::setting::Secret;
use crate::stats::Stats;

pub struct AppState {
    pub otp: Arc<OtpService>,
    pub captcha: Arc<CaptchaService>,
    pub stats: Arc<Stats>,
    pub readiness: Readiness,
    pub trusted_proxies: TrustedProxies,
    pub admin_token: Option<Secret>,
}
