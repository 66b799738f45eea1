//! Redis key layout (DESIGN.md). Every key of one phone carries the hash tag `{<E.164>}` so a
//! script touching several of them stays on one Cluster slot.

use crate::domain::{CaptchaId, Phone, Purpose};
use crate::idempotency::IdempotencyKey;
use crate::store::QuotaScope;

pub const PREFIX: &str = "verify_code:";

/// `verify_code:{+8613800138000}:login`: the pending code for (phone, purpose).
pub fn code(phone: &Phone, purpose: &Purpose) -> String {
    format!("{PREFIX}{{{}}}:{}", phone.as_e164(), purpose.as_str())
}

/// `verify_code:quota:{+8613800138000}:sends`: the phone's SMS log (sliding-window quota).
pub fn phone_sends(phone: &Phone) -> String {
    format!("{PREFIX}quota:{{{}}}:sends", phone.as_e164())
}

/// `verify_code:quota:{+8613800138000}:fails`: the phone's failed-verify log.
pub fn phone_failures(phone: &Phone) -> String {
    format!("{PREFIX}quota:{{{}}}:fails", phone.as_e164())
}

/// `verify_code:quota:ip:{203.0.113.7}` or `verify_code:quota:global`.
pub fn quota(scope: QuotaScope) -> String {
    match scope {
        QuotaScope::ClientIp(ip) => format!("{PREFIX}quota:ip:{{{ip}}}"),
        QuotaScope::Global => format!("{PREFIX}quota:global"),
    }
}

/// `verify_code:idem:{<digest of the Idempotency-Key>}`.
pub fn idempotency(key: &IdempotencyKey) -> String {
    format!("{PREFIX}idem:{{{}}}", key.as_str())
}

/// `verify_code:stats:2026-11-29`: one day's counters.
pub fn stats(date: &str) -> String {
    format!("{PREFIX}stats:{date}")
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
        assert_eq!(
            phone_sends(&phone),
            "verify_code:quota:{+8613800138000}:sends"
        );
        assert_eq!(
            phone_failures(&phone),
            "verify_code:quota:{+8613800138000}:fails"
        );
        let ip = QuotaScope::ClientIp("203.0.113.7".parse().unwrap());
        assert_eq!(quota(ip), "verify_code:quota:ip:{203.0.113.7}");
        assert_eq!(quota(QuotaScope::Global), "verify_code:quota:global");
        let id = CaptchaId::parse("0123456789abcdef0123456789abcdef").unwrap();
        assert_eq!(
            captcha(&id),
            "verify_code:captcha:{0123456789abcdef0123456789abcdef}"
        );
    }
}
