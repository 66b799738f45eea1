//! The fraud guard's operator routes (on the operator listener, behind the admin token): the
//! suspended and held prefixes, a lift, and the traffic series the console charts. A prefix
//! is the calling code and the next digits, without `+` (`44770`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `VCODE_FRAUD_GUARD`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FraudLevel {
    Off,
    Monitor,
    Standard,
    Strict,
}

/// Why a prefix is blocked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FraudReason {
    /// Its sends past the grace period convert far below the service's baseline: suspended.
    Conversion,
    /// Its unverified sends within the grace period surged: held back.
    Surge,
    /// A level (a number range, a mail domain): its recent unconverted sends exceed what its
    /// conversion and its own history explain: suspended.
    Unconverted,
    /// A level whose recent sends come back undelivered far above its own history: suspended.
    Undelivered,
    /// A country (or all mail, or the service) pumped over many ranges: its sends into ranges
    /// with no converting history of their own are refused while it lasts.
    Spread,
}

/// `GET /api/v1/admin/fraud/suspensions`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FraudSuspensions {
    pub level: FraudLevel,
    /// Newest first.
    pub suspensions: Vec<FraudSuspension>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FraudSuspension {
    pub prefix: String,
    /// ISO region (`001`: a non-geographic calling code).
    pub country: String,
    pub reason: FraudReason,
    pub since_ms: u64,
    pub until_ms: u64,
    /// Suspensions of this prefix in the last 24 hours, this one included.
    pub strikes: u32,
    /// The judged sends and their conversions that decided it.
    pub sends: u64,
    pub conversions: u64,
    /// A level's verdict (`unconverted`, `undelivered`, `spread`): the level and the figures
    /// that decided it, in words; empty for `conversion` and `surge`.
    #[serde(default)]
    pub evidence: String,
}

/// `POST /api/v1/admin/fraud/suspensions/{prefix}/lift`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FraudLifted {
    pub lifted: bool,
}

/// `GET /api/v1/admin/fraud/traffic?minutes=N`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FraudTrafficQuery {
    /// 1 to 1440; 60 when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minutes: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FraudTraffic {
    pub bucket_secs: u64,
    pub level: FraudLevel,
    /// The service's conversion over the last hour past the grace period; `null` without
    /// judged sends.
    pub baseline_conversion: Option<f64>,
    /// Oldest first, one per bucket of the span, zeros included.
    pub series: Vec<FraudTrafficBucket>,
    /// The 20 prefixes with most sends in the span.
    pub top_prefixes: Vec<FraudPrefixTraffic>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FraudTrafficBucket {
    /// The bucket's start, unix ms.
    pub t_ms: u64,
    pub sends: u64,
    /// Sends of this bucket whose code was verified (attributed to the send's bucket).
    pub verified: u64,
    /// Sends the fraud guard refused in this bucket.
    pub refused: u64,
    /// Sends of this bucket a delivery receipt called undelivered (counted in `sends`).
    pub undelivered: u64,
    pub by_country: BTreeMap<String, FraudCountryCounts>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FraudCountryCounts {
    pub sends: u64,
    pub verified: u64,
}

/// What the guard does about a prefix now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FraudPrefixState {
    Ok,
    /// Would be blocked, but the level only monitors.
    Monitored,
    Held,
    Suspended,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FraudPrefixTraffic {
    pub prefix: String,
    pub country: String,
    pub sends: u64,
    pub verified: u64,
    /// Sends a delivery receipt called undelivered (counted in `sends`): neither converted
    /// nor unconverted.
    pub undelivered: u64,
    /// Sends past the grace period that were not verified (nor undelivered).
    pub unconverted: u64,
    /// Of the sends past the grace period, the share verified; `null` without any.
    pub conversion: Option<f64>,
    pub state: FraudPrefixState,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traffic_answer_is_the_contract_s_json() {
        let traffic = FraudTraffic {
            bucket_secs: 60,
            level: FraudLevel::Standard,
            baseline_conversion: None,
            series: vec![FraudTrafficBucket {
                t_ms: 60_000,
                sends: 3,
                verified: 1,
                refused: 2,
                undelivered: 1,
                by_country: [(
                    "GB".to_owned(),
                    FraudCountryCounts {
                        sends: 3,
                        verified: 1,
                    },
                )]
                .into(),
            }],
            top_prefixes: vec![FraudPrefixTraffic {
                prefix: "44770".to_owned(),
                country: "GB".to_owned(),
                sends: 3,
                verified: 1,
                undelivered: 1,
                unconverted: 0,
                conversion: None,
                state: FraudPrefixState::Held,
            }],
        };
        let json = serde_json::to_value(&traffic).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "bucket_secs": 60, "level": "standard", "baseline_conversion": null,
                "series": [{"t_ms": 60000, "sends": 3, "verified": 1, "refused": 2,
                            "undelivered": 1,
                            "by_country": {"GB": {"sends": 3, "verified": 1}}}],
                "top_prefixes": [{"prefix": "44770", "country": "GB", "sends": 3, "verified": 1,
                                  "undelivered": 1, "unconverted": 0, "conversion": null, "state": "held"}],
            })
        );
        let suspension = FraudSuspension {
            prefix: "44770".to_owned(),
            country: "GB".to_owned(),
            reason: FraudReason::Conversion,
            since_ms: 1,
            until_ms: 2,
            strikes: 1,
            sends: 40,
            conversions: 0,
            evidence: String::new(),
        };
        assert_eq!(
            serde_json::to_value(&suspension).unwrap()["reason"],
            "conversion"
        );
    }
}
