//! The SMTP mailer: composes a code's mail (the templates, DKIM-signed), hands it to the relay
//! over lettre's SMTP connection, and classifies the outcome by the stage it failed at.
//!
//! Why lettre's connection and not its `AsyncSmtpTransport`: the transport times out the TCP
//! connect only (a relay that stops answering mid-session holds a send forever) and its errors
//! do not say whether the message had gone, which decides between rolling a send back and
//! keeping it as unconfirmed. So each step here runs under its own timeout, and the session's
//! pool is a short list of idle connections: one is put back only after a mail went through
//! whole, never after a failure or a timeout.

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use lettre::Address;
use lettre::address::Envelope;
use lettre::message::dkim::{
    DkimCanonicalization, DkimCanonicalizationType, DkimConfig, DkimSigningKey,
};
use lettre::message::header::{ContentType, HeaderName};
use lettre::message::{Mailbox, Message, MultiPart, SinglePart};
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{AsyncSmtpConnection, Certificate, TlsParameters};
use lettre::transport::smtp::commands::{Data, Mail, Rcpt};
use lettre::transport::smtp::extension::ClientId;
use rand::RngExt;
use secrecy::ExposeSecret;

use super::error::{EmailError, EmailErrorKind};
use super::settings::{Security, SmtpSettings};
use super::templates::{EmailTemplates, RenderedEmail};
use crate::domain::{Code, EmailAddress, Locale, Purpose};

/// A code's mail, before its wording.
pub struct EmailMessage<'a> {
    pub to: &'a EmailAddress,
    pub purpose: &'a Purpose,
    pub code: &'a Code,
    pub expires_in: Duration,
    /// The request's locale, if it gave one.
    pub locale: Option<&'a Locale>,
    /// The name the mail gives the service, if not `VCODE_EMAIL_SERVICE_NAME`'s (a Twilio
    /// Verify Service's `FriendlyName` or a start's `CustomFriendlyName`).
    pub service_name: Option<&'a str>,
}

/// The relay took the mail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmailSent {
    /// Our `Message-ID`, without its angle brackets.
    pub message_id: String,
    /// The relay's answer to the message (`2.0.0 Ok: queued as 4F2B1`), the address masked.
    pub reply: String,
}

/// Sends codes by email; the OTP use case holds one.
#[async_trait::async_trait]
pub trait EmailSender: Send + Sync {
    async fn send(&self, message: &EmailMessage<'_>) -> Result<EmailSent, EmailError>;
}

/// An idle session older than this is not reused: relays close idle sessions after a few
/// minutes (RFC 5321 4.5.3.2 lets them after 5), and a reuse that meets a closed one costs a
/// round trip.
const MAX_IDLE: Duration = Duration::from_secs(30);

pub struct SmtpMailer {
    settings: SmtpSettings,
    tls: Option<TlsParameters>,
    dkim: Option<DkimConfig>,
    templates: EmailTemplates,
    default_locale: Locale,
    hello: ClientId,
    idle: Mutex<Vec<(AsyncSmtpConnection, Instant)>>,
}

impl SmtpMailer {
    /// A mailer for the relay of `settings`, writing in `default_locale` when a request names
    /// no locale. Fails on TLS parameters or a DKIM key that lettre refuses.
    pub fn new(settings: SmtpSettings, default_locale: Locale) -> Result<Self, String> {
        let mut tls = TlsParameters::builder(settings.host.clone());
        if let Some(pem) = &settings.ca_pem {
            let ca =
                Certificate::from_pem(pem).map_err(|e| format!("VCODE_EMAIL_SMTP_CA_FILE: {e}"))?;
            tls = tls.add_root_certificate(ca);
        }
        let tls = tls
            .build_rustls()
            .map_err(|e| format!("the relay's TLS settings: {e}"))?;
        let dkim = settings
            .dkim
            .as_ref()
            .map(|dkim| {
                let key = DkimSigningKey::new(dkim.key.expose_secret(), dkim.algorithm)
                    .map_err(|e| format!("VCODE_EMAIL_DKIM_KEY_FILE: {e}"))?;
                Ok::<_, String>(DkimConfig::new(
                    dkim.selector.clone(),
                    dkim.domain.clone(),
                    key,
                    SIGNED_HEADERS
                        .iter()
                        .map(|name| HeaderName::new_from_ascii_str(name))
                        .collect(),
                    DkimCanonicalization {
                        header: DkimCanonicalizationType::Relaxed,
                        body: DkimCanonicalizationType::Relaxed,
                    },
                ))
            })
            .transpose()?;
        Ok(Self {
            tls: Some(tls),
            dkim,
            templates: EmailTemplates::default(),
            default_locale,
            hello: ClientId::default(),
            idle: Mutex::new(Vec::with_capacity(settings.pool_size)),
            settings,
        })
    }

    /// The mail's text, for tests and the dev inbox: what [`SmtpMailer::send`] would write.
    pub fn render(&self, message: &EmailMessage<'_>) -> RenderedEmail {
        self.templates.render(
            message.purpose,
            message.code,
            message.expires_in,
            message.locale,
            &self.default_locale,
            message.service_name.unwrap_or(&self.settings.service_name),
        )
    }

