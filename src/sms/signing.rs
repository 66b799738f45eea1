//! The primitives the providers' request signatures are built from: SHA-256, HMAC-SHA256,
//! RFC 3986 percent-encoding and UTC timestamps, as pure functions of their inputs.

use hmac::{Hmac, Mac};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use sha2::{Digest, Sha256};

/// Everything but RFC 3986's unreserved characters (`A-Z a-z 0-9 - _ . ~`) is encoded, with
/// upper-case hex: what both Alibaba Cloud's and Tencent Cloud's canonical forms use.
const RFC3986: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

pub fn percent_encode(raw: &str) -> String {
    utf8_percent_encode(raw, RFC3986).to_string()
}

pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

pub fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
}

/// The UTC civil date of a Unix time: (year, month, day). Howard Hinnant's days-to-civil.
fn civil_date(unix_secs: u64) -> (i64, u32, u32) {
    let days = (unix_secs / 86_400) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `2024-05-01`, the UTC date of a Unix time.
pub fn utc_date(unix_secs: u64) -> String {
    let (year, month, day) = civil_date(unix_secs);
    format!("{year:04}-{month:02}-{day:02}")
}

/// `2024-05-01T08:30:00Z`, ISO 8601 in UTC to the second.
pub fn utc_timestamp(unix_secs: u64) -> String {
    let (year, month, day) = civil_date(unix_secs);
    let secs_of_day = unix_secs % 86_400;
    let fields = [
        (year as u64, 4, b'-'),
        (u64::from(month), 2, b'-'),
        (u64::from(day), 2, b'T'),
        (secs_of_day / 3600, 2, b':'),
        (secs_of_day % 3600 / 60, 2, b':'),
        (secs_of_day % 60, 2, b'Z'),
    ];
    if !(0..=9999).contains(&year) {
        return format!(
            "{}T{:02}:{:02}:{:02}Z",
            utc_date(unix_secs),
            fields[3].0,
            fields[4].0,
            fields[5].0
        );
    }
    // Digit by digit: `format!` cost three times as much, and every Twilio-compatible answer
    // writes two or three of these.
    let mut out = [0u8; 20];
    let mut at = 0;
    for (value, width, separator) in fields {
        let mut rest = value;
        for slot in out[at..at + width].iter_mut().rev() {
            *slot = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        out[at + width] = separator;
        at += width + 1;
    }
    String::from_utf8(out.to_vec()).expect("ASCII digits and separators")
}

/// Parses `utc_timestamp`'s form back to a Unix time (the fake gateways check the window).
pub fn parse_utc_timestamp(raw: &str) -> Option<u64> {
    let bytes = raw.as_bytes();
    if bytes.len() != 20 || &raw[4..5] != "-" || &raw[10..11] != "T" || &raw[19..] != "Z" {
        return None;
    }
    let number = |range: std::ops::Range<usize>| raw.get(range)?.parse::<u64>().ok();
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    // Days from civil (the inverse of `civil_date`).
    let y = if month <= 2 { year - 1 } else { year } as i64;
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let m = month as i64;
    let day_of_year = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day as i64 - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    u64::try_from(days)
        .ok()
        .map(|d| d * 86_400 + hour * 3600 + minute * 60 + second)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_encoding_keeps_only_unreserved_characters() {
        assert_eq!(percent_encode("aZ09-_.~"), "aZ09-_.~");
        assert_eq!(percent_encode("a b+c*d/e"), "a%20b%2Bc%2Ad%2Fe");
        assert_eq!(
            percent_encode("{\"code\":\"1\"}"),
            "%7B%22code%22%3A%221%22%7D"
        );
        assert_eq!(percent_encode("阿里"), "%E9%98%BF%E9%87%8C");
    }

    #[test]
    fn hashes_match_known_vectors() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        // RFC 4231, test case 2.
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn utc_times_are_formatted_and_read_back() {
        for (secs, text) in [
            (0, "1970-01-01T00:00:00Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (1_551_113_065, "2019-02-25T16:44:25Z"),
            (1_735_689_599, "2024-12-31T23:59:59Z"),
            (4_107_542_400, "2100-03-01T00:00:00Z"),
        ] {
            assert_eq!(utc_timestamp(secs), text);
            assert_eq!(parse_utc_timestamp(text), Some(secs), "{text}");
        }
        assert_eq!(utc_date(1_551_113_065), "2019-02-25");
        assert_eq!(parse_utc_timestamp("2019-02-25 16:44:25"), None);
    }
}
