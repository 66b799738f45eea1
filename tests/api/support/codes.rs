//! The tests' side of codes at rest: the key every test app uses, and what a use case would do
//! around the store — digest and seal a code before an issue, digest it before a verify, open
//! what a resend delivers. Store-level tests speak in codes through these.

use std::net::IpAddr;
use std::sync::{Arc, LazyLock};

use vcode::domain::{Client, Code, CodeDigest, Destination, Purpose};
use vcode::keyring::{Keyring, SecretKey};
use vcode::store::{CodeCandidate, IssueKind, IssuedCode, PendingCode};

/// `VCODE_SECRET_KEY` of every test app (`openssl rand -hex 32`: a typed key is refused).
pub const TEST_SECRET_KEY: &str =
    "de95360cff70e64f70aa3bc9ea6a317ddcd78988be83b861b88c8766614d80ef";

pub fn test_secret_key() -> Arc<SecretKey> {
    Arc::new(SecretKey::parse(TEST_SECRET_KEY).expect("a valid key"))
}

pub fn keyring() -> &'static Keyring {
    static KEYRING: LazyLock<Keyring> = LazyLock::new(|| Keyring::new(&test_secret_key(), None));
    &KEYRING
}

/// The client address store-level verifies come from.
pub const CLIENT: Client = Client::Address(IpAddr::V4(std::net::Ipv4Addr::new(203, 0, 113, 7)));

/// What an issue stores for `code`: its digest, the code sealed (for a resend), a new id.
pub fn candidate(phone: &Destination, purpose: &Purpose, code: &Code) -> CodeCandidate {
    let digest = keyring().code_digest(phone.key(), purpose.as_str(), code);
    CodeCandidate {
        sealed: Some(keyring().seal_code(&digest, code)),
        digest,
        verification: vcode::domain::VerificationId::generate(),
        send_log: None,
        says_where: false,
    }
}

/// What a verify of `code` compares.
pub fn digests(phone: &Destination, purpose: &Purpose, code: &Code) -> Vec<CodeDigest> {
    keyring()
        .code_digests(phone.key(), purpose.as_str(), code)
        .to_vec()
}

/// The code a delivery sends: the issuer's own candidate, or the pending code opened.
pub fn delivered(
    phone: &Destination,
    purpose: &Purpose,
    delivery: &IssuedCode,
    candidate: &Code,
) -> Code {
    match delivery.kind {
        IssueKind::Redelivered => open(phone, purpose, delivery.digest(), delivery.sealed.as_ref()),
        IssueKind::Created | IssueKind::Rotated => candidate.clone(),
    }
}

/// Whether `pending` is the code `digits` (by its digest: a rotated code has no sealed copy).
pub fn holds(phone: &Destination, purpose: &Purpose, pending: &PendingCode, digits: &str) -> bool {
    let code = Code::parse(digits, vcode::domain::CodeLength::default()).expect("digits");
    digests(phone, purpose, &code).contains(&pending.digest)
}

/// The pending code, opened from its sealed copy.
pub fn pending(phone: &Destination, purpose: &Purpose, pending: &PendingCode) -> Code {
    open(phone, purpose, &pending.digest, pending.sealed.as_ref())
}

fn open(
    phone: &Destination,
    purpose: &Purpose,
    digest: &CodeDigest,
    sealed: Option<&vcode::domain::SealedCode>,
) -> Code {
    keyring()
        .open_code(
            phone.key(),
            purpose.as_str(),
            digest,
            sealed.expect("a sealed copy"),
        )
        .expect("sealed under the test key")
}