    /// The signed message in wire form, and its `Message-ID`.
    fn compose(&self, message: &EmailMessage<'_>) -> Result<(Envelope, Vec<u8>, String), String> {
        let to = Address::new(message.to.local_part(), message.to.domain())
            .map_err(|e| format!("the address: {e}"))?;
        let from = &self.settings.from;
        let id: [u8; 16] = rand::rng().random();
        let message_id = format!("{}@{}", hex::encode(id), from.email.domain());
        let mail = self.render(message);
        let mut email = Message::builder()
            .from(from.clone())
            .to(Mailbox::new(None, to.clone()))
            .subject(mail.subject)
            .message_id(Some(format!("<{message_id}>")))
            .date_now()
            .multipart(
                MultiPart::alternative()
                    .singlepart(
                        SinglePart::builder()
                            .header(ContentType::TEXT_PLAIN)
                            .body(mail.text),
                    )
                    .singlepart(
                        SinglePart::builder()
                            .header(ContentType::TEXT_HTML)
                            .body(mail.html),
                    ),
            )
            .map_err(|e| format!("the message: {e}"))?;
        if let Some(dkim) = &self.dkim {
            email.sign(dkim);
        }
        let envelope = Envelope::new(Some(from.email.clone()), vec![to])
            .map_err(|e| format!("the envelope: {e}"))?;
        Ok((envelope, email.formatted(), message_id))
    }

    /// Connects, secures and authenticates a new session, each under its timeout.
    async fn connect(&self) -> Result<AsyncSmtpConnection, EmailError> {
        let settings = &self.settings;
        let implicit = (settings.security == Security::ImplicitTls)
            .then(|| self.tls.clone())
            .flatten();
        let connect = AsyncSmtpConnection::connect_tokio1(
            (settings.host.as_str(), settings.port),
            Some(settings.connect_timeout),
            &self.hello,
            implicit,
            None,
        );
        let mut connection = tokio::time::timeout(settings.connect_timeout, connect)
            .await
            .map_err(|_| unavailable("timeout", "no session within the connect timeout"))?
            .map_err(|e| before_message("connect", &e))?;
        let wants_tls = match settings.security {
            Security::ImplicitTls => false,
            Security::StartTls => true,
            Security::StartTlsIfOffered => connection.can_starttls(),
        };
        if wants_tls {
            if !connection.can_starttls() {
                return Err(unavailable(
                    "starttls_missing",
                    "the relay offers no STARTTLS, which smtp:// to a host not on loopback \
                     requires (use smtps:// if it takes TLS on connect)",
                ));
            }
            let tls = self.tls.clone().expect("built in new");
            self.step(connection.starttls(tls, &self.hello))
                .await
                .map_err(|e| e.before_message("tls"))?;
        }
        if let Some((user, password)) = settings.password() {
            let credentials = Credentials::new(user.to_owned(), password.to_owned());
            self.step(connection.auth(&[Mechanism::Plain, Mechanism::Login], &credentials))
                .await
                .map_err(|e| e.before_message("auth"))?;
        }
        Ok(connection)
    }

    /// `future` under the command timeout.
    async fn step<T>(
        &self,
        future: impl Future<Output = Result<T, lettre::transport::smtp::Error>>,
    ) -> Result<T, StepError> {
        match tokio::time::timeout(self.settings.command_timeout, future).await {
            Err(_) => Err(StepError::Timeout),
            Ok(result) => result.map_err(StepError::Smtp),
        }
    }

    /// One mail on `connection`: MAIL, RCPT and DATA, then the message and its answer.
    async fn transact(
        &self,
        connection: &mut AsyncSmtpConnection,
        envelope: &Envelope,
        bytes: &[u8],
    ) -> Result<String, Stage> {
        let before = Stage::BeforeMessage;
        self.step(connection.command(Mail::new(envelope.from().cloned(), vec![])))
            .await
            .map_err(before)?;
        for to in envelope.to() {
            self.step(connection.command(Rcpt::new(to.clone(), vec![])))
                .await
                .map_err(before)?;
        }
        self.step(connection.command(Data)).await.map_err(before)?;
        // From here the relay may have the whole message: silence is not a refusal.
        let reply = self
            .step(connection.message(bytes))
            .await
            .map_err(Stage::AfterMessage)?;
        Ok(reply.message().collect::<Vec<_>>().join(" "))
    }

    fn idle(&self) -> MutexGuard<'_, Vec<(AsyncSmtpConnection, Instant)>> {
        self.idle
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn take_idle(&self) -> Option<AsyncSmtpConnection> {
        let mut idle = self.idle();
        while let Some((connection, since)) = idle.pop() {
            if since.elapsed() < MAX_IDLE && !connection.has_broken() {
                return Some(connection);
            }
        }
        None
    }

