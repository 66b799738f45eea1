//! Phone numbers, normalised to E.164 with libphonenumber's metadata (the `phonenumber` crate).

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::hash::{BuildHasher, RandomState};
use std::str::FromStr;
use std::sync::{Mutex, MutexGuard};

use arrayvec::ArrayString;
use phonenumber::country;

mod numbering_plan;

/// The country of the non-geographic calling codes' numbers, as libphonenumber names it.
pub const NON_GEOGRAPHIC_COUNTRY: &str = "001";

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

/// What a number is, as libphonenumber's metadata types it (its `PhoneNumberType`; the
/// `phonenumber` crate's `Type`). A valid number always has one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NumberType {
    Mobile,
    /// Where the number plan cannot tell the two apart (the US, Canada, China's…): most
    /// mobiles there are typed so.
    FixedLineOrMobile,
    FixedLine,
    TollFree,
    PremiumRate,
    SharedCost,
    Voip,
    PersonalNumber,
    Pager,
    Uan,
    Voicemail,
}

impl NumberType {
    pub const ALL: [Self; 11] = [
        Self::Mobile,
        Self::FixedLineOrMobile,
        Self::FixedLine,
        Self::TollFree,
        Self::PremiumRate,
        Self::SharedCost,
        Self::Voip,
        Self::PersonalNumber,
        Self::Pager,
        Self::Uan,
        Self::Voicemail,
    ];

    /// libphonenumber's name, in snake case (`fixed_line_or_mobile`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mobile => "mobile",
            Self::FixedLineOrMobile => "fixed_line_or_mobile",
            Self::FixedLine => "fixed_line",
            Self::TollFree => "toll_free",
            Self::PremiumRate => "premium_rate",
            Self::SharedCost => "shared_cost",
            Self::Voip => "voip",
            Self::PersonalNumber => "personal_number",
            Self::Pager => "pager",
            Self::Uan => "uan",
            Self::Voicemail => "voicemail",
        }
    }

    /// One of the `as_str` names (case-insensitive).
    pub fn parse(input: &str) -> Option<Self> {
        let input = input.trim();
        Self::ALL
            .into_iter()
            .find(|known| known.as_str().eq_ignore_ascii_case(input))
    }

    /// The crate's type of a number it found valid (`Unknown` and the short-number types
    /// never are).
    fn of_crate(number_type: phonenumber::Type) -> Option<Self> {
        use phonenumber::Type;
        Some(match number_type {
            Type::Mobile => Self::Mobile,
            Type::FixedLineOrMobile => Self::FixedLineOrMobile,
            Type::FixedLine => Self::FixedLine,
            Type::TollFree => Self::TollFree,
            Type::PremiumRate => Self::PremiumRate,
            Type::SharedCost => Self::SharedCost,
            Type::Voip => Self::Voip,
            Type::PersonalNumber => Self::PersonalNumber,
            Type::Pager => Self::Pager,
            Type::Uan => Self::Uan,
            Type::Voicemail => Self::Voicemail,
            _ => return None,
        })
    }
}

impl fmt::Display for NumberType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Digits, a leading `+` and the separators people write (` -.()`): the library would read
/// keypad letters as digits (`1380013800a`) and drop extensions (`x12`, `;ext=12`, `#12`),
/// making one number out of many inputs, so anything else is refused.
fn only_dialling_characters(input: &str) -> bool {
    input
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'+' | b' ' | b'-' | b'.' | b'(' | b')'))
}

/// A valid phone number in E.164 form, e.g. `+8613800138000`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Phone {
    e164: E164,
    /// The country calling code (`86` of `+8613800138000`): where the fraud guard's
    /// destination prefixes start.
    calling_code: u16,
    /// The region the number belongs to, where the number plan tells one: `None` for the
    /// non-geographic calling codes (+800, +870, +881, +979…).
    region: Option<Region>,
    number_type: NumberType,
}

/// Longer than any real number in any national format; longer input is refused unparsed.
const MAX_INPUT_LEN: usize = 32;

