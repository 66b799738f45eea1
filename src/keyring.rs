//! The service's secret key (`VCODE_SECRET_KEY`, and during a rotation the previous one) and
//! what is derived from it: the keyed hashes of codes, the sealing of codes that must be
//! delivered again, the keyed derivation of captcha answers and, unless a token key is
//! configured, the seed of the key that signs verification tokens. Nothing readable in the store
//! gives a code or an answer away without the key.
//!
//! A sealed code is a synthetic-IV encryption (the SIV construction of RFC 5297): the code's
//! keyed digest, which the store keeps anyway, is the IV of a ChaCha20 keystream under a second
//! key, and opening checks that the digest of what comes out matches. The digest thus serves as
//! nonce and authentication tag both, so a sealed code costs its own length (6 bytes) instead of
//! 34 for a random nonce and a Poly1305 tag: that is what keeps a pending code within 150 bytes
//! of Redis memory. Its one leak, equal codes of one phone and purpose sealing alike, the digest
//! already has.

use std::fmt;

use aes::Aes128;
use aes::cipher::{BlockDecrypt, BlockEncrypt, KeyInit};
use chacha20::ChaCha20;
use chacha20::cipher::{KeyIvInit, StreamCipher};
use hmac::{Hmac, Mac};
use rand::RngExt;
use secrecy::{ExposeSecret, SecretBox};
use sha2::Sha256;

use crate::domain::{Code, CodeDigest, SealedCode, VerificationId};

type HmacSha256 = Hmac<Sha256>;

/// HMAC-SHA-256 under `key` (HMAC takes keys of any length).
fn mac_with(key: &[u8]) -> HmacSha256 {
    <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC takes any key length")
}

/// At least this many bytes of key material.
pub const MIN_KEY_BYTES: usize = 32;
/// ChaCha20's nonce: the first bytes of a code's digest.
const NONCE_BYTES: usize = 12;
/// A sealed TOTP secret's synthetic IV, which is its authentication tag too.
const SECRET_TAG_BYTES: usize = 16;

/// Key material as configured: hex or base64, at least 32 bytes once decoded, that looks
/// random (see `weak_secret`).
pub struct SecretKey(SecretBox<Vec<u8>>);

impl SecretKey {
    /// Reads hex (64+ digits) or base64 (standard or URL-safe, padded or not). Key material
    /// that is constant, repeats a block, counts or otherwise looks typed is refused: every
    /// derived key (the token signing key too) would be as guessable as it.
    pub fn parse(raw: &str) -> Result<Self, String> {
        use base64::Engine as _;
        use base64::engine::general_purpose::{
            STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD,
        };
        let raw = raw.trim();
        let decoded = hex::decode(raw).ok().or_else(|| {
            [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
                .iter()
                .find_map(|engine| engine.decode(raw).ok())
        });
        match decoded {
            Some(bytes) if bytes.len() >= MIN_KEY_BYTES => {
                let bytes = SecretBox::new(Box::new(bytes));
                match crate::weak_secret::key_weakness(bytes.expose_secret()) {
                    None => Ok(Self(bytes)),
                    Some(reason) => Err(format!(
                        "not random: {reason}; use random bytes (`openssl rand -hex 32`)"
                    )),
                }
            }
            Some(bytes) => Err(format!(
                "expected at least {MIN_KEY_BYTES} bytes of key material, got {}",
                bytes.len()
            )),
            None => Err("expected hex or base64 (e.g. `openssl rand -hex 32`)".to_owned()),
        }
    }

    /// A random key: for one process with the embedded store.
    pub fn random() -> Self {
        let mut bytes = vec![0u8; MIN_KEY_BYTES];
        rand::rng().fill(&mut bytes[..]);
        Self(SecretBox::new(Box::new(bytes)))
    }

    /// A sub-key for one use, so that no two uses share a key.
    fn derive(&self, label: &str) -> [u8; 32] {
        let mut mac = mac_with(self.0.expose_secret());
        mac.update(b"vcode/");
        mac.update(label.as_bytes());
        mac.finalize().into_bytes().into()
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(***)")
    }
}

/// The keys derived from one secret key.
struct Keys {
    /// HMAC keyed once: a digest then costs two SHA-256 blocks less than keying it per call.
    code_hash: HmacSha256,
    code_seal: SecretBox<[u8; 32]>,
    captcha: SecretBox<[u8; 32]>,
    pow: SecretBox<[u8; 32]>,
    token: SecretBox<[u8; 32]>,
    end_user: HmacSha256,
    /// A TOTP factor's secret: the synthetic IV's MAC, and the keystream's key.
    secret_mac: HmacSha256,
    secret_seal: SecretBox<[u8; 32]>,
    /// A phone's verification ids (`LocatedId`).
    verification_id: Aes128,
}

impl Keys {
    fn from(secret: &SecretKey) -> Self {
        Self {
            pow: SecretBox::new(Box::new(secret.derive("pow-challenge/v1"))),
            token: SecretBox::new(Box::new(secret.derive("token-signing/v1"))),
            code_hash: mac_with(&secret.derive("code-hash/v1")),
            code_seal: SecretBox::new(Box::new(secret.derive("code-seal/v2"))),
            captcha: SecretBox::new(Box::new(secret.derive("captcha-answer/v1"))),
            end_user: mac_with(&secret.derive("end-user/v1")),
            secret_mac: mac_with(&secret.derive("totp-secret-mac/v1")),
            secret_seal: SecretBox::new(Box::new(secret.derive("totp-secret-seal/v1"))),
            verification_id: Aes128::new((&secret.derive("verification-id/v1")[..16]).into()),
        }
    }

