//! One-time codes: digits drawn from a CSPRNG. A code's `Debug` is redacted so that it cannot
//! reach a log by accident.

use std::fmt;

use rand::RngExt;

/// How many digits a code has (`VCODE_CODE_LENGTH`, 4 to 10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeLength(u8);

impl CodeLength {
    pub const MIN: u8 = 4;
    pub const MAX: u8 = 10;

    pub fn new(len: u8) -> Option<Self> {
        (Self::MIN..=Self::MAX).contains(&len).then_some(Self(len))
    }

    pub fn get(self) -> usize {
        usize::from(self.0)
    }
}

impl Default for CodeLength {
    fn default() -> Self {
        Self(6)
    }
}

#[derive(Clone, PartialEq, Eq)]
pub struct Code(String);

impl Code {
    /// A fresh code from the thread-local CSPRNG (ChaCha, reseeded from the OS).
    pub fn generate(len: CodeLength) -> Self {
        let mut rng = rand::rng();
        Self(
            (0..len.get())
                .map(|_| char::from(b'0' + rng.random_range(0..10u8)))
                .collect(),
        )
    }

    /// A code as a user typed it: exactly `len` ASCII digits, surrounding spaces ignored.
    pub fn parse(input: &str, len: CodeLength) -> Option<Self> {
        let input = input.trim();
        (input.len() == len.get() && input.bytes().all(|b| b.is_ascii_digit()))
            .then(|| Self(input.to_owned()))
    }

    /// A code read back from a store, trusted to be what this service wrote.
    pub(crate) fn from_stored(stored: String) -> Self {
        Self(stored)
    }

    /// The digits. Callers are the store, the SMS text and the dev inbox, nothing that logs.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Compares in time independent of where the first difference is.
    pub fn matches(&self, other: &Code) -> bool {
        super::secret::constant_time_eq(self.0.as_bytes(), other.0.as_bytes())
    }
}

/// A code's digest under each key in use (the current one, and the previous while a rotation
/// settles), inline.
pub type CodeDigests = arrayvec::ArrayVec<CodeDigest, 2>;

/// A keyed hash of a code, bound to its phone and purpose: what the store keeps instead of the
/// code. 128 bits: guessing is bounded by the attempt limit, not by the digest's length.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CodeDigest(pub [u8; CodeDigest::LEN]);

impl CodeDigest {
    pub const LEN: usize = 16;

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// From stored bytes; `None` unless exactly [`Self::LEN`].
    pub fn from_slice(bytes: &[u8]) -> Option<Self> {
        bytes.try_into().ok().map(Self)
    }

    /// Whether this digest is one of `candidates`, each compared in constant time.
    pub fn is_any_of(&self, candidates: &[CodeDigest]) -> bool {
        candidates.iter().fold(false, |found, candidate| {
            found | super::secret::constant_time_eq(&self.0, &candidate.0)
        })
    }
}

impl fmt::Debug for CodeDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CodeDigest(..)")
    }
}

/// A code sealed under the service's key, opened only beside its digest (see `keyring`): kept
/// only where the resend policy must deliver the same code again. Opaque to the store.
#[derive(Clone, PartialEq, Eq)]
pub struct SealedCode(pub Box<[u8]>);

impl fmt::Debug for SealedCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SealedCode({} bytes)", self.0.len())
    }
}

impl fmt::Debug for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Code(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn generated_codes_have_the_configured_length_and_only_digits() {
        for len in CodeLength::MIN..=CodeLength::MAX {
            let len = CodeLength::new(len).unwrap();
            let code = Code::generate(len);
            assert_eq!(code.expose().len(), len.get());
            assert!(code.expose().bytes().all(|b| b.is_ascii_digit()));
        }
    }

    #[test]
    fn generated_codes_are_spread_over_all_digits() {
        let codes: Vec<Code> = (0..2000)
            .map(|_| Code::generate(CodeLength::default()))
            .collect();
        let distinct: HashSet<&str> = codes.iter().map(Code::expose).collect();
        // 2000 draws from 10^6 values: a repeat-heavy generator would fall far below this.
        assert!(distinct.len() > 1990, "only {} distinct", distinct.len());
        for digit in b'0'..=b'9' {
            assert!(codes.iter().any(|c| c.expose().as_bytes()[0] == digit));
        }
    }

    #[test]
    fn parse_takes_exact_length_digits_only() {
        let six = CodeLength::default();
        assert_eq!(Code::parse(" 012345 ", six).unwrap().expose(), "012345");
        for bad in ["", "12345", "1234567", "12345a", "１２３４５６", "-12345"] {
            assert!(Code::parse(bad, six).is_none(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn length_bounds() {
        assert!(CodeLength::new(3).is_none());
        assert!(CodeLength::new(11).is_none());
        assert_eq!(CodeLength::new(4).unwrap().get(), 4);
    }

    #[test]
    fn matches_compares_whole_codes() {
        let six = CodeLength::default();
        let a = Code::parse("123456", six).unwrap();
        assert!(a.matches(&Code::parse("123456", six).unwrap()));
        assert!(!a.matches(&Code::parse("123457", six).unwrap()));
        assert!(!a.matches(&Code::from_stored("12345".into())));
    }

    #[test]
    fn debug_never_shows_digits() {
        let code = Code::parse("987654", CodeLength::default()).unwrap();
        assert!(!format!("{code:?}").contains("987654"));
    }
}
