//! The stable five-digit error codes; the first three digits of each are its HTTP status.

use serde::{Deserialize, Serialize};

/// An error the API answers with, as `code` in the envelope. Serialised as its number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "u32", try_from = "u32")]
#[repr(u32)]
pub enum ErrorCode {
    /// Bad JSON, a missing or wrong-typed field, a bad query or header.
    Malformed = 40000,
    InvalidPhone = 40001,
    InvalidCode = 40002,
    InvalidPurpose = 40003,
    /// No SMS goes to this type of number: premium rate, shared cost, toll-free, personal,
    /// UAN, VoIP, pager, fixed line, or a non-geographic calling code (+800, +870, +881, +979…),
    /// unless the service allows it.
    NumberTypeRefused = 40004,
    /// No SMS goes to this number's country (the service's geo permissions).
    RegionRefused = 40005,
    /// A verify without `verification_id` where the service verifies by id
    /// (`VCODE_VERIFY_BY=id`, the default).
    VerificationIdRequired = 40006,
    /// The `phone` or `purpose` of a verify by id is not its verification's.
    VerificationMismatch = 40007,
    /// An email address vcode does not send to: not exactly one `@`, a display name, a
    /// comment, a quoted or non-ASCII local part, a control character or line break, a bad
    /// domain, or longer than RFC 5321 allows. The message says which rule.
    InvalidEmail = 40008,
    /// Wrong code; data [`crate::WrongCodeData`].
    WrongCode = 40010,
    /// Wrong or missing captcha.
    WrongCaptcha = 40020,
    /// Proof of work missing, wrong, expired or used.
    PowRejected = 40021,
    /// Missing or wrong bearer token.
    Unauthorized = 40100,
    /// The fraud guard suspended or held back the destination's prefix (its sends stopped
    /// converting, or unverified sends surged); data [`crate::RetryAfterData`] and a
    /// `Retry-After` header.
    DestinationSuspended = 40300,
    /// No such route or captcha.
    NotFound = 40400,
    /// No such verification: unknown or malformed id, or its record has expired.
    VerificationNotFound = 40401,
    /// The route exists, not for this method.
    MethodNotAllowed = 40500,
    /// The request body did not arrive within the body deadline.
    BodyTimeout = 40800,
    /// A request with this `Idempotency-Key` is still in progress.
    IdempotencyInProgress = 40900,
    /// Code expired or not found.
    CodeExpired = 41000,
    PayloadTooLarge = 41300,
    /// This `Idempotency-Key` was used with a different request.
    IdempotencyMismatch = 42200,
    /// Resend cooldown; data [`crate::RetryAfterData`] and a `Retry-After` header.
    ResendCooldown = 42900,
    /// Too many failed attempts: the code was destroyed.
    TooManyAttempts = 42901,
    /// Quota exceeded (per phone, per client, global, or the SMS provider's own limit on the
    /// number or the account); data [`crate::RetryAfterData`].
    QuotaExceeded = 42902,
    /// Internal error (details only in the server's log).
    Internal = 50000,
    SmsDelivery = 50200,
    /// The mail relay refused the message (`5xx`) or could not take it (no connection, TLS,
    /// a `4xx`, a timeout before the message went): the code was rolled back.
    EmailDelivery = 50201,
    StoreUnavailable = 50300,
}

impl ErrorCode {
    /// Every code, in ascending order.
    pub const ALL: [Self; 29] = [
        Self::Malformed,
        Self::InvalidPhone,
        Self::InvalidCode,
        Self::InvalidPurpose,
        Self::NumberTypeRefused,
        Self::RegionRefused,
        Self::VerificationIdRequired,
        Self::VerificationMismatch,
        Self::InvalidEmail,
        Self::WrongCode,
        Self::WrongCaptcha,
        Self::PowRejected,
        Self::Unauthorized,
        Self::DestinationSuspended,
        Self::NotFound,
        Self::VerificationNotFound,
        Self::MethodNotAllowed,
        Self::BodyTimeout,
        Self::IdempotencyInProgress,
        Self::CodeExpired,
        Self::PayloadTooLarge,
        Self::IdempotencyMismatch,
        Self::ResendCooldown,
        Self::TooManyAttempts,
        Self::QuotaExceeded,
        Self::Internal,
        Self::SmsDelivery,
        Self::EmailDelivery,
        Self::StoreUnavailable,
    ];