/// An E.164 number kept inline: `+`, a country code and a national number, shorter than any
/// input the parsers take (`MAX_INPUT_LEN` and the country code); a phone costs no allocation.
type E164 = ArrayString<{ MAX_INPUT_LEN + 8 }>;

/// `+`, `calling_code` and `national`, if it fits (a longer one is no phone number).
fn e164_of(calling_code: u16, national: impl fmt::Display) -> Option<E164> {
    let mut e164 = E164::new();
    write!(e164, "+{calling_code}{national}").ok()?;
    Some(e164)
}

impl Phone {
    /// Reads `input` (E.164 with `+`, or a national number in `default_region`) and keeps it
    /// only if libphonenumber's metadata says it is a valid number.
    pub fn parse(input: &str, default_region: Region) -> Option<Self> {
        let input = input.trim();
        Self::parse_plain(input, default_region)
            .or_else(|| Self::parse_with_library(input, default_region))
    }

    /// The common forms, valid as written: `+` and digits, or the digits of a number dialled
    /// inside `default_region` with no prefix. Well under a microsecond.
    fn parse_plain(input: &str, default_region: Region) -> Option<Self> {
        match input.strip_prefix('+') {
            Some(digits) => {
                let valid = numbering_plan::validate(digits)?;
                Some(Self {
                    e164: E164::from(input).ok()?,
                    calling_code: valid.calling_code,
                    region: valid.region,
                    number_type: valid.number_type,
                })
            }
            None => {
                let valid = numbering_plan::validate_national(input, default_region)?;
                Some(Self {
                    e164: e164_of(valid.calling_code, input)?,
                    calling_code: valid.calling_code,
                    region: valid.region,
                    number_type: valid.number_type,
                })
            }
        }
    }

    /// Everything else (separators, prefixes) through the `phonenumber` crate: about 5–12 µs
    /// a number.
    fn parse_with_library(input: &str, default_region: Region) -> Option<Self> {
        if input.is_empty() || input.len() > MAX_INPUT_LEN || !only_dialling_characters(input) {
            return None;
        }
        // With a `+` the region must not be passed: phonenumber 0.3 then strips the region's
        // national prefix from the wrong place (`+86138…` read in US lost its `1`).
        let region = (!input.starts_with('+')).then_some(default_region.0);
        let number = phonenumber::parse(region, input).ok()?;
        if !phonenumber::is_valid(&number) {
            return None;
        }
        // E.164 is `+`, the country code and the national number; the crate's formatter would
        // first look up a national format pattern that E.164 never uses.
        let e164 = e164_of(number.country().code(), number.national())?;
        let region = number.country().id().map(Region);
        // The type as the fast path gives it for the same digits, so that one number has one
        // type however it was written; the crate's own where the fast path cannot answer.
        let number_type = match numbering_plan::validate(&e164[1..]) {
            Some(valid) => valid.number_type,
            None => NumberType::of_crate(number.number_type(&phonenumber::metadata::DATABASE))?,
        };
        Some(Self {
            e164,
            calling_code: number.country().code(),
            region,
            number_type,
        })
    }

    /// Loads libphonenumber's metadata and prepares `region`'s numbers (about 0.5 s in a
    /// debug build), so that no request pays for it.
    pub fn warm_up(region: Region) {
        numbering_plan::warm_up(region);
    }

    pub fn as_e164(&self) -> &str {
        &self.e164
    }

    /// The country calling code, without `+`.
    pub fn calling_code(&self) -> u16 {
        self.calling_code
    }

    pub fn region(&self) -> Option<Region> {
        self.region
    }

    /// The number's country as libphonenumber names regions (`GB`), or `001` for the
    /// non-geographic calling codes: what the fraud guard and the delivery rate count by.
    pub fn country(&self) -> String {
        self.region.as_ref().map_or_else(
            || NON_GEOGRAPHIC_COUNTRY.to_owned(),
            |r| r.as_str().to_owned(),
        )
    }

    /// Whether the number is one of a non-geographic calling code (+800 freephone, +808
    /// shared cost, +870 Inmarsat, +878, +881 satellite, +882/+883 international networks,
    /// +888, +979 premium rate): no country's.
    pub fn is_non_geographic(&self) -> bool {
        self.region.is_none()
    }

