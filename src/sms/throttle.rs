//! How long a provider's own limit holds a number or an account: the provider's `Retry-After`
//! when it sends one, otherwise the window its error code names. The wait becomes the client's
//! `retry_after` (`429`/`42902`); it is a hint, so a short guess only costs one more refusal.

use std::time::Duration;

use super::SmsError;

/// The longest wait passed on: no provider limit vcode maps is longer than a day, so a larger
/// `Retry-After` is a gateway's mistake, not a reason to turn a client away for longer.
pub const MAX_WAIT: Duration = Duration::from_secs(86_400);

/// Seconds China Standard Time (UTC+8, no daylight saving) is ahead of UTC.
const CHINA_OFFSET_SECS: u64 = 8 * 3600;

/// The window a provider's limit counts over, when its answer says no `Retry-After`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThrottleWindow {
    /// Request-rate limits (calls per second of the account): 1 s.
    Second,
    /// Tencent's per-number 30-second limit, Twilio's 30-second loop protection: 30 s.
    ThirtySeconds,
    /// Per-minute limits, and limits whose window the answer does not name: 60 s.
    Minute,
    /// Per-hour limits: 3600 s.
    Hour,
    /// Daily limits of Aliyun and Tencent, which count calendar days in China: until the next
    /// midnight UTC+8.
    ChinaDay,
    /// Rolling 24-hour limits (Twilio's account daily limit): 86 400 s.
    Day,
}

impl ThrottleWindow {
    /// The wait from `unix_secs` until the window lets a message through again.
    pub fn wait(self, unix_secs: u64) -> Duration {
        Duration::from_secs(match self {
            ThrottleWindow::Second => 1,
            ThrottleWindow::ThirtySeconds => 30,
            ThrottleWindow::Minute => 60,
            ThrottleWindow::Hour => 3600,
            ThrottleWindow::ChinaDay => 86_400 - (unix_secs + CHINA_OFFSET_SECS) % 86_400,
            ThrottleWindow::Day => 86_400,
        })
    }
}

/// The `Throttled` error for an answer with `retry_after` (its `Retry-After`), else with
/// `window`'s wait from now.
pub fn throttled(
    provider: &'static str,
    retry_after: Option<Duration>,
    code: impl Into<String>,
    detail: impl Into<String>,
    window: ThrottleWindow,
) -> SmsError {
    let wait = retry_after.unwrap_or_else(|| window.wait(super::unix_now()));
    SmsError::throttled(provider, code, detail, wait.min(MAX_WAIT))
}

/// A `Retry-After` value in seconds; an HTTP date (which no provider here sends) is ignored and
/// the code's window applies.
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_china_day_ends_at_midnight_utc_plus_8() {
        // 2023-11-14T22:13:20Z is 06:13:20 on the 15th in Beijing: 17h46m40s to midnight.
        assert_eq!(
            ThrottleWindow::ChinaDay.wait(1_700_000_000),
            Duration::from_secs(17 * 3600 + 46 * 60 + 40)
        );
        // 2023-11-14T16:00:00Z is midnight in Beijing: a second before it, a second is left;
        // at it, a whole day.
        let midnight = 1_699_977_600;
        assert_eq!(
            ThrottleWindow::ChinaDay.wait(midnight - 1),
            Duration::from_secs(1)
        );
        assert_eq!(
            ThrottleWindow::ChinaDay.wait(midnight),
            Duration::from_secs(86_400)
        );
    }

    #[test]
    fn the_providers_retry_after_wins_and_is_capped_at_a_day() {
        let error = throttled(
            "test",
            Some(Duration::from_secs(7)),
            "http_429",
            "",
            ThrottleWindow::Hour,
        );
        assert_eq!(error.retry_after(), Some(Duration::from_secs(7)));
        let error = throttled("test", None, "http_429", "", ThrottleWindow::Hour);
        assert_eq!(error.retry_after(), Some(Duration::from_secs(3600)));
        let error = throttled(
            "test",
            Some(Duration::from_secs(10_000_000)),
            "http_429",
            "",
            ThrottleWindow::Second,
        );
        assert_eq!(error.retry_after(), Some(MAX_WAIT));
    }

    #[test]
    fn retry_after_is_read_in_seconds_only() {
        assert_eq!(parse_retry_after(" 120 "), Some(Duration::from_secs(120)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-1"), None);
    }
}
