//! Tencent Cloud SMS's status callback (短信下发状态通知): a JSON array of reports, each with
//! the `sid` (the send's `SerialNo`), `report_status` `SUCCESS` or `FAIL` and the receipt code
//! `errmsg` (`DELIVRD` on success). Unsigned: the URL configured in Tencent's console carries
//! vcode's receipt token. Tencent wants `{"result": 0, "errmsg": "OK"}` back.

use serde::Deserialize;

use super::{Report, ReportError, Reported, error_code, message_id};

/// What vcode answers a report it took.
pub const ACCEPTED: &str = r#"{"result":0,"errmsg":"OK"}"#;

#[derive(Deserialize)]
struct Entry {
    sid: String,
    report_status: String,
    #[serde(default)]
    errmsg: Option<String>,
}

/// The reports of one callback.
pub fn parse(body: &[u8]) -> Result<Vec<Report>, ReportError> {
    let entries: Vec<Entry> =
        serde_json::from_slice(body).map_err(|_| ReportError::Malformed("status report array"))?;
    entries
        .into_iter()
        .map(|entry| {
            let reported = match entry.report_status.as_str() {
                "SUCCESS" => Reported::Delivered,
                "FAIL" => Reported::Undelivered,
                _ => return Err(ReportError::Malformed("report_status")),
            };
            Ok(Report {
                message_id: message_id(&entry.sid)?,
                reported,
                error_code: match reported {
                    Reported::Undelivered => error_code(entry.errmsg.as_deref()),
                    _ => None,
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
        let body = r#"[{"user_receive_time":"2015-10-17 08:03:04","nationcode":"86",
            "mobile":"13xxxxxxxxx","report_status":"SUCCESS","errmsg":"DELIVRD",
            "description":"用户短信送达成功","sid":"2019:-7201"},
            {"nationcode":"86","mobile":"13xxxxxxxxx","report_status":"FAIL",
            "errmsg":"MN:0001","description":"空号","sid":"2019:-7202"}]"#;
        let reports = parse(body.as_bytes()).unwrap();
        assert_eq!(reports[0].message_id, "2019:-7201");
        assert_eq!(reports[0].reported, Reported::Delivered);
        assert_eq!(reports[1].reported, Reported::Undelivered);
        assert_eq!(reports[1].error_code.as_deref(), Some("MN:0001"));
        assert!(parse(br#"[{"sid":"1","report_status":"MAYBE"}]"#).is_err());
    }
}
