//! The envelope every JSON answer is wrapped in: `{"code", "message", "data"}`, in that order.

use serde::{Deserialize, Serialize};

use crate::ErrorCode;

/// The `code` (and HTTP status) of every success.
pub const OK: u32 = 200;
/// The `message` of every success.
pub const OK_MESSAGE: &str = "ok";

/// One JSON answer. `data` is the route's answer on success; on an error it is `null` unless
/// the code carries data ([`crate::WrongCodeData`], [`crate::RetryAfterData`]), so a client
/// reading any answer uses `Envelope<Option<T>>` or `Envelope<serde_json::Value>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope<T> {
    /// [`OK`], or an [`ErrorCode`] as its number.
    pub code: u32,
    /// `"ok"`, or what went wrong, for people (clients branch on `code`).
    pub message: String,
    pub data: T,
}

impl<T> Envelope<T> {
    /// A success carrying `data`.
    pub fn ok(data: T) -> Self {
        Self {
            code: OK,
            message: OK_MESSAGE.to_owned(),
            data,
        }
    }

    /// An error answer.
    pub fn error(code: ErrorCode, message: impl Into<String>, data: T) -> Self {
        Self {
            code: code.code(),
            message: message.into(),
            data,
        }
    }

    pub fn is_ok(&self) -> bool {
        self.code == OK
    }

    /// The error this answer reports; `None` for a success or a code this contract lacks.
    pub fn error_code(&self) -> Option<ErrorCode> {
        ErrorCode::from_code(self.code)
    }
}
