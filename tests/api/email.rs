//! Email codes end to end against a real mail server the test starts (aiosmtpd, the scripts of
//! tests/email): a live vcode with `VCODE_EMAIL_SMTP_URL` pointing at it, a user asks for a
//! code by `email`, the test reads the message the server received, checks its DKIM signature
//! with dkimpy against the published key, takes the code out of the text and verifies it by
//! `otp/verify` with `email`; the token names the address and the `email` channel. A
//! header-injection corpus sent through the HTTP API is refused with 40008 and no mail leaves;
//! a relay's 5xx is 50201 and rolls the send back; a message whose answer never comes is
//! `unconfirmed` and stands. On every store.
//!
//! Needs python3 with tests/email/requirements.txt and openssl; without them each test skips
//! loudly, or fails under `TEST_REQUIRE_SDK=1` (CI).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};
use vcode::Settings;
use vcode_wire::{ErrorCode, SendRequest, VerifyData, VerifyRequest, paths};

use crate::support::{Backend, TestApp, spawn_app_with};

#[path = "../email/mail_server.rs"]
mod mail_server;

pub(crate) use self::mail_server::{MailServer, check, tools_present};

on_every_store!(
    an_emailed_code_passes_dkim_and_verifies_by_email,
    header_injection_through_the_api_is_refused_and_nothing_is_mailed,
    a_refused_mail_rolls_the_send_back_and_an_unanswered_one_stands,
    in_dev_mode_mail_is_logged_and_a_domain_budget_holds,
    a_domain_whose_mail_is_never_verified_is_held_until_lifted,
);

/// An RSA DKIM key made by openssl in a scratch file, and its DNS TXT record.
pub(crate) struct DkimKey {
    path: PathBuf,
    record: String,
}

impl DkimKey {
    fn new() -> Self {
        let path = std::env::temp_dir().join(format!(
            "vcode-api-dkim-{}-{}.pem",
            std::process::id(),
            rand::random::<u64>()
        ));
        let generated = Command::new("openssl")
            .args([
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
            ])
            .arg("-out")
            .arg(&path)
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(generated.success());
        let der = Command::new("openssl")
            .args(["pkey", "-pubout", "-outform", "DER", "-in"])
            .arg(&path)
            .output()
            .unwrap()
            .stdout;
        let record = format!("v=DKIM1; k=rsa; p={}", STANDARD.encode(der));
        Self { path, record }
    }
}

impl Drop for DkimKey {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A live instance on `backend` mailing through `server` (plain loopback SMTP), signing with
/// `dkim`, as `VCODE_EMAIL_*` variables configure it.
async fn app_mailing(backend: Backend, server: &MailServer, dkim: Option<&DkimKey>) -> TestApp {
    app_mailing_with(backend, server, dkim, &[]).await
}

/// `app_mailing` with more `VCODE_EMAIL_*` variables.
async fn app_mailing_with(
    backend: Backend,
    server: &MailServer,
    dkim: Option<&DkimKey>,
    more: &[(&str, String)],
) -> TestApp {
    let email = mailing_settings(server, dkim, more);
    spawn_app_with(backend, move |settings| settings.email = email).await
}

/// The email settings of an instance mailing through `server`, as `VCODE_EMAIL_*` variables
/// configure it (with `more` of them).
pub(crate) fn mailing_settings(
    server: &MailServer,
    dkim: Option<&DkimKey>,
    more: &[(&str, String)],
) -> vcode::email::EmailSettings {
    let mut vars: HashMap<String, String> = HashMap::from([
        (
            "VCODE_EMAIL_SMTP_URL".to_owned(),
            format!("smtp://127.0.0.1:{}", server.port),
        ),
        (
            "VCODE_EMAIL_FROM".to_owned(),
            "Acme <no-reply@acme.example>".to_owned(),
        ),
        (
            "VCODE_EMAIL_COMMAND_TIMEOUT_MS".to_owned(),
            "1500".to_owned(),
        ),
    ]);
    for (name, value) in more {
        vars.insert((*name).to_owned(), value.clone());
    }
    if let Some(dkim) = dkim {
        vars.insert(
            "VCODE_EMAIL_DKIM_KEY_FILE".to_owned(),
            dkim.path.display().to_string(),
        );
        vars.insert("VCODE_EMAIL_DKIM_SELECTOR".to_owned(), "vcode1".to_owned());
    }
    Settings::from_lookup(|name| vars.get(name).cloned())
        .expect("valid email settings")
        .email
}

/// The six digits the mail's text holds, as a user reads them.
pub(crate) fn code_in(text: &str) -> String {
    text.split(|c: char| !c.is_ascii_digit())
        .find(|run| run.len() == 6)
        .unwrap_or_else(|| panic!("no code in {text:?}"))
        .to_owned()
}

fn claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).expect("a JWS");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

