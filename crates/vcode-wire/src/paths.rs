//! Every route of the HTTP API as a full path, the form clients request and the form the
//! server's route patterns take (`{id}` is a path parameter). The JSON API lives under
//! [`API_PREFIX`]; probes, metrics and the well-known keys sit at the root.

/// A path under the JSON API's prefix, written once here as `/api/v1`.
macro_rules! api_v1 {
    ($path:literal) => {
        concat!("/api/v1", $path)
    };
}

/// The prefix of the versioned JSON API.
pub const API_PREFIX: &str = api_v1!("");

/// `GET`/`HEAD`: the process answers.
pub const HEALTHZ: &str = "/healthz";
/// `GET`/`HEAD`: the store answers (503 otherwise).
pub const READYZ: &str = "/readyz";
/// `GET` on the operator listener: Prometheus text.
pub const METRICS: &str = "/metrics";
/// `GET ?days=N` on the operator listener, behind the admin bearer token.
pub const STATS: &str = api_v1!("/stats");
/// `GET` on the operator listener: the console page. The page and its files are static and
/// served without the admin token; the data they fetch asks for it.
pub const CONSOLE: &str = "/console";
/// `GET` on the operator listener: the console's scripts and styles (vendored uPlot); the route
/// pattern of [`console_asset`].
pub const CONSOLE_ASSET: &str = "/console/{file}";
/// `GET` on the operator listener → [`crate::SmsPricesData`].
pub const SMS_PRICES: &str = api_v1!("/admin/sms-prices");

/// `GET` on the operator listener → [`crate::FraudSuspensions`]: the prefixes the fraud
/// guard suspended or holds back.
pub const FRAUD_SUSPENSIONS: &str = api_v1!("/admin/fraud/suspensions");
/// `POST` (no body) on the operator listener → [`crate::FraudLifted`]; the route pattern of
/// [`fraud_lift`] (`{prefix}`: digits without `+`).
pub const FRAUD_LIFT: &str = api_v1!("/admin/fraud/suspensions/{prefix}/lift");
/// `GET ?minutes=N` ([`crate::FraudTrafficQuery`]) on the operator listener →
/// [`crate::FraudTraffic`].
pub const FRAUD_TRAFFIC: &str = api_v1!("/admin/fraud/traffic");
/// `GET` on the operator listener → [`crate::FraudSafeList`]; `POST`
/// [`crate::FraudSafeListAdd`] → [`crate::FraudSafeListAdded`]: the fraud guard's safe list.
pub const FRAUD_SAFE_LIST: &str = api_v1!("/admin/fraud/safe-list");
/// `DELETE` (`?tenant=` for a tenant's entry: [`crate::FraudSafeListQuery`]) on the operator
/// listener → [`crate::FraudSafeListRemoved`]; the route pattern of [`fraud_safe_list_entry`]
/// (`{entry}`: digits, `+` optional).
pub const FRAUD_SAFE_LIST_ENTRY: &str = api_v1!("/admin/fraud/safe-list/{entry}");
/// `GET ?limit=N` on the operator listener → [`crate::FailedEvents`]: the events given up after
/// the retry period.
pub const EVENTS_FAILED: &str = api_v1!("/admin/events/failed");
/// `GET ?hours=N` ([`crate::DeliveryRatesQuery`]) on the operator listener →
/// [`crate::DeliveryRates`]: the delivery rate per provider and country, from the receipts.
pub const DELIVERY_RATES: &str = api_v1!("/admin/delivery-rates");
/// `POST` [`crate::ReplayRequest`] on the operator listener → [`crate::Replayed`].
pub const EVENTS_REPLAY: &str = api_v1!("/admin/events/failed/replay");
/// `GET` on the operator listener: the OpenAPI 3.1 description of its JSON routes that have
/// one (the event outbox's so far; the public one is [`OPENAPI`]).
pub const ADMIN_OPENAPI: &str = api_v1!("/admin/openapi.json");

