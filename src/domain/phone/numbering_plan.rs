//! Validity of plain phone numbers (`+` and digits, or the digits of a number dialled inside
//! a region) against libphonenumber's metadata, with each region's patterns compiled once into
//! DFAs of our own. The `phonenumber` crate matches every pattern through one locked,
//! 100-entry cache keyed by the pattern text (SipHash of patterns up to kilobytes long), 4–12
//! µs a number; this answers in well under 0.2 µs.
//!
//! Each pattern is a fully built DFA, matched without a cache (a `regex::Regex` used from more
//! than one thread takes its search cache from a locked pool on every call but one thread's,
//! which was most of a verify's 184 ns of phone validation), and walked once at compile time
//! for the first two digits a match can have.
//!
//! It follows the crate's `is_valid` exactly (same region choice, same per-type checks) and
//! answers the number's type as the crate's `number_type` does (the first type in its order of
//! precedence that matches, premium rate first), each region's patterns ruled out by length and
//! first two digits before any regex runs. It only ever answers "valid": anything else goes
//! back to the crate's full parse, which can still accept a number written with a national
//! prefix after the country code. National numbers (no `+`) are answered here only when they
//! carry nothing the crate would strip or reinterpret first: no national, carrier or
//! international prefix, no country code.

use std::sync::{LazyLock, OnceLock};

use phonenumber::metadata::{DATABASE, Descriptor, Metadata};
use regex_automata::dfa::{Automaton, StartKind, dense};
use regex_automata::util::syntax;
use regex_automata::{Anchored, Input};

use super::{NumberType, Region};

/// A number found valid: its country calling code, its region where it has one (the
/// non-geographic `001` entities have none), and its type.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ValidE164 {
    pub calling_code: u16,
    pub region: Option<Region>,
    pub number_type: NumberType,
}

/// A country code and libphonenumber's longest national number (17 digits); longer input
/// goes to the crate to refuse.
const MAX_DIGITS: usize = 3 + 17;

/// Checks `digits` (everything after the `+`) as country code and national number.
pub(super) fn validate(digits: &str) -> Option<ValidE164> {
    if digits.len() > MAX_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Country codes are prefix-free (ITU-T E.164), so the first one found is the only one.
    (1..=3.min(digits.len())).find_map(|code_len| {
        let code: u16 = digits[..code_len].parse().ok()?;
        let regions = plan(code)?;
        let national = &digits[code_len..];
        let rules = regions.get_or_init(|| compile(code)).as_deref()?;
        validate_in(code, rules, national)
    })
}

/// Checks `digits` as a number dialled inside `region` (no `+`), if it can be read as it is.
pub(super) fn validate_national(digits: &str, region: Region) -> Option<ValidE164> {
    if digits.len() > MAX_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let code = DATABASE.by_id(region.as_str())?.country_code();
    let rules = plan(code)?.get_or_init(|| compile(code)).as_deref()?;
    let home = rules.iter().find(|rules| rules.region == Some(region))?;
    if !home.dialling.reads_as_is(digits) {
        return None;
    }
    validate_in(code, rules, digits)
}

fn validate_in(calling_code: u16, rules: &[RegionRules], national: &str) -> Option<ValidE164> {
    let source = source_for(rules, national)?;
    source.number_type(national).map(|number_type| ValidE164 {
        calling_code,
        region: source.region,
        number_type,
    })
}

/// Loads the metadata and compiles the rules of `region`'s calling code now, rather than in
/// a first request.
pub(super) fn warm_up(region: Region) {
    if let Some(meta) = DATABASE.by_id(region.as_str())
        && let Some(rules) = plan(meta.country_code())
    {
        rules.get_or_init(|| compile(meta.country_code()));
    }
}

/// Every country calling code (all below 1000), with its regions' rules compiled on first use
/// (a few milliseconds a code; start-up warms the default region's). Indexed by the code: a
/// number tries up to three prefixes, each a lookup.
static PLAN: LazyLock<Vec<Option<CallingCode>>> = LazyLock::new(|| {
    let mut plan: Vec<_> = (0..1000).map(|_| None).collect();
    for meta in DATABASE.iter() {
        if let Some(entry) = plan.get_mut(usize::from(meta.country_code())) {
            *entry = Some(OnceLock::new());
        }
    }
    plan
});

