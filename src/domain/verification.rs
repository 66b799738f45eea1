//! Verification ids: what `otp/send` answers, so that only its requester can spend the code it
//! sent. 128 bits from the CSPRNG, written as 22 characters of URL-safe base64 (no padding).

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngExt;

const ID_BYTES: usize = 16;
/// 16 bytes in unpadded base64.
const ID_LEN: usize = 22;

#[derive(Clone, PartialEq, Eq, Hash)]
pub struct VerificationId(String);

impl VerificationId {
    pub fn generate() -> Self {
        let bytes: [u8; ID_BYTES] = rand::rng().random();
        Self(URL_SAFE_NO_PAD.encode(bytes))
    }

    /// Exactly what `generate` writes: 22 URL-safe base64 characters that decode to 16 bytes
    /// and encode back the same (no stray low bits). Anything else is no verification at all.
    pub fn parse(input: &str) -> Option<Self> {
        if input.len() != ID_LEN {
            return None;
        }
        let bytes = URL_SAFE_NO_PAD.decode(input).ok()?;
        (bytes.len() == ID_BYTES && URL_SAFE_NO_PAD.encode(&bytes) == input)
            .then(|| Self(input.to_owned()))
    }

    /// The id of these 16 bytes (what `generate` draws): the `VE…` SID of a Twilio Verify
    /// verification names its id this way.
    pub fn from_bytes(bytes: [u8; ID_BYTES]) -> Self {
        Self(URL_SAFE_NO_PAD.encode(bytes))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

// As its text: a send's answer kept for an `Idempotency-Key` carries it.
impl serde::Serialize for VerificationId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for VerificationId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text).ok_or_else(|| serde::de::Error::custom("not a verification id"))
    }
}

impl fmt::Debug for VerificationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VerificationId({})", self.0)
    }
}

impl fmt::Display for VerificationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_parse_and_differ() {
        let a = VerificationId::generate();
        let b = VerificationId::generate();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), ID_LEN);
        assert_eq!(VerificationId::parse(a.as_str()), Some(a));
    }

    #[test]
    fn anything_else_is_refused() {
        for input in [
            "",
            "short",
            "AAAAAAAAAAAAAAAAAAAAAAA",
            "AAAAAAAAAAAAAAAAAAAA+A",
            "AAAAAAAAAAAAAAAAAAAA/A",
            "AAAAAAAAAAAAAAAAAAAAA=",
            // The last character carries 2 bits that must be zero.
            "AAAAAAAAAAAAAAAAAAAAAB",
        ] {
            assert_eq!(VerificationId::parse(input), None, "{input:?}");
        }
        assert!(VerificationId::parse("AAAAAAAAAAAAAAAAAAAAAA").is_some());
    }
}
