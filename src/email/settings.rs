//! The email channel's settings (`VCODE_EMAIL_*`): the SMTP relay (`VCODE_EMAIL_SMTP_URL`,
//! its password, a private CA), the sender, the name the mail shows, DKIM signing, the
//! timeouts and the pool. Read and checked at start-up like every setting (a DKIM key that
//! does not parse stops it); without `VCODE_EMAIL_SMTP_URL` the channel is off.

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use base64::Engine as _;
use lettre::message::Mailbox;
use lettre::message::dkim::DkimSigningAlgorithm;
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};

use crate::config::error::ConfigError;
use crate::config::redact::{REDACTED, redact_url};
use crate::config::secret::{Secret, SecretVariable};
use crate::config::text::{Millis, OptionalText, Whole};

/// The relay's password when the URL holds none (a URL may also come from
/// `VCODE_EMAIL_SMTP_URL_FILE`).
pub const SMTP_PASSWORD: SecretVariable = SecretVariable::new(
    "VCODE_EMAIL_SMTP_PASSWORD",
    "VCODE_EMAIL_SMTP_PASSWORD_FILE",
);

/// The variables as given; [`EmailVariables::settings`] checks them into [`EmailSettings`].
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default)]
pub struct EmailVariables {
    /// `smtps://user@host:465` or `smtp://user@host:587` (STARTTLS); unset: no email channel.
    #[serde(rename = "VCODE_EMAIL_SMTP_URL", with = "OptionalText")]
    smtp_url: Option<String>,
    /// A PEM file of CA certificates the relay's certificate may chain to, beside the public
    /// roots (a relay with a private CA).
    #[serde(rename = "VCODE_EMAIL_SMTP_CA_FILE", with = "OptionalText")]
    ca_file: Option<String>,
    /// The sender: `no-reply@example.com` or `Example <no-reply@example.com>`.
    #[serde(rename = "VCODE_EMAIL_FROM", with = "OptionalText")]
    from: Option<String>,
    /// The name the mail calls the service by; unset: the sender's name, else its domain.
    #[serde(rename = "VCODE_EMAIL_SERVICE_NAME", with = "OptionalText")]
    service_name: Option<String>,
    /// A PEM private key (RSA, PKCS#1 or PKCS#8, or Ed25519, PKCS#8) that signs every mail.
    #[serde(rename = "VCODE_EMAIL_DKIM_KEY_FILE", with = "OptionalText")]
    dkim_key_file: Option<String>,
    /// The DNS name of the key: its record is at `SELECTOR._domainkey.DOMAIN`.
    #[serde(rename = "VCODE_EMAIL_DKIM_SELECTOR", with = "OptionalText")]
    dkim_selector: Option<String>,
    /// The signing domain (`d=`); unset: the sender's domain.
    #[serde(rename = "VCODE_EMAIL_DKIM_DOMAIN", with = "OptionalText")]
    dkim_domain: Option<String>,
    /// TCP connect, TLS handshake, the greeting and EHLO, together.
    #[serde(
        rename = "VCODE_EMAIL_CONNECT_TIMEOUT_MS",
        with = "Millis::<100, 60_000>"
    )]
    connect_timeout: Duration,
    /// Each command after that (STARTTLS, AUTH, MAIL, RCPT, DATA, the message's end).
    #[serde(
        rename = "VCODE_EMAIL_COMMAND_TIMEOUT_MS",
        with = "Millis::<100, 120_000>"
    )]
    command_timeout: Duration,
    /// Open sessions kept for the next mail; 0 opens one per mail.
    #[serde(rename = "VCODE_EMAIL_POOL_SIZE", with = "Whole::<0, 64>")]
    pool_size: usize,
}

impl Default for EmailVariables {
    fn default() -> Self {
        Self {
            smtp_url: None,
            ca_file: None,
            from: None,
            service_name: None,
            dkim_key_file: None,
            dkim_selector: None,
            dkim_domain: None,
            connect_timeout: Duration::from_secs(5),
            command_timeout: Duration::from_secs(10),
            pool_size: 4,
        }
    }
}