/// A calling code's regions' rules, compiled on first use; `None` inside if any pattern fails
/// to compile (the crate then answers for that code).
type CallingCode = OnceLock<Option<Vec<RegionRules>>>;

fn plan(code: u16) -> Option<&'static CallingCode> {
    PLAN.get(usize::from(code))?.as_ref()
}

/// One region's patterns, in the crate's order of regions for its calling code.
struct RegionRules {
    region: Option<Region>,
    /// The crate refuses a code whose one region is neither a known region nor `001`.
    known: bool,
    leading_digits: Option<Pattern>,
    dialling: Dialling,
    general: Pattern,
    /// Every number type's pattern, in the crate's order of precedence
    /// (`validator::number_type`): the first that matches is the number's type.
    types: Vec<(NumberType, Pattern)>,
    /// What rules most patterns out before their regex runs, one bit a pattern (bit 0 the
    /// general one, bit `1 + i` `types[i]`): the patterns that allow a number of this
    /// length (the descriptors' possible lengths; numbers here have at most 20 digits)…
    by_length: [u16; 32],
    /// …and those a match of which can start with these two digits (`10 * a + b`).
    by_leading: [u16; 100],
    /// Where mobile is in `types`.
    mobile: Option<usize>,
    /// The crate answers fixed-line-or-mobile for any fixed-line number when the two types
    /// share one pattern (US, CA…), without matching mobile's.
    fixed_line_is_mobile: bool,
}

/// What the crate looks for at the start of a number dialled inside the region, before it
/// reads the rest as the national number.
struct Dialling {
    calling_code: String,
    national_prefix: Option<String>,
    /// National prefix and carrier codes, as the crate strips them.
    national_prefix_for_parsing: Option<Pattern>,
    /// The prefix for calling abroad (`00`), after which a country code follows.
    international_prefix: Option<Pattern>,
}

impl Dialling {
    fn new(meta: &Metadata) -> Option<Self> {
        Some(Self {
            calling_code: meta.country_code().to_string(),
            national_prefix: meta.national_prefix().map(str::to_owned),
            national_prefix_for_parsing: anchored_if_any(
                meta.national_prefix_for_parsing().map(|r| r.as_str()),
            )?,
            international_prefix: anchored_if_any(meta.international_prefix().map(|r| r.as_str()))?,
        })
    }

    /// Whether the crate would take `digits` as the national number unchanged: nothing at
    /// its start is a prefix it strips or a country code it reads.
    fn reads_as_is(&self, digits: &str) -> bool {
        let starts = |regex: &Option<Pattern>| regex.as_ref().is_some_and(|r| r.is_match(digits));
        !digits.starts_with(&self.calling_code)
            && !self
                .national_prefix
                .as_ref()
                .is_some_and(|prefix| digits.starts_with(prefix.as_str()))
            && !starts(&self.national_prefix_for_parsing)
            && !starts(&self.international_prefix)
    }
}

