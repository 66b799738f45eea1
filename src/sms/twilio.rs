//! Twilio Programmable Messaging (`POST /2010-04-01/Accounts/{sid}/Messages.json`): a form
//! with `To`, `From` (or `MessagingServiceSid`) and `Body`, HTTP Basic auth with the account
//! SID and auth token, as `twilio.rest.Client` sends it. The text comes from the configured
//! texts per purpose and locale.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::http::{HttpAnswer, PreparedRequest, ProviderClient, classify_status, excerpt};
use super::templates::TextTemplates;
use super::{SmsError, SmsErrorKind, SmsMessage, SmsReceipt, SmsSender};
use crate::domain::Locale;

pub const PROVIDER: &str = "twilio";
pub const DEFAULT_ENDPOINT: &str = "https://api.twilio.com";

/// How requests authenticate: the account's auth token, or an API key (`SK…`), which Twilio
/// recommends in production; either way the account SID is in the path.
#[derive(Clone, Debug)]
pub enum TwilioAuth {
    /// `Debug` shows `[REDACTED]`.
    AuthToken(SecretString),
    ApiKey {
        sid: String,
        secret: SecretString,
    },
}

#[derive(Clone, Debug)]
pub struct TwilioSettings {
    pub account_sid: String,
    pub auth: TwilioAuth,
    /// A Twilio number or sender id; with a Messaging Service, the sender it picks within it.
    pub from: Option<String>,
    /// A Messaging Service (`MG…`) that picks the sender (and its pool's features).
    pub messaging_service_sid: Option<String>,
    pub endpoint: String,
    pub timeout: Duration,
}

pub struct TwilioSmsSender {
    settings: TwilioSettings,
    texts: Arc<TextTemplates>,
    default_locale: Locale,
    client: ProviderClient,
}

impl TwilioSmsSender {
    pub fn new(
        settings: TwilioSettings,
        texts: Arc<TextTemplates>,
        default_locale: Locale,
    ) -> Result<Self, SmsError> {
        let client = ProviderClient::new(PROVIDER, settings.timeout)?;
        Ok(Self {
            settings,
            texts,
            default_locale,
            client,
        })
    }

    /// The request for `message`: a pure function (see `aliyun`).
    pub fn build_request(&self, message: &SmsMessage<'_>) -> PreparedRequest {
        let text = self.texts.render(message, &self.default_locale);
        // In twilio-python's order: To, From, MessagingServiceSid, Body.
        let form = [
            Some(("To", message.phone.as_e164())),
            self.settings.from.as_deref().map(|from| ("From", from)),
            (self.settings.messaging_service_sid.as_deref())
                .map(|sid| ("MessagingServiceSid", sid)),
            Some(("Body", text.as_str())),
        ];
        let body = serde_urlencoded::to_string(form.iter().flatten().collect::<Vec<_>>())
            .expect("strings encode");
        let (user, password) = match &self.settings.auth {
            TwilioAuth::AuthToken(token) => (self.settings.account_sid.as_str(), token),
            TwilioAuth::ApiKey { sid, secret } => (sid.as_str(), secret),
        };
        PreparedRequest {
            method: reqwest::Method::POST,
            url: format!(
                "{}/2010-04-01/Accounts/{}/Messages.json",
                self.settings.endpoint.trim_end_matches('/'),
                self.settings.account_sid
            ),
            headers: vec![
                (
                    "authorization".to_owned(),
                    basic_authorization(user, password.expose_secret()),
                ),
                (
                    "content-type".to_owned(),
                    "application/x-www-form-urlencoded".to_owned(),
                ),
                ("accept".to_owned(), "application/json".to_owned()),
            ],
            body: body.into_bytes(),
        }
    }
}

pub fn basic_authorization(user: &str, password: &str) -> String {
    let credentials =
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {credentials}")
}

#[derive(Deserialize)]
struct Answer {
    sid: Option<String>,
    code: Option<u32>,
    message: Option<String>,
}

/// Delivered (with the message `sid`) or why not: errors carry Twilio's numeric code.
pub fn classify(answer: &HttpAnswer) -> Result<Option<String>, SmsError> {
    let parsed = serde_json::from_str::<Answer>(&answer.body).ok();
    if (200..300).contains(&answer.status) {
        return Ok(parsed.and_then(|a| a.sid));
    }
    let Some(Answer {
        code: Some(code),
        message,
        ..
    }) = parsed
    else {
        return Err(classify_status(PROVIDER, answer));
    };
    let kind = match code {
        // Invalid 'To', not a mobile number, not a valid number, unsubscribed recipient.
        21211 | 21614 | 21217 | 21401 | 21610 => SmsErrorKind::InvalidNumber,
        // Too many requests, queue overflow, rate limit, service unavailable.
        20429 | 14107 | 30001 | 20500 | 20503 => SmsErrorKind::Retryable,
        _ if answer.status == 429 || answer.status >= 500 => SmsErrorKind::Retryable,
        // Authentication (20003), 'From' numbers, geo permissions (21408), trial limits (21608).
        _ => SmsErrorKind::Rejected,
    };
    Err(SmsError::new(
        PROVIDER,
        kind,
        code.to_string(),
        excerpt(&message.unwrap_or_default()),
    ))
}

#[async_trait]
impl SmsSender for TwilioSmsSender {
    async fn send(&self, message: &SmsMessage<'_>) -> Result<SmsReceipt, SmsError> {
        let answer = self.client.execute(self.build_request(message)).await?;
        let message_id = classify(&answer)?;
        Ok(SmsReceipt {
            provider: PROVIDER,
            message_id,
        })
    }
}
