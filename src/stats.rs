//! Daily counters of what the service did (sends, SMS, deduplications, verify and captcha
//! outcomes, quota rejections), kept in the store under `verify_code:stats:<YYYY-MM-DD>` for 7
//! days; every event also feeds the Prometheus metrics. Events are counted in-process and
//! added to the store once a second, so the hot path never waits for a stats write.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::sms::{SmsAttempt, SmsObserver};
use crate::store::{StatsStore, StoreError};

/// How many days of counters the store keeps (and `GET /api/v1/stats` can show).
pub const RETENTION_DAYS: u32 = 7;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    SendRequest,
    SmsSent,
    SmsFailed,
    /// A send whose provider never answered: the SMS may have arrived, the code stays.
    SmsUnconfirmed,
    DedupCooldown,
    DedupIdempotency,
    VerifyOk,
    VerifyWrong,
    VerifyExpired,
    VerifyLocked,
    CaptchaCreated,
    CaptchaSolved,
    CaptchaFailed,
    PowChallenge,
    PowSolved,
    PowRefused,
    QuotaPhone,
    QuotaIp,
    QuotaGlobal,
    QuotaFailures,
    /// A send refused for the number's type or non-geographic code.
    RefusedNumberType,
    /// A send refused for the number's country.
    RefusedRegion,
    /// An SMS delivered to a monitored country.
    SmsMonitored,
    /// A send to a test number (`VCODE_TEST_NUMBERS`): its fixed code stored, no SMS.
    TestNumberSend,
    /// The fraud guard suspended a prefix (its conversion) or held one back (a surge).
    FraudSuspended,
    FraudHeld,
    /// A send the fraud guard refused, by why its prefix is blocked.
    FraudRefusedConversion,
    FraudRefusedSurge,
    /// Refused by a level of the guard (a range, a country or the service: issue 39).
    FraudRefusedLevel,
    /// A send a suspension would have refused, passed as its destination verified before.
    FraudReturningPassed,
    /// A send refused by a spend cap.
    FraudRefusedSpend,
    /// A spend cap newly reached (an instance's reading of the shared counts).
    FraudSpendCapped,
    /// An operator lifted a prefix's suspension or hold.
    FraudLifted,
    // Per provider (the SMS observer's hook): `sms_<provider>_sent` / `_failed`.
    SmsLogSent,
    SmsLogFailed,
    SmsWebhookSent,
    SmsWebhookFailed,
    SmsAliyunSent,
    SmsAliyunFailed,
    SmsTencentSent,
    SmsTencentFailed,
    SmsTwilioSent,
    SmsTwilioFailed,
}

impl Event {
    pub const ALL: [Event; 43] = [
        Event::SendRequest,
        Event::SmsSent,
        Event::SmsFailed,
        Event::SmsUnconfirmed,
        Event::DedupCooldown,
        Event::DedupIdempotency,
        Event::VerifyOk,
        Event::VerifyWrong,
        Event::VerifyExpired,
        Event::VerifyLocked,
        Event::CaptchaCreated,
        Event::CaptchaSolved,
        Event::CaptchaFailed,
        Event::PowChallenge,
        Event::PowSolved,
        Event::PowRefused,
        Event::QuotaPhone,
        Event::QuotaIp,
        Event::QuotaGlobal,
        Event::QuotaFailures,
        Event::RefusedNumberType,
        Event::RefusedRegion,
        Event::SmsMonitored,
        Event::TestNumberSend,
        Event::FraudSuspended,
        Event::FraudHeld,
        Event::FraudRefusedConversion,
        Event::FraudRefusedSurge,
        Event::FraudRefusedLevel,
        Event::FraudReturningPassed,
        Event::FraudRefusedSpend,
        Event::FraudSpendCapped,
        Event::FraudLifted,
        Event::SmsLogSent,
        Event::SmsLogFailed,
        Event::SmsWebhookSent,
        Event::SmsWebhookFailed,
        Event::SmsAliyunSent,
        Event::SmsAliyunFailed,
        Event::SmsTencentSent,
        Event::SmsTencentFailed,
        Event::SmsTwilioSent,
        Event::SmsTwilioFailed,
    ];

