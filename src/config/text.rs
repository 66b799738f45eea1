//! Serde adapters between a setting's text and its value. Variables are text; the config file's
//! scalars (`8`, `true`) and arrays of strings (joined by commas) read as the same text, so one
//! parser serves both. A refusal is the reason alone (`expected a whole number from 1 to 100`):
//! `config` puts the variable and its value in front. The `serialize` halves write the text back,
//! which is how `vcode check-config` shows defaults.

use std::fmt;
use std::ops::RangeInclusive;
use std::time::Duration;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serializer};

/// A setting's text, whatever type its source gave it.
pub struct Text(pub String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;

        impl<'de> Visitor<'de> for TextVisitor {
            type Value = String;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("text, a number, true or false, or a list of them")
            }

            fn visit_str<E: de::Error>(self, value: &str) -> Result<String, E> {
                Ok(value.to_owned())
            }

            fn visit_string<E: de::Error>(self, value: String) -> Result<String, E> {
                Ok(value)
            }

            fn visit_bool<E: de::Error>(self, value: bool) -> Result<String, E> {
                Ok(value.to_string())
            }

            fn visit_i64<E: de::Error>(self, value: i64) -> Result<String, E> {
                Ok(value.to_string())
            }

            fn visit_u64<E: de::Error>(self, value: u64) -> Result<String, E> {
                Ok(value.to_string())
            }

            fn visit_f64<E: de::Error>(self, value: f64) -> Result<String, E> {
                Ok(value.to_string())
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<String, A::Error> {
                let mut joined = Vec::new();
                while let Some(Text(item)) = items.next_element()? {
                    joined.push(item);
                }
                Ok(joined.join(","))
            }
        }

        deserializer.deserialize_any(TextVisitor).map(Text)
    }
}

/// Parses a setting's trimmed text with `parse`; its reason becomes the error.
pub fn parse_text<'de, D, T>(
    deserializer: D,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
{
    let Text(raw) = Text::deserialize(deserializer)?;
    parse(raw.trim()).map_err(de::Error::custom)
}

/// Writes a setting's text.
pub fn show_text<S: Serializer>(text: impl fmt::Display, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&text)
}

/// A comma-separated list, blanks between commas skipped; each item trimmed and parsed.
pub fn list<T>(raw: &str, item: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    raw.split(',')
        .map(str::trim)
        .filter(|piece| !piece.is_empty())
        .map(item)
        .collect()
}

/// A whole number within `range`.
pub fn whole(raw: &str, range: RangeInclusive<u64>) -> Result<u64, String> {
    raw.parse::<u64>()
        .ok()
        .filter(|n| range.contains(n))
        .ok_or_else(|| {
            format!(
                "expected a whole number from {} to {}",
                range.start(),
                range.end()
            )
        })
}

/// A whole number from `MIN` to `MAX`, as any unsigned integer type that holds them.
pub struct Whole<const MIN: u64, const MAX: u64>;

impl<const MIN: u64, const MAX: u64> Whole<MIN, MAX> {
    pub fn deserialize<'de, D, T>(deserializer: D) -> Result<T, D::Error>
    where
        D: Deserializer<'de>,
        T: TryFrom<u64>,
    {
        parse_text(deserializer, |raw| {
            let n = whole(raw, MIN..=MAX)?;
            T::try_from(n).map_err(|_| format!("{n} does not fit"))
        })
    }

    pub fn serialize<S, T>(value: &T, serializer: S) -> Result<S::Ok, S::Error>
    where
        S: Serializer,
        T: fmt::Display,
    {
        show_text(value, serializer)
    }
}

/// Whole seconds from `MIN` to `MAX`.
pub struct Secs<const MIN: u64, const MAX: u64>;

impl<const MIN: u64, const MAX: u64> Secs<MIN, MAX> {
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        parse_text(deserializer, |raw| {
            whole(raw, MIN..=MAX).map(Duration::from_secs)
        })
    }

    pub fn serialize<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        show_text(value.as_secs(), serializer)
    }
}

/// Whole milliseconds from `MIN` to `MAX`.
pub struct Millis<const MIN: u64, const MAX: u64>;

impl<const MIN: u64, const MAX: u64> Millis<MIN, MAX> {
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        parse_text(deserializer, |raw| {
            whole(raw, MIN..=MAX).map(Duration::from_millis)
        })
    }

    pub fn serialize<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        show_text(value.as_millis(), serializer)
    }
}

/// On or off, in the spellings operators use.
pub struct Flag;

impl Flag {
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
        parse_text(deserializer, |raw| {
            match raw.to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => Ok(true),
                "0" | "false" | "no" | "off" => Ok(false),
                _ => Err("expected true or false (or 1/0, yes/no, on/off)".to_owned()),
            }
        })
    }

    pub fn serialize<S: Serializer>(value: &bool, serializer: S) -> Result<S::Ok, S::Error> {
        show_text(value, serializer)
    }
}

/// Text that may be absent; blank counts as absent.
pub struct OptionalText;

impl OptionalText {
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<String>, D::Error> {
        let Text(raw) = Text::deserialize(deserializer)?;
        let raw = raw.trim();
        Ok((!raw.is_empty()).then(|| raw.to_owned()))
    }

    pub fn serialize<S: Serializer>(
        value: &Option<String>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(text) => serializer.serialize_some(text),
            None => serializer.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::IntoDeserializer;
    use serde::de::value::Error;

    fn from<T>(
        text: &'static str,
        adapter: impl FnOnce(serde::de::value::StrDeserializer<'static, Error>) -> Result<T, Error>,
    ) -> Result<T, String> {
        adapter(text.into_deserializer()).map_err(|e| e.to_string())
    }

    #[test]
    fn numbers_keep_to_their_range_and_say_it() {
        assert_eq!(from(" 7 ", Whole::<1, 10>::deserialize::<_, u32>), Ok(7));
        assert_eq!(
            from("11", Whole::<1, 10>::deserialize::<_, u32>),
            Err("expected a whole number from 1 to 10".to_owned())
        );
        assert!(from("-1", Whole::<0, 10>::deserialize::<_, u8>).is_err());
        assert!(from("1.5", Whole::<0, 10>::deserialize::<_, u8>).is_err());
        assert_eq!(
            from("3", Secs::<1, 5>::deserialize),
            Ok(Duration::from_secs(3))
        );
        assert_eq!(
            from("250", Millis::<10, 1000>::deserialize),
            Ok(Duration::from_millis(250))
        );
        assert!(from("0", Secs::<1, 5>::deserialize).is_err());
    }

    #[test]
    fn flags_take_the_usual_spellings() {
        for on in ["1", "true", "YES", "On"] {
            assert_eq!(from(on, Flag::deserialize), Ok(true), "{on}");
        }
        for off in ["0", "false", "no", "OFF"] {
            assert_eq!(from(off, Flag::deserialize), Ok(false), "{off}");
        }
        assert!(from("maybe", Flag::deserialize).is_err());
    }

    #[test]
    fn lists_skip_blanks_and_name_the_bad_item() {
        let parse = |raw| list(raw, |item| item.parse::<u8>().map_err(|_| item.to_owned()));
        assert_eq!(parse(" 1, 2,,3 "), Ok(vec![1, 2, 3]));
        assert_eq!(parse("1,x"), Err("x".to_owned()));
    }
}
