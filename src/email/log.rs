//! The dev-mode mail sender: writes each code's mail to the log instead of a relay, as SMS's
//! `log` provider does, so that a developer (and the dev inbox, which the OTP use case feeds
//! for every send) sees the code without a mail server. Never built outside dev mode.

use async_trait::async_trait;

use super::error::EmailError;
use super::mailer::{EmailMessage, EmailSender, EmailSent};
use super::templates::EmailTemplates;
use crate::domain::Locale;

pub struct LogMailer {
    templates: EmailTemplates,
    default_locale: Locale,
}

impl LogMailer {
    pub fn new(default_locale: Locale) -> Self {
        tracing::warn!(
            "email sender 'log' prints codes to the log instead of mailing them: dev mode only; \
             set VCODE_EMAIL_SMTP_URL to mail them"
        );
        Self {
            templates: EmailTemplates::default(),
            default_locale,
        }
    }
}

#[async_trait]
impl EmailSender for LogMailer {
    async fn send(&self, message: &EmailMessage<'_>) -> Result<EmailSent, EmailError> {
        let rendered = self.templates.render(
            message.purpose,
            message.code,
            message.expires_in,
            message.locale,
            &self.default_locale,
            message.service_name.unwrap_or("vcode"),
        );
        tracing::info!(
            to = %message.to,
            purpose = %message.purpose,
            code = message.code.expose(),
            subject = %rendered.subject,
            "email (log sender, not delivered)"
        );
        Ok(EmailSent {
            message_id: "log".to_owned(),
            reply: "not sent: log sender".to_owned(),
        })
    }
}