async fn send_email(app: &TestApp, email: &str) -> crate::support::app::Answer {
    app.post_json(paths::OTP_SEND, &SendRequest::email(email))
        .await
}

async fn an_emailed_code_passes_dkim_and_verifies_by_email(backend: Backend) {
    if !tools_present("email end to end") {
        return;
    }
    let server = MailServer::start("plain", &[]);
    let dkim = DkimKey::new();
    let app = app_mailing(backend, &server, Some(&dkim)).await;
    let user = format!("Ann.Lee{}", rand::random::<u32>());
    let address = format!("{user}+news@Example.COM");
    let folded = address.to_ascii_lowercase();
    // The mailbox: folded, its tag dropped (issue 39).
    let mailbox = format!("{}@example.com", user.to_ascii_lowercase());

    let sent = send_email(&app, &address).await;
    assert_eq!(sent.status, 200, "{sent:?}");
    assert_eq!(sent.body["data"]["delivery"], "sent");
    let id = sent.verification_id();

    let received = server.next();
    // The local part as written, the domain lower-cased.
    let written = address.replace("Example.COM", "example.com");
    assert_eq!(received["rcpt_tos"], json!([written]));
    assert_eq!(received["mail_from"], "no-reply@acme.example");
    let checked = check(received["data"].as_str().unwrap(), Some(&dkim.record));
    assert_eq!(checked["dkim"], true, "{checked}");
    let code = code_in(checked["text"].as_str().unwrap());

    // The cooldown holds per mailbox, whatever its case or its tag.
    for spelling in [
        folded.clone(),
        format!("{user}+other@example.com"),
        mailbox.clone(),
    ] {
        let soon = send_email(&app, &spelling).await;
        assert_eq!(
            soon.body["code"],
            ErrorCode::ResendCooldown.code(),
            "{spelling}: {soon:?}"
        );
    }
    assert!(server.nothing_received());

    // A wrong code counts under the id, as for SMS.
    let wrong = if code == "000000" { "111111" } else { "000000" };
    let refused = app
        .post_json(paths::OTP_VERIFY, &VerifyRequest::with_id(&id, wrong))
        .await;
    assert_eq!(
        refused.body["code"],
        ErrorCode::WrongCode.code(),
        "{refused:?}"
    );

    // The address in another case is the same mailbox: the verify names it so.
    let verified = app
        .post_json(
            paths::OTP_VERIFY,
            &VerifyRequest {
                email: Some(folded.to_uppercase().replace("EXAMPLE.COM", "example.com")),
                ..VerifyRequest::with_id(&id, &code)
            },
        )
        .await;
    assert_eq!(verified.status, 200, "{verified:?}");
    let data: VerifyData = verified.data();
    let signed = claims(data.token.as_deref().expect("a token"));
    assert_eq!(signed["sub"], mailbox);
    assert_eq!(signed["channel"], "email");
    assert_eq!(signed["vid"], id);

    // The code is gone; the verification shows the address masked, and no phone.
    let again = app
        .post_json(paths::OTP_VERIFY, &VerifyRequest::with_id(&id, &code))
        .await;
    assert_eq!(
        again.body["code"],
        ErrorCode::CodeExpired.code(),
        "{again:?}"
    );
    let shown = app.get(&paths::OTP_VERIFICATION.replace("{id}", &id)).await;
    assert_eq!(shown.body["data"]["status"], "approved", "{shown:?}");
    assert_eq!(shown.body["data"]["email"], "a***@example.com");
    assert!(shown.body["data"].get("phone").is_none(), "{shown:?}");

    // A phone's token says `sms`.
    let phone = crate::support::random_phone();
    let phone_id = app.send_id(&phone).await;
    let code = app.last_code(&phone).await;
    let verified = app.verify_id(&phone_id, &code).await;
    let data: VerifyData = verified.data();
    let signed = claims(data.token.as_deref().unwrap());
    assert_eq!(
        (signed["sub"].as_str(), signed["channel"].as_str()),
        (Some(phone.as_str()), Some("sms"))
    );
}

