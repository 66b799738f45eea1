//! Validated request values: a value of these types has passed its `parse`, so the rest of the
//! service never re-checks raw strings.

mod budget;
mod captcha;
mod client;
mod code;
mod destination;
mod email;
mod locale;
mod phone;
mod purpose;
pub(crate) mod secret;
pub mod traffic;
mod verification;

pub use budget::SendBudget;
pub use captcha::{CaptchaAnswer, CaptchaId};
pub use client::Client;
pub use code::{Code, CodeDigest, CodeDigests, CodeLength, SealedCode};
pub use destination::{Channel, Destination, EMAIL_COUNTRY, EmailDestination, masked_key};
pub use email::{EmailAddress, InvalidEmail};
pub use locale::Locale;
pub use phone::{NumberType, Phone, PhoneParser, Region, masked_e164};
pub use purpose::Purpose;
pub use verification::VerificationId;
