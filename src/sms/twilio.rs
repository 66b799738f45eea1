//! Twilio Programmable Messaging (`POST /2010-04-01/Accounts/{sid}/Messages.json`): a form
//! with `To`, `From` and/or `MessagingServiceSid`, and `Body`, HTTP Basic auth with the account
//! SID and auth token or with an API key's SID and secret (the account SID still in the path),
//! as `twilio.rest.Client` sends it. The text comes from the configured texts per purpose and
//! locale.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::http::{HttpAnswer, PreparedRequest, ProviderClient, classify_status, excerpt};
use super::templates::TextTemplates;
use super::throttle::{self, ThrottleWindow};
use super::{SmsError, SmsErrorKind, SmsMessage, SmsReceipt, SmsSender};
use crate::domain::Locale;

pub const PROVIDER: &str = "twilio";
pub const DEFAULT_ENDPOINT: &str = "https://api.twilio.com";

/// The HTTP Basic credential; `Debug` shows secrets as `[REDACTED]`.
#[derive(Clone, Debug)]
pub enum TwilioAuth {
    /// The account SID and its auth token.
    AuthToken(SecretString),
    /// An API key (`SK…`) and its secret: Twilio's advice for production, as a key can be
    /// revoked alone and the auth token stays off the servers.
    ApiKey { sid: String, secret: SecretString },
}

#[derive(Clone, Debug)]
pub struct TwilioSettings {
    /// `AC…`, in the path whichever credential signs.
    pub account_sid: String,
    pub auth: TwilioAuth,
    /// `From`: a Twilio number or an alphanumeric sender id.
    pub from: Option<String>,
    /// `MessagingServiceSid` (`MG…`): the service sends, from `from` when that is set too (one
    /// of its senders), else from a sender it picks. At least one of the two is set.
    pub messaging_service_sid: Option<String>,
    pub endpoint: String,
    pub timeout: Duration,
    /// `StatusCallback`: where Twilio posts the message's delivery receipts (vcode's receipt
    /// route, when `VCODE_SMS_RECEIPTS_URL` is set).
    pub status_callback: Option<String>,
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
        if settings.from.is_none() && settings.messaging_service_sid.is_none() {
            return Err(SmsError::misconfigured(
                PROVIDER,
                "no sender: set a From number or a Messaging Service SID",
            ));
        }
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
        let settings = &self.settings;
        let form: Vec<(&str, &str)> = [
            ("To", Some(message.phone.as_e164())),
            ("From", settings.from.as_deref()),
            (
                "MessagingServiceSid",
                settings.messaging_service_sid.as_deref(),
            ),
            ("Body", Some(text.as_str())),
            ("StatusCallback", settings.status_callback.as_deref()),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some((name, value?)))
        .collect();
        let body = serde_urlencoded::to_string(form).expect("strings encode");
        let authorization = match &settings.auth {
            TwilioAuth::AuthToken(token) => {
                basic_authorization(&settings.account_sid, token.expose_secret())
            }
            TwilioAuth::ApiKey { sid, secret } => basic_authorization(sid, secret.expose_secret()),
        };
        PreparedRequest {
            method: reqwest::Method::POST,
            url: format!(
                "{}/2010-04-01/Accounts/{}/Messages.json",
                self.settings.endpoint.trim_end_matches('/'),
                self.settings.account_sid
            ),
            headers: vec![
                ("authorization".to_owned(), authorization),
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
    let message = excerpt(&message.unwrap_or_default());
    let window = match code {
        // Too many requests (the account's API concurrency).
        20429 => Some(ThrottleWindow::Second),
        // More than 30 messages between two numbers in 30 s.
        14107 => Some(ThrottleWindow::ThirtySeconds),
        // The account's messages in a rolling 24 hours.
        63038 => Some(ThrottleWindow::Day),
        _ if answer.status == 429 => Some(ThrottleWindow::Minute),
        _ => None,
    };
    if let Some(window) = window {
        return Err(throttle::throttled(
            PROVIDER,
            answer.retry_after,
            code.to_string(),
            message,
            window,
        ));
    }
    let kind = match code {
        // Invalid 'To', not a mobile number, not a valid number, unsubscribed recipient.
        21211 | 21614 | 21217 | 21401 | 21610 => SmsErrorKind::InvalidNumber,
        // Queue overflow, internal error, service unavailable.
        30001 | 20500 | 20503 => SmsErrorKind::Retryable,
        _ if answer.status >= 500 => SmsErrorKind::Retryable,
        // Authentication (20003), 'From' numbers, geo permissions (21408), trial limits (21608).
        _ => SmsErrorKind::Rejected,
    };
    Err(SmsError::new(PROVIDER, kind, code.to_string(), message))
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