/// The email channel, checked: `None` when `VCODE_EMAIL_SMTP_URL` is unset.
#[derive(Clone, Debug, Default)]
pub struct EmailSettings {
    pub smtp: Option<SmtpSettings>,
}

/// How the session is encrypted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Security {
    /// `smtps://`: TLS from the first byte (port 465).
    ImplicitTls,
    /// `smtp://` to another host: STARTTLS or no mail.
    StartTls,
    /// `smtp://` to a loopback relay: STARTTLS where offered, else plain text (a local MTA).
    StartTlsIfOffered,
}

#[derive(Clone)]
pub struct SmtpSettings {
    pub host: String,
    pub port: u16,
    pub security: Security,
    /// User name and password.
    pub credentials: Option<(String, Secret)>,
    /// PEM CA certificates beside the public roots.
    pub ca_pem: Option<Vec<u8>>,
    pub from: Mailbox,
    pub service_name: String,
    pub dkim: Option<DkimSettings>,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
    pub pool_size: usize,
    /// The URL with its password hidden, for logs and errors.
    pub shown_url: String,
}

/// DKIM signing: the key in the form lettre reads (PKCS#1 PEM for RSA, base64 of the 32-byte
/// seed for Ed25519), its selector and domain.
#[derive(Clone)]
pub struct DkimSettings {
    pub selector: String,
    pub domain: String,
    pub algorithm: DkimSigningAlgorithm,
    pub key: Secret,
}

impl fmt::Debug for SmtpSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SmtpSettings")
            .field("url", &self.shown_url)
            .field("security", &self.security)
            .field("user", &self.credentials.as_ref().map(|(user, _)| user))
            .field("from", &self.from.to_string())
            .field("service_name", &self.service_name)
            .field("dkim", &self.dkim)
            .field("connect_timeout", &self.connect_timeout)
            .field("command_timeout", &self.command_timeout)
            .field("pool_size", &self.pool_size)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for DkimSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DkimSettings")
            .field("selector", &self.selector)
            .field("domain", &self.domain)
            .field("algorithm", &self.algorithm)
            .field("key", &REDACTED)
            .finish()
    }
}

const URL: &str = "VCODE_EMAIL_SMTP_URL";
const FROM: &str = "VCODE_EMAIL_FROM";
const DKIM_KEY_FILE: &str = "VCODE_EMAIL_DKIM_KEY_FILE";
const DKIM_SELECTOR: &str = "VCODE_EMAIL_DKIM_SELECTOR";
const DKIM_DOMAIN: &str = "VCODE_EMAIL_DKIM_DOMAIN";

impl EmailVariables {
    /// The checked settings; `password` is [`SMTP_PASSWORD`]'s.
    pub fn settings(self, password: Option<Secret>) -> Result<EmailSettings, ConfigError> {
        let Some(raw_url) = self.smtp_url.clone() else {
            let stray = [
                (FROM, self.from.is_some()),
                (DKIM_KEY_FILE, self.dkim_key_file.is_some()),
                (SMTP_PASSWORD.name, password.is_some()),
            ];
            if let Some((name, _)) = stray.iter().find(|(_, set)| *set) {
                return Err(ConfigError::Inconsistent(format!(
                    "{name} is only read beside {URL}: set the relay, or unset {name}"
                )));
            }
            return Ok(EmailSettings::default());
        };
        let shown_url = redact_url(&raw_url);
        let invalid = |reason: String| ConfigError::invalid(URL, shown_url.clone(), reason);
        let url = url::Url::parse(&raw_url).map_err(|e| invalid(e.to_string()))?;
        let (security, default_port) = match url.scheme() {
            "smtps" => (Security::ImplicitTls, 465),
            "smtp" => (Security::StartTls, 587),
            _ => return Err(invalid("expected smtps://host or smtp://host".to_owned())),
        };
        let host = match url.host() {
            Some(url::Host::Domain(name)) => name.to_owned(),
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            None => return Err(invalid("expected a host".to_owned())),
        };
        if !matches!(url.path(), "" | "/") || url.query().is_some() || url.fragment().is_some() {
            return Err(invalid(
                "expected no path, query or fragment: scheme, user, password, host and port only"
                    .to_owned(),
            ));
        }
        let security = match security {
            Security::StartTls if is_loopback(&host) => Security::StartTlsIfOffered,
            other => other,
        };
        let credentials = credentials(&url, password, &invalid)?;
        let ca_pem = self
            .ca_file
            .as_deref()
            .map(|path| read_file("VCODE_EMAIL_SMTP_CA_FILE", path))
            .transpose()?;
        let from = self.sender()?;
        let service_name = self
            .service_name
            .clone()
            .or_else(|| from.name.clone())
            .unwrap_or_else(|| from.email.domain().to_owned());
        let dkim = self.dkim(&from)?;
        Ok(EmailSettings {
            smtp: Some(SmtpSettings {
                host,
                port: url.port().unwrap_or(default_port),
                security,
                credentials,
                ca_pem,
                from,
                service_name,
                dkim,
                connect_timeout: self.connect_timeout,
                command_timeout: self.command_timeout,
                pool_size: self.pool_size,
                shown_url,
            }),
        })
    }