    /// The synthetic IV of a TOTP secret bound to `context` (its factor): the first 16 bytes
    /// of a MAC over both, length-prefixed.
    fn secret_iv(&self, context: &str, secret: &[u8]) -> [u8; SECRET_TAG_BYTES] {
        let mut mac = self.secret_mac.clone();
        for field in [context.as_bytes(), secret] {
            mac.update(&(field.len() as u32).to_be_bytes());
            mac.update(field);
        }
        let full = mac.finalize().into_bytes();
        let mut iv = [0u8; SECRET_TAG_BYTES];
        iv.copy_from_slice(&full[..SECRET_TAG_BYTES]);
        iv
    }

    fn secret_keystream(&self, iv: &[u8; SECRET_TAG_BYTES], bytes: &mut [u8]) {
        let nonce: &[u8; NONCE_BYTES] = iv[..NONCE_BYTES]
            .try_into()
            .expect("an IV is longer than a nonce");
        ChaCha20::new(self.secret_seal.expose_secret().into(), nonce.into()).apply_keystream(bytes);
    }

    fn open_secret(&self, context: &str, sealed: &[u8]) -> Option<Vec<u8>> {
        use subtle::ConstantTimeEq as _;
        let (iv, body) = sealed.split_at_checked(SECRET_TAG_BYTES)?;
        let iv: &[u8; SECRET_TAG_BYTES] = iv.try_into().ok()?;
        let mut plain = body.to_vec();
        self.secret_keystream(iv, &mut plain);
        bool::from(self.secret_iv(context, &plain).ct_eq(iv)).then_some(plain)
    }

    fn code_digest(&self, phone: &str, purpose: &str, code: &str) -> CodeDigest {
        let mut mac = self.code_hash.clone();
        // Length-prefixed fields: no two (phone, purpose, code) triples hash the same input.
        for field in [phone, purpose, code] {
            mac.update(&(field.len() as u32).to_be_bytes());
            mac.update(field.as_bytes());
        }
        let full = mac.finalize().into_bytes();
        let mut digest = [0u8; 16];
        digest.copy_from_slice(&full[..16]);
        CodeDigest(digest)
    }

    /// XORs `bytes` with the keystream a code of `digest` is sealed with (sealing and opening
    /// are the same operation).
    fn code_keystream(&self, digest: &CodeDigest, bytes: &mut [u8]) {
        let nonce: &[u8; NONCE_BYTES] = digest.0[..NONCE_BYTES]
            .try_into()
            .expect("a digest is longer than a nonce");
        ChaCha20::new(self.code_seal.expose_secret().into(), nonce.into()).apply_keystream(bytes);
    }

