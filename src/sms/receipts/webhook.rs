//! The webhook gateway's receipt: `POST` JSON `{"message_id": …, "status": "sent" |
//! "delivered" | "undelivered", "error_code": …}` (the `message_id` of vcode's request),
//! signed as vcode signs its requests to the gateway (`X-Vcode-Timestamp`, `X-Vcode-Signature:
//! v1=<hex>` of `"<timestamp>.<body>"` under `VCODE_SMS_WEBHOOK_SECRET`), within
//! [`TOLERANCE_SECS`] of vcode's clock, so that a captured receipt cannot be replayed later.

use serde::Deserialize;

use super::{Report, ReportError, Reported, error_code, message_id, same_secret};
use crate::sms::webhook::signature;

/// How far a receipt's timestamp may be from vcode's clock.
pub const TOLERANCE_SECS: u64 = 300;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    message_id: String,
    status: Status,
    #[serde(default)]
    error_code: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Status {
    Sent,
    Delivered,
    Undelivered,
}

/// Whether the headers sign `body` under `secret` at a time near `now` (Unix seconds).
pub fn verify(
    secret: &[u8],
    timestamp: Option<&str>,
    given: Option<&str>,
    body: &[u8],
    now: u64,
) -> bool {
    let (Some(timestamp), Some(given)) = (timestamp, given) else {
        return false;
    };
    let Ok(timestamp) = timestamp.trim().parse::<u64>() else {
        return false;
    };
    if timestamp.abs_diff(now) > TOLERANCE_SECS {
        return false;
    }
    let expected = signature(secret, timestamp, body);
    same_secret(given.trim().as_bytes(), expected.as_bytes())
}

/// The report of a verified receipt.
pub fn parse(body: &[u8]) -> Result<Report, ReportError> {
    let body: Body =
        serde_json::from_slice(body).map_err(|_| ReportError::Malformed("receipt body"))?;
    let reported = match body.status {
        Status::Sent => Reported::Sent,
        Status::Delivered => Reported::Delivered,
        Status::Undelivered => Reported::Undelivered,
    };
    Ok(Report {
        message_id: message_id(&body.message_id)?,
        reported,
        error_code: match reported {
            Reported::Undelivered => error_code(body.error_code.as_deref()),
            _ => None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"whsec-0123456789abcdef0123456789abcdef";

    #[test]
    fn a_receipt_is_taken_only_signed_and_on_time() {
        let body = br#"{"message_id":"abc","status":"undelivered","error_code":"E42"}"#;
        let signed = signature(SECRET, 1_700_000_000, body);
        let check = |timestamp: &str, given: &str, body: &[u8], now| {
            verify(SECRET, Some(timestamp), Some(given), body, now)
        };
        assert!(check("1700000000", &signed, body, 1_700_000_100));
        assert!(!check("1700000000", &signed, body, 1_700_000_301));
        assert!(!check("1700000001", &signed, body, 1_700_000_000));
        assert!(!check("1700000000", &signed, b"{}", 1_700_000_000));
        assert!(!verify(SECRET, None, Some(&signed), body, 1_700_000_000));
        let report = parse(body).unwrap();
        assert_eq!(report.reported, Reported::Undelivered);
        assert_eq!(report.error_code.as_deref(), Some("E42"));
        assert!(parse(br#"{"message_id":"abc","status":"lost"}"#).is_err());
    }
}
