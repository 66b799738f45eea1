//! The bridge sender: an HTTP POST of JSON to the team's own gateway
//! (`VCODE_SMS_WEBHOOK_URL`), bounded by a timeout, never redirected and never sent through a
//! proxy the environment names. Each request is signed (`X-Vcode-Timestamp`,
//! `X-Vcode-Signature: v1=<hex>`, HMAC-SHA-256 over `"<timestamp>.<body>"` under
//! `VCODE_SMS_WEBHOOK_SECRET`) so the gateway can refuse forgeries and replays. The URL is https
//! and the secret required unless the gateway is on this host (a loopback address). A 2xx answer
//! is delivered; 429 is the gateway's limit (final, for its `Retry-After` or a minute); 5xx did
//! not take the message; a redirect or any other status is a settings problem.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hmac::{Hmac, Mac};
use secrecy::{ExposeSecret, SecretString};
use serde::Serialize;
use sha2::Sha256;

use super::http::{PreparedRequest, ProviderClient, classify_status};
use super::templates::TextTemplates;
use super::{SmsError, SmsErrorKind, SmsMessage, SmsReceipt, SmsSender};
use crate::domain::Locale;

pub const PROVIDER: &str = "webhook";

/// The Unix time (seconds) the request was signed at.
pub const TIMESTAMP_HEADER: &str = "X-Vcode-Timestamp";
/// `v1=` and the hex HMAC-SHA-256 of `"<timestamp>.<body>"`.
pub const SIGNATURE_HEADER: &str = "X-Vcode-Signature";
/// A shorter shared secret could be guessed offline from one captured request.
pub const MIN_SECRET_BYTES: usize = 32;

#[derive(Clone)]
pub struct WebhookSettings {
    /// May carry a credential (user info, query): `Debug` is written by the settings.
    pub url: String,
    pub timeout: Duration,
    /// Signs every request (`VCODE_SMS_WEBHOOK_SECRET`); only a loopback gateway may go
    /// without.
    pub secret: Option<SecretString>,
}

impl WebhookSettings {
    /// Why these settings would let a code leave unprotected, if they would: the URL must be
    /// https and the requests signed, unless the gateway is on this host.
    pub fn problem(&self) -> Option<WebhookProblem> {
        let loopback = match check_url(&self.url) {
            Ok(loopback) => loopback,
            Err(UrlRefusal::PlainHttp) => {
                return Some(WebhookProblem::Url(
                    "expected https:// (http:// only to a loopback host): the body carries the code",
                ));
            }
            Err(UrlRefusal::NotHttps) => {
                return Some(WebhookProblem::Url("expected an https:// URL"));
            }
        };
        match &self.secret {
            Some(secret) if secret.expose_secret().len() < MIN_SECRET_BYTES => Some(
                WebhookProblem::Secret("at least 32 characters (`openssl rand -hex 32`)"),
            ),
            None if !loopback => Some(WebhookProblem::Secret(
                "required for a gateway off this host (or VCODE_SMS_WEBHOOK_SECRET_FILE): at least 32 characters (`openssl rand -hex 32`), shared with the gateway, which checks X-Vcode-Signature with it",
            )),
            _ => None,
        }
    }
}

/// Why a URL may not receive a signed request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UrlRefusal {
    /// Not a URL, or neither https nor http.
    NotHttps,
    /// http:// to a host other than this one: anyone on the way reads the body.
    PlainHttp,
}

/// Whether `url` may receive signed requests (https, or http to a loopback host); `Ok` says
/// whether it is on this host. The SMS webhook and the event webhooks check their URLs here.
pub fn check_url(url: &str) -> Result<bool, UrlRefusal> {
    let url = reqwest::Url::parse(url).map_err(|_| UrlRefusal::NotHttps)?;
    let loopback = is_loopback(&url);
    match url.scheme() {
        "https" => Ok(loopback),
        "http" if loopback => Ok(true),
        "http" => Err(UrlRefusal::PlainHttp),
        _ => Err(UrlRefusal::NotHttps),
    }
}

