//! The SMTP mailer against real mail servers the tests start: aiosmtpd (plain, STARTTLS with a
//! certificate of a private CA made here, AUTH, implicit TLS, refusals, a server that never
//! answers the message), the received message read by Python's email package and its DKIM
//! signature verified by dkimpy against the published key. The settings come through
//! `Settings::from_lookup`, as `VCODE_EMAIL_*` variables.
//!
//! Needs python3 with tests/email/requirements.txt and openssl (scripts/provision installs
//! them); without them each test is skipped loudly, or fails with `TEST_REQUIRE_SDK=1` (CI).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use serde_json::Value;
use vcode::domain::{Code, CodeLength, EmailAddress, Locale, Purpose};
use vcode::email::{EmailErrorKind, EmailMessage, EmailSender, SmtpMailer};
use vcode::settings::Settings;

mod mail_server;

use self::mail_server::{MailServer, SCRIPTS, check, tools_present};

/// A scratch directory, removed at the end.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("vcode-email-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A private CA and a server certificate for 127.0.0.1 signed by it: (CA PEM, cert, key).
fn certificates() -> (String, String, String) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let issuer = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    (issuer.pem(), server.pem(), key.serialize_pem())
}

/// A mailer from `VCODE_EMAIL_*` variables, as start-up reads them.
fn mailer(vars: &[(&str, String)]) -> SmtpMailer {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(name, value)| ((*name).to_owned(), value.clone()))
        .collect();
    let settings = Settings::from_lookup(|name| vars.get(name).cloned()).expect("valid settings");
    let smtp = settings.email.smtp.expect("a relay");
    SmtpMailer::new(smtp, Locale::parse("en").unwrap()).expect("a mailer")
}

fn base(url: String) -> Vec<(&'static str, String)> {
    vec![
        ("VCODE_EMAIL_SMTP_URL", url),
        (
            "VCODE_EMAIL_FROM",
            "Acme <no-reply@acme.example>".to_owned(),
        ),
        ("VCODE_EMAIL_COMMAND_TIMEOUT_MS", "1500".to_owned()),
    ]
}

async fn send(
    mailer: &SmtpMailer,
    to: &str,
) -> Result<vcode::email::EmailSent, vcode::email::EmailError> {
    let to = EmailAddress::parse(to).unwrap();
    let code = Code::parse("482913", CodeLength::default()).unwrap();
    let purpose = Purpose::parse("login").unwrap();
    mailer
        .send(&EmailMessage {
            to: &to,
            purpose: &purpose,
            code: &code,
            expires_in: Duration::from_secs(300),
            locale: None,
            service_name: None,
        })
        .await
}

