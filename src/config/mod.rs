//! The vocabulary every module writes its settings with, and nothing that gathers them (that
//! is `crate::settings`, at the top): serde adapters from a variable's text to a typed value
//! with the reason a refusal gives (`text`), secrets read from a variable or its `_FILE` twin
//! and never shown (`secret`), the error that names the variable (`error`), the one redaction
//! (`redact`), the names a type reads (`names`), and the layering of the variables over the
//! optional config file in one figment (`sources`). Nothing here imports another module of
//! the crate, so every module may import it.

pub mod error;
pub mod names;
pub mod redact;
pub mod secret;
pub mod sources;
pub mod text;

pub use self::error::ConfigError;
