//! Verification ids: what `otp/send` answers, so that only its requester can spend the code it
//! sent. 128 bits, written as 22 characters of URL-safe base64 (no padding): from the CSPRNG,
//! or for a phone one AES block under the keyring that also says where it leads
//! (`Keyring::phone_verification_id`).

use std::fmt;

use arrayvec::ArrayString;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngExt;

const ID_BYTES: usize = 16;
/// 16 bytes in unpadded base64.
const ID_LEN: usize = 22;

/// Kept inline (its 22 characters): a send makes one and copies it into its verification, its
/// pending code and its answer, each a heap allocation while it was a `String`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct VerificationId(ArrayString<ID_LEN>);

impl VerificationId {
    pub fn generate() -> Self {
        Self::from_bytes(rand::rng().random())
    }

    /// Exactly what `generate` writes: 22 URL-safe base64 characters that decode to 16 bytes
    /// and encode back the same (no stray low bits). Anything else is no verification at all.
    /// Checked character by character rather than by decoding and encoding again (two
    /// allocations and the base64 engine on every verify by id; 0.99x of its instructions).
    pub fn parse(input: &str) -> Option<Self> {
        let (&last, rest) = input.as_bytes().split_last()?;
        if input.len() != ID_LEN || !rest.iter().all(|&c| sextet(c).is_some()) {
            return None;
        }
        // 22 characters carry 132 bits: the last one's low 4 bits are past the 128th, zero.
        let padding = (1u8 << (ID_LEN * 6 - ID_BYTES * 8)) - 1;
        if sextet(last)? & padding != 0 {
            return None;
        }
        ArrayString::from(input).ok().map(Self)
    }

    /// The id of these 16 bytes (what `generate` draws): the `VE…` SID of a Twilio Verify
    /// verification names its id this way.
    pub fn from_bytes(bytes: [u8; ID_BYTES]) -> Self {
        let mut text = [0u8; ID_LEN];
        let written = URL_SAFE_NO_PAD
            .encode_slice(bytes, &mut text)
            .expect("16 bytes are 22 characters of base64");
        debug_assert_eq!(written, ID_LEN);
        let text = std::str::from_utf8(&text).expect("base64 is ASCII");
        Self(ArrayString::from(text).expect("22 characters"))
    }

    /// Its 16 bytes (what `from_bytes` takes).
    pub fn to_bytes(&self) -> [u8; ID_BYTES] {
        let mut bytes = [0u8; ID_BYTES];
        URL_SAFE_NO_PAD
            .decode_slice(self.0.as_bytes(), &mut bytes)
            .expect("an id is 22 characters of base64 of 16 bytes");
        bytes
    }

    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

/// The value of one character of URL-safe base64.
fn sextet(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'-' => Some(62),
        b'_' => Some(63),
        _ => None,
    }
}

// As its text: a send's answer kept for an `Idempotency-Key` carries it.
impl serde::Serialize for VerificationId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.as_str())
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
        write!(f, "VerificationId({})", self.0.as_str())
    }
}

impl fmt::Display for VerificationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_str())
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
            // The last character carries 2 bits of the id; its other 4 must be zero.
            "AAAAAAAAAAAAAAAAAAAAAB",
        ] {
            assert_eq!(VerificationId::parse(input), None, "{input:?}");
        }
        assert!(VerificationId::parse("AAAAAAAAAAAAAAAAAAAAAA").is_some());
    }

    /// What the base64 crate says: decodes to 16 bytes and encodes back the same.
    fn canonical(input: &str) -> bool {
        URL_SAFE_NO_PAD
            .decode(input)
            .is_ok_and(|bytes| bytes.len() == ID_BYTES && URL_SAFE_NO_PAD.encode(&bytes) == input)
    }

    #[test]
    fn parse_agrees_with_a_decode_and_encode_on_every_byte_in_every_place() {
        let id = VerificationId::generate();
        let mut tried = 0;
        for at in 0..ID_LEN {
            for byte in 0..=u8::MAX {
                let mut input = id.as_str().as_bytes().to_vec();
                input[at] = byte;
                let Ok(input) = String::from_utf8(input) else {
                    continue;
                };
                assert_eq!(
                    VerificationId::parse(&input).is_some(),
                    canonical(&input),
                    "{input:?}"
                );
                tried += 1;
            }
        }
        assert_eq!(tried, ID_LEN * 128, "every ASCII byte in every place");
    }
}