    fn captcha_mac(&self, id: &str, seed: u64) -> [u8; 32] {
        let mut mac = mac_with(self.captcha.expose_secret());
        mac.update(id.as_bytes());
        mac.update(&seed.to_be_bytes());
        mac.finalize().into_bytes().into()
    }
}

/// Where a phone's verification id leads, read from the id itself: the number, and a 24-bit
/// digest of the purpose ([`purpose_tag`]) that the caller matches against the purposes it
/// owns (which a verify by id knows), so no store keeps an index from ids to targets.
///
/// The id is one AES-128 block under a key of its own: `0xA0 | digits`, the number (7 bytes,
/// big-endian), the purpose's tag (3 bytes), 40 random bits. An E.164 fits: 15 digits at most,
/// under 2^50. Without the key an id can be neither read nor made, and a changed one decrypts
/// to noise, which passes the checks here about once in 18,000 (the first byte, then a number of
/// as many digits) and then names a verification no store has. The random bits keep two ids of one phone and purpose apart
/// (1 in 2^40 for a pair).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocatedId {
    pub phone_e164: String,
    pub purpose_tag: [u8; 3],
}

const LOCATED: u8 = 0xA0;

/// The purpose's digest inside a phone's verification id (SHA-256, first 3 bytes: inside the
/// encrypted block it needs no key).
pub fn purpose_tag(purpose: &str) -> [u8; 3] {
    use sha2::Digest as _;
    let full = Sha256::digest(purpose.as_bytes());
    [full[0], full[1], full[2]]
}

/// The plain block of a phone's id; `None` unless `phone_e164` is `+` and 1-15 digits.
fn pack_located(phone_e164: &str, purpose_tag: [u8; 3], random: [u8; 5]) -> Option<[u8; 16]> {
    let digits = phone_e164.strip_prefix('+')?;
    let valid = (1..=15).contains(&digits.len())
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !digits.starts_with('0');
    let number: u64 = digits.parse().ok().filter(|_| valid)?;
    let mut block = [0u8; 16];
    block[0] = LOCATED | digits.len() as u8;
    block[1..8].copy_from_slice(&number.to_be_bytes()[1..]);
    block[8..11].copy_from_slice(&purpose_tag);
    block[11..].copy_from_slice(&random);
    Some(block)
}

/// What a plain block says, if it is a phone's id's.
fn unpack_located(block: &[u8; 16]) -> Option<LocatedId> {
    let digits = u32::from(block[0] & 0x0F);
    if block[0] & 0xF0 != LOCATED || !(1..=15).contains(&digits) {
        return None;
    }
    let mut number = [0u8; 8];
    number[1..].copy_from_slice(&block[1..8]);
    let number = u64::from_be_bytes(number);
    if !(10u64.pow(digits - 1)..10u64.pow(digits)).contains(&number) {
        return None;
    }
    Some(LocatedId {
        phone_e164: format!("+{number}"),
        purpose_tag: [block[8], block[9], block[10]],
    })
}

/// The current keys, and the previous ones while a rotation settles.
pub struct Keyring {
    current: Keys,
    previous: Option<Keys>,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyring")
            .field("previous", &self.previous.is_some())
            .finish_non_exhaustive()
    }
}

impl Keyring {
    pub fn new(current: &SecretKey, previous: Option<&SecretKey>) -> Self {
        Self {
            current: Keys::from(current),
            previous: previous.map(Keys::from),
        }
    }

    fn all(&self) -> impl Iterator<Item = &Keys> {
        std::iter::once(&self.current).chain(self.previous.as_ref())
    }

    /// A new verification id for a send to `phone_e164` for the purpose whose
    /// [`purpose_tag`] is `purpose_tag`, that says where it leads (current key); `None` for
    /// anything that is not an E.164 number.
    pub fn phone_verification_id(
        &self,
        phone_e164: &str,
        purpose_tag: [u8; 3],
    ) -> Option<VerificationId> {
        let random: [u8; 5] = rand::rng().random();
        let mut block = pack_located(phone_e164, purpose_tag, random)?.into();
        self.current.verification_id.encrypt_block(&mut block);
        Some(VerificationId::from_bytes(block.into()))
    }