    /// `VCODE_EMAIL_FROM`, required with a relay; its name (if any) is the operator's text, and
    /// lettre writes it as an encoded phrase.
    fn sender(&self) -> Result<Mailbox, ConfigError> {
        let raw = self.from.as_deref().ok_or_else(|| {
            ConfigError::Inconsistent(format!(
                "{URL} needs {FROM}: the sender, no-reply@example.com or Name <no-reply@example.com>"
            ))
        })?;
        if raw.chars().any(char::is_control) {
            return Err(ConfigError::invalid(FROM, raw, "no control characters"));
        }
        raw.parse::<Mailbox>().map_err(|e| {
            ConfigError::invalid(
                FROM,
                raw,
                format!("{e}: expected no-reply@example.com or Name <no-reply@example.com>"),
            )
        })
    }

    /// The DKIM key, selector and domain: all or none (the domain defaults to the sender's).
    fn dkim(&self, from: &Mailbox) -> Result<Option<DkimSettings>, ConfigError> {
        let (path, selector) = match (&self.dkim_key_file, &self.dkim_selector) {
            (None, None) if self.dkim_domain.is_none() => return Ok(None),
            (Some(path), Some(selector)) => (path, selector),
            _ => {
                return Err(ConfigError::Inconsistent(format!(
                    "DKIM signing needs {DKIM_KEY_FILE} and {DKIM_SELECTOR} ({DKIM_DOMAIN} defaults to {FROM}'s domain)"
                )));
            }
        };
        let label_ok = |text: &str| {
            !text.is_empty()
                && text.split('.').all(|label| {
                    !label.is_empty()
                        && label.len() <= 63
                        && label
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                })
        };
        if !label_ok(selector) {
            return Err(ConfigError::invalid(
                DKIM_SELECTOR,
                selector.as_str(),
                "expected a DNS label such as vcode2025",
            ));
        }
        let domain = match &self.dkim_domain {
            Some(domain) => domain.to_ascii_lowercase(),
            None => from.email.domain().to_ascii_lowercase(),
        };
        if !label_ok(&domain) {
            return Err(ConfigError::invalid(
                DKIM_DOMAIN,
                domain.as_str(),
                "expected a domain name in ASCII (A-labels)",
            ));
        }
        let pem = read_file(DKIM_KEY_FILE, path)?;
        let pem = String::from_utf8(pem)
            .map_err(|_| ConfigError::invalid(DKIM_KEY_FILE, path.as_str(), "not a PEM file"))?;
        let (algorithm, key) = dkim_key(&pem)
            .map_err(|reason| ConfigError::invalid(DKIM_KEY_FILE, path.as_str(), reason))?;
        Ok(Some(DkimSettings {
            selector: selector.clone(),
            domain,
            algorithm,
            key,
        }))
    }
}