    /// The counter's field name in the store and in `/api/v1/stats`.
    pub fn name(self) -> &'static str {
        match self {
            Event::SendRequest => "send_requests",
            Event::SmsSent => "sms_sent",
            Event::SmsFailed => "sms_failed",
            Event::SmsUnconfirmed => "sms_unconfirmed",
            Event::DedupCooldown => "dedup_cooldown",
            Event::DedupIdempotency => "dedup_idempotency",
            Event::VerifyOk => "verify_ok",
            Event::VerifyWrong => "verify_wrong",
            Event::VerifyExpired => "verify_expired",
            Event::VerifyLocked => "verify_locked",
            Event::CaptchaCreated => "captcha_created",
            Event::CaptchaSolved => "captcha_solved",
            Event::CaptchaFailed => "captcha_failed",
            Event::PowChallenge => "pow_challenges",
            Event::PowSolved => "pow_solved",
            Event::PowRefused => "pow_refused",
            Event::QuotaPhone => "quota_phone",
            Event::QuotaIp => "quota_ip",
            Event::QuotaGlobal => "quota_global",
            Event::QuotaFailures => "quota_failures",
            Event::RefusedNumberType => "refused_number_type",
            Event::RefusedRegion => "refused_region",
            Event::SmsMonitored => "sms_monitored",
            Event::TestNumberSend => "test_number_sends",
            Event::FraudSuspended => "fraud_suspended",
            Event::FraudHeld => "fraud_held",
            Event::FraudRefusedConversion => "fraud_refused_conversion",
            Event::FraudRefusedSurge => "fraud_refused_surge",
            Event::FraudRefusedLevel => "fraud_refused_level",
            Event::FraudReturningPassed => "fraud_returning_passed",
            Event::FraudRefusedSpend => "fraud_refused_spend",
            Event::FraudSpendCapped => "fraud_spend_capped",
            Event::FraudLifted => "fraud_lifted",
            Event::SmsLogSent => "sms_log_sent",
            Event::SmsLogFailed => "sms_log_failed",
            Event::SmsWebhookSent => "sms_webhook_sent",
            Event::SmsWebhookFailed => "sms_webhook_failed",
            Event::SmsAliyunSent => "sms_aliyun_sent",
            Event::SmsAliyunFailed => "sms_aliyun_failed",
            Event::SmsTencentSent => "sms_tencent_sent",
            Event::SmsTencentFailed => "sms_tencent_failed",
            Event::SmsTwilioSent => "sms_twilio_sent",
            Event::SmsTwilioFailed => "sms_twilio_failed",
        }
    }

    /// The Prometheus counter this event increments: family (without `_total`) and its label.
    /// `None` for the SMS events: the sender counts its attempts itself, per provider
    /// (`vcode_sms_total{provider,result}`).
    fn metric(self) -> Option<(&'static str, &'static str, &'static str)> {
        Some(match self {
            Event::SendRequest => ("vcode_otp_send_requests", "route", "otp_send"),
            Event::SmsSent | Event::SmsFailed | Event::SmsUnconfirmed => return None,
            Event::DedupCooldown => ("vcode_otp_dedup", "by", "cooldown"),
            Event::DedupIdempotency => ("vcode_otp_dedup", "by", "idempotency_key"),
            Event::VerifyOk => ("vcode_otp_verify", "outcome", "ok"),
            Event::VerifyWrong => ("vcode_otp_verify", "outcome", "wrong"),
            Event::VerifyExpired => ("vcode_otp_verify", "outcome", "expired"),
            Event::VerifyLocked => ("vcode_otp_verify", "outcome", "locked"),
            Event::CaptchaCreated => ("vcode_captcha", "outcome", "created"),
            Event::CaptchaSolved => ("vcode_captcha", "outcome", "solved"),
            Event::CaptchaFailed => ("vcode_captcha", "outcome", "failed"),
            Event::PowChallenge => ("vcode_pow", "outcome", "challenge"),
            Event::PowSolved => ("vcode_pow", "outcome", "solved"),
            Event::PowRefused => ("vcode_pow", "outcome", "refused"),
            Event::QuotaPhone => ("vcode_quota_rejections", "quota", "phone"),
            Event::QuotaIp => ("vcode_quota_rejections", "quota", "client_ip"),
            Event::QuotaGlobal => ("vcode_quota_rejections", "quota", "global"),
            Event::QuotaFailures => ("vcode_quota_rejections", "quota", "destination_failures"),
            Event::RefusedNumberType => ("vcode_destination_refusals", "reason", "number_type"),
            Event::RefusedRegion => ("vcode_destination_refusals", "reason", "region"),
            // Per region: `crate::metrics::count_monitored_sms`.
            Event::SmsMonitored => return None,
            Event::TestNumberSend => ("vcode_otp_test_number_sends", "route", "otp_send"),
            // Per country: `crate::metrics::count_fraud_block`.
            Event::FraudSuspended | Event::FraudHeld => return None,
            Event::FraudRefusedConversion => ("vcode_fraud_refused", "reason", "conversion"),
            Event::FraudRefusedSurge => ("vcode_fraud_refused", "reason", "surge"),
            Event::FraudRefusedLevel => ("vcode_fraud_refused", "reason", "level"),
            Event::FraudReturningPassed => ("vcode_fraud_returning", "outcome", "passed"),
            Event::FraudRefusedSpend => ("vcode_fraud_refused", "reason", "spend"),
            // Per cap: `crate::metrics::set_sms_spend`.
            Event::FraudSpendCapped => return None,
            Event::FraudLifted => ("vcode_fraud_lifts", "by", "operator"),
            Event::SmsLogSent
            | Event::SmsLogFailed
            | Event::SmsWebhookSent
            | Event::SmsWebhookFailed
            | Event::SmsAliyunSent
            | Event::SmsAliyunFailed
            | Event::SmsTencentSent
            | Event::SmsTencentFailed
            | Event::SmsTwilioSent
            | Event::SmsTwilioFailed => return None,
        })
    }
}

