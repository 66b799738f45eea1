//! SMS delivery behind one trait: `log` for development and `webhook` for a real gateway.

mod log;
mod webhook;

use std::time::Duration;

use async_trait::async_trait;

use crate::domain::{Code, Phone, Purpose};

pub use self::log::LogSender;
pub use self::webhook::WebhookSender;

/// One SMS to deliver.
#[derive(Debug)]
pub struct SmsMessage<'a> {
    pub phone: &'a Phone,
    pub purpose: &'a Purpose,
    pub code: &'a Code,
    pub expires_in: Duration,
}

impl SmsMessage<'_> {
    /// The text a person reads on the phone.
    pub fn text(&self) -> String {
        let minutes = self.expires_in.as_secs().div_ceil(60).max(1);
        format!(
            "Your {} code is {}. It expires in {} minute{}. Do not share it.",
            self.purpose,
            self.code.expose(),
            minutes,
            if minutes == 1 { "" } else { "s" }
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SmsError {
    #[error("SMS gateway unreachable: {0}")]
    Unreachable(String),
    #[error("SMS gateway did not answer within {0:?}")]
    Timeout(Duration),
    #[error("SMS gateway answered HTTP {0}")]
    Rejected(u16),
}

#[async_trait]
pub trait SmsSender: Send + Sync + 'static {
    /// Delivers one message; `Ok` only once the gateway has accepted it.
    async fn send(&self, message: &SmsMessage<'_>) -> Result<(), SmsError>;
}