fn headers(checked: &Value) -> Vec<(String, String)> {
    checked["headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pair| {
            (
                pair[0].as_str().unwrap().to_owned(),
                pair[1].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// A DKIM key made by openssl, and its DNS TXT record (RFC 6376 / RFC 8463 `p=`).
fn dkim_key(scratch: &Scratch, algorithm: &str) -> (PathBuf, String) {
    let path = scratch.0.join(format!("dkim-{algorithm}.pem"));
    let mut generate = Command::new("openssl");
    generate.args(["genpkey", "-out"]).arg(&path);
    match algorithm {
        "rsa" => generate.args(["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"]),
        _ => generate.args(["-algorithm", "ED25519"]),
    };
    assert!(generate.stderr(Stdio::null()).status().unwrap().success());
    let der = Command::new("openssl")
        .args(["pkey", "-pubout", "-outform", "DER", "-in"])
        .arg(&path)
        .output()
        .unwrap()
        .stdout;
    // Ed25519's record holds the bare 32-byte key; RSA's the SubjectPublicKeyInfo.
    let public = match algorithm {
        "rsa" => &der[..],
        _ => &der[der.len() - 32..],
    };
    let b64 = base64::engine::general_purpose::STANDARD.encode(public);
    (path, format!("v=DKIM1; k={algorithm}; p={b64}"))
}

#[tokio::test]
async fn a_signed_mail_reaches_a_plain_loopback_relay_and_passes_dkim_in_rsa_and_ed25519() {
    if !tools_present("dkim") {
        return;
    }
    let scratch = Scratch::new("dkim");
    let server = MailServer::start("plain", &[]);
    for algorithm in ["rsa", "ed25519"] {
        let (key, record) = dkim_key(&scratch, algorithm);
        let mut vars = base(format!("smtp://127.0.0.1:{}", server.port));
        vars.push(("VCODE_EMAIL_DKIM_KEY_FILE", key.display().to_string()));
        vars.push(("VCODE_EMAIL_DKIM_SELECTOR", "vcode1".to_owned()));
        let mailer = mailer(&vars);
        let sent = send(&mailer, "John.Doe+x@Example.COM").await.expect("sent");
        assert_eq!(sent.reply, "2.0.0 Ok: queued as 4F2B1");
        let received = server.next();
        assert_eq!(received["mail_from"], "no-reply@acme.example");
        // The local part as written, the domain lower-cased: one recipient.
        assert_eq!(
            received["rcpt_tos"],
            serde_json::json!(["John.Doe+x@example.com"])
        );
        assert_eq!(received["tls"], false);
        let data = received["data"].as_str().unwrap();
        let checked = check(data, Some(&record));
        assert_eq!(checked["dkim"], true, "{algorithm}: {data}");
        assert_eq!(
            checked["looked_up"],
            serde_json::json!(["vcode1._domainkey.acme.example."])
        );
        // A wrong key in DNS fails the same message: the check can fail.
        let (_, other) = dkim_key(&scratch, algorithm);
        assert_eq!(check(data, Some(&other))["dkim"], false, "{algorithm}");

        let headers = headers(&checked);
        let names: Vec<&str> = headers.iter().map(|(name, _)| name.as_str()).collect();
        for name in [
            "From",
            "To",
            "Subject",
            "Date",
            "Message-ID",
            "DKIM-Signature",
        ] {
            assert_eq!(
                names.iter().filter(|n| **n == name).count(),
                1,
                "{name}: {names:?}"
            );
        }
        assert!(!names.iter().any(|n| ["Cc", "Bcc", "Reply-To"].contains(n)));
        let header = |name: &str| &headers.iter().find(|(n, _)| n == name).unwrap().1;
        assert_eq!(header("To"), "John.Doe+x@example.com");
        assert_eq!(header("Subject"), "Your Acme login code");
        assert_eq!(header("Message-ID"), &format!("<{}>", sent.message_id));
        let text = checked["text"].as_str().unwrap();
        let html = checked["html"].as_str().unwrap();
        assert!(text.contains("482913") && html.contains("482913"), "{text}");
        // Nothing of the request but the code's wording: not the address.
        assert!(!text.contains("John") && !html.contains("John"));
    }
}

#[tokio::test]
async fn starttls_with_a_private_ca_and_auth_carry_the_mail_encrypted() {
    if !tools_present("starttls") {
        return;
    }
    let scratch = Scratch::new("starttls");
    let (ca, cert, key) = certificates();
    let ca_file = scratch.write("ca.pem", &ca);
    let cert_file = scratch.write("cert.pem", &cert);
    let key_file = scratch.write("key.pem", &key);
    let tls_args = [
        "--cert",
        cert_file.to_str().unwrap(),
        "--key",
        key_file.to_str().unwrap(),
    ];
    let auth_args = [
        &tls_args[..],
        &["--user", "relay-user", "--password", "p@ss:word"],
    ]
    .concat();

    let server = MailServer::start("auth", &auth_args);
    let url = format!("smtp://relay-user@127.0.0.1:{}", server.port);
    let mut vars = base(url.clone());
    vars.push(("VCODE_EMAIL_SMTP_CA_FILE", ca_file.display().to_string()));
    vars.push(("VCODE_EMAIL_SMTP_PASSWORD", "p@ss:word".to_owned()));
    send(&mailer(&vars), "a@example.com").await.expect("sent");
    let received = server.next();
    assert_eq!(received["tls"], true);
    assert_eq!(received["auth"], "relay-user");

    // A wrong password: refused by AUTH (535), before any mail.
    let mut wrong = base(url);
    wrong.push(("VCODE_EMAIL_SMTP_CA_FILE", ca_file.display().to_string()));
    wrong.push(("VCODE_EMAIL_SMTP_PASSWORD", "wrong".to_owned()));
    let error = send(&mailer(&wrong), "a@example.com").await.unwrap_err();
    assert_eq!(error.kind(), EmailErrorKind::Refused, "{error}");
    assert_eq!(error.code(), "smtp_535");
    assert!(server.nothing_received());

    // Without the CA, the certificate is not trusted: no mail, the relay unavailable.
    let server = MailServer::start("starttls", &tls_args);
    let untrusted = base(format!("smtp://127.0.0.1:{}", server.port));
    let error = send(&mailer(&untrusted), "a@example.com")
        .await
        .unwrap_err();
    assert_eq!(error.kind(), EmailErrorKind::Unavailable, "{error}");
    assert!(server.nothing_received());

    // Implicit TLS (smtps://).
    let server = MailServer::start("smtps", &tls_args);
    let mut vars = base(format!("smtps://127.0.0.1:{}", server.port));
    vars.push(("VCODE_EMAIL_SMTP_CA_FILE", ca_file.display().to_string()));
    send(&mailer(&vars), "a@example.com").await.expect("sent");
    assert_eq!(server.next()["tls"], true);
}

#[tokio::test]
async fn a_5xx_is_a_definite_failure_and_silence_after_the_message_is_unconfirmed() {
    if !tools_present("failures") {
        return;
    }
    let server = MailServer::start("refuse", &[]);
    let mailer_of =
        |server: &MailServer| mailer(&base(format!("smtp://127.0.0.1:{}", server.port)));
    let error = send(&mailer_of(&server), "John@example.com")
        .await
        .unwrap_err();
    assert_eq!(error.kind(), EmailErrorKind::Refused, "{error}");
    assert!(error.kind().is_definite());
    assert_eq!(error.code(), "smtp_550");
    // The relay quoted the address: the error (which reaches logs) has it masked.
    assert!(!error.to_string().contains("John@"), "{error}");
    assert!(error.to_string().contains("J***@example.com"), "{error}");

    let server = MailServer::start("refuse_data", &[]);
    let error = send(&mailer_of(&server), "a@example.com")
        .await
        .unwrap_err();
    assert_eq!(
        (error.kind(), error.code()),
        (EmailErrorKind::Refused, "smtp_554")
    );

    let server = MailServer::start("hang", &[]);
    let started = Instant::now();
    let error = send(&mailer_of(&server), "a@example.com")
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert_eq!(error.kind(), EmailErrorKind::Unconfirmed, "{error}");
    assert!(!error.kind().is_definite());
    // The command timeout is 1.5 s.
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_secs(5),
        "{took:?}"
    );
    // The message did reach the server: that is why it is unconfirmed, not refused.
    assert_eq!(
        server.next()["rcpt_tos"],
        serde_json::json!(["a@example.com"])
    );

    // Nothing listening: unavailable, definite.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let error = send(
        &mailer(&base(format!("smtp://127.0.0.1:{port}"))),
        "a@example.com",
    )
    .await
    .unwrap_err();
    assert_eq!(error.kind(), EmailErrorKind::Unavailable, "{error}");
}

#[tokio::test]
async fn the_pool_reuses_a_session_and_the_header_injection_corpus_never_reaches_the_wire() {
    if !tools_present("pool") {
        return;
    }
    let server = MailServer::start("plain", &[]);
    let pooled = mailer(&base(format!("smtp://127.0.0.1:{}", server.port)));
    for _ in 0..3 {
        send(&pooled, "a@example.com").await.expect("sent");
    }
    let ports: Vec<Value> = (0..3).map(|_| server.next()["peer_port"].clone()).collect();
    assert!(
        ports.iter().all(|port| *port == ports[0]),
        "one session: {ports:?}"
    );

    let mut vars = base(format!("smtp://127.0.0.1:{}", server.port));
    vars.push(("VCODE_EMAIL_POOL_SIZE", "0".to_owned()));
    let unpooled = mailer(&vars);
    for _ in 0..2 {
        send(&unpooled, "a@example.com").await.expect("sent");
    }
    assert_ne!(server.next()["peer_port"], server.next()["peer_port"]);

    // The mailer takes only an EmailAddress: each of these is refused before any session.
    for injected in [
        "a@b.c\r\nBcc: x@evil.com",
        "\"a\r\n\"@b.c",
        "a@example.com\u{2028}Bcc: x@evil.com",
        "=?utf-8?q?Bcc=3A_x?=@example.com",
        "Eve <a@example.com>",
        "a@example.com>\r\nRCPT TO:<x@evil.com",
        "a@b@example.com",
        "a@[127.0.0.1]",
    ] {
        assert!(EmailAddress::parse(injected).is_err(), "{injected:?}");
    }
    assert!(server.nothing_received());
}

#[test]
fn the_scripts_are_where_the_tests_look() {
    for script in ["smtp_server.py", "check_mail.py", "requirements.txt"] {
        assert!(Path::new(SCRIPTS).join(script).exists(), "{script}");
    }
}
