//! What one setting is, for every module that owns settings: serde adapters from a variable's
//! text to a typed value with the reason a refusal gives (`text`), secrets that are read from a
//! variable or its `_FILE` twin and never shown (`secret`), the error that names the variable
//! (`error`), how passwords in URLs are hidden (`redact`) and the names a settings type reads
//! (`names`). Each module derives serde on its own
//! settings struct with these, one field per variable; `config` gathers the sources (figment)
//! and assembles the whole.
//!
//! Why serde and figment (in `config::sources`): each settings struct is the one definition of
//! its variables (the field's serde name *is* the variable), so the known names, the defaults
//! that `vcode check-config` shows and the parsing cannot drift apart; figment layers the config
//! file under the variables, remembers which layer each value came from and points its errors at
//! the key. `envy` names no field in its errors and is unmaintained; clap's `env` reads only the
//! process environment, where `Settings::from_lookup` must also read a map. The ranges and
//! reasons stay ours: they are the product's messages.

pub mod error;
pub mod names;
pub mod redact;
pub mod secret;
pub mod text;

pub use self::error::ConfigError;
pub use self::names::field_names;
pub use self::redact::{REDACTED, redact_url_password};
pub use self::secret::{Secret, SecretVariable};
pub use self::text::{Flag, Millis, OptionalText, Secs, Text, Whole, list, parse_text, show_text};