    fn put_back(&self, connection: AsyncSmtpConnection) {
        let mut idle = self.idle();
        if idle.len() < self.settings.pool_size {
            idle.push((connection, Instant::now()));
        }
    }
}

/// Headers the DKIM signature covers: all a reader sees. Not `Content-Type`: lettre writes a
/// multipart's type with the body, after signing, so a signature over it never verifies (the
/// body hash covers the parts, their types included).
const SIGNED_HEADERS: [&str; 6] = [
    "From",
    "To",
    "Subject",
    "Date",
    "Message-ID",
    "MIME-Version",
];

#[async_trait::async_trait]
impl EmailSender for SmtpMailer {
    async fn send(&self, message: &EmailMessage<'_>) -> Result<EmailSent, EmailError> {
        let (envelope, bytes, message_id) = self
            .compose(message)
            .map_err(|detail| EmailError::new(EmailErrorKind::Refused, "compose", detail))?;
        let mask = |text: String| mask_address(&text, message.to);
        // A pooled session the relay has closed meanwhile fails before the message: then once
        // more on a new one.
        let mut pooled = self.take_idle();
        loop {
            let reused = pooled.is_some();
            let mut connection = match pooled.take() {
                Some(connection) => connection,
                None => self.connect().await.map_err(|e| e.masked(message.to))?,
            };
            match self.transact(&mut connection, &envelope, &bytes).await {
                Ok(reply) => {
                    self.put_back(connection);
                    return Ok(EmailSent {
                        message_id,
                        reply: mask(reply),
                    });
                }
                Err(Stage::BeforeMessage(StepError::Smtp(e))) if reused && e.status().is_none() => {
                }
                Err(Stage::BeforeMessage(e)) => {
                    return Err(e.before_message("send").masked(message.to));
                }
                Err(Stage::AfterMessage(e)) => {
                    return Err(e.after_message().masked(message.to));
                }
            }
        }
    }
}

/// Where a mail's session failed.
enum Stage {
    /// Before the message's last line went: nothing was handed over.
    BeforeMessage(StepError),
    /// While or after the message went.
    AfterMessage(StepError),
}

enum StepError {
    Timeout,
    Smtp(lettre::transport::smtp::Error),
}

impl StepError {
    /// Nothing was handed over: a `5xx` is a refusal, anything else the relay unavailable.
    fn before_message(self, step: &str) -> EmailError {
        match self {
            Self::Timeout => unavailable("timeout", format!("no answer to {step} in time")),
            Self::Smtp(e) => before_message(step, &e),
        }
    }

    /// The message went: a `5xx` or `4xx` answer says it was not taken; silence or a cut
    /// connection says nothing.
    fn after_message(self) -> EmailError {
        match self {
            Self::Smtp(e) if e.status().is_some() => before_message("the message", &e),
            Self::Smtp(e) => EmailError::new(
                EmailErrorKind::Unconfirmed,
                "dropped",
                format!("the connection failed after the message was sent: {e}"),
            ),
            Self::Timeout => EmailError::new(
                EmailErrorKind::Unconfirmed,
                "timeout",
                "no answer to the message within the command timeout",
            ),
        }
    }
}

fn unavailable(code: &str, detail: impl Into<String>) -> EmailError {
    EmailError::new(EmailErrorKind::Unavailable, code, detail)
}

/// A lettre error at `step`, before the message went.
fn before_message(step: &str, error: &lettre::transport::smtp::Error) -> EmailError {
    let detail = format!("{step}: {error}");
    match error.status() {
        Some(code) if error.is_permanent() => {
            EmailError::new(EmailErrorKind::Refused, format!("smtp_{code}"), detail)
        }
        Some(code) => unavailable(&format!("smtp_{code}"), detail),
        None if error.is_tls() => unavailable("tls", detail),
        None => unavailable(step, detail),
    }
}

impl EmailError {
    /// This error with `to` masked wherever the relay's words repeat it.
    fn masked(self, to: &EmailAddress) -> Self {
        let detail = mask_address(self.detail(), to);
        Self::new(self.kind(), self.code().to_owned(), detail)
    }
}

/// `text` with `to` (in any case) replaced by its masked form: relays quote the recipient in
/// their answers, and errors and replies reach logs.
fn mask_address(text: &str, to: &EmailAddress) -> String {
    let folded_text = text.to_ascii_lowercase();
    let folded = to.folded();
    let mut out = String::with_capacity(text.len());
    let mut rest = 0;
    for (start, _) in folded_text.match_indices(&folded) {
        out.push_str(&text[rest..start]);
        out.push_str(&to.masked());
        rest = start + folded.len();
    }
    out.push_str(&text[rest..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relay_answers_are_logged_with_the_address_masked() {
        let to = EmailAddress::parse("John.Doe@example.com").unwrap();
        assert_eq!(
            mask_address(
                "550 5.1.1 <john.doe@EXAMPLE.com>: unknown; John.Doe@example.com",
                &to
            ),
            "550 5.1.1 <J***@example.com>: unknown; J***@example.com"
        );
        assert_eq!(mask_address("250 ok", &to), "250 ok");
    }

    #[test]
    fn only_definite_failures_roll_a_send_back() {
        assert!(EmailErrorKind::Refused.is_definite());
        assert!(EmailErrorKind::Unavailable.is_definite());
        assert!(!EmailErrorKind::Unconfirmed.is_definite());
    }
}