/// What is wrong with the webhook's settings, by the setting to change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WebhookProblem {
    Url(&'static str),
    Secret(&'static str),
}

impl WebhookProblem {
    /// The variable that fixes it.
    pub fn variable(self) -> &'static str {
        match self {
            WebhookProblem::Url(_) => "VCODE_SMS_WEBHOOK_URL",
            WebhookProblem::Secret(_) => "VCODE_SMS_WEBHOOK_SECRET",
        }
    }

    pub fn reason(self) -> &'static str {
        match self {
            WebhookProblem::Url(reason) | WebhookProblem::Secret(reason) => reason,
        }
    }
}

/// `localhost`, 127.0.0.0/8 or `::1`: a gateway on this host, where neither the code nor a
/// forgery crosses a network.
pub fn is_loopback(url: &reqwest::Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `v1=<hex>`: HMAC-SHA-256 under `secret` of the timestamp, a `.`, and the exact body bytes.
/// The timestamp is inside the MAC, so a captured request cannot be replayed with a new one.
pub fn signature(secret: &[u8], timestamp: u64, body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("HMAC takes any key");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1={}", hex::encode(mac.finalize().into_bytes()))
}

pub struct WebhookSender {
    url: String,
    secret: Option<SecretString>,
    texts: Arc<TextTemplates>,
    default_locale: Locale,
    client: ProviderClient,
}

/// The body the gateway receives.
#[derive(Serialize)]
struct WebhookBody<'a> {
    /// Unique per delivery attempt, so a gateway can drop its own retries' duplicates and
    /// replays within the signature's time window.
    message_id: &'a str,
    phone: &'a str,
    purpose: &'a str,
    locale: Option<&'a str>,
    code: &'a str,
    text: String,
    expires_in: u64,
}

impl WebhookSender {
    /// Refuses settings that would send a code in clear or unsigned off this host, whoever
    /// built them (the variables are checked the same way at start-up).
    pub fn new(
        settings: WebhookSettings,
        texts: Arc<TextTemplates>,
        default_locale: Locale,
    ) -> Result<Self, SmsError> {
        if let Some(problem) = settings.problem() {
            let detail = format!("{}: {}", problem.variable(), problem.reason());
            return Err(SmsError::misconfigured(PROVIDER, detail));
        }
        Ok(Self {
            client: ProviderClient::new(PROVIDER, settings.timeout)?,
            url: settings.url,
            secret: settings.secret,
            texts,
            default_locale,
        })
    }

    /// The request for `message`, signed at `timestamp` (Unix seconds) when a secret is set.
    fn request(
        &self,
        message: &SmsMessage<'_>,
        message_id: &str,
        timestamp: u64,
    ) -> PreparedRequest {
        let body = WebhookBody {
            message_id,
            phone: message.phone.as_e164(),
            purpose: message.purpose.as_str(),
            locale: message.locale.map(Locale::as_str),
            code: message.code.expose(),
            text: self.texts.render(message, &self.default_locale),
            expires_in: message.expires_in.as_secs(),
        };
        let body = serde_json::to_vec(&body).expect("the body serialises");
        let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        if let Some(secret) = &self.secret {
            let signed = signature(secret.expose_secret().as_bytes(), timestamp, &body);
            headers.push((TIMESTAMP_HEADER.to_owned(), timestamp.to_string()));
            headers.push((SIGNATURE_HEADER.to_owned(), signed));
        }
        PreparedRequest {
            method: reqwest::Method::POST,
            url: self.url.clone(),
            headers,
            body,
        }
    }
}