async fn header_injection_through_the_api_is_refused_and_nothing_is_mailed(backend: Backend) {
    if !tools_present("email header injection") {
        return;
    }
    let server = MailServer::start("plain", &[]);
    let app = app_mailing(backend, &server, None).await;
    let corpus = [
        "a@example.com\r\nBcc: victim@evil.example",
        "a@example.com\nBcc: victim@evil.example",
        "a@example.com\rRCPT TO:<victim@evil.example>",
        "a@example.com%0d%0aBcc:victim@evil.example",
        "Eve <eve@example.com>",
        "\"a\r\nBcc: x@evil.example\"@example.com",
        "a@example.com, victim@evil.example",
        "a@example.com;victim@evil.example",
        "a(comment)@example.com",
        "=?utf-8?q?a=0D=0ABcc:x@evil.example?=@example.com",
        "a@example.com\u{2028}Bcc: x@evil.example",
        "a@example.com\u{0085}Bcc: x@evil.example",
        "a@[127.0.0.1]",
        "a@localhost",
        "a@example.com\0",
        "a\u{200B}@example.com",
        // Spaces around an address are refused as inside it (docs/email.md).
        " a@example.com",
        "a@example.com\t",
        "",
        "@example.com",
        "a@",
    ];
    for input in corpus {
        let answer = send_email(&app, input).await;
        assert_eq!(answer.status, 400, "{input:?}: {answer:?}");
        assert_eq!(
            answer.body["code"],
            ErrorCode::InvalidEmail.code(),
            "{input:?}: {answer:?}"
        );
        // The message names the rule, never the input.
        let message = answer.body["message"].as_str().unwrap();
        assert!(!message.contains("evil"), "{message}");
    }
    // Both destinations, or neither: a clear 400 that names the rule.
    for body in [
        json!({"phone": "+8613800138000", "email": "a@example.com"}),
        json!({}),
    ] {
        let answer = app.post_json(paths::OTP_SEND, &body).await;
        assert_eq!(answer.status, 400, "{answer:?}");
        assert_eq!(answer.body["code"], ErrorCode::Malformed.code());
        assert!(
            answer.body["message"]
                .as_str()
                .unwrap()
                .contains("exactly one of phone and email"),
            "{answer:?}"
        );
    }
    assert!(
        server.nothing_received(),
        "a refused request mailed something"
    );
    // The same server takes a good address: the check above could fail.
    assert_eq!(send_email(&app, "ok@example.com").await.status, 200);
    assert_eq!(server.next()["rcpt_tos"], json!(["ok@example.com"]));
}

async fn a_refused_mail_rolls_the_send_back_and_an_unanswered_one_stands(backend: Backend) {
    if !tools_present("email refusals") {
        return;
    }
    let address = format!("bob{}@example.org", rand::random::<u32>());
    {
        let server = MailServer::start("refuse_data", &[]);
        let app = app_mailing(backend, &server, None).await;
        let refused = send_email(&app, &address).await;
        assert_eq!(refused.status, 502, "{refused:?}");
        assert_eq!(refused.body["code"], ErrorCode::EmailDelivery.code());
        server.next();
        // Rolled back: no cooldown stands in the way of the retry.
        let retried = send_email(&app, &address).await;
        assert_eq!(
            retried.body["code"],
            ErrorCode::EmailDelivery.code(),
            "{retried:?}"
        );
    }
    let server = MailServer::start("hang", &[]);
    let app = app_mailing(backend, &server, None).await;
    let address = format!("carol{}@example.org", rand::random::<u32>());
    let unconfirmed = send_email(&app, &address).await;
    assert_eq!(unconfirmed.status, 200, "{unconfirmed:?}");
    assert_eq!(unconfirmed.body["data"]["delivery"], "unconfirmed");
    let id = unconfirmed.verification_id();
    server.next();
    // It stands: the cooldown runs, and the verification says so.
    let soon = send_email(&app, &address).await;
    assert_eq!(
        soon.body["code"],
        ErrorCode::ResendCooldown.code(),
        "{soon:?}"
    );
    let shown = app.get(&paths::OTP_VERIFICATION.replace("{id}", &id)).await;
    assert_eq!(shown.body["data"]["delivery"], "unconfirmed", "{shown:?}");
}

