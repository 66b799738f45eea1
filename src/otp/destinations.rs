//! Which numbers an SMS may go to, decided from the number alone before anything else happens:
//! its type, as libphonenumber's metadata gives it (`VCODE_ALLOWED_NUMBER_TYPES`), and its
//! country's permission (`VCODE_ALLOWED_REGIONS`, `VCODE_MONITORED_REGIONS`,
//! `VCODE_BLOCKED_REGIONS`). Premium-rate, shared-cost and non-geographic ranges are where SMS
//! pumping is paid; a country the service does not serve is where it is paid unnoticed.

use std::fmt;

use crate::domain::{NumberType, Phone, Region};

/// The number types an SMS may go to, and whether numbers of the non-geographic calling codes
/// may receive one at all (`VCODE_ALLOWED_NUMBER_TYPES`; default `mobile,fixed_line_or_mobile`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct NumberTypes {
    /// One bit per `NumberType`, by its place in `NumberType::ALL`.
    types: u16,
    non_geographic: bool,
}

/// The name that allows numbers of the non-geographic calling codes (of an allowed type).
const NON_GEOGRAPHIC: &str = "non_geographic";

impl NumberTypes {
    pub fn new(types: impl IntoIterator<Item = NumberType>, non_geographic: bool) -> Self {
        Self {
            types: types.into_iter().fold(0, |bits, t| bits | bit(t)),
            non_geographic,
        }
    }

    /// Every type and the non-geographic codes: the check off.
    pub fn all() -> Self {
        Self::new(NumberType::ALL, true)
    }

    pub fn allows(&self, number_type: NumberType) -> bool {
        self.types & bit(number_type) != 0
    }

    pub fn allows_non_geographic(&self) -> bool {
        self.non_geographic
    }

    /// A comma-separated list of `NumberType` names and `non_geographic`, or `*` for all.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let mut parsed = Self::new([], false);
        let mut any = false;
        for item in raw
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
        {
            any = true;
            if item == "*" {
                parsed = Self::all();
            } else if item.eq_ignore_ascii_case(NON_GEOGRAPHIC) {
                parsed.non_geographic = true;
            } else {
                let number_type = NumberType::parse(item).ok_or_else(|| {
                    let names: Vec<&str> = NumberType::ALL.iter().map(|t| t.as_str()).collect();
                    format!(
                        "{item:?} is not a number type: expected some of {}, {NON_GEOGRAPHIC}, or *",
                        names.join(", ")
                    )
                })?;
                parsed.types |= bit(number_type);
            }
        }
        if !any || parsed.types == 0 {
            return Err("expected at least one number type, such as mobile".to_owned());
        }
        Ok(parsed)
    }
}

fn bit(number_type: NumberType) -> u16 {
    let index = NumberType::ALL
        .iter()
        .position(|known| *known == number_type)
        .unwrap_or_default();
    1 << index
}

impl Default for NumberTypes {
    fn default() -> Self {
        Self::new([NumberType::Mobile, NumberType::FixedLineOrMobile], false)
    }
}

/// The list as `parse` reads it.
impl fmt::Display for NumberTypes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&str> = NumberType::ALL
            .into_iter()
            .filter(|t| self.allows(*t))
            .map(NumberType::as_str)
            .collect();
        if self.non_geographic {
            names.push(NON_GEOGRAPHIC);
        }
        f.write_str(&names.join(","))
    }
}

impl fmt::Debug for NumberTypes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NumberTypes({self})")
    }
}

/// A list of regions for a geo permission; `*` stands for every region no other list names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Regions {
    pub listed: Vec<Region>,
    pub every_other: bool,
}

impl Regions {
    pub fn of(listed: impl IntoIterator<Item = Region>) -> Self {
        Self {
            listed: listed.into_iter().collect(),
            every_other: false,
        }
    }