#[async_trait]
impl SmsSender for WebhookSender {
    async fn send(&self, message: &SmsMessage<'_>) -> Result<SmsReceipt, SmsError> {
        let message_id = super::nonce();
        let request = self.request(message, &message_id, super::unix_now());
        let answer = self.client.execute(request).await?;
        match answer.status {
            200..=299 => Ok(SmsReceipt {
                provider: PROVIDER,
                message_id: Some(message_id),
            }),
            // Following it would send the code to wherever the answer points.
            300..=399 => Err(SmsError::new(
                PROVIDER,
                SmsErrorKind::Rejected,
                format!("http_{}", answer.status),
                "the gateway answered a redirect, which is not followed: set VCODE_SMS_WEBHOOK_URL to the final URL",
            )),
            _ => Err(classify_status(PROVIDER, &answer)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::domain::{Code, CodeLength, Phone, Purpose, Region};
    use crate::sms::SmsSettings;

    const SECRET: &str = "whsec-0123456789abcdef0123456789abcdef";

    fn settings(url: &str, secret: Option<&str>) -> WebhookSettings {
        WebhookSettings {
            url: url.to_owned(),
            timeout: Duration::from_secs(1),
            secret: secret.map(|s| SecretString::from(s.to_owned())),
        }
    }

    fn parse(vars: &[(&str, &str)]) -> Result<SmsSettings, String> {
        let vars: HashMap<String, String> = [("VCODE_SMS", "webhook")]
            .iter()
            .chain(vars)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        crate::settings::Settings::from_vars(vars)
            .map(|settings| settings.sms)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_signature_is_the_documented_hmac() {
        // Computed with Python's hmac and hashlib, as docs/security-at-rest.md shows.
        assert_eq!(
            signature(SECRET.as_bytes(), 1_700_000_000, br#"{"code":"123456"}"#),
            "v1=952040a1318157361f3e9db52eb2f042a74153a804dd42ca82643451039c608d"
        );
    }

    #[test]
    fn requests_carry_the_timestamp_and_the_signature_of_their_exact_body() {
        let sender = WebhookSender::new(
            settings("https://sms.example/send", Some(SECRET)),
            Arc::new(TextTemplates::default()),
            Locale::default(),
        )
        .unwrap();
        let phone = Phone::parse("+8613800138000", Region::default()).unwrap();
        let code = Code::parse("480213", CodeLength::default()).unwrap();
        let message = SmsMessage {
            phone: &phone,
            purpose: &Purpose::default(),
            code: &code,
            expires_in: Duration::from_secs(300),
            locale: None,
            tenant: None,
        };
        let request = sender.request(&message, "id-1", 1_700_000_123);
        assert_eq!(request.header(TIMESTAMP_HEADER), Some("1700000123"));
        assert_eq!(
            request.header(SIGNATURE_HEADER),
            Some(signature(SECRET.as_bytes(), 1_700_000_123, &request.body).as_str())
        );
        let mut tampered = request.body.clone();
        let at = tampered.iter().position(|b| *b == b'4').unwrap();
        tampered[at] = b'5';
        assert_ne!(
            request.header(SIGNATURE_HEADER),
            Some(signature(SECRET.as_bytes(), 1_700_000_123, &tampered).as_str())
        );
        assert_ne!(
            request.header(SIGNATURE_HEADER),
            Some(signature(SECRET.as_bytes(), 1_700_000_124, &request.body).as_str())
        );
    }

    #[test]
    fn only_a_loopback_gateway_takes_plain_http_or_no_secret() {
        for url in [
            "http://127.0.0.1:9000/sms",
            "http://127.3.2.1/sms",
            "http://localhost:9000/sms",
            "http://[::1]:9000/sms",
            "https://127.0.0.1/sms",
        ] {
            assert_eq!(settings(url, None).problem(), None, "{url}");
            assert_eq!(settings(url, Some(SECRET)).problem(), None, "{url}");
        }
        assert_eq!(
            settings("https://sms.example/send", Some(SECRET)).problem(),
            None
        );
        for url in [
            "http://sms.example/send",
            "http://10.0.0.1/sms",
            "ftp://127.0.0.1/",
        ] {
            assert!(
                matches!(
                    settings(url, Some(SECRET)).problem(),
                    Some(WebhookProblem::Url(_))
                ),
                "{url}"
            );
        }
        assert!(matches!(
            settings("https://sms.example/send", None).problem(),
            Some(WebhookProblem::Secret(_))
        ));
        assert!(matches!(
            settings("https://sms.example/send", Some("short")).problem(),
            Some(WebhookProblem::Secret(_))
        ));
        assert!(
            WebhookSender::new(
                settings("http://sms.example/send", Some(SECRET)),
                Arc::new(TextTemplates::default()),
                Locale::default(),
            )
            .is_err()
        );
    }

    #[test]
    fn start_up_names_the_url_or_the_secret() {
        let url = ("VCODE_SMS_WEBHOOK_URL", "http://sms.example/send");
        let secret = ("VCODE_SMS_WEBHOOK_SECRET", SECRET);
        let error = parse(&[url, secret]).unwrap_err();
        assert!(error.starts_with("VCODE_SMS_WEBHOOK_URL"), "{error}");
        let url = ("VCODE_SMS_WEBHOOK_URL", "https://sms.example/send");
        let error = parse(&[url]).unwrap_err();
        assert!(error.starts_with("VCODE_SMS_WEBHOOK_SECRET"), "{error}");
        let error = parse(&[url, ("VCODE_SMS_WEBHOOK_SECRET", "short-s3cret")]).unwrap_err();
        assert!(error.starts_with("VCODE_SMS_WEBHOOK_SECRET"), "{error}");
        assert!(!error.contains("short-s3cret"), "{error}");
        let settings = parse(&[url, secret]).unwrap();
        let webhook = settings.webhook.as_ref().unwrap();
        assert_eq!(webhook.secret.as_ref().unwrap().expose_secret(), SECRET);
        assert!(!format!("{settings:?}").contains(SECRET));
        let local = parse(&[("VCODE_SMS_WEBHOOK_URL", "http://127.0.0.1:9000/sms")]).unwrap();
        assert!(local.webhook.unwrap().secret.is_none());
    }

    #[test]
    fn the_secret_comes_from_a_file_never_from_the_config_file() {
        let dir = std::env::temp_dir().join(format!("vcode-webhook-{}", std::process::id()));
        std::fs::write(&dir, format!("{SECRET}\n")).unwrap();
        let from_file = parse(&[
            ("VCODE_SMS_WEBHOOK_URL", "https://sms.example/send"),
            ("VCODE_SMS_WEBHOOK_SECRET_FILE", dir.to_str().unwrap()),
        ]);
        std::fs::remove_file(&dir).unwrap();
        let from_file = from_file.unwrap().webhook.unwrap();
        assert_eq!(from_file.secret.unwrap().expose_secret(), SECRET);

        let path = std::env::temp_dir().join(format!("vcode-webhook-{}.toml", std::process::id()));
        std::fs::write(&path, format!("[sms.webhook]\nsecret = \"{SECRET}\"")).unwrap();
        let error = parse(&[
            ("VCODE_SMS_WEBHOOK_URL", "https://sms.example/send"),
            ("VCODE_CONFIG_FILE", path.to_str().unwrap()),
        ])
        .unwrap_err();
        std::fs::remove_file(&path).unwrap();
        assert!(error.contains("sms.webhook.secret"), "{error}");
        assert!(!error.contains(SECRET), "{error}");
    }

    #[test]
    fn the_webhook_variables_are_recognised() {
        let url = ("VCODE_SMS_WEBHOOK_URL", "http://127.0.0.1:9000/sms");
        assert!(parse(&[url, ("VCODE_SMS_WEBHOOK_TIMEOUT_MS", "900")]).is_ok());
        let error = parse(&[url, ("VCODE_SMS_WEBHOOK_SECRETS", SECRET)]).unwrap_err();
        assert_eq!(
            error,
            "unknown variable VCODE_SMS_WEBHOOK_SECRETS: did you mean VCODE_SMS_WEBHOOK_SECRET?"
        );
    }
}
