//! The JSON envelope every API answer uses: `{"code", "message", "data"}`, and `Reply`, an
//! answer as plain data that can cross tasks and be stored (for `Idempotency-Key` repeats).

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use serde::{Deserialize, Serialize};

pub use vcode_wire::Envelope;

/// A 200 answer carrying `data`.
pub fn ok<T: Serialize>(data: T) -> HttpResponse {
    Reply::ok(data).into_response()
}

/// An answer: status, JSON body and the `Retry-After` seconds, if any.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    pub status: u16,
    pub body: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
}

/// A success's [`Envelope`] as written: the same fields, its message not copied into a
/// `String` on every answer.
#[derive(Serialize)]
struct Success<T> {
    code: u32,
    message: &'static str,
    data: T,
}

impl Reply {
    pub fn ok<T: Serialize>(data: T) -> Self {
        let envelope = Success {
            code: vcode_wire::OK,
            message: vcode_wire::OK_MESSAGE,
            data,
        };
        Self {
            status: 200,
            body: serde_json::to_string(&envelope).unwrap_or_default(),
            retry_after: None,
        }
    }

    pub fn into_response(self) -> HttpResponse {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = HttpResponse::build(status);
        response.insert_header((
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        ));
        if let Some(secs) = self.retry_after {
            response.insert_header((header::RETRY_AFTER, HeaderValue::from(secs)));
        }
        response.body(self.body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_success_reads_as_the_wire_envelope() {
        let data =
            serde_json::json!({"verification_id": "q3Vd0m9YyTnJkqW8cXoB4A", "expires_in": 300});
        let body = Reply::ok(&data).body;
        assert_eq!(body, serde_json::to_string(&Envelope::ok(&data)).unwrap());
        let read: Envelope<serde_json::Value> = serde_json::from_str(&body).unwrap();
        assert_eq!(read, Envelope::ok(data));
    }
}
