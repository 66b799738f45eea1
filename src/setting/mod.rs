//! What one setting is, for every module that owns settings: serde adapters from a variable's
//! text to a typed value with the reason a refusal gives (`text`), secrets that are read from a
//! variable or its `_FILE` twin and never shown (`secret`), the error that names the variable
//! (`error`), and the names a settings type reads (`names`). Each module derives serde on its own
//! settings struct with these, one field per variable; `config` gathers the sources (figment)
//! and assembles the whole.
//!
//! Why figment and serde: each settings struct is the one definition of its variables (the
//! field's serde name *is* the variable), so the list of known names, the defaults shown by
//! `vcode check-config` and the parsing cannot drift apart; figment layers the config file under
//! the variables and remembers where each value came from, for the error messages and the
//! "default or set" column. The reasons and ranges stay ours: they are the product's messages.

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