    /// Where `id` leads, if one of the keys made it as a phone's (a random id, an email's or
    /// one made before such ids, is `None` but for about 1 in 18,000, whose purpose's tag the
    /// caller then finds none of its own).
    pub fn locate_id(&self, id: &VerificationId) -> Option<LocatedId> {
        let sealed = id.to_bytes();
        self.all().find_map(|keys| {
            let mut block = sealed.into();
            keys.verification_id.decrypt_block(&mut block);
            unpack_located(&block.into())
        })
    }

    /// The digest a new code is stored under (current key).
    pub fn code_digest(&self, phone: &str, purpose: &str, code: &Code) -> CodeDigest {
        self.current.code_digest(phone, purpose, code.expose())
    }

    /// The digests a submitted code may be stored under: current key, then previous (inline:
    /// a verify allocates nothing for them).
    pub fn code_digests(
        &self,
        phone: &str,
        purpose: &str,
        code: &Code,
    ) -> crate::domain::CodeDigests {
        self.all()
            .map(|keys| keys.code_digest(phone, purpose, code.expose()))
            .collect()
    }

    /// The name an end user's budgets are kept under: a keyed digest of (tenant, the tenant's
    /// key for it), so that no key is stored and two tenants' users never meet (current key
    /// only: a rotation starts end users' counts afresh, as it costs one window of a quota).
    pub fn end_user_digest(&self, tenant: &str, key: &str) -> u64 {
        let mut mac = self.current.end_user.clone();
        for field in [tenant, key] {
            mac.update(&(field.len() as u32).to_be_bytes());
            mac.update(field.as_bytes());
        }
        let full = mac.finalize().into_bytes();
        u64::from_be_bytes(full[..8].try_into().expect("a MAC is longer than 8 bytes"))
    }

    /// The names the fraud guard remembers a destination that verified under (issue 39): a
    /// keyed digest of its key, under the current key and then the previous one (a rotation
    /// forgets no returning user while it settles). Never the number itself.
    pub fn returning_digests(&self, destination: &str) -> Vec<u64> {
        self.all()
            .map(|keys| {
                let mut mac = keys.end_user.clone();
                // A tenant's name is never empty: no end user's digest meets these.
                mac.update(&0u32.to_be_bytes());
                mac.update(b"returning");
                mac.update(destination.as_bytes());
                let full = mac.finalize().into_bytes();
                u64::from_be_bytes(full[..8].try_into().expect("a MAC is longer than 8 bytes"))
            })
            .collect()
    }

    /// The seeds of the Ed25519 keys that sign verification tokens when no token key is
    /// configured: current key first (it signs), then the previous one (still published).
    pub fn token_seeds(&self) -> Vec<&[u8; 32]> {
        self.all().map(|keys| keys.token.expose_secret()).collect()
    }

    /// The key proof-of-work challenges are signed with (current key only: a challenge lives
    /// minutes, a rotation's old key is not needed for it).
    pub fn pow_key(&self) -> [u8; 32] {
        *self.current.pow.expose_secret()
    }

    /// `code` sealed under the current key, `digest` being its digest under that key: the
    /// digest is the IV (see the module's opening), so the digest must be stored beside it.
    pub fn seal_code(&self, digest: &CodeDigest, code: &Code) -> SealedCode {
        let mut sealed = code.expose().as_bytes().to_vec();
        self.current.code_keystream(digest, &mut sealed);
        SealedCode(sealed.into_boxed_slice())
    }

    /// The sealed code stored with `digest`, if one of the keys opens it to a code whose digest
    /// for this phone and purpose is `digest`: a sealed code opens only beside its own digest,
    /// for its phone and purpose, and a changed byte opens to nothing.
    pub fn open_code(
        &self,
        phone: &str,
        purpose: &str,
        digest: &CodeDigest,
        sealed: &SealedCode,
    ) -> Option<Code> {
        self.all().find_map(|keys| {
            let mut plain = sealed.0.to_vec();
            keys.code_keystream(digest, &mut plain);
            let plain = String::from_utf8(plain).ok()?;
            keys.code_digest(phone, purpose, &plain)
                .is_any_of(std::slice::from_ref(digest))
                .then(|| Code::from_stored(plain))
        })
    }

