//! The development sender: writes the SMS (masked phone, the text with its code) to the log
//! instead of sending it.

use std::sync::Arc;

use async_trait::async_trait;

use super::templates::TextTemplates;
use super::{SmsError, SmsMessage, SmsReceipt, SmsSender};
use crate::domain::Locale;

pub const PROVIDER: &str = "log";

pub struct LogSender {
    texts: Arc<TextTemplates>,
    default_locale: Locale,
}

impl LogSender {
    pub fn new(texts: Arc<TextTemplates>, default_locale: Locale) -> Self {
        tracing::warn!(
            "SMS sender 'log' prints codes to the log instead of sending them: for development \
             only, choose a provider (VCODE_SMS) in production"
        );
        Self {
            texts,
            default_locale,
        }
    }
}

#[async_trait]
impl SmsSender for LogSender {
    async fn send(&self, message: &SmsMessage<'_>) -> Result<SmsReceipt, SmsError> {
        tracing::info!(
            phone = %message.phone,
            purpose = %message.purpose,
            code = message.code.expose(),
            text = %self.texts.render(message, &self.default_locale),
            "SMS (log sender, not delivered)"
        );
        Ok(SmsReceipt {
            provider: PROVIDER,
            message_id: None,
        })
    }
}