    /// The number in the envelope.
    pub const fn code(self) -> u32 {
        self as u32
    }

    /// The HTTP status the code is answered with: its first three digits.
    pub const fn http_status(self) -> u16 {
        (self.code() / 100) as u16
    }

    /// The code with this number, if there is one.
    pub fn from_code(code: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|known| known.code() == code)
    }
}

impl From<ErrorCode> for u32 {
    fn from(code: ErrorCode) -> Self {
        code.code()
    }
}

impl TryFrom<u32> for ErrorCode {
    type Error = String;

    fn try_from(code: u32) -> Result<Self, Self::Error> {
        Self::from_code(code).ok_or_else(|| format!("{code} is not a vcode error code"))
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DESIGN.md's table, row by row: code and HTTP status written out, not computed.
    const TABLE: [(ErrorCode, u32, u16); 29] = [
        (ErrorCode::Malformed, 40000, 400),
        (ErrorCode::InvalidPhone, 40001, 400),
        (ErrorCode::InvalidCode, 40002, 400),
        (ErrorCode::InvalidPurpose, 40003, 400),
        (ErrorCode::NumberTypeRefused, 40004, 400),
        (ErrorCode::RegionRefused, 40005, 400),
        (ErrorCode::VerificationIdRequired, 40006, 400),
        (ErrorCode::VerificationMismatch, 40007, 400),
        (ErrorCode::InvalidEmail, 40008, 400),
        (ErrorCode::WrongCode, 40010, 400),
        (ErrorCode::WrongCaptcha, 40020, 400),
        (ErrorCode::PowRejected, 40021, 400),
        (ErrorCode::Unauthorized, 40100, 401),
        (ErrorCode::DestinationSuspended, 40300, 403),
        (ErrorCode::NotFound, 40400, 404),
        (ErrorCode::VerificationNotFound, 40401, 404),
        (ErrorCode::MethodNotAllowed, 40500, 405),
        (ErrorCode::BodyTimeout, 40800, 408),
        (ErrorCode::IdempotencyInProgress, 40900, 409),
        (ErrorCode::CodeExpired, 41000, 410),
        (ErrorCode::PayloadTooLarge, 41300, 413),
        (ErrorCode::IdempotencyMismatch, 42200, 422),
        (ErrorCode::ResendCooldown, 42900, 429),
        (ErrorCode::TooManyAttempts, 42901, 429),
        (ErrorCode::QuotaExceeded, 42902, 429),
        (ErrorCode::Internal, 50000, 500),
        (ErrorCode::SmsDelivery, 50200, 502),
        (ErrorCode::EmailDelivery, 50201, 502),
        (ErrorCode::StoreUnavailable, 50300, 503),
    ];

    #[test]
    fn codes_and_statuses_are_the_documented_table() {
        for (error, code, status) in TABLE {
            assert_eq!(error.code(), code, "{error:?}");
            assert_eq!(error.http_status(), status, "{error:?}");
            assert_eq!(ErrorCode::from_code(code), Some(error));
        }
        let listed: Vec<ErrorCode> = TABLE.iter().map(|row| row.0).collect();
        assert_eq!(
            listed,
            ErrorCode::ALL,
            "ALL lists every code once, in order"
        );
    }

    #[test]
    fn unknown_numbers_are_no_code() {
        for number in [0, 200, 40009, 42903, 50100] {
            assert_eq!(ErrorCode::from_code(number), None, "{number}");
        }
    }

    #[test]
    fn a_code_is_written_and_read_as_its_number() {
        let json = serde_json::to_string(&ErrorCode::TooManyAttempts).unwrap();
        assert_eq!(json, "42901");
        let read: ErrorCode = serde_json::from_str("40021").unwrap();
        assert_eq!(read, ErrorCode::PowRejected);
        assert!(serde_json::from_str::<ErrorCode>("40009").is_err());
    }
}