    /// A TOTP factor's `secret` sealed under the current key and bound to `context` (the
    /// factor's scope, identity and SID): its synthetic IV (a MAC of both, which is the tag
    /// too) then the secret under ChaCha20, as codes are sealed (the module's opening). Equal
    /// secrets of one factor seal alike; a random secret never repeats.
    pub fn seal_secret(&self, context: &str, secret: &[u8]) -> Vec<u8> {
        let iv = self.current.secret_iv(context, secret);
        let mut sealed = Vec::with_capacity(SECRET_TAG_BYTES + secret.len());
        sealed.extend_from_slice(&iv);
        sealed.extend_from_slice(secret);
        self.current
            .secret_keystream(&iv, &mut sealed[SECRET_TAG_BYTES..]);
        sealed
    }

    /// The secret `sealed` holds if one of the keys opens it for `context`, and whether that
    /// was the current key (`false`: sealed before a rotation; seal it again). A changed byte,
    /// another factor's context or an unknown key opens to nothing.
    pub fn open_secret(&self, context: &str, sealed: &[u8]) -> Option<(Vec<u8>, bool)> {
        if let Some(secret) = self.current.open_secret(context, sealed) {
            return Some((secret, true));
        }
        let previous = self.previous.as_ref()?;
        previous
            .open_secret(context, sealed)
            .map(|secret| (secret, false))
    }

    /// The answer of captcha `id` drawn from `seed`, `len` characters of `alphabet`, under the
    /// current key: the store keeps the seed, and the seed alone does not give the answer.
    pub fn captcha_answer(&self, id: &str, seed: u64, alphabet: &[u8], len: usize) -> String {
        answer_from(&self.current.captcha_mac(id, seed), alphabet, len)
    }

    /// Every answer the captcha may have been shown with (current key, then previous).
    pub fn captcha_answers(&self, id: &str, seed: u64, alphabet: &[u8], len: usize) -> Vec<String> {
        self.all()
            .map(|keys| answer_from(&keys.captcha_mac(id, seed), alphabet, len))
            .collect()
    }
}

/// Characters of `alphabet` from MAC bytes; rejection sampling keeps them uniform.
fn answer_from(mac: &[u8; 32], alphabet: &[u8], len: usize) -> String {
    let limit = 256 - 256 % alphabet.len();
    mac.iter()
        .filter(|&&byte| usize::from(byte) < limit)
        .take(len)
        .map(|&byte| char::from(alphabet[usize::from(byte) % alphabet.len()]))
        .collect()
}

#[cfg(test)]
mod tests {
    use sha2::Digest as _;

    use super::*;
    use crate::domain::CodeLength;

    /// A distinct key for each `n`: random-looking bytes (SHA-256 of `n`), as a real key is.
    fn key(n: u8) -> SecretKey {
        SecretKey::parse(&hex::encode(Sha256::digest([n]))).unwrap()
    }

    /// `openssl rand -hex 32` and `openssl rand -base64 32`.
    const HEX: &str = "b236b04907a66fde363b2dfc79984cb65411da9123cdac99ac8238b87abb534b";
    const BASE64: &str = "77owb33TNr78iBJsJ64o0r9TDdngxVqTREeNkidHXgM=";

    #[test]
    fn keys_are_hex_or_base64_of_32_bytes_or_more() {
        assert!(SecretKey::parse(HEX).is_ok());
        assert!(SecretKey::parse(BASE64).is_ok());
        assert!(SecretKey::parse(&format!("  {HEX}\n")).is_ok());
        assert!(SecretKey::parse(&HEX[..62]).is_err());
        assert!(SecretKey::parse("not a key").is_err());
        assert_eq!(
            format!("{:?}", SecretKey::parse(HEX).unwrap()),
            "SecretKey(***)"
        );
    }

    #[test]
    fn keys_that_do_not_look_random_are_refused_in_either_encoding() {
        use base64::Engine as _;
        for bytes in [
            vec![0u8; 32],
            vec![0xff; 32],
            [0xab, 0xcd].repeat(16),
            hex::decode("00112233445566778899aabbccddeeff")
                .unwrap()
                .repeat(2),
        ] {
            for raw in [
                hex::encode(&bytes),
                base64::engine::general_purpose::STANDARD.encode(&bytes),
            ] {
                let error = SecretKey::parse(&raw).unwrap_err();
                assert!(
                    error.starts_with("not random:") && error.contains("openssl rand"),
                    "{raw}: {error}"
                );
            }
        }
    }