/// `POST` [`crate::SendRequest`] → [`crate::SendData`].
pub const OTP_SEND: &str = api_v1!("/otp/send");
/// `POST` [`crate::VerifyRequest`] → [`crate::VerifyData`].
pub const OTP_VERIFY: &str = api_v1!("/otp/verify");
/// `GET` → [`crate::VerificationData`]; the route pattern of [`verification`].
pub const OTP_VERIFICATION: &str = api_v1!("/otp/verifications/{id}");
/// `POST` (no body) → [`crate::VerificationData`]; the route pattern of
/// [`verification_cancel`].
pub const OTP_VERIFICATION_CANCEL: &str = api_v1!("/otp/verifications/{id}/cancel");

/// `POST` [`crate::TotpEnrolRequest`] → [`crate::TotpEnrolData`]; `GET` →
/// [`crate::TotpFactorsData`]: an identity's authenticator-app factors.
pub const TOTP_FACTORS: &str = api_v1!("/totp/{identity}/factors");
/// `DELETE` → `null`: removes one factor.
pub const TOTP_FACTOR: &str = api_v1!("/totp/{identity}/factors/{factor_id}");
/// `POST` [`crate::TotpConfirmRequest`] → [`crate::TotpFactorData`]: the first right code
/// verifies the factor.
pub const TOTP_FACTOR_CONFIRM: &str = api_v1!("/totp/{identity}/factors/{factor_id}/confirm");
/// `POST` [`crate::TotpVerifyRequest`] → [`crate::VerifyData`]: a code of a verified factor,
/// answered with the token of an OTP verify (`channel` `totp`).
pub const TOTP_VERIFY: &str = api_v1!("/totp/{identity}/verify");

/// `POST` by Twilio (its `StatusCallback`, a signed form): a delivery receipt.
pub const RECEIPT_TWILIO: &str = api_v1!("/receipts/twilio");
/// `POST ?token=…` by Aliyun (`SmsReport`, a JSON array): delivery receipts.
pub const RECEIPT_ALIYUN: &str = api_v1!("/receipts/aliyun");
/// `POST ?token=…` by Tencent Cloud SMS (its status callback, a JSON array): delivery receipts.
pub const RECEIPT_TENCENT: &str = api_v1!("/receipts/tencent");
/// `POST` by the webhook gateway ([`crate::WebhookReceipt`], signed as vcode's requests to it
/// are): a delivery receipt.
pub const RECEIPT_WEBHOOK: &str = api_v1!("/receipts/webhook");

/// [`OTP_VERIFICATION`] of one id (as `otp/send` answered it: URL-safe already).
pub fn verification(id: &str) -> String {
    OTP_VERIFICATION.replace("{id}", id)
}

/// [`OTP_VERIFICATION_CANCEL`] of one id.
pub fn verification_cancel(id: &str) -> String {
    OTP_VERIFICATION_CANCEL.replace("{id}", id)
}

/// `POST` (no body) → [`crate::CaptchaCreated`].
pub const CAPTCHA: &str = api_v1!("/captcha");
/// `POST` [`crate::CaptchaVerifyRequest`] → [`crate::Verified`].
pub const CAPTCHA_VERIFY: &str = api_v1!("/captcha/verify");
/// `GET` → `image/png`; the route pattern of [`captcha_image`].
pub const CAPTCHA_IMAGE: &str = api_v1!("/captcha/{id}.png");

/// `GET` → the ALTCHA challenge JSON, not enveloped (the widget reads it as is).
pub const POW_CHALLENGE: &str = api_v1!("/pow/challenge");
/// `POST` [`crate::PowVerifyRequest`] → [`crate::Verified`].
pub const POW_VERIFY: &str = api_v1!("/pow/verify");

/// `GET`: the public keys that check a verify's token.
pub const JWKS: &str = "/.well-known/jwks.json";
/// `GET`: the API description.
pub const OPENAPI: &str = api_v1!("/openapi.json");
/// `GET`: the API documentation page.
pub const DOCS: &str = "/docs";
/// `GET`: the docs page's scripts and styles (vendored Swagger UI); the route pattern of
/// [`docs_asset`].
pub const DOCS_ASSET: &str = "/docs/{file}";
/// `GET`: the demo page (demo or dev mode).
pub const DEMO: &str = "/demo";
/// `GET`: the demo page's scripts and styles (demo or dev mode); the route pattern of
/// [`demo_asset`].
pub const DEMO_ASSET: &str = "/demo/{file}";
/// `POST` [`crate::TotpEnrolRequest`] → [`crate::TotpEnrolData`] (demo or dev mode): the demo
/// page's own enrolment, without an API key, in the demo's scope.
pub const DEMO_TOTP_FACTORS: &str = "/demo/totp/{identity}/factors";
/// `POST` [`crate::TotpConfirmRequest`] → [`crate::TotpFactorData`] (demo or dev mode).
pub const DEMO_TOTP_CONFIRM: &str = "/demo/totp/{identity}/factors/{factor_id}/confirm";
/// `POST` [`crate::TotpVerifyRequest`] → [`crate::VerifyData`] (demo or dev mode).
pub const DEMO_TOTP_VERIFY: &str = "/demo/totp/{identity}/verify";