impl Event {
    /// The per-provider counter of one SMS attempt.
    pub fn of_sms_attempt(attempt: &SmsAttempt) -> Self {
        let (sent, failed) = match attempt.provider {
            "log" => (Event::SmsLogSent, Event::SmsLogFailed),
            "webhook" => (Event::SmsWebhookSent, Event::SmsWebhookFailed),
            "aliyun" => (Event::SmsAliyunSent, Event::SmsAliyunFailed),
            "tencent" => (Event::SmsTencentSent, Event::SmsTencentFailed),
            _ => (Event::SmsTwilioSent, Event::SmsTwilioFailed),
        };
        if attempt.delivered() { sent } else { failed }
    }
}

/// The daily stats count every provider's attempts.
impl SmsObserver for Stats {
    fn attempt(&self, attempt: SmsAttempt) {
        self.record(Event::of_sms_attempt(&attempt));
    }
}

pub struct Stats {
    store: Arc<dyn StatsStore>,
    pending: [AtomicU64; Event::ALL.len()],
    /// One flush at a time, so a failed flush can put its counts back without double counting.
    flushing: tokio::sync::Mutex<()>,
}

/// Counters of one day.
pub type DayCounters = BTreeMap<&'static str, u64>;

#[derive(Debug, Serialize)]
pub struct DayReport {
    pub date: String,
    pub counters: DayCounters,
}

#[derive(Debug, Serialize)]
pub struct StatsReport {
    pub days: Vec<DayReport>,
    pub totals: DayCounters,
    /// Sends answered without a new SMS (cooldown or Idempotency-Key repeat), per send request.
    pub dedup_saved_share: f64,
}