    #[test]
    fn digests_bind_the_phone_the_purpose_and_the_key() {
        let ring = Keyring::new(&key(1), None);
        let code = Code::generate(CodeLength::default());
        let digest = ring.code_digest("+8613800138000", "login", &code);
        assert_eq!(digest, ring.code_digest("+8613800138000", "login", &code));
        assert_ne!(digest, ring.code_digest("+8613800138001", "login", &code));
        assert_ne!(
            digest,
            ring.code_digest("+8613800138000", "register", &code)
        );
        let other = Keyring::new(&key(2), None);
        assert_ne!(digest, other.code_digest("+8613800138000", "login", &code));
    }

    #[test]
    fn a_rotation_keeps_old_digests_and_seals_usable() {
        let (old, new) = (key(1), key(2));
        let before = Keyring::new(&old, None);
        let code = Code::generate(CodeLength::default());
        let digest = before.code_digest("+1", "login", &code);
        let sealed = before.seal_code(&digest, &code);
        let during = Keyring::new(&new, Some(&old));
        assert!(digest.is_any_of(&during.code_digests("+1", "login", &code)));
        assert_eq!(
            during.open_code("+1", "login", &digest, &sealed),
            Some(code.clone())
        );
        let after = Keyring::new(&new, None);
        assert!(!digest.is_any_of(&after.code_digests("+1", "login", &code)));
        assert_eq!(after.open_code("+1", "login", &digest, &sealed), None);
    }

    #[test]
    fn sealed_codes_open_only_beside_their_digest_and_hide_the_digits() {
        let ring = Keyring::new(&key(1), None);
        let code = Code::parse("123456", CodeLength::default()).unwrap();
        let digest = ring.code_digest("+1", "login", &code);
        let sealed = ring.seal_code(&digest, &code);
        assert_eq!(sealed.0.len(), 6, "a sealed code costs its own length");
        assert_ne!(&sealed.0[..], b"123456");
        assert_eq!(ring.open_code("+1", "login", &digest, &sealed), Some(code));

        // Another phone or purpose, another code's digest, another key: nothing opens.
        assert_eq!(ring.open_code("+2", "login", &digest, &sealed), None);
        assert_eq!(ring.open_code("+1", "register", &digest, &sealed), None);
        let other_code = Code::parse("654321", CodeLength::default()).unwrap();
        let other_digest = ring.code_digest("+1", "login", &other_code);
        assert_eq!(ring.open_code("+1", "login", &other_digest, &sealed), None);
        let stranger = Keyring::new(&key(2), None);
        assert_eq!(stranger.open_code("+1", "login", &digest, &sealed), None);

        // Any changed bit of the sealed code opens to nothing.
        for byte in 0..sealed.0.len() {
            for bit in 0..8 {
                let mut tampered = sealed.0.to_vec();
                tampered[byte] ^= 1 << bit;
                let tampered = SealedCode(tampered.into());
                assert_eq!(ring.open_code("+1", "login", &digest, &tampered), None);
            }
        }
    }

    #[test]
    fn two_codes_seal_under_different_nonces() {
        let ring = Keyring::new(&key(1), None);
        let (first, second) = (
            Code::parse("111111", CodeLength::default()).unwrap(),
            Code::parse("111112", CodeLength::default()).unwrap(),
        );
        let (first_digest, second_digest) = (
            ring.code_digest("+1", "login", &first),
            ring.code_digest("+1", "login", &second),
        );
        // XOR of two seals under one keystream would equal the XOR of the codes.
        let xor: Vec<u8> = ring
            .seal_code(&first_digest, &first)
            .0
            .iter()
            .zip(ring.seal_code(&second_digest, &second).0.iter())
            .map(|(a, b)| a ^ b)
            .collect();
        assert_ne!(xor, [0, 0, 0, 0, 0, 3]);
    }

