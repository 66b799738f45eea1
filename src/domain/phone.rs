//! Phone numbers, normalised to E.164 with libphonenumber's metadata (the `phonenumber` crate).

use std::fmt;
use std::str::FromStr;

use phonenumber::country;

/// The region a number without a leading `+` is read in (`VCODE_DEFAULT_REGION`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Region(country::Id);

impl Region {
    /// Parses an ISO 3166-1 alpha-2 region code such as `CN` or `US` (case-insensitive).
    pub fn parse(input: &str) -> Option<Self> {
        country::Id::from_str(&input.trim().to_ascii_uppercase())
            .ok()
            .map(Self)
    }

    pub fn as_str(&self) -> &str {
        self.0.as_ref()
    }
}

impl Default for Region {
    fn default() -> Self {
        Self(country::Id::CN)
    }
}

/// A valid phone number in E.164 form, e.g. `+8613800138000`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Phone {
    e164: String,
    /// The region the number belongs to, where the number plan tells one.
    region: Option<Region>,
}

/// Longer than any real number in any national format; longer input is refused unparsed.
const MAX_INPUT_LEN: usize = 32;

impl Phone {
    /// Reads `input` (E.164 with `+`, or a national number in `default_region`) and keeps it
    /// only if libphonenumber says it is a valid number.
    pub fn parse(input: &str, default_region: Region) -> Option<Self> {
        let input = input.trim();
        if input.is_empty() || input.len() > MAX_INPUT_LEN {
            return None;
        }
        // With a `+` the region must not be passed: phonenumber 0.3 then strips the region's
        // national prefix from the wrong place (`+86138…` read in US lost its `1`).
        let region = (!input.starts_with('+')).then_some(default_region.0);
        let number = phonenumber::parse(region, input).ok()?;
        if !phonenumber::is_valid(&number) {
            return None;
        }
        let e164 = number.format().mode(phonenumber::Mode::E164).to_string();
        let region = number.country().id().map(Region);
        Some(Self { e164, region })
    }

    pub fn as_e164(&self) -> &str {
        &self.e164
    }

    pub fn region(&self) -> Option<Region> {
        self.region
    }

    /// The form used in logs: country code and a few leading digits, the last four digits, and
    /// the rest starred (`+86138****8000`), enough to correlate reports without exposing users.
    pub fn masked(&self) -> String {
        mask(&self.e164)
    }
}

fn mask(e164: &str) -> String {
    let chars: Vec<char> = e164.chars().collect();
    // At least four digits stay hidden, whatever the length.
    let keep_tail = 4.min(chars.len().saturating_sub(4) / 2);
    let keep_head = 6.min(chars.len().saturating_sub(keep_tail + 4));
    chars
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if i < keep_head || i >= chars.len() - keep_tail {
                *c
            } else {
                '*'
            }
        })
        .collect()
}

// Debug and Display are masked so that a phone can never reach a log in full by accident.
impl fmt::Debug for Phone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Phone({})", self.masked())
    }
}

impl fmt::Display for Phone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.masked())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cn() -> Region {
        Region::default()
    }

    #[test]
    fn national_and_international_forms_are_the_same_phone() {
        let national = Phone::parse("13800138000", cn()).unwrap();
        let international = Phone::parse("+8613800138000", cn()).unwrap();
        let spaced = Phone::parse(" +86 138 0013 8000 ", cn()).unwrap();
        assert_eq!(national, international);
        assert_eq!(national, spaced);
        assert_eq!(national.as_e164(), "+8613800138000");
    }

    #[test]
    fn default_region_applies_only_without_plus() {
        let us = Region::parse("us").unwrap();
        assert_eq!(
            Phone::parse("2025550143", us).unwrap().as_e164(),
            "+12025550143"
        );
        assert_eq!(
            Phone::parse("+8613800138000", us).unwrap().as_e164(),
            "+8613800138000"
        );
    }

    #[test]
    fn invalid_numbers_are_refused() {
        for bad in [
            "",
            "   ",
            "abc",
            "12345",
            "+86",
            "138001380001234567",
            "+999123456789",
            "1380013800x",
            &"1".repeat(100),
        ] {
            assert!(Phone::parse(bad, cn()).is_none(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn masking_hides_the_middle_digits() {
        let phone = Phone::parse("+8613800138000", cn()).unwrap();
        assert_eq!(phone.masked(), "+86138****8000");
        assert!(!format!("{phone:?}").contains("13800138000"));
        assert!(!phone.to_string().contains("0013"));
    }

    #[test]
    fn numbers_know_their_region() {
        let hk = Phone::parse("+85251234567", cn()).unwrap();
        assert_eq!(
            hk.region().map(|r| r.as_str().to_owned()).as_deref(),
            Some("HK")
        );
        let cn_phone = Phone::parse("13800138000", cn()).unwrap();
        assert_eq!(cn_phone.region(), Some(cn()));
    }

    #[test]
    fn unknown_regions_are_refused() {
        assert!(Region::parse("XX").is_none());
        assert!(Region::parse("").is_none());
        assert_eq!(Region::parse("cn").unwrap().as_str(), "CN");
    }
}