/// The user name (and password, percent-decoded) of the URL, or the password from
/// [`SMTP_PASSWORD`]: not both.
fn credentials(
    url: &url::Url,
    password: Option<Secret>,
    invalid: &dyn Fn(String) -> ConfigError,
) -> Result<Option<(String, Secret)>, ConfigError> {
    let decode = |text: &str| {
        percent_encoding::percent_decode_str(text)
            .decode_utf8()
            .map(|text| text.into_owned())
            .map_err(|_| invalid("the user info is not UTF-8 once decoded".to_owned()))
    };
    let user = decode(url.username())?;
    let in_url = url.password().map(decode).transpose()?;
    match (user.is_empty(), in_url, password) {
        (true, None, None) => Ok(None),
        (false, Some(_), Some(_)) => Err(ConfigError::Inconsistent(format!(
            "the relay's password is in {URL} and in {}: give it once",
            SMTP_PASSWORD.name
        ))),
        (false, Some(in_url), None) => Ok(Some((user, Secret::from(in_url)))),
        (false, None, Some(password)) => Ok(Some((user, password))),
        (false, None, None) => Err(invalid(format!(
            "a user without a password: put it in the URL or in {}",
            SMTP_PASSWORD.name
        ))),
        (true, _, _) => Err(invalid(format!(
            "a password without a user: write smtps://USER@host with {}",
            SMTP_PASSWORD.name
        ))),
    }
}

/// `localhost` or a loopback address: the one place an SMTP session may go unencrypted.
fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_matches(['[', ']'])
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn read_file(variable: &str, path: &str) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path)
        .map_err(|error| ConfigError::invalid(variable, path, format!("cannot read it: {error}")))
}

/// The DKIM key of a PEM text, in the form lettre's `DkimSigningKey::new` reads.
fn dkim_key(pem: &str) -> Result<(DkimSigningAlgorithm, Secret), String> {
    use ed25519_dalek::pkcs8::DecodePrivateKey as _;
    use rsa::pkcs1::{DecodeRsaPrivateKey as _, EncodeRsaPrivateKey as _};
    use rsa::pkcs8::DecodePrivateKey as _;
    use rsa::traits::PublicKeyParts as _;

    let rsa = if pem.contains("BEGIN RSA PRIVATE KEY") {
        rsa::RsaPrivateKey::from_pkcs1_pem(pem).map_err(|e| format!("not an RSA key: {e}"))?
    } else if let Ok(key) = ed25519_dalek::SigningKey::from_pkcs8_pem(pem) {
        let seed = base64::engine::general_purpose::STANDARD.encode(key.to_bytes());
        return Ok((DkimSigningAlgorithm::Ed25519, Secret::from(seed)));
    } else {
        rsa::RsaPrivateKey::from_pkcs8_pem(pem).map_err(|_| {
            "expected a PEM private key: RSA (BEGIN RSA PRIVATE KEY or BEGIN PRIVATE KEY) or \
             Ed25519 (BEGIN PRIVATE KEY)"
                .to_owned()
        })?
    };
    // RFC 8301: verifiers ignore keys under 1024 bits; 2048 is what receivers expect today.
    let bits = rsa.size() * 8;
    if bits < 2048 {
        return Err(format!(
            "an RSA key of {bits} bits: DKIM keys are 2048 bits or more"
        ));
    }
    let pkcs1 = rsa
        .to_pkcs1_pem(rsa::pkcs1::LineEnding::LF)
        .map_err(|e| format!("cannot re-encode the RSA key: {e}"))?;
    Ok((DkimSigningAlgorithm::Rsa, Secret::from(pkcs1.as_str())))
}