    #[test]
    fn totp_secrets_open_beside_their_factor_under_either_key_of_a_rotation() {
        let (old, new) = (key(1), key(2));
        let before = Keyring::new(&old, None);
        let secret = [7u8; 20];
        let sealed = before.seal_secret("VA1/alice/YF1", &secret);
        assert_eq!(sealed.len(), 16 + 20);
        assert!(!sealed.windows(20).any(|window| window == secret));
        assert_eq!(
            before.open_secret("VA1/alice/YF1", &sealed),
            Some((secret.to_vec(), true))
        );
        assert_eq!(before.open_secret("VA1/alice/YF2", &sealed), None);
        let during = Keyring::new(&new, Some(&old));
        assert_eq!(
            during.open_secret("VA1/alice/YF1", &sealed),
            Some((secret.to_vec(), false)),
            "opened by the previous key: to seal again"
        );
        let resealed = during.seal_secret("VA1/alice/YF1", &secret);
        assert_eq!(
            during.open_secret("VA1/alice/YF1", &resealed),
            Some((secret.to_vec(), true))
        );
        let after = Keyring::new(&new, None);
        assert_eq!(after.open_secret("VA1/alice/YF1", &sealed), None);
        for byte in 0..sealed.len() {
            let mut tampered = sealed.clone();
            tampered[byte] ^= 1;
            assert_eq!(before.open_secret("VA1/alice/YF1", &tampered), None);
        }
        assert_eq!(before.open_secret("VA1/alice/YF1", &sealed[..10]), None);
    }

    #[test]
    fn captcha_answers_come_from_the_key_not_the_seed_alone() {
        let alphabet = b"ACDEFGHJKMNPQRTUVWXY34679";
        let ring = Keyring::new(&key(1), None);
        let answer = ring.captcha_answer("id", 7, alphabet, 5);
        assert_eq!(answer.len(), 5);
        assert!(answer.bytes().all(|c| alphabet.contains(&c)));
        assert_eq!(answer, ring.captcha_answer("id", 7, alphabet, 5));
        assert_ne!(
            answer,
            Keyring::new(&key(2), None).captcha_answer("id", 7, alphabet, 5)
        );
    }

    #[test]
    fn a_phones_id_says_where_it_leads_under_the_key_that_made_it_or_the_next() {
        let old = Keyring::new(&key(1), None);
        let id = old
            .phone_verification_id("+8613800138000", purpose_tag("login"))
            .unwrap();
        let located = LocatedId {
            phone_e164: "+8613800138000".to_owned(),
            purpose_tag: purpose_tag("login"),
        };
        assert_eq!(old.locate_id(&id), Some(located.clone()));
        // Through a rotation: the previous key still reads it; a keyring without it does not.
        assert_eq!(
            Keyring::new(&key(2), Some(&key(1))).locate_id(&id),
            Some(located)
        );
        assert_eq!(Keyring::new(&key(2), None).locate_id(&id), None);
        // Every length of number, and no two ids alike.
        for phone in ["+1", "+12", "+44207946000", "+999999999999999"] {
            let a = old
                .phone_verification_id(phone, purpose_tag("va0123"))
                .unwrap();
            let b = old
                .phone_verification_id(phone, purpose_tag("va0123"))
                .unwrap();
            assert_ne!(a, b);
            assert_eq!(old.locate_id(&a).unwrap().phone_e164, phone);
        }
        for not_e164 in [
            "8613800138000",
            "+",
            "+0123",
            "+1234567890123456",
            "+1 2",
            "a@b.c",
        ] {
            assert_eq!(
                old.phone_verification_id(not_e164, purpose_tag("login")),
                None,
                "{not_e164}"
            );
        }
    }

    #[test]
    fn ids_that_no_key_made_as_a_phones_rarely_read_as_one() {
        // A random id (an email's, or one from before these ids) reads as a phone's for about
        // 1 in 18,000 (1/256 for the first byte, 1.4 % for the number): its purpose's tag must
        // then match one the caller owns (1 in 2^24 each).
        let keyring = Keyring::new(&key(1), None);
        let located = (0..50_000)
            .filter(|_| keyring.locate_id(&VerificationId::generate()).is_some())
            .count();
        assert!(
            located < 15,
            "{located} of 50,000 random ids read as a phone's"
        );
    }
}