impl Stats {
    /// A recorder that adds its counts to the store every `flush_every`, until dropped.
    pub fn spawn(store: Arc<dyn StatsStore>, flush_every: Duration) -> Arc<Self> {
        let stats = Arc::new(Self {
            store,
            pending: std::array::from_fn(|_| AtomicU64::new(0)),
            flushing: tokio::sync::Mutex::new(()),
        });
        tokio::spawn(flush_forever(Arc::downgrade(&stats), flush_every));
        stats
    }

    pub fn record(&self, event: Event) {
        self.pending[event as usize].fetch_add(1, Ordering::Relaxed);
        if let Some((name, label, value)) = event.metric() {
            crate::metrics::count_stats_event(event as usize, name, label, value);
        }
    }

    /// Adds what was counted since the last flush to today's counters in the store.
    pub async fn flush(&self) -> Result<(), StoreError> {
        let _one_at_a_time = self.flushing.lock().await;
        let counts: Vec<(&'static str, u64)> = Event::ALL
            .iter()
            .map(|event| {
                (
                    event.name(),
                    self.pending[*event as usize].swap(0, Ordering::Relaxed),
                )
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        if counts.is_empty() {
            return Ok(());
        }
        let result = self.store.add_stats(&utc_date(now_secs()), &counts).await;
        if result.is_err() {
            // Keep them for the next flush.
            for (name, n) in &counts {
                if let Some(event) = Event::ALL.iter().find(|e| e.name() == *name) {
                    self.pending[*event as usize].fetch_add(*n, Ordering::Relaxed);
                }
            }
        }
        result
    }

    /// The last `days` days (today first), with totals and the share deduplication saved.
    pub async fn report(&self, days: u32) -> Result<StatsReport, StoreError> {
        self.flush().await?;
        let today = now_secs() / 86_400;
        let dates: Vec<String> = (0..u64::from(days.clamp(1, RETENTION_DAYS)))
            .map(|back| utc_date((today - back) * 86_400))
            .collect();
        let stored = self.store.stats(&dates).await?;
        let mut totals: DayCounters = Event::ALL.iter().map(|e| (e.name(), 0)).collect();
        let days = dates
            .into_iter()
            .zip(stored)
            .map(|(date, fields)| {
                let counters: DayCounters = Event::ALL
                    .iter()
                    .map(|e| (e.name(), fields.get(e.name()).copied().unwrap_or(0)))
                    .collect();
                for (name, n) in &counters {
                    *totals.entry(name).or_default() += n;
                }
                DayReport { date, counters }
            })
            .collect();
        let deduplicated =
            totals[Event::DedupCooldown.name()] + totals[Event::DedupIdempotency.name()];
        let requests = totals[Event::SendRequest.name()];
        let dedup_saved_share = if requests == 0 {
            0.0
        } else {
            deduplicated as f64 / requests as f64
        };
        Ok(StatsReport {
            days,
            totals,
            dedup_saved_share,
        })
    }
}

async fn flush_forever(stats: Weak<Stats>, every: Duration) {
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let Some(stats) = stats.upgrade() else { return };
        if let Err(error) = stats.flush().await {
            tracing::warn!(%error, "stats not flushed; retrying with the next flush");
        }
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `YYYY-MM-DD` of a Unix time, in UTC (civil-from-days, H. Hinnant's algorithm).
pub fn utc_date(unix_secs: u64) -> String {
    let days = (unix_secs / 86_400) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_calendar_days() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(86_399), "1970-01-01");
        assert_eq!(utc_date(86_400), "1970-01-02");
        assert_eq!(utc_date(951_782_400), "2000-02-29");
        assert_eq!(utc_date(1_795_964_928), "2026-11-29");
        assert_eq!(utc_date(4_107_542_400), "2100-03-01");
    }

    #[test]
    fn every_event_has_a_distinct_name() {
        let names: std::collections::HashSet<&str> = Event::ALL.iter().map(|e| e.name()).collect();
        assert_eq!(names.len(), Event::ALL.len());
        for (index, event) in Event::ALL.iter().enumerate() {
            assert_eq!(*event as usize, index, "ALL is in declaration order");
        }
    }
}
