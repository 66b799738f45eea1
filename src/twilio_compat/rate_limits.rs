//! Twilio's Service Rate Limits: the keys a Service meters its starts by (a Rate Limit, `RK…`,
//! named by its `UniqueName`: the end user's address, an account id…) and, for each, the
//! limits (its Buckets, `BL…`: at most `Max` starts per `Interval` seconds for one value). A
//! start names its values in `RateLimits` (`{"end_user_ip_address": "203.0.113.7"}`); each
//! Bucket of each Rate Limit it names then counts the start for that value.
//!
//! The Rate Limits and Buckets are kept in their Service's record (a compare-and-set of the
//! Service, as an update is), bounded in number; the counting is the store's quota logs, in the
//! send's own budget step on every backend (all or none with the client's and the global
//! budgets, before any code or SMS exists), under a keyed digest of (Bucket, value): no value a
//! tenant names is stored. A full Bucket refuses the start with Twilio's 20429 and
//! `Retry-After`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Service, TwilioCompat, TwilioError, now_ms, sid};
use crate::otp::MeteredBucket;
use crate::store::QuotaRule;

/// Rate Limits one Service may have, and Buckets one Rate Limit may have (Twilio documents
/// none; these keep a Service's record small).
pub const MAX_RATE_LIMITS: usize = 20;
pub const MAX_BUCKETS: usize = 10;
/// A Bucket's `Max` and `Interval` (seconds): its quota log holds up to `Max` starts for
/// `Interval`.
pub const MAX_BUCKET_MAX: u32 = 10_000;
pub const MAX_BUCKET_INTERVAL: u32 = 86_400;
/// The longest `UniqueName` and `Description`, and the longest value a start may name.
const MAX_NAME: usize = 64;
const MAX_DESCRIPTION: usize = 255;
const MAX_VALUE: usize = 255;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimit {
    pub sid: String,
    pub unique_name: String,
    #[serde(default)]
    pub description: Option<String>,
    pub created_ms: u64,
    pub updated_ms: u64,
    #[serde(default)]
    pub buckets: Vec<Bucket>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bucket {
    pub sid: String,
    pub max: u32,
    pub interval_secs: u32,
    pub created_ms: u64,
    pub updated_ms: u64,
}

/// What a Bucket's create or update sets (an update, only what it sends).
#[derive(Clone, Copy, Debug, Default)]
pub struct BucketChanges {
    pub max: Option<u32>,
    pub interval_secs: Option<u32>,
}

/// A `UniqueName`: 1 to 64 of letters, digits and `_.-`.
fn is_unique_name(name: &str) -> bool {
    (1..=MAX_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"_.-".contains(&byte))
}

fn check_description(description: Option<&str>) -> Result<(), TwilioError> {
    match description {
        Some(text) if text.chars().count() > MAX_DESCRIPTION => {
            Err(TwilioError::InvalidParameter("Description"))
        }
        _ => Ok(()),
    }
}

impl BucketChanges {
    fn check(&self) -> Result<(), TwilioError> {
        if self
            .max
            .is_some_and(|max| !(1..=MAX_BUCKET_MAX).contains(&max))
        {
            return Err(TwilioError::InvalidParameter("Max"));
        }
        if self
            .interval_secs
            .is_some_and(|interval| !(1..=MAX_BUCKET_INTERVAL).contains(&interval))
        {
            return Err(TwilioError::InvalidParameter("Interval"));
        }
        Ok(())
    }
}

impl Service {
    fn rate_limit_mut(&mut self, sid: &str) -> Result<&mut RateLimit, TwilioError> {
        let service = self.sid.clone();
        self.rate_limits
            .iter_mut()
            .find(|limit| limit.sid == sid)
            .ok_or_else(|| rate_limit_not_found(&service, sid))
    }

    /// One of its Rate Limits.
    pub fn rate_limit(&self, sid: &str) -> Result<&RateLimit, TwilioError> {
        self.rate_limits
            .iter()
            .find(|limit| limit.sid == sid)
            .ok_or_else(|| rate_limit_not_found(&self.sid, sid))
    }

    /// What a start naming `raw` (its `RateLimits` JSON: an object of `UniqueName` to a value,
    /// a string or a number) counts in: each Bucket of each Rate Limit it names, for that
    /// value. An unknown name, a value that is not text, or text that is no JSON object is
    /// 60200.
    pub fn metered(&self, raw: Option<&str>) -> Result<Vec<MeteredBucket>, TwilioError> {
        let Some(raw) = raw else {
            return Ok(Vec::new());
        };
        let invalid = || TwilioError::InvalidParameter("RateLimits");
        let named: BTreeMap<String, serde_json::Value> =
            serde_json::from_str(raw).map_err(|_| invalid())?;
        let mut metered = Vec::new();
        for (name, value) in named {
            let value = match value {
                serde_json::Value::String(text) => text,
                serde_json::Value::Number(number) => number.to_string(),
                _ => return Err(invalid()),
            };
            if value.is_empty() || value.len() > MAX_VALUE {
                return Err(invalid());
            }
            let limit = self
                .rate_limits
                .iter()
                .find(|limit| limit.unique_name == name)
                .ok_or_else(invalid)?;
            for bucket in &limit.buckets {
                let window = Duration::from_secs(u64::from(bucket.interval_secs));
                if let Some(rule) = QuotaRule::new(bucket.max, window) {
                    metered.push(MeteredBucket {
                        bucket: bucket.sid.clone(),
                        value: value.clone(),
                        rule,
                    });
                }
            }
        }
        Ok(metered)
    }
}

fn rate_limit_not_found(service: &str, sid: &str) -> TwilioError {
    TwilioError::NotFound(format!("/Services/{service}/RateLimits/{sid}"))
}

fn bucket_not_found(service: &str, rate_limit: &str, sid: &str) -> TwilioError {
    TwilioError::NotFound(format!(
        "/Services/{service}/RateLimits/{rate_limit}/Buckets/{sid}"
    ))
}

impl TwilioCompat {
    pub async fn create_rate_limit(
        &self,
        account: &str,
        service_sid: &str,
        unique_name: Option<&str>,
        description: Option<&str>,
    ) -> Result<RateLimit, TwilioError> {
        let unique_name = unique_name
            .filter(|name| is_unique_name(name))
            .ok_or(TwilioError::InvalidParameter("UniqueName"))?;
        check_description(description)?;
        let now = now_ms();
        let created = RateLimit {
            sid: sid::generate(sid::RATE_LIMIT),
            unique_name: unique_name.to_owned(),
            description: description.map(str::to_owned),
            created_ms: now,
            updated_ms: now,
            buckets: Vec::new(),
        };
        self.change_service(account, service_sid, |service| {
            if service
                .rate_limits
                .iter()
                .any(|limit| limit.unique_name == created.unique_name)
            {
                return Err(TwilioError::InvalidParameter("UniqueName"));
            }
            if service.rate_limits.len() >= MAX_RATE_LIMITS {
                return Err(TwilioError::TooManyResources(
                    "Rate Limits",
                    MAX_RATE_LIMITS,
                ));
            }
            service.rate_limits.push(created.clone());
            Ok(())
        })
        .await?;
        Ok(created)
    }

    pub async fn update_rate_limit(
        &self,
        account: &str,
        service_sid: &str,
        sid: &str,
        description: Option<&str>,
    ) -> Result<RateLimit, TwilioError> {
        check_description(description)?;
        let service = self
            .change_service(account, service_sid, |service| {
                let limit = service.rate_limit_mut(sid)?;
                if let Some(description) = description {
                    limit.description = Some(description.to_owned());
                }
                limit.updated_ms = now_ms();
                Ok(())
            })
            .await?;
        service.rate_limit(sid).cloned()
    }

    pub async fn delete_rate_limit(
        &self,
        account: &str,
        service_sid: &str,
        sid: &str,
    ) -> Result<(), TwilioError> {
        self.change_service(account, service_sid, |service| {
            service.rate_limit_mut(sid)?;
            service.rate_limits.retain(|limit| limit.sid != sid);
            Ok(())
        })
        .await
        .map(drop)
    }

    pub async fn create_bucket(
        &self,
        account: &str,
        service_sid: &str,
        rate_limit: &str,
        changes: BucketChanges,
    ) -> Result<Bucket, TwilioError> {
        changes.check()?;
        let max = changes.max.ok_or(TwilioError::InvalidParameter("Max"))?;
        let interval_secs = changes
            .interval_secs
            .ok_or(TwilioError::InvalidParameter("Interval"))?;
        let now = now_ms();
        let created = Bucket {
            sid: sid::generate(sid::BUCKET),
            max,
            interval_secs,
            created_ms: now,
            updated_ms: now,
        };
        self.change_service(account, service_sid, |service| {
            let limit = service.rate_limit_mut(rate_limit)?;
            if limit.buckets.len() >= MAX_BUCKETS {
                return Err(TwilioError::TooManyResources("Buckets", MAX_BUCKETS));
            }
            limit.buckets.push(created.clone());
            Ok(())
        })
        .await?;
        Ok(created)
    }

    pub async fn update_bucket(
        &self,
        account: &str,
        service_sid: &str,
        rate_limit: &str,
        sid: &str,
        changes: BucketChanges,
    ) -> Result<Bucket, TwilioError> {
        changes.check()?;
        let service = self
            .change_service(account, service_sid, |service| {
                let service_sid = service.sid.clone();
                let limit = service.rate_limit_mut(rate_limit)?;
                let bucket = limit
                    .buckets
                    .iter_mut()
                    .find(|bucket| bucket.sid == sid)
                    .ok_or_else(|| bucket_not_found(&service_sid, rate_limit, sid))?;
                bucket.max = changes.max.unwrap_or(bucket.max);
                bucket.interval_secs = changes.interval_secs.unwrap_or(bucket.interval_secs);
                bucket.updated_ms = now_ms();
                Ok(())
            })
            .await?;
        Self::bucket(&service, rate_limit, sid).cloned()
    }

    pub async fn delete_bucket(
        &self,
        account: &str,
        service_sid: &str,
        rate_limit: &str,
        sid: &str,
    ) -> Result<(), TwilioError> {
        self.change_service(account, service_sid, |service| {
            let service_sid = service.sid.clone();
            let limit = service.rate_limit_mut(rate_limit)?;
            if !limit.buckets.iter().any(|bucket| bucket.sid == sid) {
                return Err(bucket_not_found(&service_sid, rate_limit, sid));
            }
            limit.buckets.retain(|bucket| bucket.sid != sid);
            Ok(())
        })
        .await
        .map(drop)
    }

    /// One of a Rate Limit's Buckets.
    pub fn bucket<'a>(
        service: &'a Service,
        rate_limit: &str,
        sid: &str,
    ) -> Result<&'a Bucket, TwilioError> {
        service
            .rate_limit(rate_limit)?
            .buckets
            .iter()
            .find(|bucket| bucket.sid == sid)
            .ok_or_else(|| bucket_not_found(&service.sid, rate_limit, sid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service_with(limit: RateLimit) -> Service {
        let mut service: Service = serde_json::from_value(serde_json::json!({
            "sid": format!("VA{}", "0".repeat(32)), "account_sid": "AC1", "friendly_name": "Shop",
            "code_length": 6, "lookup_enabled": false, "psd2_enabled": false,
            "skip_sms_to_landlines": false, "dtmf_input_required": false,
            "do_not_share_warning_enabled": false, "custom_code_enabled": false,
            "created_ms": 0, "updated_ms": 0,
        }))
        .unwrap();
        service.rate_limits.push(limit);
        service
    }

    #[test]
    fn a_start_counts_in_every_bucket_of_the_rate_limits_it_names() {
        let bucket = |max| Bucket {
            sid: sid::generate(sid::BUCKET),
            max,
            interval_secs: 60,
            created_ms: 0,
            updated_ms: 0,
        };
        let service = service_with(RateLimit {
            sid: sid::generate(sid::RATE_LIMIT),
            unique_name: "end_user_ip_address".into(),
            description: None,
            created_ms: 0,
            updated_ms: 0,
            buckets: vec![bucket(3), bucket(10)],
        });
        let metered = service
            .metered(Some(r#"{"end_user_ip_address": "203.0.113.7"}"#))
            .unwrap();
        assert_eq!(metered.len(), 2);
        assert!(metered.iter().all(|bucket| bucket.value == "203.0.113.7"));
        assert_eq!(service.metered(None).unwrap(), Vec::new());
        for bad in [
            r#"{"other": "x"}"#,
            "[]",
            "not json",
            r#"{"end_user_ip_address": []}"#,
        ] {
            assert!(service.metered(Some(bad)).is_err(), "{bad}");
        }
        // A Service record written before Rate Limits existed reads as having none.
        let older: Service = serde_json::from_str(
            &serde_json::to_string(&service)
                .unwrap()
                .replace("\"rate_limits\"", "\"_\""),
        )
        .unwrap();
        assert!(older.rate_limits.is_empty());
    }
}
