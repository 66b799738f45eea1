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
use super::throttle::{self, Window};
use super::{SmsError, SmsErrorKind, SmsMessage, SmsReceipt, SmsSender};
use crate::domain::Locale;

pub const PROVIDER: &str = "twilio";
pub const DEFAULT_ENDPOINT: &str = "https://api.twilio.com";

/// Who the message is from: a Twilio number, or a Messaging Service that picks one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TwilioFrom {
    From(String),
    MessagingService(String),
}

#[derive(Clone, Debug)]
pub struct TwilioSettings {
    pub account_sid: String,
    /// `Debug` shows `[REDACTED]`.
    pub auth_token: SecretString,
    pub from: TwilioFrom,
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
        let (sender_field, sender_value) = match &self.settings.from {
            TwilioFrom::From(number) => ("From", number.as_str()),
            TwilioFrom::MessagingService(sid) => ("MessagingServiceSid", sid.as_str()),
        };
        let form = [
            ("To", message.phone.as_e164()),
            (sender_field, sender_value),
            ("Body", text.as_str()),
        ];
        let body = serde_urlencoded::to_string(form).expect("strings encode");
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
                    basic_authorization(
                        &self.settings.account_sid,
                        self.settings.auth_token.expose_secret(),
                    ),
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
    let message = excerpt(&message.unwrap_or_default());
    let window = match code {
        // Too many requests (the account's API concurrency).
        20429 => Some(Window::Second),
        // More than 30 messages between two numbers in 30 s.
        14107 => Some(Window::ThirtySeconds),
        // The account's messages in a rolling 24 hours.
        63038 => Some(Window::Day),
        _ if answer.status == 429 => Some(Window::Minute),
        _ => None,
    };
    if let Some(window) = window {
        return Err(throttle::throttled(
            PROVIDER,
            answer,
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
