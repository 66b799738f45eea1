//! The token signing keys: read from PEM (one or more PKCS#8 Ed25519 private keys, the first
//! signs, the others are only published) or derived from the service's secret key, each named
//! by its RFC 7638 thumbprint (`kid`), and the JWK Set (RFC 7517) that publishes them.

use jsonwebtoken::jwk::{
    CommonParameters, Jwk, JwkSet, KeyAlgorithm, PublicKeyUse, ThumbprintHash,
};
use jsonwebtoken::{Algorithm, EncodingKey};

/// PKCS#8 v1 (RFC 8410) of an Ed25519 private key: this prefix, then the 32-byte seed.
const ED25519_PKCS8_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];
const PEM_BEGIN: &str = "-----BEGIN PRIVATE KEY-----";
const PEM_END: &str = "-----END PRIVATE KEY-----";

/// One signing key: the private half, and its public JWK (with its `kid`).
#[derive(Clone)]
pub struct SigningKey {
    pub kid: String,
    pub private: EncodingKey,
    pub public: Jwk,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.kid)
            .finish()
    }
}

impl SigningKey {
    fn from_encoding_key(private: EncodingKey) -> Result<Self, String> {
        let mut public = Jwk::from_encoding_key(&private, Algorithm::EdDSA)
            .map_err(|error| format!("not an Ed25519 key: {error}"))?;
        // A kid every instance computes alike from the key alone: no naming to keep in step.
        let kid = public
            .thumbprint(ThumbprintHash::SHA256)
            .map_err(|error| format!("no thumbprint: {error}"))?;
        public.common = CommonParameters {
            public_key_use: Some(PublicKeyUse::Signature),
            key_algorithm: Some(KeyAlgorithm::EdDSA),
            key_id: Some(kid.clone()),
            ..CommonParameters::default()
        };
        Ok(Self {
            kid,
            private,
            public,
        })
    }

    /// The Ed25519 key whose private seed is `seed` (32 bytes, secret).
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        let der = [&ED25519_PKCS8_PREFIX[..], &seed[..]].concat();
        Self::from_encoding_key(EncodingKey::from_ed_der(&der))
            .expect("a 32-byte seed is an Ed25519 key")
    }
}

/// Every `PRIVATE KEY` block of `pem`, in order; anything else (comments, other blocks) is
/// refused so that a wrong file is noticed. Errors say which block and why, never its content.
pub fn parse_pem_keys(pem: &str) -> Result<Vec<SigningKey>, String> {
    let mut keys = Vec::new();
    let mut rest = pem.trim();
    while !rest.is_empty() {
        let number = keys.len() + 1;
        let Some(body) = rest.strip_prefix(PEM_BEGIN) else {
            return Err(format!(
                "block {number}: expected {PEM_BEGIN} (PKCS#8 Ed25519: `openssl genpkey -algorithm ed25519`)"
            ));
        };
        let Some(end) = body.find(PEM_END) else {
            return Err(format!("block {number}: no {PEM_END}"));
        };
        let block = format!("{PEM_BEGIN}{}{PEM_END}", &body[..end]);
        let private = EncodingKey::from_ed_pem(block.as_bytes())
            .map_err(|_| format!("block {number}: not a PKCS#8 Ed25519 private key"))?;
        let key = SigningKey::from_encoding_key(private)
            .map_err(|reason| format!("block {number}: {reason}"))?;
        if keys.iter().any(|known: &SigningKey| known.kid == key.kid) {
            return Err(format!("block {number}: the same key twice"));
        }
        keys.push(key);
        rest = body[end + PEM_END.len()..].trim_start();
    }
    if keys.is_empty() {
        return Err("expected at least one PKCS#8 Ed25519 private key".to_owned());
    }
    Ok(keys)
}

/// The public JWK Set of `keys`.
pub fn jwk_set(keys: &[SigningKey]) -> JwkSet {
    JwkSet {
        keys: keys.iter().map(|key| key.public.clone()).collect(),
    }
}
