//! The fraud guard's settings (`VCODE_FRAUD_*`): its level, the number ranges it judges, how
//! destinations group into the prefixes its blocks name, the traffic report's grace period, the
//! safe list, the thresholds (0 = the level's own), the spend caps and how long a returning
//! destination is remembered. Each field's serde name is its variable; the defaults are the
//! `Default` impl.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::levels::LevelThresholds;
use super::policy::Level;
use super::spend::SpendCaps;
use crate::config::text::{Secs, Whole, list, parse_text, show_text};

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default)]
pub struct FraudSettings {
    #[serde(rename = "VCODE_FRAUD_GUARD", with = "level")]
    pub level: Level,
    /// Digits after the calling code that make a destination prefix (`44` + `770`): what a
    /// block names and the store checks before an issue, and the traffic report's unit.
    #[serde(rename = "VCODE_FRAUD_PREFIX_DIGITS", with = "Whole::<1, 8>")]
    pub prefix_digits: usize,
    /// How long a send may go unverified before the traffic report counts it unconverted.
    #[serde(rename = "VCODE_FRAUD_GRACE_SECS", with = "Secs::<10, 600>")]
    pub grace: Duration,
    /// Numbers and prefixes (digits, `+` optional) never suspended or held back.
    #[serde(rename = "VCODE_FRAUD_SAFE_LIST", with = "safe_list")]
    pub safe_list: Vec<String>,
    /// How often each instance reads the safe list operators change (the store's) again: how
    /// long another instance's change may take to reach this one's sends.
    #[serde(rename = "VCODE_FRAUD_SAFE_LIST_REFRESH_SECS", with = "Secs::<1, 300>")]
    pub safe_list_refresh: Duration,
    /// A level converting below this percentage of the reference is refused; 0 = the level's.
    #[serde(rename = "VCODE_FRAUD_MIN_CONVERSION_PCT", with = "Whole::<0, 100>")]
    pub min_conversion_pct: u32,
    /// The depths of the number ranges judged as levels (digits after the calling code).
    #[serde(rename = "VCODE_FRAUD_RANGE_DIGITS", with = "range_digits")]
    pub range_digits: Vec<u8>,
    /// The handful of unexplained unconverted sends any level may have; 0 = the level's. Up to
    /// a billion: a load that never verifies (a benchmark's millions of sends) must stay as far
    /// from every verdict as converting traffic does, or it times refusals (at a million it
    /// did from the millionth send) and, from a quarter of a verdict, a wide level counted in
    /// the store on every send (`wide_levels`).
    #[serde(rename = "VCODE_FRAUD_EVIDENCE", with = "Whole::<0, 1_000_000_000>")]
    pub evidence: u64,
    /// Spend caps (issue 39; 0: none), in `VCODE_SMS_PRICES`' currency: what SMS may cost the
    /// service per hour and per day, and each country per hour and per day.
    #[serde(rename = "VCODE_FRAUD_SPEND_HOUR", with = "amount")]
    pub spend_hour: f64,
    #[serde(rename = "VCODE_FRAUD_SPEND_DAY", with = "amount")]
    pub spend_day: f64,
    #[serde(rename = "VCODE_FRAUD_SPEND_COUNTRY_HOUR", with = "amount")]
    pub spend_country_hour: f64,
    #[serde(rename = "VCODE_FRAUD_SPEND_COUNTRY_DAY", with = "amount")]
    pub spend_country_day: f64,
    /// How long a destination that verified is remembered as returning (never refused by a
    /// suspension of its range).
    #[serde(rename = "VCODE_FRAUD_RETURNING_DAYS", with = "Whole::<1, 400>")]
    pub returning_days: u64,
}

impl Default for FraudSettings {
    fn default() -> Self {
        Self {
            level: Level::Standard,
            prefix_digits: 3,
            grace: Duration::from_secs(60),
            safe_list: Vec::new(),
            safe_list_refresh: Duration::from_secs(5),
            min_conversion_pct: 0,
            range_digits: vec![3, 5, 7],
            spend_hour: 0.0,
            spend_day: 0.0,
            spend_country_hour: 0.0,
            spend_country_day: 0.0,
            evidence: 0,
            returning_days: 90,
        }
    }
}

impl FraudSettings {
    /// The spend caps (none unless set).
    pub fn spend_caps(&self) -> SpendCaps {
        SpendCaps {
            service_hour: self.spend_hour,
            service_day: self.spend_day,
            country_hour: self.spend_country_hour,
            country_day: self.spend_country_day,
        }
    }

    /// The levels' thresholds, with the configured ones in place of the level's.
    pub fn level_thresholds(&self) -> LevelThresholds {
        let mut thresholds = self.level.level_thresholds();
        if self.evidence > 0 {
            thresholds.evidence_floor = self.evidence as f64;
        }
        if self.min_conversion_pct > 0 {
            thresholds.min_conversion_ratio = f64::from(self.min_conversion_pct) / 100.0;
        }
        thresholds
    }
}

mod amount {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        parse_text(d, |raw| match raw.trim().parse::<f64>() {
            Ok(amount) if amount.is_finite() && amount >= 0.0 => Ok(amount),
            _ => Err(format!("{raw:?} is not an amount (0 or more; 0: no cap)")),
        })
    }

    pub fn serialize<S: Serializer>(amount: &f64, s: S) -> Result<S::Ok, S::Error> {
        show_text(amount, s)
    }
}

mod range_digits {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        parse_text(d, |raw| {
            let depths = list(raw, |item| match item.parse::<u8>() {
                Ok(depth) if (1..=10).contains(&depth) => Ok(depth),
                _ => Err(format!("{item:?} is not a number of digits from 1 to 10")),
            })?;
            if depths.is_empty() {
                return Err("at least one depth (digits after the calling code)".to_owned());
            }
            Ok(depths)
        })
    }

    pub fn serialize<S: Serializer>(depths: &[u8], s: S) -> Result<S::Ok, S::Error> {
        let shown: Vec<String> = depths.iter().map(u8::to_string).collect();
        show_text(shown.join(","), s)
    }
}

mod level {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Level, D::Error> {
        parse_text(d, |raw| {
            Level::parse(raw).ok_or_else(|| "expected off, monitor, standard or strict".to_owned())
        })
    }

    pub fn serialize<S: Serializer>(level: &Level, s: S) -> Result<S::Ok, S::Error> {
        show_text(level.as_str(), s)
    }
}

mod safe_list {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        parse_text(d, |raw| {
            list(raw, |item| {
                let digits = item.strip_prefix('+').unwrap_or(item);
                if (1..=15).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()) {
                    Ok(digits.to_owned())
                } else {
                    Err(format!(
                        "{item:?} is not a number or prefix (1 to 15 digits, + optional)"
                    ))
                }
            })
        })
    }

    pub fn serialize<S: Serializer>(entries: &[String], s: S) -> Result<S::Ok, S::Error> {
        show_text(entries.join(","), s)
    }
}
