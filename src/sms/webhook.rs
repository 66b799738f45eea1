//! The production sender: an HTTP POST of JSON to a gateway (`VCODE_SMS_WEBHOOK_URL`), bounded
//! by a timeout. Only a 2xx answer counts as delivered.

use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;

use super::{SmsError, SmsMessage, SmsSender};

pub struct WebhookSender {
    client: reqwest::Client,
    url: String,
    timeout: Duration,
}

/// The body the gateway receives.
#[derive(Serialize)]
struct WebhookBody<'a> {
    /// Unique per delivery attempt, so a gateway can drop its own retries' duplicates.
    message_id: String,
    phone: &'a str,
    purpose: &'a str,
    code: &'a str,
    text: String,
    expires_in: u64,
}

impl WebhookSender {
    pub fn new(url: String, timeout: Duration) -> Result<Self, SmsError> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()
            .map_err(|e| SmsError::Unreachable(e.to_string()))?;
        Ok(Self {
            client,
            url,
            timeout,
        })
    }
}

fn message_id() -> String {
    use rand::RngExt;
    let bytes: [u8; 16] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[async_trait]
impl SmsSender for WebhookSender {
    async fn send(&self, message: &SmsMessage<'_>) -> Result<(), SmsError> {
        let body = WebhookBody {
            message_id: message_id(),
            phone: message.phone.as_e164(),
            purpose: message.purpose.as_str(),
            code: message.code.expose(),
            text: message.text(),
            expires_in: message.expires_in.as_secs(),
        };
        let response = self
            .client
            .post(&self.url)
            .json(&body)
            .send()
            .await
            .map_err(|e| {
                if e.is_timeout() {
                    SmsError::Timeout(self.timeout)
                } else {
                    // Without the URL: it may carry a gateway credential.
                    SmsError::Unreachable(e.without_url().to_string())
                }
            })?;
        let status = response.status();
        if status.is_success() {
            Ok(())
        } else {
            Err(SmsError::Rejected(status.as_u16()))
        }
    }
}
