//! The one way secrets are compared: in time independent of their content.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Whether `a` equals `b`, in time independent of where they differ. The length is not
/// hidden: use it for values of a public length (codes, captcha answers, MACs).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

/// Whether `presented` equals `expected`, in time independent of both their contents and their
/// lengths (the digests compared are of one length): for bearer tokens and API keys.
pub fn same_secret(presented: &[u8], expected: &[u8]) -> bool {
    constant_time_eq(&Sha256::digest(presented), &Sha256::digest(expected))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_only_when_every_byte_and_the_length_agree() {
        assert!(constant_time_eq(b"123456", b"123456"));
        assert!(!constant_time_eq(b"123456", b"123457"));
        assert!(!constant_time_eq(b"12345", b"123456"));
        assert!(same_secret(b"token-0123456789", b"token-0123456789"));
        assert!(!same_secret(b"token-0123456789", b"token-012345678"));
        assert!(!same_secret(b"", b"token"));
    }
}
