//! The email channel: codes sent by SMTP through a relay. It owns the relay's settings
//! (`settings`), what a mail says (`templates`), the mailer that composes, DKIM-signs and
//! hands a mail over (`mailer`) and how a failed delivery is classified (`error`). The
//! addresses themselves are `domain::EmailAddress`; the OTP use case sends through an
//! [`EmailSender`]: the [`SmtpMailer`], or in dev mode the [`LogMailer`].

mod error;
mod log;
mod mailer;
pub mod settings;
mod templates;

pub use error::{EmailError, EmailErrorKind};
pub use log::LogMailer;
pub use mailer::{EmailMessage, EmailSender, EmailSent, SmtpMailer};
pub use settings::{EmailSettings, EmailVariables, Security, SmtpSettings};
pub use templates::{EmailTemplates, RenderedEmail};