impl RegionRules {
    fn new(meta: &Metadata) -> Option<Self> {
        let d = meta.descriptors();
        // The crate's order: the first type that matches is the number's, except that a
        // fixed-line number that is also mobile is fixed-line-or-mobile.
        let typed: Vec<(NumberType, &Descriptor)> = [
            (NumberType::PremiumRate, d.premium_rate()),
            (NumberType::TollFree, d.toll_free()),
            (NumberType::SharedCost, d.shared_cost()),
            (NumberType::Voip, d.voip()),
            (NumberType::PersonalNumber, d.personal_number()),
            (NumberType::Pager, d.pager()),
            (NumberType::Uan, d.uan()),
            (NumberType::Voicemail, d.voicemail()),
            (NumberType::FixedLine, d.fixed_line()),
            (NumberType::Mobile, d.mobile()),
        ]
        .into_iter()
        .filter_map(|(number_type, descriptor)| descriptor.map(|d| (number_type, d)))
        .collect();
        let general = anchored(d.general().national_number().as_str())?;
        let types: Vec<(NumberType, Pattern)> = typed
            .iter()
            .map(|(number_type, d)| Some((*number_type, anchored(d.national_number().as_str())?)))
            .collect::<Option<_>>()?;
        let mut by_length = [0u16; 32];
        let mut by_leading = [0u16; 100];
        let descriptors = std::iter::once(d.general()).chain(typed.iter().map(|(_, d)| *d));
        let patterns = std::iter::once(&general).chain(types.iter().map(|(_, pattern)| pattern));
        for (bit, (descriptor, pattern)) in descriptors.zip(patterns).enumerate() {
            let lengths = descriptor.possible_length();
            for (length, patterns) in by_length.iter_mut().enumerate() {
                if lengths.is_empty() || lengths.contains(&(length as u16)) {
                    *patterns |= 1 << bit;
                }
            }
            let leading = pattern.leading_digits();
            for (start, patterns) in by_leading.iter_mut().enumerate() {
                if leading & (1 << start) != 0 {
                    *patterns |= 1 << bit;
                }
            }
        }
        let fixed_line_is_mobile = match (d.fixed_line(), d.mobile()) {
            (Some(fixed), Some(mobile)) => {
                fixed.national_number().as_str() == mobile.national_number().as_str()
            }
            _ => false,
        };
        let region = Region::parse(meta.id());
        Some(Self {
            region,
            known: region.is_some() || meta.id() == "001",
            leading_digits: anchored_if_any(meta.leading_digits().map(|r| r.as_str()))?,
            dialling: Dialling::new(meta)?,
            general,
            mobile: typed.iter().position(|(t, _)| *t == NumberType::Mobile),
            types,
            by_length,
            by_leading,
            fixed_line_is_mobile,
        })
    }

    /// The patterns whose regex could match `national` (digits), as bits: a possible length
    /// of theirs, and a start a match of theirs can have.
    fn candidates(&self, national: &str) -> u16 {
        let by_length = self.by_length.get(national.len()).copied().unwrap_or(0);
        let by_leading = match national.as_bytes() {
            [a, b, ..] => {
                let start =
                    usize::from(a.wrapping_sub(b'0')) * 10 + usize::from(b.wrapping_sub(b'0'));
                self.by_leading.get(start).copied().unwrap_or(0)
            }
            _ => u16::MAX,
        };
        by_length & by_leading
    }

    /// The crate's `number_type`, `None` where it answers `Unknown` (an invalid number): the
    /// general pattern and the first type that matches, each with a possible length of its
    /// own and matching from the first digit (a prefix match, as the crate's
    /// `Descriptor::is_match` does it). Most numbers run two regexes, the general one and
    /// their type's: the others are ruled out by length or first digits.
    fn number_type(&self, national: &str) -> Option<NumberType> {
        let candidates = self.candidates(national);
        if candidates & 1 == 0 || !self.general.is_match(national) {
            return None;
        }
        let matches = |i: usize| candidates & (2 << i) != 0 && self.types[i].1.is_match(national);
        let mut rest = candidates >> 1;
        while rest != 0 {
            let i = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            if self.types[i].1.is_match(national) {
                return Some(match self.types[i].0 {
                    NumberType::FixedLine
                        if self.fixed_line_is_mobile || self.mobile.is_some_and(matches) =>
                    {
                        NumberType::FixedLineOrMobile
                    }
                    other => other,
                });
            }
        }
        None
    }
}

/// One of the metadata's patterns, matched from the first digit as a prefix (the crate's
/// `Descriptor::is_match`), on input of ASCII digits only.
struct Pattern(dense::DFA<Vec<u32>>);

/// Far larger than any DFA the metadata's patterns make (all 207 calling codes' together take
/// 2.0 MB); a pattern over it fails to build, and the crate answers for its code.
const DFA_SIZE_LIMIT: usize = 8 << 20;

/// Every two-digit start, one bit each (`10 * a + b`).
const ALL_STARTS: u128 = (1 << 100) - 1;

