//! The language of an SMS whose request names none: the operator's choice for the number's
//! region (`VCODE_REGION_LOCALES`), else the region's own language where a text or template is
//! written in it, else the default (`VCODE_DEFAULT_LOCALE`, `en`). So a `+1` number is not sent
//! Chinese because the service's users mostly read it, nor a `+86` one English.

use std::collections::{BTreeMap, BTreeSet};

use crate::domain::{Locale, Phone};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Locales {
    /// The language of each region that has one: the operator's choices over the built-in
    /// ones that something is written in. Resolved once, so a send looks up one entry.
    by_region: BTreeMap<String, Locale>,
    default: Locale,
}

impl Locales {
    /// `chosen` by the operator (region code → locale) over the built-in languages of the
    /// regions, of which those `written` in (a text's or template's language) count.
    pub fn new(
        chosen: BTreeMap<String, Locale>,
        written: &BTreeSet<String>,
        default: Locale,
    ) -> Self {
        let mut by_region: BTreeMap<String, Locale> = REGION_LANGUAGES
            .iter()
            .filter_map(|(region, tag)| Some(((*region).to_owned(), Locale::parse(tag)?)))
            .filter(|(_, locale)| written.contains(locale.language()))
            .collect();
        by_region.extend(chosen);
        Self { by_region, default }
    }

    /// The language of numbers no region rule decides (`VCODE_DEFAULT_LOCALE`).
    pub fn default(&self) -> &Locale {
        &self.default
    }

    pub fn for_phone(&self, phone: &Phone) -> &Locale {
        phone
            .region()
            .and_then(|region| self.by_region.get(region.as_str()))
            .unwrap_or(&self.default)
    }
}

/// Regions whose messages are read in their own language when vcode has a text in it.
const REGION_LANGUAGES: [(&str, &str); 44] = [
    ("CN", "zh-CN"),
    ("TW", "zh-TW"),
    ("HK", "zh-HK"),
    ("MO", "zh-MO"),
    ("JP", "ja"),
    ("KR", "ko"),
    ("VN", "vi"),
    ("TH", "th"),
    ("ID", "id"),
    ("MY", "ms"),
    ("FR", "fr"),
    ("DE", "de"),
    ("AT", "de"),
    ("ES", "es"),
    ("MX", "es"),
    ("AR", "es"),
    ("CO", "es"),
    ("CL", "es"),
    ("PE", "es"),
    ("IT", "it"),
    ("PT", "pt-PT"),
    ("BR", "pt-BR"),
    ("RU", "ru"),
    ("UA", "uk"),
    ("PL", "pl"),
    ("NL", "nl"),
    ("SE", "sv"),
    ("NO", "nb"),
    ("DK", "da"),
    ("FI", "fi"),
    ("TR", "tr"),
    ("GR", "el"),
    ("CZ", "cs"),
    ("HU", "hu"),
    ("RO", "ro"),
    ("SA", "ar"),
    ("AE", "ar"),
    ("EG", "ar"),
    ("IL", "he"),
    ("IR", "fa"),
    ("PK", "ur"),
    ("BD", "bn"),
    ("KH", "km"),
    ("MN", "mn"),
];