/// Dev mode, loopback peers only: `GET ?phone=` ([`crate::DevInboxQuery`]) →
/// [`crate::DevInboxData`].
pub const DEV_INBOX: &str = api_v1!("/dev/inbox");
/// Dev mode, loopback peers only: `GET` → [`crate::CaptchaAnswer`], without consuming the
/// captcha; the route pattern of [`dev_captcha_answer`].
pub const DEV_CAPTCHA_ANSWER: &str = api_v1!("/dev/captcha/{id}");

/// Every route of the public listener but the dev routes, as route patterns.
pub const PUBLIC: [&str; 28] = [
    HEALTHZ,
    READYZ,
    OTP_SEND,
    OTP_VERIFY,
    OTP_VERIFICATION,
    OTP_VERIFICATION_CANCEL,
    TOTP_FACTORS,
    TOTP_FACTOR,
    TOTP_FACTOR_CONFIRM,
    TOTP_VERIFY,
    CAPTCHA,
    CAPTCHA_VERIFY,
    CAPTCHA_IMAGE,
    POW_CHALLENGE,
    POW_VERIFY,
    JWKS,
    OPENAPI,
    DOCS,
    DOCS_ASSET,
    DEMO,
    DEMO_ASSET,
    DEMO_TOTP_FACTORS,
    DEMO_TOTP_CONFIRM,
    DEMO_TOTP_VERIFY,
    RECEIPT_TWILIO,
    RECEIPT_ALIYUN,
    RECEIPT_TENCENT,
    RECEIPT_WEBHOOK,
];

/// The dev routes: registered in dev mode only.
pub const DEV: [&str; 2] = [DEV_INBOX, DEV_CAPTCHA_ANSWER];

/// Every route of the operator listener (`VCODE_ADMIN_BIND`).
pub const OPERATOR: [&str; 14] = [
    METRICS,
    STATS,
    CONSOLE,
    CONSOLE_ASSET,
    SMS_PRICES,
    FRAUD_SUSPENSIONS,
    FRAUD_LIFT,
    FRAUD_TRAFFIC,
    FRAUD_SAFE_LIST,
    FRAUD_SAFE_LIST_ENTRY,
    EVENTS_FAILED,
    EVENTS_REPLAY,
    DELIVERY_RATES,
    ADMIN_OPENAPI,
];

/// The path parameter in [`CAPTCHA_IMAGE`] and [`DEV_CAPTCHA_ANSWER`].
const ID: &str = "{id}";
/// The path parameter in [`DOCS_ASSET`], [`DEMO_ASSET`] and [`CONSOLE_ASSET`].
const FILE: &str = "{file}";

/// The path parameter in [`FRAUD_LIFT`].
const PREFIX: &str = "{prefix}";

/// The path parameter in [`FRAUD_SAFE_LIST_ENTRY`].
const ENTRY: &str = "{entry}";

/// Where an operator removes the safe-list entry `entry` (digits, `+` optional: a `+` is sent
/// as it is, which a path allows).
pub fn fraud_safe_list_entry(entry: &str) -> String {
    FRAUD_SAFE_LIST_ENTRY.replace(ENTRY, entry)
}

/// Where an operator lifts `prefix`'s suspension.
pub fn fraud_lift(prefix: &str) -> String {
    FRAUD_LIFT.replace(PREFIX, prefix)
}

/// Where the picture of captcha `id` is fetched (the `image_url` of its creation).
pub fn captcha_image(id: &str) -> String {
    CAPTCHA_IMAGE.replace(ID, id)
}