impl Pattern {
    fn is_match(&self, digits: &str) -> bool {
        let input = Input::new(digits).anchored(Anchored::Yes).earliest(true);
        // The search only fails on a quit byte or a look-around the DFA lacks; none is built.
        matches!(self.0.try_search_fwd(&input), Ok(Some(_)))
    }

    /// The two-digit starts a match can have (`ALL_STARTS`' bits): the DFA walked over each
    /// pair, a start that leaves it dead ruled out.
    fn leading_digits(&self) -> u128 {
        let dfa = &self.0;
        let Ok(start) = dfa.start_state_forward(&Input::new("").anchored(Anchored::Yes)) else {
            return ALL_STARTS;
        };
        let mut leading = 0;
        for a in 0..10u8 {
            let first = dfa.next_state(start, b'0' + a);
            for b in 0..10u8 {
                if !dfa.is_dead_state(dfa.next_state(first, b'0' + b)) {
                    leading |= 1u128 << (10 * a + b);
                }
            }
        }
        leading
    }
}

/// The crate's regexes are built with `ignore_whitespace`; the newline ends any trailing `#`
/// comment before the closing parenthesis. `\d` is ASCII here (the input is digits), which
/// keeps the DFAs small.
fn anchored(pattern: &str) -> Option<Pattern> {
    dense::Builder::new()
        .syntax(syntax::Config::new().ignore_whitespace(true).unicode(false))
        .configure(
            dense::Config::new()
                .start_kind(StartKind::Anchored)
                .dfa_size_limit(Some(DFA_SIZE_LIMIT))
                .determinize_size_limit(Some(DFA_SIZE_LIMIT)),
        )
        .build(&format!("^(?:{pattern}\n)"))
        .ok()
        .map(Pattern)
}

/// `Some(None)` without a pattern, `None` if it fails to compile.
fn anchored_if_any(pattern: Option<&str>) -> Option<Option<Pattern>> {
    match pattern {
        Some(pattern) => anchored(pattern).map(Some),
        None => Some(None),
    }
}

/// `None` if any pattern fails to compile: the crate then answers for that code.
fn compile(code: u16) -> Option<Vec<RegionRules>> {
    let ids = DATABASE.region(&code)?;
    ids.into_iter()
        .map(|id| DATABASE.by_id(id).and_then(RegionRules::new))
        .collect()
}

