//! Twilio's resource identifiers: two letters and 32 hex digits. A Verification's `VE…` SID is
//! a vcode verification id written in Twilio's form (the same 16 bytes in hex), so the one
//! names the other without a table; Services, accounts and send attempts get random SIDs.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngExt;

use crate::domain::{Purpose, VerificationId};

pub const ACCOUNT: &str = "AC";
pub const API_KEY: &str = "SK";
pub const SERVICE: &str = "VA";
pub const VERIFICATION: &str = "VE";
pub const SEND_ATTEMPT: &str = "VL";
pub const RATE_LIMIT: &str = "RK";
pub const BUCKET: &str = "BL";
pub const SAFE_LIST: &str = "GN";

/// A new SID with `prefix`: 128 bits from the CSPRNG, in lower-case hex as Twilio writes them.
pub fn generate(prefix: &str) -> String {
    with_hex(prefix, &rand::rng().random::<[u8; 16]>())
}

/// `prefix` and the 32 lower-case hex digits of `bytes`, in one allocation.
fn with_hex(prefix: &str, bytes: &[u8; 16]) -> String {
    let mut digits = [0u8; 32];
    hex::encode_to_slice(bytes, &mut digits).expect("32 digits for 16 bytes");
    let mut sid = String::with_capacity(prefix.len() + 32);
    sid.push_str(prefix);
    sid.push_str(std::str::from_utf8(&digits).expect("hex digits are ASCII"));
    sid
}

/// The `GN…` SID of an account's Safe List number: a digest of the account and the number, so
/// that every instance and every restart names it alike without storing it (shown only to
/// that account, which knows the number).
pub fn of_safe_number(account: &str, e164: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::new()
        .chain_update(b"vcode safe list\0")
        .chain_update(account)
        .chain_update(b"\0")
        .chain_update(e164)
        .finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    with_hex(SAFE_LIST, &bytes)
}

/// Whether `raw` is a SID with `prefix` (hex in either case, as Twilio's spec allows).
pub fn is_sid(raw: &str, prefix: &str) -> bool {
    raw.len() == 34
        && raw.starts_with(prefix)
        && raw.as_bytes()[2..].iter().all(u8::is_ascii_hexdigit)
}

/// The `VE…` SID of a verification id.
pub fn of_verification(id: &VerificationId) -> String {
    of_verification_text(id.as_str()).expect("a verification id is base64 of 16 bytes")
}

/// The `VE…` SID of a verification id as stored (a send log's), without making the id
/// first; `None` unless it is base64 of exactly 16 bytes.
pub fn of_verification_text(id: &str) -> Option<String> {
    let mut bytes = [0u8; 16];
    match URL_SAFE_NO_PAD.decode_slice(id, &mut bytes) {
        Ok(16) if id.len() == 22 => Some(with_hex(VERIFICATION, &bytes)),
        _ => None,
    }
}

/// The verification id a `VE…` SID names; `None` for anything else.
pub fn verification_id(sid: &str) -> Option<VerificationId> {
    if !is_sid(sid, VERIFICATION) {
        return None;
    }
    let mut bytes = [0u8; 16];
    hex::decode_to_slice(&sid[2..], &mut bytes).ok()?;
    Some(VerificationId::from_bytes(bytes))
}

/// The purpose a Service's codes are kept under, apart from every other Service's and from
/// `VCODE_PURPOSES` (which are names, never `va` and 30 hex digits): `va` and the first 30 of
/// its SID's 32 hex digits (a purpose is at most 32 characters; 120 random bits still never
/// meet).
pub fn purpose_of(service: &str) -> Purpose {
    // Written in one buffer: every start and check names its Service's purpose.
    let mut purpose = [0u8; 32];
    purpose[..2].copy_from_slice(b"va");
    let digits = service.get(2..32).unwrap_or_default().as_bytes();
    purpose[2..2 + digits.len()].copy_from_slice(digits);
    purpose.make_ascii_lowercase();
    std::str::from_utf8(&purpose[..2 + digits.len()])
        .ok()
        .and_then(Purpose::parse)
        .expect("a Service SID's hex is a valid purpose")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_id_becomes_its_sid_only_when_it_is_an_id() {
        for _ in 0..100 {
            let id = VerificationId::generate();
            assert_eq!(
                of_verification_text(id.as_str()),
                Some(of_verification(&id))
            );
        }
        let id = VerificationId::generate();
        for broken in [
            "",
            &id.as_str()[1..],
            &format!("{}A", id.as_str()),
            "!!!!!!!!!!!!!!!!!!!!!!",
            "AAAAAAAAAAAAAAAAAAAAAA==",
        ] {
            assert_eq!(of_verification_text(broken), None, "{broken:?}");
        }
    }

    #[test]
    fn a_verification_sid_and_its_id_name_each_other() {
        let id = VerificationId::generate();
        let sid = of_verification(&id);
        assert!(is_sid(&sid, VERIFICATION), "{sid}");
        assert_eq!(verification_id(&sid), Some(id));
        let upper = format!("VE{}", sid[2..].to_ascii_uppercase());
        assert_eq!(
            verification_id(&upper).map(|id| of_verification(&id)),
            Some(sid)
        );
    }

    #[test]
    fn anything_else_names_no_verification() {
        for raw in [
            "",
            "VE",
            "VA0123456789abcdef0123456789abcdef",
            "VE0123456789abcdef0123456789abcde",
            "VE0123456789abcdef0123456789abcdeg",
            "VE0123456789abcdef0123456789abcdef0",
        ] {
            assert_eq!(verification_id(raw), None, "{raw}");
        }
    }

    #[test]
    fn a_safe_number_s_sid_is_its_account_s_and_number_s() {
        let sid = of_safe_number("AC1", "+447400123456");
        assert!(is_sid(&sid, SAFE_LIST), "{sid}");
        assert_eq!(sid, of_safe_number("AC1", "+447400123456"));
        assert_ne!(sid, of_safe_number("AC2", "+447400123456"));
        assert_ne!(sid, of_safe_number("AC1", "+447400123457"));
    }

    #[test]
    fn services_have_purposes_of_their_own() {
        let (a, b) = (generate(SERVICE), generate(SERVICE));
        assert!(is_sid(&a, SERVICE));
        assert_ne!(purpose_of(&a), purpose_of(&b));
        assert_eq!(purpose_of(&a).as_str().len(), 32);
        let upper = format!("VA{}", a[2..].to_ascii_uppercase());
        assert_eq!(purpose_of(&a), purpose_of(&upper));
    }
}