/// Where dev mode tells the answer of captcha `id`.
pub fn dev_captcha_answer(id: &str) -> String {
    DEV_CAPTCHA_ANSWER.replace(ID, id)
}

/// Where the docs page's file `name` is served.
pub fn docs_asset(name: &str) -> String {
    DOCS_ASSET.replace(FILE, name)
}

/// Where the demo page's file `name` is served.
pub fn demo_asset(name: &str) -> String {
    DEMO_ASSET.replace(FILE, name)
}

/// Where the console page's file `name` is served.
pub fn console_asset(name: &str) -> String {
    CONSOLE_ASSET.replace(FILE, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lists are what the spec coverage test walks: a path constant added here and left
    /// out of them would escape it.
    #[test]
    fn every_path_constant_is_in_a_list() {
        let source = include_str!("paths.rs");
        let declared = source
            .lines()
            .filter(|line| line.starts_with("pub const ") && line.contains(": &str ="))
            .count();
        let mut listed: Vec<&str> = PUBLIC
            .iter()
            .chain(&DEV)
            .chain(&OPERATOR)
            .copied()
            .collect();
        listed.sort_unstable();
        listed.dedup();
        // API_PREFIX is a prefix, not a route.
        assert_eq!(listed.len(), declared - 1, "a path constant is in no list");
    }

    #[test]
    fn paths_are_the_documented_ones() {
        // Spelled out as DESIGN.md's "HTTP API" does, not derived from the constants.
        let documented = [
            (HEALTHZ, "/healthz"),
            (READYZ, "/readyz"),
            (METRICS, "/metrics"),
            (STATS, "/api/v1/stats"),
            (CONSOLE, "/console"),
            (CONSOLE_ASSET, "/console/{file}"),
            (SMS_PRICES, "/api/v1/admin/sms-prices"),
            (FRAUD_SUSPENSIONS, "/api/v1/admin/fraud/suspensions"),
            (FRAUD_LIFT, "/api/v1/admin/fraud/suspensions/{prefix}/lift"),
            (FRAUD_TRAFFIC, "/api/v1/admin/fraud/traffic"),
            (FRAUD_SAFE_LIST, "/api/v1/admin/fraud/safe-list"),
            (
                FRAUD_SAFE_LIST_ENTRY,
                "/api/v1/admin/fraud/safe-list/{entry}",
            ),
            (EVENTS_FAILED, "/api/v1/admin/events/failed"),
            (EVENTS_REPLAY, "/api/v1/admin/events/failed/replay"),
            (DELIVERY_RATES, "/api/v1/admin/delivery-rates"),
            (ADMIN_OPENAPI, "/api/v1/admin/openapi.json"),
            (OTP_SEND, "/api/v1/otp/send"),
            (OTP_VERIFY, "/api/v1/otp/verify"),
            (CAPTCHA, "/api/v1/captcha"),
            (CAPTCHA_VERIFY, "/api/v1/captcha/verify"),
            (CAPTCHA_IMAGE, "/api/v1/captcha/{id}.png"),
            (POW_CHALLENGE, "/api/v1/pow/challenge"),
            (POW_VERIFY, "/api/v1/pow/verify"),
            (JWKS, "/.well-known/jwks.json"),
            (OPENAPI, "/api/v1/openapi.json"),
            (DOCS, "/docs"),
            (DEMO, "/demo"),
            (DOCS_ASSET, "/docs/{file}"),
            (DEMO_ASSET, "/demo/{file}"),
            (DEV_INBOX, "/api/v1/dev/inbox"),
            (DEV_CAPTCHA_ANSWER, "/api/v1/dev/captcha/{id}"),
            (API_PREFIX, "/api/v1"),
        ];
        for (path, expected) in documented {
            assert_eq!(path, expected);
        }
    }

    #[test]
    fn helpers_fill_the_id_in() {
        let id = "0123456789abcdef0123456789abcdef";
        assert_eq!(
            captcha_image(id),
            "/api/v1/captcha/0123456789abcdef0123456789abcdef.png"
        );
        assert_eq!(
            fraud_lift("44770"),
            "/api/v1/admin/fraud/suspensions/44770/lift"
        );
        assert_eq!(
            dev_captcha_answer(id),
            "/api/v1/dev/captcha/0123456789abcdef0123456789abcdef"
        );
    }
}
