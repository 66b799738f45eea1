//! Aliyun's `SmsReport` (HTTP batch push): a JSON array of reports, each with the `biz_id` the
//! send answered, `success` and the report code `err_code` (`DELIVERED` on success). Unsigned:
//! the URL configured in Aliyun's console carries vcode's receipt token. Aliyun wants
//! `{"code": 0, "msg": …}` back, and pushes again (1, 5, 10 minutes) on anything but a 200.

use serde::Deserialize;

use super::{Report, ReportError, Reported, error_code, message_id};

/// What vcode answers a report it took.
pub const ACCEPTED: &str = r#"{"code":0,"msg":"接收成功"}"#;

#[derive(Deserialize)]
struct Entry {
    biz_id: String,
    success: bool,
    #[serde(default)]
    err_code: Option<String>,
}

/// The reports of one push.
pub fn parse(body: &[u8]) -> Result<Vec<Report>, ReportError> {
    let entries: Vec<Entry> =
        serde_json::from_slice(body).map_err(|_| ReportError::Malformed("SmsReport array"))?;
    entries
        .into_iter()
        .map(|entry| {
            Ok(Report {
                message_id: message_id(&entry.biz_id)?,
                reported: if entry.success {
                    Reported::Delivered
                } else {
                    Reported::Undelivered
                },
                error_code: if entry.success {
                    None
                } else {
                    error_code(entry.err_code.as_deref())
                },
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_report_parses() {
        // Aliyun's example, with a failure beside it.
        let body = r#"[{"phone_number":"1381111****","send_time":"2017-01-01 00:00:00",
            "report_time":"2017-01-01 00:00:00","success":true,"err_code":"DELIVERED",
            "err_msg":"用户接收成功","sms_size":"1","biz_id":"12345^0","out_id":"67890"},
            {"phone_number":"1381111****","success":false,"err_code":"MK:0001",
            "biz_id":"12346^0"}]"#;
        let reports = parse(body.as_bytes()).unwrap();
        assert_eq!(reports.len(), 2);
        assert_eq!(reports[0].message_id, "12345^0");
        assert_eq!(reports[0].reported, Reported::Delivered);
        assert_eq!(reports[0].error_code, None);
        assert_eq!(reports[1].reported, Reported::Undelivered);
        assert_eq!(reports[1].error_code.as_deref(), Some("MK:0001"));
        assert!(parse(br#"{"biz_id":"1"}"#).is_err());
        assert!(parse(br#"[{"success":true}]"#).is_err());
    }
}