    /// `*`: every region no other list names.
    pub fn every_other() -> Self {
        Self {
            listed: Vec::new(),
            every_other: true,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.listed.is_empty() && !self.every_other
    }

    /// Comma-separated ISO 3166 codes (`CN,HK`), and `*` for every other region.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let mut regions = Self::default();
        for item in raw
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
        {
            if item == "*" {
                regions.every_other = true;
            } else {
                let region = Region::parse(item)
                    .ok_or(format!("{item:?} is not a region code such as CN, nor *"))?;
                if !regions.listed.contains(&region) {
                    regions.listed.push(region);
                }
            }
        }
        Ok(regions)
    }
}

/// The list as `parse` reads it.
impl fmt::Display for Regions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&str> = self.listed.iter().map(Region::as_str).collect();
        if self.every_other {
            names.push("*");
        }
        f.write_str(&names.join(","))
    }
}

/// What a country's numbers get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GeoPermission {
    /// Served.
    Allow,
    /// Served, and each SMS counted (`sms_monitored`, `vcode_sms_monitored_total{region}`)
    /// and logged.
    Monitor,
    /// Refused before any code or SMS exists (`40005`).
    Block,
}

impl GeoPermission {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Monitor => "monitor",
            Self::Block => "block",
        }
    }
}

/// The three lists resolved: each named region's permission, and the one of every other.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeoPermissions {
    listed: Vec<(Region, GeoPermission)>,
    others: GeoPermission,
}

impl GeoPermissions {
    /// A region named in several lists gets the strictest (block, then monitor), as does `*`;
    /// `conflicts` tells the operator. An empty allow list stands for `default_region`, unless
    /// another list names it.
    pub fn new(
        allowed: &Regions,
        monitored: &Regions,
        blocked: &Regions,
        default_region: Region,
    ) -> Self {
        let implicit = Regions::of([default_region]);
        let allowed = if allowed.is_empty() {
            &implicit
        } else {
            allowed
        };
        let mut listed: Vec<(Region, GeoPermission)> = Vec::new();
        for (regions, permission) in [
            (blocked, GeoPermission::Block),
            (monitored, GeoPermission::Monitor),
            (allowed, GeoPermission::Allow),
        ] {
            for region in &regions.listed {
                if !listed.iter().any(|(known, _)| known == region) {
                    listed.push((*region, permission));
                }
            }
        }
        let others = if blocked.every_other {
            GeoPermission::Block
        } else if monitored.every_other {
            GeoPermission::Monitor
        } else if allowed.every_other {
            GeoPermission::Allow
        } else {
            GeoPermission::Block
        };
        Self { listed, others }
    }

    /// A region, or `*`, in more than one list: the variables and what they share.
    pub fn conflicts(allowed: &Regions, monitored: &Regions, blocked: &Regions) -> Option<String> {
        let lists = [
            ("VCODE_ALLOWED_REGIONS", allowed),
            ("VCODE_MONITORED_REGIONS", monitored),
            ("VCODE_BLOCKED_REGIONS", blocked),
        ];
        for (i, (first, a)) in lists.iter().enumerate() {
            for (second, b) in &lists[i + 1..] {
                let mut shared: Vec<&str> = a
                    .listed
                    .iter()
                    .filter(|region| b.listed.contains(region))
                    .map(Region::as_str)
                    .collect();
                if a.every_other && b.every_other {
                    shared.push("*");
                }
                if !shared.is_empty() {
                    return Some(format!(
                        "{first} and {second} both name {}: a region has one permission",
                        shared.join(",")
                    ));
                }
            }
        }
        None
    }

    pub fn of(&self, region: Region) -> GeoPermission {
        self.listed
            .iter()
            .find(|(known, _)| *known == region)
            .map_or(self.others, |(_, permission)| *permission)
    }

    /// For the start-up log: `allow CN; monitor US; block every other country`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        for permission in [
            GeoPermission::Allow,
            GeoPermission::Monitor,
            GeoPermission::Block,
        ] {
            let regions: Vec<&str> = self
                .listed
                .iter()
                .filter(|(_, p)| *p == permission)
                .map(|(region, _)| region.as_str())
                .collect();
            if !regions.is_empty() {
                parts.push(format!("{} {}", permission.as_str(), regions.join(",")));
            }
        }
        parts.push(format!("{} every other country", self.others.as_str()));
        parts.join("; ")
    }
}

