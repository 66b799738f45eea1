//! The names a settings type reads, taken from its serde definition: the list of known
//! variables is the settings structs themselves, never a second list kept by hand.

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

/// The serde names of `T`'s fields (skipped fields excluded): for a settings struct, its
/// variables.
pub fn field_names<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut probe = Probe(&[]);
    // The probe only records the names and then refuses: the error is expected.
    let _ = T::deserialize(&mut probe);
    probe.0
}

/// A deserializer that answers nothing, and remembers the fields a struct asks for.
struct Probe(&'static [&'static str]);

#[derive(Debug)]
struct Refused;

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("only names are probed")
    }
}

impl std::error::Error for Refused {}

impl de::Error for Refused {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Refused
    }
}

impl<'de> Deserializer<'de> for &mut Probe {
    type Error = Refused;

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Refused> {
        self.0 = fields;
        Err(Refused)
    }

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Refused> {
        Err(Refused)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct Example {
        #[serde(rename = "VCODE_A")]
        a: u8,
        #[serde(skip)]
        b: u8,
        #[serde(rename = "VCODE_C")]
        c: u8,
    }

    #[test]
    fn the_names_are_the_serde_names_without_skipped_fields() {
        assert_eq!(field_names::<Example>(), ["VCODE_A", "VCODE_C"]);
    }
}