/// A private CA and a certificate for 127.0.0.1 it signed: (CA PEM, certificate, key).
fn certificates() -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let issuer = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    (issuer.pem(), server.pem(), key.serialize_pem())
}

/// The same user journey over STARTTLS with AUTH (a relay that refuses plain text and
/// anonymous mail), the relay's certificate from a private CA vcode is given: the mail arrives
/// encrypted and authenticated, signed, and its code verifies. The channel is the mailer's, not
/// the store's: the embedded store only.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_emailed_code_arrives_over_starttls_with_auth_and_verifies() {
    if !tools_present("email over STARTTLS") {
        return;
    }
    let dir = std::env::temp_dir().join(format!(
        "vcode-api-starttls-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let (ca, cert, key) = certificates();
    let write = |name: &str, contents: &str| {
        let path = dir.join(name);
        std::fs::write(&path, contents).unwrap();
        path.display().to_string()
    };
    let (ca_file, cert_file, key_file) = (
        write("ca.pem", &ca),
        write("cert.pem", &cert),
        write("key.pem", &key),
    );
    let server = MailServer::start(
        "auth",
        &[
            "--cert",
            &cert_file,
            "--key",
            &key_file,
            "--user",
            "relay-user",
            "--password",
            "relay-pass",
        ],
    );
    let dkim = DkimKey::new();
    let more = [
        (
            "VCODE_EMAIL_SMTP_URL",
            format!("smtp://relay-user:relay-pass@127.0.0.1:{}", server.port),
        ),
        ("VCODE_EMAIL_SMTP_CA_FILE", ca_file),
    ];
    let app = app_mailing_with(Backend::Memory, &server, Some(&dkim), &more).await;
    let address = format!("dora{}@example.net", rand::random::<u32>());
    let sent = send_email(&app, &address).await;
    assert_eq!(sent.status, 200, "{sent:?}");
    let received = server.next();
    assert_eq!(received["tls"], true, "{received}");
    assert_eq!(received["auth"], "relay-user");
    let checked = check(received["data"].as_str().unwrap(), Some(&dkim.record));
    assert_eq!(checked["dkim"], true);
    let code = code_in(checked["text"].as_str().unwrap());
    let verified = app
        .post_json(
            paths::OTP_VERIFY,
            &VerifyRequest {
                email: Some(address.clone()),
                ..VerifyRequest::with_id(sent.verification_id(), &code)
            },
        )
        .await;
    assert_eq!(verified.status, 200, "{verified:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Dev mode without a relay: the log-only sender, whose codes the dev inbox shows by `email`
/// (and they verify); a recipient domain's budget (`VCODE_QUOTA_EMAIL_DOMAIN_HOUR`) refuses the
/// send past it, for any address of the domain, with nothing stored, while another domain
/// still gets its mail. Needs no mail server.
async fn in_dev_mode_mail_is_logged_and_a_domain_budget_holds(backend: Backend) {
    let app = spawn_app_with(backend, |settings| {
        settings.abuse.sends_per_email_domain_hour = 2;
    })
    .await;
    let domain = format!("d{}.example", rand::random::<u32>());
    let first = format!("ann@{domain}");
    let id = send_email(&app, &first).await.verification_id();
    let outbox = app
        .request(
            app.client
                .get(app.url(paths::DEV_INBOX))
                .query(&[("email", first.to_uppercase())]),
        )
        .await;
    assert_eq!(outbox.status, 200, "{outbox:?}");
    let messages = outbox.body["data"]["messages"].as_array().unwrap().clone();
    assert_eq!(messages.len(), 1, "{outbox:?}");
    assert_eq!(messages[0]["phone"], first);
    let code = messages[0]["code"].as_str().unwrap();
    let verified = app
        .post_json(paths::OTP_VERIFY, &VerifyRequest::with_id(&id, code))
        .await;
    assert_eq!(verified.status, 200, "{verified:?}");

    assert_eq!(send_email(&app, &format!("bob@{domain}")).await.status, 200);
    let third = format!("carol@{}", domain.to_uppercase());
    let refused = send_email(&app, &third).await;
    assert_eq!(refused.status, 429, "{refused:?}");
    assert_eq!(refused.body["code"], ErrorCode::QuotaExceeded.code());
    assert!(refused.body["data"]["retry_after"].as_u64().unwrap() > 3500);
    // Nothing was stored for the refused send: no message, and (the domain's budget aside)
    // nothing stops another domain.
    let outbox = app
        .request(
            app.client
                .get(app.url(paths::DEV_INBOX))
                .query(&[("email", third.as_str())]),
        )
        .await;
    assert_eq!(outbox.body["data"]["messages"], json!([]), "{outbox:?}");
    let elsewhere = format!("carol@other-{domain}");
    assert_eq!(send_email(&app, &elsewhere).await.status, 200);
}

/// The newest code the dev inbox holds for `email`.
async fn outbox_code(app: &TestApp, email: &str) -> String {
    let outbox = app
        .request(
            app.client
                .get(app.url(paths::DEV_INBOX))
                .query(&[("email", email)]),
        )
        .await;
    let messages = outbox.body["data"]["messages"].as_array().unwrap().clone();
    messages.last().expect("a mail in the outbox")["code"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The fraud guard judges a mail domain as a level of its own (`@domain`, country `EMAIL`): a
/// domain without history whose codes are never verified is refused after a handful (403/40300,
/// no mail), one whose codes are verified is not, and the operator lists and lifts the domain
/// by its `@domain` name. Its level alone judges it, a burst against its honest history.
async fn a_domain_whose_mail_is_never_verified_is_held_until_lifted(backend: Backend) {
    const TOKEN: &str = "fraud-admin-token-0123";
    let app = spawn_app_with(backend, |settings| {
        settings.admin_token = Some(TOKEN.into());
        settings.abuse = vcode::settings::AbuseSettings::unlimited();
        settings.fraud = vcode::fraud::FraudSettings::default();
    })
    .await;
    let tag = rand::random::<u32>();
    let (good, bad) = (format!("good{tag}.example"), format!("bad{tag}.example"));
    for i in 0..10 {
        let address = format!("user{i}@{good}");
        let sent = send_email(&app, &address).await;
        assert_eq!(sent.status, 200, "{sent:?}");
        let code = outbox_code(&app, &address).await;
        let verified = app
            .post_json(
                paths::OTP_VERIFY,
                &VerifyRequest::with_id(sent.verification_id(), &code),
            )
            .await;
        assert_eq!(verified.status, 200, "{verified:?}");
    }
    // Up to 60 sends: the level refuses the domain after its handful.
    let mut paid = 0;
    while paid < 60 {
        let sent = send_email(&app, &format!("bot{paid}@{bad}")).await;
        if sent.status == 403 {
            break;
        }
        assert_eq!(sent.status, 200, "{sent:?}");
        paid += 1;
    }
    assert!(
        (9..=12).contains(&paid),
        "paid {paid} before the first refusal"
    );
    let held_address = format!("bot-next@{bad}");
    let refused = send_email(&app, &held_address).await;
    assert_eq!(
        (refused.status, refused.code()),
        (403, 40300),
        "{refused:?}"
    );
    let outbox = app
        .request(
            app.client
                .get(app.url(paths::DEV_INBOX))
                .query(&[("email", held_address.as_str())]),
        )
        .await;
    assert_eq!(
        outbox.body["data"]["messages"],
        json!([]),
        "no mail: {outbox:?}"
    );
    let other = send_email(&app, &format!("user-next@{good}")).await;
    assert_eq!(
        other.status, 200,
        "the converting domain is not held: {other:?}"
    );

    let admin = |post: bool, path: String| {
        let url = app.admin_url(&path);
        let request = if post {
            app.client.post(url)
        } else {
            app.client.get(url)
        };
        app.request(request.bearer_auth(TOKEN))
    };
    let listed = admin(false, paths::FRAUD_SUSPENSIONS.to_owned()).await;
    assert_eq!(listed.status, 200, "{listed:?}");
    let suspensions = listed.body["data"]["suspensions"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(suspensions.len(), 1, "{listed:?}");
    assert_eq!(suspensions[0]["prefix"], format!("@{bad}"));
    assert_eq!(suspensions[0]["country"], "EMAIL");
    assert_eq!(suspensions[0]["reason"], "unconverted");

    let lifted = admin(true, paths::fraud_lift(&format!("@{bad}"))).await;
    assert_eq!(lifted.status, 200, "{lifted:?}");
    assert_eq!(lifted.body["data"]["lifted"], true, "{lifted:?}");
    let again = send_email(&app, &format!("bot-after@{bad}")).await;
    assert_eq!(again.status, 200, "open again: {again:?}");
}
