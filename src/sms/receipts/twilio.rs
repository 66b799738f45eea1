//! Twilio's `StatusCallback`: a form POST (`MessageSid`, `MessageStatus`, `ErrorCode`…) signed
//! with `X-Twilio-Signature`: base64 of the HMAC (SHA-1, or the algorithm
//! `X-Twilio-Webhooks-Signature-Settings` names) under the auth token of the full URL Twilio
//! called followed by every form parameter, sorted by name, as name then value. As the official
//! SDK's `RequestValidator`, the URL is tried with and without its port (Twilio is not
//! consistent about a default port), and an unknown algorithm is refused.

use base64::Engine;
use ring::hmac;

use super::{Report, ReportError, Reported, error_code, message_id};

pub const SIGNATURE_HEADER: &str = "X-Twilio-Signature";
pub const SIGNATURE_SETTINGS_HEADER: &str = "X-Twilio-Webhooks-Signature-Settings";

/// The algorithm the settings header names; `None` for one Twilio's SDK does not know.
fn algorithm(settings: Option<&str>) -> Option<hmac::Algorithm> {
    let named = settings
        .unwrap_or("")
        .split(',')
        .filter_map(|part| part.split_once('='))
        .find(|(name, value)| name.trim() == "algorithm" && !value.trim().is_empty())
        .map_or("HMAC_SHA1", |(_, value)| value.trim());
    match named.to_ascii_uppercase().as_str() {
        "HMAC_SHA1" => Some(hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY),
        "HMAC_SHA256" => Some(hmac::HMAC_SHA256),
        _ => None,
    }
}

/// The text Twilio signs: the URL, then each distinct parameter name in order with each of
/// its distinct values in order.
fn signed_text(url: &str, params: &[(String, String)]) -> Vec<u8> {
    let mut sorted: Vec<(&str, &str)> = params
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut text = url.as_bytes().to_vec();
    for (name, value) in sorted {
        text.extend_from_slice(name.as_bytes());
        text.extend_from_slice(value.as_bytes());
    }
    text
}

/// The signature of a request to `url` with `params` under `auth_token` (SHA-1).
pub fn signature(auth_token: &[u8], url: &str, params: &[(String, String)]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, auth_token);
    base64::engine::general_purpose::STANDARD
        .encode(hmac::sign(&key, &signed_text(url, params)).as_ref())
}

/// `url` with its authority's port, and without (the SDK's `add_port` / `remove_port`).
fn with_and_without_port(url: &str) -> [String; 2] {
    let Some((scheme, rest)) = url.split_once("://") else {
        return [url.to_owned(), url.to_owned()];
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let host = authority.split(':').next().unwrap_or(authority);
    let has_port = authority
        .rsplit_once(':')
        .is_some_and(|(_, port)| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()));
    if has_port {
        return [url.to_owned(), format!("{scheme}://{host}{tail}")];
    }
    let port = if scheme.eq_ignore_ascii_case("https") {
        443
    } else {
        80
    };
    [
        format!("{scheme}://{authority}:{port}{tail}"),
        url.to_owned(),
    ]
}

/// Whether `given` is Twilio's signature of a request to `url` with `params`.
pub fn verify(
    auth_token: &[u8],
    url: &str,
    params: &[(String, String)],
    given: &str,
    settings: Option<&str>,
) -> bool {
    let Some(algorithm) = algorithm(settings) else {
        return false;
    };
    let Ok(given) = base64::engine::general_purpose::STANDARD.decode(given.trim()) else {
        return false;
    };
    let key = hmac::Key::new(algorithm, auth_token);
    with_and_without_port(url)
        .iter()
        .any(|url| hmac::verify(&key, &signed_text(url, params), &given).is_ok())
}