/// Why a number gets no SMS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DestinationRefusal {
    /// Its type is not among `VCODE_ALLOWED_NUMBER_TYPES`.
    NumberType(NumberType),
    /// It belongs to a non-geographic calling code, and `non_geographic` is not allowed.
    NonGeographic(NumberType),
    /// Its country is blocked.
    Region(Region),
}

impl fmt::Display for DestinationRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NumberType(number_type) => write!(f, "{number_type} numbers are not served"),
            Self::NonGeographic(_) => f.write_str("non-geographic calling codes are not served"),
            Self::Region(region) => write!(f, "{} is not served", region.as_str()),
        }
    }
}

/// The whole decision: number type, then country.
#[derive(Clone, Debug)]
pub struct Destinations {
    number_types: NumberTypes,
    geo: GeoPermissions,
}

impl Destinations {
    pub fn new(number_types: NumberTypes, geo: GeoPermissions) -> Self {
        Self { number_types, geo }
    }

    /// Whether `phone` may receive an SMS, and if so whether it is monitored. A number of a
    /// non-geographic code has no country: `non_geographic` in the allowed types is its
    /// permission.
    pub fn check(&self, phone: &Phone) -> Result<GeoPermission, DestinationRefusal> {
        let number_type = phone.number_type();
        if !self.number_types.allows(number_type) {
            return Err(DestinationRefusal::NumberType(number_type));
        }
        let Some(region) = phone.region() else {
            return if self.number_types.allows_non_geographic() {
                Ok(GeoPermission::Allow)
            } else {
                Err(DestinationRefusal::NonGeographic(number_type))
            };
        };
        match self.geo.of(region) {
            GeoPermission::Block => Err(DestinationRefusal::Region(region)),
            served => Ok(served),
        }
    }