impl SmtpSettings {
    /// The password, for the relay's AUTH only.
    pub(super) fn password(&self) -> Option<(&str, &str)> {
        self.credentials
            .as_ref()
            .map(|(user, password)| (user.as_str(), password.expose_secret()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variables(url: &str) -> EmailVariables {
        EmailVariables {
            smtp_url: Some(url.to_owned()),
            from: Some("Example <no-reply@example.com>".to_owned()),
            ..EmailVariables::default()
        }
    }

    fn smtp(url: &str, password: Option<&str>) -> Result<SmtpSettings, ConfigError> {
        variables(url)
            .settings(password.map(Secret::from))
            .map(|settings| settings.smtp.unwrap())
    }

    #[test]
    fn smtp_requires_starttls_but_to_loopback_and_smtps_is_tls_from_the_start() {
        for (url, security, port) in [
            ("smtp://mail.example.com", Security::StartTls, 587),
            ("smtp://mail.example.com:25", Security::StartTls, 25),
            ("smtp://127.0.0.1:2525", Security::StartTlsIfOffered, 2525),
            ("smtp://localhost", Security::StartTlsIfOffered, 587),
            ("smtp://[::1]:25", Security::StartTlsIfOffered, 25),
            ("smtps://mail.example.com", Security::ImplicitTls, 465),
            ("smtps://127.0.0.1:4650", Security::ImplicitTls, 4650),
        ] {
            let settings = smtp(url, None).unwrap();
            assert_eq!(
                (settings.security, settings.port),
                (security, port),
                "{url}"
            );
        }
        for bad in [
            "http://mail.example.com",
            "smtp://",
            "smtp://mail.example.com/path",
            "smtp://mail.example.com?tls=none",
        ] {
            assert!(smtp(bad, None).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_password_comes_from_the_url_or_its_variable_and_is_never_shown() {
        let settings = smtp("smtps://apikey:s%40cret@smtp.example.com", None).unwrap();
        assert_eq!(settings.password(), Some(("apikey", "s@cret")));
        let shown = format!("{settings:?}");
        assert!(
            !shown.contains("s%40cret") && !shown.contains("s@cret"),
            "{shown}"
        );
        assert!(shown.contains("apikey"), "{shown}");

        let settings = smtp("smtps://apikey@smtp.example.com", Some("from-file")).unwrap();
        assert_eq!(settings.password(), Some(("apikey", "from-file")));

        let both = smtp("smtps://apikey:x@smtp.example.com", Some("y")).unwrap_err();
        assert!(!both.to_string().contains("x@"), "{both}");
        assert!(smtp("smtps://apikey@smtp.example.com", None).is_err());
        let error = smtp("ftp://u:hunter2@smtp.example.com", None).unwrap_err();
        assert!(!error.to_string().contains("hunter2"), "{error}");
    }

    #[test]
    fn the_sender_is_required_and_names_the_service() {
        let settings = smtp("smtps://smtp.example.com", None).unwrap();
        assert_eq!(settings.service_name, "Example");
        let mut plain = variables("smtps://smtp.example.com");
        plain.from = Some("no-reply@example.com".to_owned());
        let settings = plain.settings(None).unwrap().smtp.unwrap();
        assert_eq!(settings.service_name, "example.com");
        let mut missing = variables("smtps://smtp.example.com");
        missing.from = None;
        assert!(missing.settings(None).is_err());
        let mut injected = variables("smtps://smtp.example.com");
        injected.from = Some("a@example.com\r\nBcc: x@evil.com".to_owned());
        assert!(injected.settings(None).is_err());
    }

    #[test]
    fn without_a_relay_the_channel_is_off_and_its_other_settings_refused() {
        let off = EmailVariables::default().settings(None).unwrap();
        assert!(off.smtp.is_none());
        let stray = EmailVariables {
            from: Some("a@example.com".to_owned()),
            ..EmailVariables::default()
        };
        assert!(stray.settings(None).is_err());
        assert!(
            EmailVariables::default()
                .settings(Some(Secret::from("x")))
                .is_err()
        );
    }

    #[test]
    fn dkim_needs_a_key_and_a_selector_and_refuses_what_is_not_a_key() {
        let dir = std::env::temp_dir().join(format!("vcode-dkim-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let garbage = dir.join("garbage.pem");
        std::fs::write(
            &garbage,
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        let mut only_selector = variables("smtps://smtp.example.com");
        only_selector.dkim_selector = Some("s1".to_owned());
        assert!(only_selector.settings(None).is_err());
        let mut bad_key = variables("smtps://smtp.example.com");
        bad_key.dkim_selector = Some("s1".to_owned());
        bad_key.dkim_key_file = Some(garbage.display().to_string());
        let error = bad_key.settings(None).unwrap_err().to_string();
        assert!(error.contains(DKIM_KEY_FILE), "{error}");
        let mut bad_selector = variables("smtps://smtp.example.com");
        bad_selector.dkim_selector = Some("s1; x=y".to_owned());
        bad_selector.dkim_key_file = Some(garbage.display().to_string());
        assert!(bad_selector.settings(None).is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