    pub fn number_type(&self) -> NumberType {
        self.number_type
    }

    /// The form used in logs: country code and a few leading digits, the last four digits, and
    /// the rest starred (`+86138****8000`), enough to correlate reports without exposing users.
    pub fn masked(&self) -> String {
        mask(&self.e164)
    }
}

/// A stored E.164 in the form `Phone::masked` shows.
pub fn masked_e164(e164: &str) -> String {
    mask(e164)
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

/// Parses phones, remembering a bounded number of recent inputs that needed the `phonenumber`
/// crate (separators, prefixes): it costs about 5–12 µs a number, and the same number usually
/// comes back soon (a send, then its verify, retries). Plain digits, with or without `+`, are
/// cheaper to check than to look up, so they are never cached.
pub struct PhoneParser {
    default_region: Region,
    shards: Box<[Mutex<ParsedInputs>]>,
    hasher: RandomState,
    per_shard: usize,
}

const CACHE_SHARDS: usize = 16;

/// Raw inputs (trimmed) and what they parse to; an invalid input is remembered as `None`.
type ParsedInputs = HashMap<Box<str>, Option<Phone>>;

impl PhoneParser {
    /// A parser remembering about `capacity` inputs (0 turns the cache off).
    pub fn new(default_region: Region, capacity: usize) -> Self {
        Self {
            default_region,
            shards: (0..CACHE_SHARDS).map(|_| Mutex::default()).collect(),
            hasher: RandomState::new(),
            per_shard: capacity.div_ceil(CACHE_SHARDS),
        }
    }

    /// `Phone::parse` in the default region, remembered.
    pub fn parse(&self, input: &str) -> Option<Phone> {
        let input = input.trim();
        if let Some(phone) = Phone::parse_plain(input, self.default_region) {
            return Some(phone);
        }
        if self.per_shard == 0 || input.len() > MAX_INPUT_LEN {
            return Phone::parse_with_library(input, self.default_region);
        }
        let shard = &self.shards[self.hasher.hash_one(input) as usize % self.shards.len()];
        if let Some(known) = lock(shard).get(input) {
            return known.clone();
        }
        let parsed = Phone::parse_with_library(input, self.default_region);
        let mut map = lock(shard);
        // Full: start the shard afresh; cheaper than tracking recency, and the hot numbers
        // come straight back.
        if map.len() >= self.per_shard {
            map.clear();
        }
        map.insert(input.into(), parsed.clone());
        parsed
    }
}

/// A poisoned lock only means a panic elsewhere mid-insert; the map is still a valid cache.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
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
    #[test]
    fn letters_and_extensions_are_refused() {
        use super::{Phone, Region};
        for input in [
            "1380013800a",
            "+86 138 0013 8000 x12",
            "+8613800138000;ext=12",
            "+8613800138000#12",
            "+86 138-0013-80OO",
        ] {
            assert!(Phone::parse(input, Region::default()).is_none(), "{input}");
        }
        assert!(Phone::parse("+86 (138) 0013-8000", Region::default()).is_some());
    }

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
    fn e164_matches_the_library_formatter() {
        for input in [
            "+8613800138000",
            "+390612345678",
            "+12025550143",
            "+85251234567",
        ] {
            let number = phonenumber::parse(None, input).unwrap();
            let expected = number.format().mode(phonenumber::Mode::E164).to_string();
            assert_eq!(Phone::parse(input, cn()).unwrap().as_e164(), expected);
        }
    }

    #[test]
    fn the_parser_cache_answers_like_parse() {
        let parser = PhoneParser::new(cn(), 4);
        for round in 0..3 {
            for input in [
                "13800138000",
                " +8613800138000",
                "12345",
                "+390612345678",
                "abc",
            ] {
                assert_eq!(
                    parser.parse(input),
                    Phone::parse(input, cn()),
                    "{input:?} in round {round}"
                );
            }
        }
        let uncached = PhoneParser::new(cn(), 0);
        assert_eq!(
            uncached.parse("13800138000"),
            Phone::parse("13800138000", cn())
        );
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
