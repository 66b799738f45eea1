//! Standard Webhooks signing (standardwebhooks.com): a secret is `whsec_` and the base64 of
//! its key; a request carries `webhook-id`, `webhook-timestamp` (unix seconds) and
//! `webhook-signature`, `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`, one per secret
//! in use, separated by spaces, so a receiver holding either the old or the new secret during a
//! rotation verifies the request.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use secrecy::{ExposeSecret, SecretSlice};
use sha2::Sha256;

pub const ID_HEADER: &str = "webhook-id";
pub const TIMESTAMP_HEADER: &str = "webhook-timestamp";
pub const SIGNATURE_HEADER: &str = "webhook-signature";

const PREFIX: &str = "whsec_";
/// Fewer key bytes could be guessed offline from one captured request.
const MIN_KEY_BYTES: usize = 24;

/// One signing secret; `Debug` shows nothing of it.
#[derive(Clone)]
pub struct WebhookSecret(SecretSlice<u8>);

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("whsec_***")
    }
}

impl WebhookSecret {
    /// `whsec_<base64>` of at least 24 bytes; the reason otherwise (never showing the secret).
    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        let encoded = raw
            .trim()
            .strip_prefix(PREFIX)
            .ok_or("expected whsec_ followed by the base64 of the key (Standard Webhooks)")?;
        let key = STANDARD
            .decode(encoded)
            .map_err(|_| "the part after whsec_ is not base64")?;
        if key.len() < MIN_KEY_BYTES {
            return Err(
                "the key is shorter than 24 bytes (`echo whsec_$(openssl rand -base64 32)`)",
            );
        }
        Ok(Self(key.into()))
    }

    /// Several secrets, separated by spaces or commas: all sign during a rotation.
    pub fn parse_list(raw: &str) -> Result<Vec<Self>, &'static str> {
        let secrets = raw
            .split([' ', ',', '\n'])
            .filter(|item| !item.trim().is_empty())
            .map(Self::parse)
            .collect::<Result<Vec<_>, _>>()?;
        if secrets.is_empty() {
            return Err("no secret given");
        }
        Ok(secrets)
    }

    /// `v1,<base64>` of the HMAC-SHA256 of `"<id>.<timestamp>.<body>"`.
    pub fn sign(&self, id: &str, timestamp: u64, body: &[u8]) -> String {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(self.0.expose_secret())
            .expect("HMAC takes any key");
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }
}

/// The `webhook-signature` value: one signature per secret.
pub fn signature_header(
    secrets: &[WebhookSecret],
    id: &str,
    timestamp: u64,
    body: &[u8],
) -> String {
    secrets
        .iter()
        .map(|secret| secret.sign(id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks reference libraries' tests.
    #[test]
    fn signs_as_the_reference_libraries() {
        let secret = WebhookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let signature = secret.sign(
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1_614_265_330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn a_rotation_signs_with_every_secret() {
        let old = WebhookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let new = WebhookSecret::parse(&format!("whsec_{}", STANDARD.encode([7u8; 32]))).unwrap();
        let header = signature_header(&[old.clone(), new.clone()], "msg_1", 1, b"{}");
        let parts: Vec<&str> = header.split(' ').collect();
        assert_eq!(
            parts,
            [old.sign("msg_1", 1, b"{}"), new.sign("msg_1", 1, b"{}")]
        );
        assert_ne!(parts[0], parts[1]);
    }

    #[test]
    fn refuses_what_is_not_a_secret() {
        assert!(WebhookSecret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_err());
        assert!(WebhookSecret::parse("whsec_%%%").is_err());
        assert!(WebhookSecret::parse("whsec_c2hvcnQ=").is_err());
        assert!(
            format!(
                "{:?}",
                WebhookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap()
            )
            .ends_with("***")
        );
    }
}