    /// For the start-up log: `SMS to mobile,fixed_line_or_mobile numbers, not to
    /// non-geographic codes; allow CN; block every other country`.
    pub fn describe(&self) -> String {
        let types = NumberTypes {
            non_geographic: false,
            ..self.number_types
        };
        let non_geographic = if self.number_types.allows_non_geographic() {
            "also"
        } else {
            "not"
        };
        format!(
            "SMS to {types} numbers, {non_geographic} to non-geographic codes; {}",
            self.geo.describe()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phone(number: &str) -> Phone {
        Phone::parse(number, Region::default()).unwrap_or_else(|| panic!("{number} is valid"))
    }

    fn region(code: &str) -> Region {
        Region::parse(code).unwrap()
    }

    fn regions(raw: &str) -> Regions {
        Regions::parse(raw).unwrap()
    }

    fn defaults() -> Destinations {
        Destinations::new(
            NumberTypes::default(),
            GeoPermissions::new(
                &Regions::default(),
                &Regions::default(),
                &Regions::default(),
                Region::default(),
            ),
        )
    }

    /// Every world-wide geography served: only the number types decide.
    fn every_country() -> Destinations {
        Destinations::new(
            NumberTypes::default(),
            GeoPermissions::new(
                &Regions::every_other(),
                &Regions::default(),
                &Regions::default(),
                Region::default(),
            ),
        )
    }

    /// The numbers of issue 25, each paid to whoever pumps it.
    const PUMPED: [(&str, NumberType, bool); 7] = [
        ("+979 123456789", NumberType::PremiumRate, true),
        ("+881 612345678", NumberType::Mobile, true),
        ("+870 773 111 111", NumberType::Mobile, true),
        ("+1 900 555 0123", NumberType::PremiumRate, false),
        ("+44 909 8790000", NumberType::PremiumRate, false),
        ("+44 70 1234 5678", NumberType::PersonalNumber, false),
        ("+800 12345678", NumberType::TollFree, true),
    ];

    #[test]
    fn the_pumped_numbers_are_typed_as_libphonenumber_types_them() {
        for (number, number_type, non_geographic) in PUMPED {
            let phone = phone(number);
            assert_eq!(phone.number_type(), number_type, "{number}");
            assert_eq!(phone.is_non_geographic(), non_geographic, "{number}");
        }
    }

    #[test]
    fn the_pumped_numbers_are_refused_at_the_defaults_whatever_the_countries() {
        for destinations in [defaults(), every_country()] {
            for (number, ..) in PUMPED {
                let refusal = destinations.check(&phone(number)).unwrap_err();
                assert!(
                    matches!(
                        refusal,
                        DestinationRefusal::NumberType(_) | DestinationRefusal::NonGeographic(_)
                    ),
                    "{number}: {refusal:?}"
                );
            }
        }
    }

    #[test]
    fn mobiles_of_many_countries_are_served_where_their_country_is() {
        let mobiles = [
            ("+8613800138000", NumberType::Mobile),
            ("13800138000", NumberType::Mobile),
            ("+86 139 1234 5678", NumberType::Mobile),
            ("+12025550143", NumberType::FixedLineOrMobile),
            ("+1 416 555 0143", NumberType::FixedLineOrMobile),
            ("+447400123456", NumberType::Mobile),
            ("+85251234567", NumberType::Mobile),
            ("+819012345678", NumberType::Mobile),
            ("+4915123456789", NumberType::Mobile),
            ("+33612345678", NumberType::Mobile),
            ("+919876543210", NumberType::Mobile),
            ("+5511961234567", NumberType::Mobile),
        ];
        for (number, number_type) in mobiles {
            let phone = phone(number);
            assert_eq!(phone.number_type(), number_type, "{number}");
            assert_eq!(
                every_country().check(&phone),
                Ok(GeoPermission::Allow),
                "{number}"
            );
        }
        assert_eq!(
            defaults().check(&phone("+8613800138000")),
            Ok(GeoPermission::Allow)
        );
    }

    #[test]
    fn the_start_up_line_says_what_is_served() {
        assert_eq!(
            defaults().describe(),
            "SMS to mobile,fixed_line_or_mobile numbers, not to non-geographic codes; allow CN; block every other country"
        );
    }

    #[test]
    fn fixed_lines_and_the_other_types_are_refused_unless_listed() {
        let rome = phone("+390612345678");
        assert_eq!(rome.number_type(), NumberType::FixedLine);
        let london_freephone = phone("+448001234567");
        assert_eq!(london_freephone.number_type(), NumberType::TollFree);
        let everywhere = GeoPermissions::new(
            &Regions::every_other(),
            &Regions::default(),
            &Regions::default(),
            Region::default(),
        );
        let strict = Destinations::new(NumberTypes::default(), everywhere.clone());
        assert_eq!(
            strict.check(&rome),
            Err(DestinationRefusal::NumberType(NumberType::FixedLine))
        );
        let with_fixed = Destinations::new(
            NumberTypes::parse("mobile, fixed_line_or_mobile, FIXED_LINE").unwrap(),
            everywhere.clone(),
        );
        assert_eq!(with_fixed.check(&rome), Ok(GeoPermission::Allow));
        assert!(with_fixed.check(&london_freephone).is_err());
        let satellite = phone("+881612345678");
        let with_satellites = Destinations::new(
            NumberTypes::parse("mobile,fixed_line_or_mobile,non_geographic").unwrap(),
            GeoPermissions::new(
                &Regions::default(),
                &Regions::default(),
                &Regions::default(),
                Region::default(),
            ),
        );
        assert_eq!(with_satellites.check(&satellite), Ok(GeoPermission::Allow));
        // Still not a premium-rate one.
        assert_eq!(
            with_satellites.check(&phone("+979123456789")),
            Err(DestinationRefusal::NumberType(NumberType::PremiumRate))
        );
        let anything = Destinations::new(NumberTypes::all(), everywhere);
        for (number, ..) in PUMPED {
            assert!(anything.check(&phone(number)).is_ok(), "{number}");
        }
    }

    #[test]
    fn number_types_read_and_show_as_listed() {
        assert_eq!(
            NumberTypes::default().to_string(),
            "mobile,fixed_line_or_mobile"
        );
        let listed = NumberTypes::parse("voip, mobile,non_geographic").unwrap();
        assert_eq!(listed.to_string(), "mobile,voip,non_geographic");
        assert_eq!(NumberTypes::parse(&listed.to_string()), Ok(listed));
        assert_eq!(NumberTypes::parse("*"), Ok(NumberTypes::all()));
        for bad in ["", " , ", "non_geographic", "mobile,landline"] {
            assert!(NumberTypes::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn by_default_only_the_default_region_is_served() {
        let geo = GeoPermissions::new(
            &Regions::default(),
            &Regions::default(),
            &Regions::default(),
            region("CN"),
        );
        assert_eq!(geo.of(region("CN")), GeoPermission::Allow);
        assert_eq!(geo.of(region("US")), GeoPermission::Block);
        assert_eq!(geo.describe(), "allow CN; block every other country");
        let us = GeoPermissions::new(
            &Regions::default(),
            &Regions::default(),
            &Regions::default(),
            region("US"),
        );
        assert_eq!(us.of(region("US")), GeoPermission::Allow);
        assert_eq!(us.of(region("CN")), GeoPermission::Block);
    }

    #[test]
    fn lists_and_wildcards_give_each_region_one_permission() {
        let geo = GeoPermissions::new(
            &regions("CN,HK"),
            &regions("US, gb"),
            &Regions::default(),
            region("CN"),
        );
        assert_eq!(geo.of(region("HK")), GeoPermission::Allow);
        assert_eq!(geo.of(region("GB")), GeoPermission::Monitor);
        assert_eq!(geo.of(region("FR")), GeoPermission::Block);
        assert_eq!(
            geo.describe(),
            "allow CN,HK; monitor US,GB; block every other country"
        );
        // Everything monitored but the home country and a blocked one.
        let geo = GeoPermissions::new(
            &Regions::default(),
            &regions("*"),
            &regions("RU"),
            region("CN"),
        );
        assert_eq!(geo.of(region("CN")), GeoPermission::Allow);
        assert_eq!(geo.of(region("RU")), GeoPermission::Block);
        assert_eq!(geo.of(region("BR")), GeoPermission::Monitor);
        // Blocking the default region with no allow list serves no one there.
        let geo = GeoPermissions::new(
            &Regions::default(),
            &regions("US"),
            &regions("CN"),
            region("CN"),
        );
        assert_eq!(geo.of(region("CN")), GeoPermission::Block);
        assert_eq!(geo.of(region("US")), GeoPermission::Monitor);
    }

    #[test]
    fn a_region_in_two_lists_is_a_conflict() {
        assert_eq!(
            GeoPermissions::conflicts(&regions("CN,US"), &regions("US"), &Regions::default()),
            Some(
                "VCODE_ALLOWED_REGIONS and VCODE_MONITORED_REGIONS both name US: a region has one permission"
                    .to_owned()
            )
        );
        assert!(
            GeoPermissions::conflicts(&regions("*"), &Regions::default(), &regions("*")).is_some()
        );
        assert_eq!(
            GeoPermissions::conflicts(&regions("*"), &regions("US"), &regions("RU")),
            None
        );
        // Conflicts resolve to the strictest regardless.
        let geo = GeoPermissions::new(&regions("US"), &regions("US"), &regions("US"), region("CN"));
        assert_eq!(geo.of(region("US")), GeoPermission::Block);
    }

    #[test]
    fn regions_read_and_show_as_listed() {
        let listed = regions(" cn,HK,*, ");
        assert_eq!(listed.to_string(), "CN,HK,*");
        assert!(Regions::parse("CN,XX").is_err());
        assert!(regions("").is_empty());
    }
}
