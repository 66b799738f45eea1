//! The fraud guard's operator routes (on the operator listener, behind the admin token): the
//! suspended and held prefixes, a lift, the traffic series the console charts, and the safe
//! list. A prefix is the calling code and the next digits, without `+` (`44770`).

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
    /// Before 2026-12-06 only (the guard's retired first round; a block recorded then is still
    /// read): its sends past the grace period converted far below the service's baseline.
    Conversion,
    /// Before 2026-12-06 only, as `Conversion`: its unverified sends within grace surged.
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
    /// The recent sends and conversions that decided it (a level's decayed counts, rounded).
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
    /// Each spend cap set (`VCODE_FRAUD_SPEND_*`) and what was spent against it; empty without
    /// caps.
    #[serde(default)]
    pub spend: Vec<FraudSpend>,
}

/// One spend cap and what SMS cost against it, in `VCODE_SMS_PRICES`' currency.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FraudSpend {
    /// A country's ISO region, or `*` for the service.
    pub scope: String,
    /// `hour` or `day`.
    pub window: String,
    pub spent: f64,
    pub cap: f64,
    /// Spent up to the cap: its sends are refused (`403`/`40300`).
    pub reached: bool,
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

/// `GET /api/v1/admin/fraud/safe-list`: every entry the guard exempts, the configured ones
/// first.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FraudSafeList {
    /// How often every instance reads the stored entries again
    /// (`VCODE_FRAUD_SAFE_LIST_REFRESH_SECS`): how long a change made on one instance may take
    /// to reach another's sends (the instance that made it applies it at once).
    pub refresh_secs: u64,
    pub entries: Vec<FraudSafeListEntry>,
}

/// One entry of the safe list: a send to a number that is, or starts with, `entry` is counted
/// but never judged nor refused by the fraud guard.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FraudSafeListEntry {
    /// `+` and 1 to 15 digits: a number or a prefix.
    pub entry: String,
    pub source: FraudSafeListSource,
    /// The tenant whose sends alone it exempts (`twilio:AC…`, a Twilio account's Safe List);
    /// absent: every send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// Who added it (absent for a configured entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added_by: Option<String>,
    /// When, unix ms (absent for a configured entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added_at_ms: Option<u64>,
}

/// Where a safe-list entry comes from.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FraudSafeListSource {
    /// `VCODE_FRAUD_SAFE_LIST`: read at start, read-only here.
    Configured,
    /// Added by an operator (this API, the console).
    Operator,
    /// A tenant's own number (`/v2/SafeList/Numbers`): exempts that tenant's sends only.
    Tenant,
}

/// `POST /api/v1/admin/fraud/safe-list`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FraudSafeListAdd {
    /// A number or a prefix: 1 to 15 digits, `+` optional.
    pub entry: String,
    /// Who adds it, as the list shows it: 1 to 64 characters; `operator` when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added_by: Option<String>,
}

/// The answer of an add: the entry as stored (its first author and time if it was there
/// already), and whether this add made it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FraudSafeListAdded {
    pub added: bool,
    pub entry: FraudSafeListEntry,
}

/// `DELETE /api/v1/admin/fraud/safe-list/{entry}?tenant=…`: `tenant` names a tenant's entry
/// (`twilio:AC…`); left out, the entry for every send.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FraudSafeListQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// The answer of a removal.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FraudSafeListRemoved {
    pub removed: bool,
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
            spend: vec![],
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
                "spend": [],
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

    #[test]
    fn the_safe_list_is_the_contract_s_json() {
        let list = FraudSafeList {
            refresh_secs: 5,
            entries: vec![
                FraudSafeListEntry {
                    entry: "+1202".to_owned(),
                    source: FraudSafeListSource::Configured,
                    tenant: None,
                    added_by: None,
                    added_at_ms: None,
                },
                FraudSafeListEntry {
                    entry: "+447400123456".to_owned(),
                    source: FraudSafeListSource::Tenant,
                    tenant: Some("twilio:AC1".to_owned()),
                    added_by: Some("AC1".to_owned()),
                    added_at_ms: Some(7),
                },
            ],
        };
        assert_eq!(
            serde_json::to_value(&list).unwrap(),
            serde_json::json!({"refresh_secs": 5, "entries": [
                {"entry": "+1202", "source": "configured"},
                {"entry": "+447400123456", "source": "tenant", "tenant": "twilio:AC1",
                 "added_by": "AC1", "added_at_ms": 7},
            ]})
        );
        let add: FraudSafeListAdd = serde_json::from_str(r#"{"entry": "44740"}"#).unwrap();
        assert_eq!(add.added_by, None);
    }
}