/// The crate's `validator::source_for`: the only region of a code, or the first whose leading
/// digits (or, lacking those, whose number types) fit the national number.
fn source_for<'a>(rules: &'a [RegionRules], national: &str) -> Option<&'a RegionRules> {
    if let [only] = rules {
        return only.known.then_some(only);
    }
    rules.iter().find(|rules| match &rules.leading_digits {
        Some(leading) => leading.is_match(national),
        None => rules.number_type(national).is_some(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the `phonenumber` crate itself makes of `input` (read in `region`, if given):
    /// whether it is valid, as E.164 digits, with its region and type.
    fn crate_answer(
        input: &str,
        region: Option<Region>,
    ) -> Option<(String, Option<Region>, Option<NumberType>)> {
        let number = phonenumber::parse(region.map(|r| r.0), input).ok()?;
        phonenumber::is_valid(&number).then(|| {
            (
                format!("{}{}", number.country().code(), number.national()),
                number
                    .country()
                    .id()
                    .map(|id| Region::parse(id.as_ref()).unwrap()),
                NumberType::of_crate(number.number_type(&DATABASE)),
            )
        })
    }

    /// Every region's example numbers (national significant numbers) and near misses around
    /// each: a digit added or dropped, the second half replaced with pseudo-random digits.
    fn samples() -> Vec<(&'static Metadata, String)> {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next_digit = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            char::from(b'0' + (seed % 10) as u8)
        };
        let mut samples = Vec::new();
        for meta in DATABASE.iter() {
            let d = meta.descriptors();
            let types = [
                Some(d.general()),
                d.fixed_line(),
                d.mobile(),
                d.toll_free(),
                d.premium_rate(),
                d.shared_cost(),
                d.voip(),
                d.personal_number(),
                d.pager(),
                d.uan(),
                d.voicemail(),
            ];
            for example in types.into_iter().flatten().filter_map(|d| d.example()) {
                samples.push((meta, example.to_owned()));
                samples.push((meta, format!("{example}5")));
                samples.push((meta, example[..example.len() - 1].to_owned()));
                let keep = example.len() / 2;
                for _ in 0..20 {
                    let tail: String = (keep..example.len()).map(|_| next_digit()).collect();
                    samples.push((meta, format!("{}{tail}", &example[..keep])));
                }
            }
        }
        samples
    }

    fn starts_with_national_prefix(meta: &Metadata, national: &str) -> bool {
        meta.national_prefix_for_parsing()
            .map(|pattern| pattern.find(national).is_some_and(|m| m.start() == 0))
            .or_else(|| {
                meta.national_prefix()
                    .map(|prefix| national.starts_with(prefix))
            })
            .unwrap_or(false)
    }

    /// Wherever one of the two reads `+<code><national>` as valid as written, the other must
    /// agree, region and number type included, except for two bugs of the crate's, each recognised by its
    /// cause and counted:
    /// - it strips a national prefix from after the country code (`+7 800…` becomes `00…`)
    ///   and then refuses libphonenumber's own example numbers;
    /// - it drops a national number's leading zero before choosing the region (`+39 02…` gets
    ///   none, `+47 07…` becomes Svalbard), and before typing the number.
    #[test]
    fn e164_agrees_with_the_crate_on_every_region() {
        let (mut checked, mut valid, mut prefix_bug, mut zero_bug) = (0, 0, 0, 0);
        let mut disagreements = Vec::new();
        for (meta, national) in samples() {
            let digits = format!("{}{national}", meta.country_code());
            checked += 1;
            let ours = validate(&digits);
            let theirs = crate_answer(&format!("+{digits}"), None);
            valid += usize::from(ours.is_some());
            match (&ours, &theirs) {
                (Some(ours), Some((read, region, number_type)))
                    if *read == digits && ours.region == *region =>
                {
                    if !same_type(ours, *number_type, &national) {
                        disagreements.push(format!("+{digits}: ours {ours:?}, crate {theirs:?}"));
                    }
                }
                (None, None) => {}
                (None, Some((read, ..))) if *read != digits => {}
                (Some(_), None) if starts_with_national_prefix(meta, &national) => prefix_bug += 1,
                (Some(_), Some((read, ..))) if *read == digits && national.starts_with('0') => {
                    zero_bug += 1
                }
                _ => disagreements.push(format!("+{digits}: ours {ours:?}, crate {theirs:?}")),
            }
        }
        // The sample must hold plenty of both answers for the comparison to mean anything, and
        // the two known bugs must be what they were when this was written.
        assert_agreement(&disagreements, checked, valid);
        assert!(
            prefix_bug < 250 && zero_bug < 100,
            "{prefix_bug} prefix, {zero_bug} zero"
        );
    }

    /// The same samples dialled inside their own region (and behind its national prefix):
    /// whatever the fast path accepts, the crate reads as the same number; whatever the crate
    /// reads as written, the fast path accepts unless a prefix the crate would look at starts
    /// it. Region choices differ only by the crate's leading-zero bug.
    #[test]
    fn national_numbers_agree_with_the_crate_on_every_region() {
        let (mut checked, mut fast, mut left_to_crate, mut zero_bug) = (0, 0, 0, 0);
        let mut disagreements = Vec::new();
        for (meta, national) in samples() {
            let Some(region) = Region::parse(meta.id()) else {
                continue; // 001: no national dialling
            };
            let prefixed = meta.national_prefix().map(|p| format!("{p}{national}"));
            for input in [Some(national.clone()), prefixed].into_iter().flatten() {
                checked += 1;
                let ours = validate_national(&input, region);
                let theirs = crate_answer(&input, Some(region));
                let as_written = format!("{}{input}", meta.country_code());
                fast += usize::from(ours.is_some());
                match (&ours, &theirs) {
                    (Some(ours), Some((read, region, number_type)))
                        if *read == as_written && ours.region == *region =>
                    {
                        if !same_type(ours, *number_type, &input) {
                            disagreements.push(format!(
                                "{input} in {}: ours {ours:?}, crate {theirs:?}",
                                meta.id()
                            ));
                        }
                    }
                    (Some(_), Some((read, ..)))
                        if *read == as_written && input.starts_with('0') =>
                    {
                        zero_bug += 1
                    }
                    (None, Some((read, ..))) if *read != as_written => {}
                    (None, None) => {}
                    (None, Some(_)) if !reads_as_is(meta, &input) => left_to_crate += 1,
                    _ => disagreements.push(format!(
                        "{input} in {}: ours {ours:?}, crate {theirs:?}",
                        meta.id()
                    )),
                }
            }
        }
        assert_agreement(&disagreements, checked, fast);
        assert!(
            left_to_crate < checked / 10 && zero_bug < 100,
            "{left_to_crate} left to the crate, {zero_bug} zero"
        );
    }

    /// Whether our type of `national` is the crate's. Its `PhoneNumber::number_type` reads
    /// the national number as an integer, dropping leading zeros (a third bug); those numbers
    /// are typed by `validator::number_type` transcribed, on the crate's own descriptors.
    fn same_type(ours: &ValidE164, theirs: Option<NumberType>, national: &str) -> bool {
        if !national.starts_with('0') {
            return Some(ours.number_type) == theirs;
        }
        let meta = match ours.region {
            Some(region) => DATABASE.by_id(region.as_str()),
            None => DATABASE
                .by_code(&ours.calling_code)
                .and_then(|metas| metas.into_iter().next()),
        };
        meta.and_then(|meta| crate_number_type(meta, national)) == Some(ours.number_type)
    }

    /// The crate's private `validator::number_type`, line by line.
    fn crate_number_type(meta: &Metadata, national: &str) -> Option<NumberType> {
        let d = meta.descriptors();
        let is = |descriptor: Option<&Descriptor>| descriptor.is_some_and(|d| d.is_match(national));
        if !d.general().is_match(national) {
            return None;
        }
        for (descriptor, number_type) in [
            (d.premium_rate(), NumberType::PremiumRate),
            (d.toll_free(), NumberType::TollFree),
            (d.shared_cost(), NumberType::SharedCost),
            (d.voip(), NumberType::Voip),
            (d.personal_number(), NumberType::PersonalNumber),
            (d.pager(), NumberType::Pager),
            (d.uan(), NumberType::Uan),
            (d.voicemail(), NumberType::Voicemail),
        ] {
            if is(descriptor) {
                return Some(number_type);
            }
        }
        if is(d.fixed_line()) {
            let same = d.fixed_line().map(|d| d.national_number().as_str())
                == d.mobile().map(|d| d.national_number().as_str());
            return Some(if same || is(d.mobile()) {
                NumberType::FixedLineOrMobile
            } else {
                NumberType::FixedLine
            });
        }
        is(d.mobile()).then_some(NumberType::Mobile)
    }

    /// No disagreement, and plenty of numbers read as valid and as not, of `checked`.
    fn assert_agreement(disagreements: &[String], checked: usize, valid: usize) {
        assert!(
            disagreements.is_empty(),
            "{} of {checked}:\n{}",
            disagreements.len(),
            disagreements.join("\n")
        );
        assert!(
            valid > 1000 && checked - valid > 1000,
            "{valid} valid of {checked}"
        );
    }

    fn reads_as_is(meta: &Metadata, input: &str) -> bool {
        Dialling::new(meta).unwrap().reads_as_is(input)
    }

    /// The types whose regex a number of `code` runs, in order, beside the general one.
    fn regexes_run(code: u16, national: &str) -> Vec<NumberType> {
        let rules = plan(code)
            .unwrap()
            .get_or_init(|| compile(code))
            .as_deref()
            .unwrap();
        let source = source_for(rules, national).unwrap();
        let candidates = source.candidates(national);
        let mut run = Vec::new();
        for (i, (number_type, regex)) in source.types.iter().enumerate() {
            if candidates & (2 << i) != 0 {
                run.push(*number_type);
                if regex.is_match(national) {
                    break;
                }
            }
        }
        run
    }

    /// What keeps a send's parse cheap: a common mobile runs the general regex and its own
    /// type's, every other type ruled out by its lengths or first digits.
    #[test]
    fn common_mobiles_run_two_regexes() {
        for (code, national, number_type) in [
            (86, "13912345678", NumberType::Mobile),
            (86, "18612345678", NumberType::Mobile),
            (1, "2025550143", NumberType::FixedLine),
            (44, "7400123456", NumberType::Mobile),
            (852, "51234567", NumberType::Mobile),
        ] {
            assert_eq!(
                regexes_run(code, national),
                [number_type],
                "+{code} {national}"
            );
        }
        // Premium rate is the first type checked: a premium number runs just the one.
        assert_eq!(regexes_run(1, "9005550123"), [NumberType::PremiumRate]);
        assert_eq!(
            validate("12025550143").map(|valid| valid.number_type),
            Some(NumberType::FixedLineOrMobile)
        );
    }

    /// No calling code is left to the crate's slow path because a pattern's DFA would not
    /// build, and all of them together stay small enough to compile on first use.
    #[test]
    fn every_calling_codes_patterns_build_as_dfas() {
        let (mut codes, mut bytes) = (0, 0);
        for code in 0..1000 {
            let Some(calling_code) = plan(code) else {
                continue;
            };
            let rules = calling_code.get_or_init(|| compile(code));
            let rules = rules
                .as_deref()
                .unwrap_or_else(|| panic!("+{code} did not build"));
            codes += 1;
            for region in rules {
                let patterns = [
                    &region.leading_digits,
                    &region.dialling.national_prefix_for_parsing,
                    &region.dialling.international_prefix,
                ];
                bytes += region.general.0.memory_usage()
                    + region
                        .types
                        .iter()
                        .map(|(_, p)| p.0.memory_usage())
                        .sum::<usize>()
                    + patterns
                        .iter()
                        .filter_map(|p| p.as_ref())
                        .map(|p| p.0.memory_usage())
                        .sum::<usize>();
            }
        }
        eprintln!("{codes} calling codes, {bytes} bytes of DFAs");
        assert!(codes > 200, "{codes}");
        assert!(bytes < 8 << 20, "{bytes} bytes");
    }

    #[test]
    fn leading_digits_are_what_a_match_can_start_with() {
        let starts = |pattern: &str| {
            let leading = anchored(pattern).map_or(ALL_STARTS, |pattern| pattern.leading_digits());
            (0..100).filter(|i| leading & (1u128 << i) != 0).count()
        };
        assert_eq!(starts(r"1[38]\d{9}"), 2);
        assert_eq!(starts(r"\d{8}"), 100);
        assert_eq!(starts(r"9\d{7}|8(?:0[0-2]|9)\d{5}"), 10 + 2);
        assert_eq!(
            starts("5"),
            10,
            "a one-digit match leaves the second digit free"
        );
        assert_eq!(
            starts("("),
            100,
            "unparsable (the crate then answers): every start"
        );
    }

    #[test]
    fn refuses_what_is_not_digits_or_too_long() {
        assert!(validate("8613800138000").is_some());
        for bad in [
            "",
            "86",
            "86 13800138000",
            "86-13800138000",
            "8613800138000x",
            "8613800138000123456789",
        ] {
            assert_eq!(validate(bad), None, "{bad:?}");
        }
        assert_eq!(validate("99912345678"), None, "no such country code");
    }

    #[test]
    fn national_numbers_with_a_prefix_are_left_to_the_crate() {
        let cn = Region::parse("CN").unwrap();
        assert_eq!(
            validate_national("13800138000", cn),
            Some(ValidE164 {
                calling_code: 86,
                region: Some(cn),
                number_type: NumberType::Mobile,
            })
        );
        // Trunk prefix, international prefix, country code, carrier code: not read here.
        for prefixed in [
            "013800138000",
            "008613800138000",
            "8613800138000",
            "1259313800138000",
        ] {
            assert_eq!(validate_national(prefixed, cn), None, "{prefixed}");
        }
    }
}
