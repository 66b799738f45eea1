//! Redis key layout (DESIGN.md). Every key of one phone carries the hash tag `{<E.164>}` so a
//! script touching several of them stays on one Cluster slot.

use crate::domain::{CaptchaId, Phone, Purpose};

pub const PREFIX: &str = "verify_code:";

/// `verify_code:{+8613800138000}:login`: the pending code for (phone, purpose).
pub fn code(phone: &Phone, purpose: &Purpose) -> String {
    format!("{PREFIX}{{{}}}:{}", phone.as_e164(), purpose.as_str())
}

/// `verify_code:dev-outbox:{+8613800138000}`: the dev outbox of one phone.
pub fn outbox(phone_e164: &str) -> String {
    format!("{PREFIX}dev-outbox:{{{phone_e164}}}")
}

/// `verify_code:captcha:{<id>}`: a captcha's answer and picture seed.
pub fn captcha(id: &CaptchaId) -> String {
    format!("{PREFIX}captcha:{{{}}}", id.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Region;

    #[test]
    fn keys_follow_the_documented_layout() {
        let phone = Phone::parse("13800138000", Region::default()).unwrap();
        let purpose = Purpose::default();
        assert_eq!(code(&phone, &purpose), "verify_code:{+8613800138000}:login");
        assert_eq!(
            outbox(phone.as_e164()),
            "verify_code:dev-outbox:{+8613800138000}"
        );
        let id = CaptchaId::parse("0123456789abcdef0123456789abcdef").unwrap();
        assert_eq!(
            captcha(&id),
            "verify_code:captcha:{0123456789abcdef0123456789abcdef}"
        );
    }
}
