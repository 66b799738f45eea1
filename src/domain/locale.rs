//! The language an SMS is written in: a BCP 47 tag (`zh-CN`, `en`, `zh-Hant-TW`), checked and
//! written in its canonical case so that `ZH-cn` and `zh-CN` are one locale.

use std::collections::BTreeMap;
use std::fmt;

/// A well-formed BCP 47 language tag: a 2–3 letter language, then optional subtags (a 4-letter
/// script, a 2-letter or 3-digit region, 5–8 character variants). Private-use and extension
/// subtags are refused: no SMS template is keyed by them.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Locale(String);

/// Longer than any tag this service can have a template for.
const MAX_LEN: usize = 35;

impl Locale {
    /// Parses `input` (`_` is read as `-`, as in `zh_CN`) into its canonical case: lower-case
    /// language, title-case script, upper-case region (`zh-hans-cn` → `zh-Hans-CN`).
    pub fn parse(input: &str) -> Option<Self> {
        let input = input.trim();
        if input.is_empty() || input.len() > MAX_LEN {
            return None;
        }
        let mut subtags = input.split(['-', '_']);
        let language = subtags.next()?;
        if !(2..=3).contains(&language.len()) || !language.bytes().all(|b| b.is_ascii_alphabetic())
        {
            return None;
        }
        let mut tag = language.to_ascii_lowercase();
        // Position: 0 = after the language, 1 = after a script, 2 = after a region or variant.
        let mut position = 0;
        for subtag in subtags {
            let alpha = subtag.bytes().all(|b| b.is_ascii_alphabetic());
            let digits = subtag.bytes().all(|b| b.is_ascii_digit());
            let canonical = match subtag.len() {
                4 if position == 0 && alpha => {
                    position = 1;
                    let mut script = subtag.to_ascii_lowercase();
                    script[..1].make_ascii_uppercase();
                    script
                }
                2 if position <= 1 && alpha => {
                    position = 2;
                    subtag.to_ascii_uppercase()
                }
                3 if position <= 1 && digits => {
                    position = 2;
                    subtag.to_owned()
                }
                5..=8 if subtag.bytes().all(|b| b.is_ascii_alphanumeric()) => {
                    position = 2;
                    subtag.to_ascii_lowercase()
                }
                4 if subtag.as_bytes()[0].is_ascii_digit()
                    && subtag.bytes().all(|b| b.is_ascii_alphanumeric()) =>
                {
                    position = 2;
                    subtag.to_ascii_lowercase()
                }
                _ => return None,
            };
            tag.push('-');
            tag.push_str(&canonical);
        }
        Some(Self(tag))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The primary language subtag (`zh` of `zh-Hant-TW`).
    pub fn language(&self) -> &str {
        self.0.split('-').next().unwrap_or(&self.0)
    }

    /// The entry of `by_locale` this locale reads best: its own tag, then each shorter prefix
    /// (`zh-Hant-TW`, `zh-Hant`, `zh`), then any entry in the same language (`zh-CN` for
    /// `zh-TW`). The one choice of SMS texts and email templates.
    pub fn pick<'a, T>(&self, by_locale: &'a BTreeMap<Locale, T>) -> Option<&'a T> {
        self.fallbacks()
            .find_map(|tag| by_locale.iter().find(|(l, _)| l.as_str() == tag))
            .or_else(|| {
                by_locale
                    .iter()
                    .find(|(l, _)| l.language() == self.language())
            })
            .map(|(_, entry)| entry)
    }

    /// This tag and each shorter prefix of it, longest first (`zh-Hant-TW`, `zh-Hant`, `zh`):
    /// the order in which templates are looked up.
    pub fn fallbacks(&self) -> impl Iterator<Item = &str> {
        let tag = self.0.as_str();
        let cuts = tag.match_indices('-').map(|(i, _)| i).collect::<Vec<_>>();
        std::iter::once(tag).chain(cuts.into_iter().rev().map(move |i| &tag[..i]))
    }
}

impl Default for Locale {
    /// `zh-CN`: the users this service is written for mostly read Chinese.
    fn default() -> Self {
        Self("zh-CN".to_owned())
    }
}

impl fmt::Debug for Locale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Locale({})", self.0)
    }
}

impl fmt::Display for Locale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_written_in_their_canonical_case() {
        for (input, canonical) in [
            ("zh-CN", "zh-CN"),
            ("ZH-cn", "zh-CN"),
            ("zh_CN", "zh-CN"),
            ("en", "en"),
            ("EN", "en"),
            ("zh-hant-tw", "zh-Hant-TW"),
            ("es-419", "es-419"),
            ("sl-rozaj-biske", "sl-rozaj-biske"),
            ("de-CH-1996", "de-CH-1996"),
            (" en-GB ", "en-GB"),
        ] {
            assert_eq!(Locale::parse(input).unwrap().as_str(), canonical, "{input}");
        }
    }

    #[test]
    fn malformed_tags_are_refused() {
        for bad in [
            "",
            "e",
            "english",
            "zh-",
            "-CN",
            "zh--CN",
            "zh-CN-Hans",
            "zh-C",
            "en-US-x-private",
            "中文",
            "zh CN",
            &"a".repeat(40),
        ] {
            assert!(Locale::parse(bad).is_none(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn fallbacks_go_from_the_whole_tag_to_the_language() {
        let locale = Locale::parse("zh-Hant-TW").unwrap();
        let chain: Vec<&str> = locale.fallbacks().collect();
        assert_eq!(chain, ["zh-Hant-TW", "zh-Hant", "zh"]);
        assert_eq!(locale.language(), "zh");
        let en = Locale::parse("en").unwrap();
        assert_eq!(en.fallbacks().collect::<Vec<_>>(), ["en"]);
    }

    #[test]
    fn default_is_simplified_chinese() {
        assert_eq!(Locale::default().as_str(), "zh-CN");
    }
}
