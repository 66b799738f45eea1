//! Header names of the contract beyond the standard ones.

/// The send's de-duplication key (`Idempotency-Key` in the docs). Written in lower case, the
/// form HTTP/2 sends and `HeaderName::from_static` accepts; header names match in any case.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
