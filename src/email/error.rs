//! Why a code's email was not delivered, classified once by the mailer from the stage the SMTP
//! session failed at, as SMS failures are (`SmsErrorKind`): the OTP use case rolls a send back
//! on a definite failure and keeps the code as sent on an unconfirmed one.

use std::fmt;

/// What a failure means for the send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EmailErrorKind {
    /// The relay answered `5xx` (the address, the sender or the message refused): the mail
    /// was not taken and will not be on a retry. Definite: the send is rolled back.
    Refused,
    /// The relay could not be reached or did not take the mail: no connection, TLS or AUTH
    /// failed, STARTTLS not offered where required, a `4xx`, or no answer before the message
    /// was sent. Definite (nothing was handed over): the send is rolled back; a retry may pass.
    Unavailable,
    /// The whole message was sent but its answer never came (timeout, connection cut): it may
    /// have been queued, so the code is kept as sent (`delivery` `unconfirmed`), like an SMS.
    Unconfirmed,
}

impl EmailErrorKind {
    /// Whether the mail certainly did not go: the caller undoes the send.
    pub fn is_definite(self) -> bool {
        self != Self::Unconfirmed
    }

    /// A metric label for an attempt that failed this way.
    pub fn metric_label(self) -> &'static str {
        match self {
            Self::Refused => "refused",
            Self::Unavailable => "unavailable",
            Self::Unconfirmed => "unconfirmed",
        }
    }
}

/// One failed delivery. Its text never holds the code, a password or the whole recipient
/// address: the relay's own words are kept with the address masked.
#[derive(Clone, Debug)]
pub struct EmailError {
    kind: EmailErrorKind,
    /// The SMTP reply code (`smtp_550`) or our word for the failure (`timeout`, `connect`,
    /// `tls`, `starttls_missing`, `dropped`).
    code: String,
    detail: String,
}

impl EmailError {
    pub fn new(kind: EmailErrorKind, code: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind,
            code: code.into(),
            detail: detail.into(),
        }
    }

    pub fn kind(&self) -> EmailErrorKind {
        self.kind
    }

    pub fn code(&self) -> &str {
        &self.code
    }

    pub fn detail(&self) -> &str {
        &self.detail
    }
}

impl fmt::Display for EmailError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SMTP relay failed ({:?}): {}: {}",
            self.kind, self.code, self.detail
        )
    }
}

impl std::error::Error for EmailError {}
