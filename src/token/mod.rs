//! Verification tokens: after a code is verified, a JWT signed with Ed25519 (EdDSA) that a
//! backend checks against the published keys (`GET /.well-known/jwks.json`) without calling
//! the service. Claims: `iss`, `sub` (the E.164 phone), `purpose`, `iat`, `exp`, `jti`, the
//! `aud` the caller asked for and `vid`, the verification id the code was verified under. Keys are in `keys`, settings in `settings`.

mod keys;
mod settings;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::Signer as _;
use ed25519_dalek::pkcs8::DecodePrivateKey as _;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, Header};
use rand::RngExt;
use serde::{Deserialize, Serialize};

use crate::domain::Channel;

pub use self::keys::{SigningKey, jwk_set, parse_pem_keys};
pub use self::settings::TokenSettings;

/// The longest `aud` or `iss` accepted.
pub const MAX_CLAIM_TEXT: usize = 256;
/// What a claim given as text must be (the issuer, an audience).
pub const CLAIM_TEXT_RULE: &str = "expected 1 to 256 visible ASCII characters";

/// `raw` if it may be a token's `iss` or `aud`: 1 to 256 visible ASCII characters (a URL, a
/// client id), nothing a log line or a header could be confused by.
pub fn claim_text(raw: &str) -> Option<&str> {
    let fits =
        (1..=MAX_CLAIM_TEXT).contains(&raw.len()) && raw.bytes().all(|b| b.is_ascii_graphic());
    fits.then_some(raw)
}

/// The audience a caller asked the token to name (`aud`), already checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Audience(String);

impl Audience {
    pub fn parse(raw: &str) -> Option<Self> {
        claim_text(raw).map(|text| Self(text.to_owned()))
    }
}

/// A token's claims, as signed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub iss: String,
    pub sub: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aud: Option<String>,
    pub purpose: String,
    pub iat: u64,
    pub exp: u64,
    pub jti: String,
    /// The verification id (`otp/send`'s `verification_id`) the code was verified under;
    /// absent for a verify by phone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vid: Option<String>,
    /// How the code travelled: `sms` (`sub` is an E.164 phone) or `email` (`sub` is the
    /// address, its domain in lower-case A-labels and the whole folded to lower case). A token
    /// from before the claim existed is an SMS one.
    #[serde(default = "sms_channel")]
    pub channel: String,
}

fn sms_channel() -> String {
    Channel::Sms.as_str().to_owned()
}

#[derive(Debug, thiserror::Error)]
#[error("token signing failed: {0}")]
pub struct TokenError(#[from] serde_json::Error);

/// Signs tokens with the first key; publishes all of them.
pub struct TokenIssuer {
    keys: Vec<SigningKey>,
    header: Header,
    /// The header as it starts every token (base64url JSON), encoded once.
    encoded_header: String,
    /// The first key, parsed once: `jsonwebtoken::encode` parses its PKCS#8 key and derives
    /// the public key on every call, which doubled the cost of a token (benches/token.rs).
    signer: ed25519_dalek::SigningKey,
    jwks: JwkSet,
    settings: TokenSettings,
}

impl std::fmt::Debug for TokenIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenIssuer")
            .field("keys", &self.keys)
            .field("settings", &self.settings)
            .finish()
    }
}

impl TokenIssuer {
    /// An issuer signing with `keys[0]`; panics on no key (the settings refuse that).
    pub fn new(keys: Vec<SigningKey>, settings: TokenSettings) -> Self {
        let signing = keys.first().expect("at least one token key");
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(signing.kid.clone());
        let signer = ed25519_dalek::SigningKey::from_pkcs8_der(signing.private.as_bytes())
            .expect("token keys are checked Ed25519 PKCS#8 keys");
        let header_json = serde_json::to_vec(&header).expect("a header serialises");
        Self {
            jwks: jwk_set(&keys),
            encoded_header: URL_SAFE_NO_PAD.encode(header_json),
            signer,
            header,
            keys,
            settings,
        }
    }

    /// The `kid` new tokens carry.
    pub fn signing_kid(&self) -> &str {
        &self.keys[0].kid
    }

    /// The public keys, for `GET /.well-known/jwks.json`.
    pub fn jwks(&self) -> &JwkSet {
        &self.jwks
    }

    pub fn ttl(&self) -> Duration {
        self.settings.ttl
    }

    /// A token saying `phone` (E.164) was verified just now for `purpose`.
    pub fn issue(
        &self,
        phone: &str,
        purpose: &str,
        audience: Option<&Audience>,
    ) -> Result<String, TokenError> {
        self.issue_for(phone, Channel::Sms, purpose, audience, None)
    }

    /// `issue` for a destination of either channel (`subject`: its key, `channel`: the
    /// `channel` claim), naming the verification id the code was verified under (`vid`).
    pub fn issue_for(
        &self,
        subject: &str,
        channel: Channel,
        purpose: &str,
        audience: Option<&Audience>,
        verification: Option<&str>,
    ) -> Result<String, TokenError> {
        self.issue_on(subject, channel.as_str(), purpose, audience, verification)
    }

    /// The same token for a check on `channel` by its name: `totp` for an authenticator
    /// app's code, whose subject is the factor's identity.
    pub fn issue_on(
        &self,
        subject: &str,
        channel: &str,
        purpose: &str,
        audience: Option<&Audience>,
        verification: Option<&str>,
    ) -> Result<String, TokenError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let claims = Claims {
            iss: self.settings.issuer.clone(),
            sub: subject.to_owned(),
            aud: audience.map(|audience| audience.0.clone()),
            purpose: purpose.to_owned(),
            iat: now,
            exp: now + self.settings.ttl.as_secs(),
            jti: random_jti(),
            vid: verification.map(str::to_owned),
            channel: channel.to_owned(),
        };
        // The JWS compact form (RFC 7515): header.claims.signature, each base64url.
        let mut token = String::with_capacity(320);
        token.push_str(&self.encoded_header);
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(serde_json::to_vec(&claims)?, &mut token);
        let signature = self.signer.sign(token.as_bytes());
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(signature.to_bytes(), &mut token);
        Ok(token)
    }

    /// The same token through `jsonwebtoken::encode` (key parsed per call): the benchmark's
    /// reference, and the tests' proof that both forms agree.
    pub fn issue_with_jsonwebtoken(&self, claims: &Claims) -> String {
        jsonwebtoken::encode(&self.header, claims, &self.keys[0].private)
            .expect("a checked key signs")
    }
}

/// 128 bits from the thread's CSPRNG, base64url: unique per token, unguessable.
fn random_jti() -> String {
    let mut bytes = [0u8; 16];
    rand::rng().fill(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests;