/// The report of a verified callback. Statuses of incoming messages (`receiving`, `received`)
/// report nothing.
pub fn parse(params: &[(String, String)]) -> Result<Option<Report>, ReportError> {
    let field = |name: &str| {
        params
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    };
    let sid = field("MessageSid")
        .or_else(|| field("SmsSid"))
        .ok_or(ReportError::Malformed("MessageSid"))?;
    let status = field("MessageStatus")
        .or_else(|| field("SmsStatus"))
        .ok_or(ReportError::Malformed("MessageStatus"))?;
    let reported = match status {
        "accepted" | "scheduled" | "queued" | "sending" | "sent" => Reported::Sent,
        "delivered" | "read" => Reported::Delivered,
        "undelivered" | "failed" | "canceled" => Reported::Undelivered,
        "receiving" | "received" | "partially_delivered" => return Ok(None),
        _ => return Err(ReportError::Malformed("MessageStatus")),
    };
    Ok(Some(Report {
        message_id: message_id(sid)?,
        reported,
        error_code: match reported {
            Reported::Undelivered => error_code(field("ErrorCode")),
            _ => None,
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &[u8] = b"12345";

    fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect()
    }

    #[test]
    fn the_signature_is_twilios_documented_example() {
        // Twilio's documentation ("Webhooks security") and its SDK: this URL, these parameters and
        // the auth token 12345 sign to this value.
        let url = "https://mycompany.com/myapp.php?foo=1&bar=2";
        let form = params(&[
            ("CallSid", "CA1234567890ABCDE"),
            ("Caller", "+12349013030"),
            ("Digits", "1234"),
            ("From", "+12349013030"),
            ("To", "+18005551212"),
        ]);
        assert_eq!(signature(TOKEN, url, &form), "0/KCTR6DLpKmkAf8muzZqo1nDgQ=");
        assert!(verify(
            TOKEN,
            url,
            &form,
            "0/KCTR6DLpKmkAf8muzZqo1nDgQ=",
            None
        ));
        assert!(!verify(
            b"54321",
            url,
            &form,
            "0/KCTR6DLpKmkAf8muzZqo1nDgQ=",
            None
        ));
        let mut tampered = form.clone();
        tampered[2].1 = "1235".to_owned();
        assert!(!verify(
            TOKEN,
            url,
            &tampered,
            "0/KCTR6DLpKmkAf8muzZqo1nDgQ=",
            None
        ));
        assert!(!verify(
            TOKEN,
            url,
            &form,
            "0/KCTR6DLpKmkAf8muzZqo1nDgQ=",
            Some("algorithm=MD5")
        ));
    }

    #[test]
    fn a_default_port_is_tried_both_ways() {
        let form = params(&[("MessageSid", "SM1"), ("MessageStatus", "delivered")]);
        let signed = signature(TOKEN, "https://vcode.example:443/r", &form);
        assert!(verify(
            TOKEN,
            "https://vcode.example/r",
            &form,
            &signed,
            None
        ));
        let signed = signature(TOKEN, "https://vcode.example/r", &form);
        assert!(verify(
            TOKEN,
            "https://vcode.example:443/r",
            &form,
            &signed,
            None
        ));
    }

    #[test]
    fn statuses_map_to_deliveries_with_the_error_code_of_a_failure() {
        let report = |status: &str| {
            parse(&params(&[
                ("MessageSid", "SM0123"),
                ("MessageStatus", status),
                ("ErrorCode", "30003"),
            ]))
            .unwrap()
        };
        assert_eq!(report("delivered").unwrap().reported, Reported::Delivered);
        assert_eq!(report("delivered").unwrap().error_code, None);
        assert_eq!(report("sent").unwrap().reported, Reported::Sent);
        let failed = report("undelivered").unwrap();
        assert_eq!(failed.reported, Reported::Undelivered);
        assert_eq!(failed.error_code.as_deref(), Some("30003"));
        assert_eq!(report("received"), None);
        assert!(parse(&params(&[("MessageStatus", "sent")])).is_err());
    }
}
