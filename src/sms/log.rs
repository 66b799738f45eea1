//! The development sender: writes the SMS (masked phone, the code) to the log instead of
//! sending it.

use async_trait::async_trait;

use super::{SmsError, SmsMessage, SmsSender};

#[derive(Debug, Default)]
pub struct LogSender;

impl LogSender {
    pub fn new() -> Self {
        tracing::warn!(
            "SMS sender 'log' prints codes to the log instead of sending them: for development \
             only, set VCODE_SMS=webhook in production"
        );
        Self
    }
}

#[async_trait]
impl SmsSender for LogSender {
    async fn send(&self, message: &SmsMessage<'_>) -> Result<(), SmsError> {
        tracing::info!(
            phone = %message.phone,
            purpose = %message.purpose,
            code = message.code.expose(),
            "SMS (log sender, not delivered)"
        );
        Ok(())
    }
}
