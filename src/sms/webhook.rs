//! The bridge sender: an HTTP POST of JSON to the team's own gateway
//! (`VCODE_SMS_WEBHOOK_URL`), bounded by a timeout, no redirects. A 2xx answer is delivered;
//! 429 and 5xx did not take the message; any other status is a settings problem.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;

use super::http::{PreparedRequest, ProviderClient, classify_status};
use super::templates::TextTemplates;
use super::{SmsError, SmsMessage, SmsReceipt, SmsSender};
use crate::domain::Locale;

pub const PROVIDER: &str = "webhook";

#[derive(Clone)]
pub struct WebhookSettings {
    /// May carry a credential (user info, query): `Debug` is written by the settings.
    pub url: String,
    pub timeout: Duration,
}

pub struct WebhookSender {
    url: String,
    texts: Arc<TextTemplates>,
    default_locale: Locale,
    client: ProviderClient,
}

/// The body the gateway receives.
#[derive(Serialize)]
struct WebhookBody<'a> {
    /// Unique per delivery attempt, so a gateway can drop its own retries' duplicates.
    message_id: &'a str,
    phone: &'a str,
    purpose: &'a str,
    locale: Option<&'a str>,
    code: &'a str,
    text: String,
    expires_in: u64,
}

impl WebhookSender {
    pub fn new(
        settings: WebhookSettings,
        texts: Arc<TextTemplates>,
        default_locale: Locale,
    ) -> Result<Self, SmsError> {
        Ok(Self {
            client: ProviderClient::new(PROVIDER, settings.timeout)?,
            url: settings.url,
            texts,
            default_locale,
        })
    }
}

#[async_trait]
impl SmsSender for WebhookSender {
    async fn send(&self, message: &SmsMessage<'_>) -> Result<SmsReceipt, SmsError> {
        let message_id = super::nonce();
        let body = WebhookBody {
            message_id: &message_id,
            phone: message.phone.as_e164(),
            purpose: message.purpose.as_str(),
            locale: message.locale.map(Locale::as_str),
            code: message.code.expose(),
            text: self.texts.render(message, &self.default_locale),
            expires_in: message.expires_in.as_secs(),
        };
        let request = PreparedRequest {
            method: reqwest::Method::POST,
            url: self.url.clone(),
            headers: vec![("content-type".to_owned(), "application/json".to_owned())],
            body: serde_json::to_vec(&body).expect("the body serialises"),
        };
        let answer = self.client.execute(request).await?;
        if (200..300).contains(&answer.status) {
            Ok(SmsReceipt {
                provider: PROVIDER,
                message_id: Some(message_id),
            })
        } else {
            Err(classify_status(PROVIDER, &answer))
        }
    }
}
