//! Captcha ids and answers. An id is 128 bits from the CSPRNG; an answer is drawn from
//! [`CaptchaAnswer::ALPHABET`], compared case-insensitively, ignoring surrounding spaces, and an
//! empty answer never matches.

use std::fmt;

use rand::RngExt;

/// 32 lower-case hex digits.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct CaptchaId(String);

const ID_LEN: usize = 32;

impl CaptchaId {
    pub fn generate() -> Self {
        let bytes: [u8; ID_LEN / 2] = rand::rng().random();
        Self(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// Anything else (empty, too long, other characters) is no captcha at all.
    pub fn parse(input: &str) -> Option<Self> {
        (input.len() == ID_LEN
            && input
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .then(|| Self(input.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for CaptchaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CaptchaId({})", self.0)
    }
}

impl fmt::Display for CaptchaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a person typed, normalised for comparison.
#[derive(Clone, PartialEq, Eq)]
pub struct CaptchaAnswer(String);

/// Longer than any answer; longer input is refused unnormalised.
const MAX_ANSWER_INPUT: usize = 64;

impl CaptchaAnswer {
    /// Characters an answer is drawn from: upper-case letters and digits without the pairs that
    /// read alike once distorted: 0/O/Q and 1/I/L (a Q whose tail a stroke crosses reads as
    /// O), 2/Z, 5/S, 8/B, and 7/T (a tilted T crossed by a stroke reads as 7).
    pub const ALPHABET: &'static [u8] = b"34679ACDEFGHJKMNPRUVWXY";

    /// Trims and upper-cases `input`; an empty (or all-space) answer is refused.
    pub fn parse(input: &str) -> Option<Self> {
        let trimmed = input.trim();
        (!trimmed.is_empty() && trimmed.len() <= MAX_ANSWER_INPUT)
            .then(|| Self(trimmed.to_ascii_uppercase()))
    }

    /// Whether this answer is the stored one, compared in time independent of where they
    /// differ. An empty stored answer never matches (a missing entry must not equal "").
    pub fn matches(&self, stored: &str) -> bool {
        !stored.is_empty()
            && super::secret::constant_time_eq(
                self.0.as_bytes(),
                stored.to_ascii_uppercase().as_bytes(),
            )
    }
}

impl fmt::Debug for CaptchaAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CaptchaAnswer(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn generated_ids_parse_and_differ() {
        let ids: HashSet<String> = (0..1000)
            .map(|_| CaptchaId::generate().as_str().to_owned())
            .collect();
        assert_eq!(ids.len(), 1000);
        for id in &ids {
            assert_eq!(CaptchaId::parse(id).unwrap().as_str(), id);
        }
    }

    #[test]
    fn malformed_ids_are_refused() {
        for bad in [
            "",
            "abc",
            &"g".repeat(32),
            &"A".repeat(32),
            &"a".repeat(33),
            "../../../../etc/passwd/aaaaaaaaaa",
        ] {
            assert!(CaptchaId::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn answers_match_case_insensitively_ignoring_spaces() {
        let answer = CaptchaAnswer::parse("  a7kp2 ").unwrap();
        assert!(answer.matches("A7KP2"));
        assert!(!answer.matches("A7KP3"));
        assert!(!answer.matches("A7KP"));
        assert!(!answer.matches("A7KP22"));
    }

    /// The backticked runs of upper-case letters and digits long enough to be an alphabet.
    fn alphabets_named_in(doc: &str) -> Vec<&str> {
        doc.split('`')
            .skip(1)
            .step_by(2)
            .filter(|quoted| {
                quoted.len() >= 16
                    && quoted
                        .bytes()
                        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
            })
            .collect()
    }

    #[test]
    fn the_docs_name_the_alphabet_answers_are_drawn_from() {
        let alphabet = std::str::from_utf8(CaptchaAnswer::ALPHABET).unwrap();
        let api = include_str!("../../docs/api.md");
        assert_eq!(alphabets_named_in(api), [alphabet], "docs/api.md");
        // docs/captcha.md names the previous alphabet too, as the "before" of a change.
        let captcha = include_str!("../../docs/captcha.md");
        assert!(
            alphabets_named_in(captcha).contains(&alphabet),
            "docs/captcha.md"
        );
    }

    #[test]
    fn empty_answers_never_match() {
        assert!(CaptchaAnswer::parse("").is_none());
        assert!(CaptchaAnswer::parse("   \t").is_none());
        assert!(!CaptchaAnswer::parse("X").unwrap().matches(""));
    }
}
