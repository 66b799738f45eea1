//! Services: a Twilio Verify Service is a tenant of one account, with a name, a code length
//! and a few switches. Kept in the store (every instance sees them) as JSON; an update is a
//! compare-and-set on the revision read, retried when another write came between.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::rate_limits::RateLimit;
use super::{TwilioCompat, TwilioError, now_ms, sid};
use crate::domain::{CodeLength, Locale, Purpose};
use crate::otp::ServiceProfile;
use crate::sms::templates::TenantWording;
use crate::store::Revised;

/// Twilio's limit on `FriendlyName`.
const MAX_FRIENDLY_NAME: usize = 32;
/// vcode's own bounds on a Service's code lifetime, in seconds.
pub const CODE_TTL_SECS: std::ops::RangeInclusive<u32> = 60..=86_400;
/// vcode's own bounds on a Service's texts: locales, and characters a text.
const MAX_TEXTS: usize = 20;
const MAX_TEXT_CHARS: usize = 320;
/// Tries of a compare-and-set before giving up to a storm of concurrent writers.
pub(super) const WRITE_TRIES: usize = 8;

/// How long a start or a check may use a Service read before (by any request of this
/// instance): a Service read on every request cost a store round trip each; a change made on
/// another instance reaches this one within it (on this one, at once).
const SERVICE_CACHE_TTL: Duration = Duration::from_secs(1);
/// Cached Services beyond this are all dropped (a flood of SIDs cannot grow the map).
const SERVICE_CACHE_CAPACITY: usize = 10_000;

/// Services read lately, by SID (shared, not copied: a start or check only reads them), each
/// with its store revision: a read or a write that finishes late never puts an older
/// revision over a newer one (two concurrent updates could otherwise leave the first one's
/// Service in the cache, shown for up to `SERVICE_CACHE_TTL` after the second was answered).
#[derive(Default)]
pub(super) struct RecentServices(Mutex<HashMap<String, RecentService>>);

struct RecentService {
    read: Instant,
    revision: u64,
    service: Arc<Service>,
}

impl RecentServices {
    /// The Service `sid` if read lately and `account`'s (another account's is not there).
    fn get(&self, account: &str, sid: &str) -> Option<Arc<Service>> {
        let map = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        map.get(sid)
            .filter(|recent| {
                recent.read.elapsed() < SERVICE_CACHE_TTL && recent.service.account_sid == account
            })
            .map(|recent| Arc::clone(&recent.service))
    }

    /// Remembers `service` at `revision`, unless a later revision is remembered already.
    fn put(&self, revision: u64, service: Arc<Service>) {
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if map
            .get(&service.sid)
            .is_some_and(|recent| recent.revision > revision)
        {
            return;
        }
        if map.len() >= SERVICE_CACHE_CAPACITY {
            map.clear();
        }
        let recent = RecentService {
            read: Instant::now(),
            revision,
            service,
        };
        map.insert(recent.service.sid.clone(), recent);
    }

    fn forget(&self, sid: &str) {
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        map.remove(sid);
    }
}

/// A Service as stored and shown.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Service {
    pub sid: String,
    pub account_sid: String,
    pub friendly_name: String,
    pub code_length: u8,
    pub lookup_enabled: bool,
    pub psd2_enabled: bool,
    pub skip_sms_to_landlines: bool,
    pub dtmf_input_required: bool,
    pub do_not_share_warning_enabled: bool,
    pub custom_code_enabled: bool,
    pub created_ms: u64,
    pub updated_ms: u64,
    /// vcode's own: its codes' lifetime in seconds (`None`: `VCODE_CODE_TTL_SECS`).
    #[serde(default)]
    pub code_ttl_secs: Option<u32>,
    /// vcode's own: its SMS texts by locale tag (`{code}`, `{minutes}`, `{name}`); locales
    /// without one use the built-in texts.
    #[serde(default)]
    pub texts: BTreeMap<String, String>,
    /// Its Rate Limits and their Buckets (`rate_limits.rs`).
    #[serde(default)]
    pub rate_limits: Vec<RateLimit>,
    /// Its `Totp.*` settings: its factors' defaults (`None`: RFC 6238's, and its
    /// `FriendlyName` as the issuer).
    #[serde(default)]
    pub totp: ServiceTotp,
}

/// A Service's `Totp.*`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ServiceTotp {
    pub issuer: Option<String>,
    pub time_step: Option<u64>,
    pub code_length: Option<u8>,
    pub skew: Option<u8>,
}

impl Service {
    /// The purpose its codes are kept under: its own, never one of `VCODE_PURPOSES`.
    pub fn purpose(&self) -> Purpose {
        sid::purpose_of(&self.sid)
    }

    /// Its codes as the OTP use cases keep them: under its own purpose, of its length.
    pub fn profile(&self) -> ServiceProfile {
        ServiceProfile {
            purpose: self.purpose(),
            code_length: CodeLength::new(self.code_length).unwrap_or_default(),
            code_ttl: self.code_ttl(),
            wording: None,
            send_log: None,
            buckets: Vec::new(),
        }
    }

    /// Its factors' defaults: its `Totp.*` where set, RFC 6238's otherwise.
    pub fn totp_config(&self) -> crate::totp::TotpConfig {
        let defaults = crate::totp::TotpConfig::default();
        crate::totp::TotpConfig {
            algorithm: defaults.algorithm,
            digits: self.totp.code_length.unwrap_or(defaults.digits),
            step_secs: self.totp.time_step.unwrap_or(defaults.step_secs),
            skew: self.totp.skew.unwrap_or(defaults.skew),
        }
    }

    /// The issuer its factors' apps show: `Totp.Issuer`, else its name.
    pub fn totp_issuer(&self) -> String {
        self.totp
            .issuer
            .clone()
            .unwrap_or_else(|| self.friendly_name.clone())
    }

    /// Its own code lifetime, if it has one.
    pub fn code_ttl(&self) -> Option<Duration> {
        self.code_ttl_secs
            .map(|secs| Duration::from_secs(u64::from(secs)))
    }

    /// What its SMS say: its name (or the start's `CustomFriendlyName`), the do-not-share
    /// sentence if switched on, its own texts. Its mail takes only the name.
    pub fn wording(&self, custom_name: Option<&str>) -> TenantWording {
        TenantWording {
            name: custom_name.unwrap_or(&self.friendly_name).to_owned(),
            do_not_share: self.do_not_share_warning_enabled,
            texts: self
                .texts
                .iter()
                .filter_map(|(tag, text)| Some((Locale::parse(tag)?, text.clone())))
                .collect(),
        }
    }
}

/// Whether `name` may stand for a Service in its SMS (Twilio's limit).
pub(super) fn is_friendly_name(name: &str) -> bool {
    !name.trim().is_empty() && name.chars().count() <= MAX_FRIENDLY_NAME
}

/// What a create or an update sets (`None`: left as it is, or Twilio's default).
#[derive(Clone, Debug, Default)]
pub struct ServiceChanges {
    pub friendly_name: Option<String>,
    pub code_length: Option<u8>,
    pub lookup_enabled: Option<bool>,
    pub psd2_enabled: Option<bool>,
    pub skip_sms_to_landlines: Option<bool>,
    pub dtmf_input_required: Option<bool>,
    pub do_not_share_warning_enabled: Option<bool>,
    pub custom_code_enabled: Option<bool>,
    /// vcode's own (`VcodeCodeTtl`): seconds; 0 goes back to `VCODE_CODE_TTL_SECS`.
    pub code_ttl_secs: Option<u32>,
    /// vcode's own (`VcodeTexts`): replaces the Service's texts (empty: the built-in ones).
    pub texts: Option<BTreeMap<String, String>>,
    /// `Totp.Issuer`, `Totp.TimeStep`, `Totp.CodeLength`, `Totp.Skew`.
    pub totp: ServiceTotp,
}

impl ServiceChanges {
    fn check(&self) -> Result<(), TwilioError> {
        if let Some(name) = &self.friendly_name
            && !is_friendly_name(name)
        {
            return Err(TwilioError::InvalidParameter("FriendlyName"));
        }
        if let Some(secs) = self.code_ttl_secs
            && secs != 0
            && !CODE_TTL_SECS.contains(&secs)
        {
            return Err(TwilioError::InvalidParameter("VcodeCodeTtl"));
        }
        if let Some(texts) = &self.texts {
            let valid = texts.len() <= MAX_TEXTS
                && texts.iter().all(|(tag, text)| {
                    Locale::parse(tag).is_some()
                        && text.chars().count() <= MAX_TEXT_CHARS
                        && TenantWording::check_text(text).is_ok()
                });
            if !valid {
                return Err(TwilioError::InvalidParameter("VcodeTexts"));
            }
        }
        if let Some(length) = self.code_length
            && CodeLength::new(length).is_none()
        {
            return Err(TwilioError::InvalidParameter("CodeLength"));
        }
        let totp = &self.totp;
        if totp.issuer.as_ref().is_some_and(|issuer| {
            issuer.trim().is_empty() || issuer.contains(':') || issuer.chars().count() > 64
        }) {
            return Err(TwilioError::InvalidParameter("Totp.Issuer"));
        }
        if totp
            .time_step
            .is_some_and(|step| !crate::totp::STEP_SECS.contains(&step))
        {
            return Err(TwilioError::InvalidParameter("Totp.TimeStep"));
        }
        if totp
            .code_length
            .is_some_and(|digits| !crate::totp::DIGITS.contains(&digits))
        {
            return Err(TwilioError::InvalidParameter("Totp.CodeLength"));
        }
        if totp.skew.is_some_and(|skew| skew > crate::totp::MAX_SKEW) {
            return Err(TwilioError::InvalidParameter("Totp.Skew"));
        }
        Ok(())
    }

    fn apply(&self, service: &mut Service) {
        let Self {
            friendly_name,
            code_length,
            lookup_enabled,
            psd2_enabled,
            skip_sms_to_landlines,
            dtmf_input_required,
            do_not_share_warning_enabled,
            custom_code_enabled,
            code_ttl_secs,
            texts,
            totp,
        } = self;
        for (field, value) in [(&mut service.totp.time_step, totp.time_step)] {
            if value.is_some() {
                *field = value;
            }
        }
        if totp.issuer.is_some() {
            service.totp.issuer.clone_from(&totp.issuer);
        }
        if totp.code_length.is_some() {
            service.totp.code_length = totp.code_length;
        }
        if totp.skew.is_some() {
            service.totp.skew = totp.skew;
        }
        if let Some(secs) = code_ttl_secs {
            service.code_ttl_secs = (*secs != 0).then_some(*secs);
        }
        if let Some(texts) = texts {
            service.texts.clone_from(texts);
        }
        if let Some(name) = friendly_name {
            service.friendly_name.clone_from(name);
        }
        if let Some(length) = code_length {
            service.code_length = *length;
        }
        for (field, value) in [
            (&mut service.lookup_enabled, lookup_enabled),
            (&mut service.psd2_enabled, psd2_enabled),
            (&mut service.skip_sms_to_landlines, skip_sms_to_landlines),
            (&mut service.dtmf_input_required, dtmf_input_required),
            (
                &mut service.do_not_share_warning_enabled,
                do_not_share_warning_enabled,
            ),
            (&mut service.custom_code_enabled, custom_code_enabled),
        ] {
            if let Some(value) = value {
                *field = *value;
            }
        }
    }
}

fn decode(record: &Revised) -> Result<Service, TwilioError> {
    serde_json::from_str(&record.body).map_err(|error| TwilioError::Internal(error.into()))
}

fn encode(service: &Service) -> String {
    serde_json::to_string(service).expect("a Service serialises")
}

fn not_found(sid: &str) -> TwilioError {
    TwilioError::NotFound(format!("/Services/{sid}"))
}

impl TwilioCompat {
    /// Creates a Service for `account`: `FriendlyName` required, Twilio's defaults otherwise
    /// (6 digits, every switch off).
    pub async fn create_service(
        &self,
        account: &str,
        changes: ServiceChanges,
    ) -> Result<Service, TwilioError> {
        if changes.friendly_name.is_none() {
            return Err(TwilioError::InvalidParameter("FriendlyName"));
        }
        changes.check()?;
        // Checked before the write: concurrent creates may pass the bound by their number.
        if self.store.twilio_services(account).await?.len() >= self.max_services {
            return Err(TwilioError::TooManyResources("Services", self.max_services));
        }
        let now = now_ms();
        let mut service = Service {
            sid: sid::generate(sid::SERVICE),
            account_sid: account.to_owned(),
            friendly_name: String::new(),
            code_length: 6,
            lookup_enabled: false,
            psd2_enabled: false,
            skip_sms_to_landlines: false,
            dtmf_input_required: false,
            do_not_share_warning_enabled: false,
            custom_code_enabled: false,
            created_ms: now,
            updated_ms: now,
            code_ttl_secs: None,
            texts: BTreeMap::new(),
            rate_limits: Vec::new(),
            totp: ServiceTotp::default(),
        };
        changes.apply(&mut service);
        let written = self
            .store
            .put_twilio_service(account, &service.sid, None, &encode(&service))
            .await?;
        // 128 random bits never meet an existing SID; a store that says so is broken.
        if !written {
            return Err(TwilioError::Internal(
                "a new Service SID already taken".into(),
            ));
        }
        tracing::info!(service = %service.sid, "Twilio-compatible Service created");
        Ok(service)
    }

    /// The account's Services, oldest first.
    pub async fn services(&self, account: &str) -> Result<Vec<Service>, TwilioError> {
        let mut services = self
            .store
            .twilio_services(account)
            .await?
            .iter()
            .map(|(_, record)| decode(record))
            .collect::<Result<Vec<_>, _>>()?;
        services.sort_by(|a, b| (a.created_ms, &a.sid).cmp(&(b.created_ms, &b.sid)));
        Ok(services)
    }

    /// One of the account's Services, as read within the last `SERVICE_CACHE_TTL`.
    pub async fn service(&self, account: &str, sid: &str) -> Result<Arc<Service>, TwilioError> {
        if let Some(service) = self.recent.get(account, sid) {
            return Ok(service);
        }
        let (revision, service) = self.service_revised(account, sid).await?;
        let service = Arc::new(service);
        self.recent.put(revision, Arc::clone(&service));
        Ok(service)
    }

    async fn service_revised(
        &self,
        account: &str,
        sid: &str,
    ) -> Result<(u64, Service), TwilioError> {
        if !sid::is_sid(sid, sid::SERVICE) {
            return Err(not_found(sid));
        }
        let record = self
            .store
            .twilio_service(account, sid)
            .await?
            .ok_or_else(|| not_found(sid))?;
        Ok((record.revision, decode(&record)?))
    }

    /// Applies `changes` to one of the account's Services; a concurrent update is never lost
    /// (each applies to what the other wrote).
    pub async fn update_service(
        &self,
        account: &str,
        sid: &str,
        changes: ServiceChanges,
    ) -> Result<Service, TwilioError> {
        changes.check()?;
        self.change_service(account, sid, |service| {
            changes.apply(service);
            Ok(())
        })
        .await
    }

    /// Changes one of the account's Services by `change`, compare-and-set: a concurrent change
    /// is never lost (each applies to what the other wrote). Answers the Service as written.
    pub(super) async fn change_service(
        &self,
        account: &str,
        sid: &str,
        mut change: impl FnMut(&mut Service) -> Result<(), TwilioError>,
    ) -> Result<Service, TwilioError> {
        for _ in 0..WRITE_TRIES {
            let (revision, mut service) = self.service_revised(account, sid).await?;
            change(&mut service)?;
            service.updated_ms = now_ms();
            if self
                .store
                .put_twilio_service(account, sid, Some(revision), &encode(&service))
                .await?
            {
                // Every store writes a compare-and-set's record at the next revision.
                self.recent.put(revision + 1, Arc::new(service.clone()));
                return Ok(service);
            }
        }
        Err(TwilioError::TooManyRequests {
            retry_after: std::time::Duration::from_secs(1),
        })
    }

    /// Deletes one of the account's Services. Its pending codes expire as they would.
    pub async fn delete_service(&self, account: &str, sid: &str) -> Result<(), TwilioError> {
        self.recent.forget(sid);
        if sid::is_sid(sid, sid::SERVICE) && self.store.delete_twilio_service(account, sid).await? {
            tracing::info!(service = %sid, "Twilio-compatible Service deleted");
            return Ok(());
        }
        Err(not_found(sid))
    }
}

#[cfg(test)]
mod recent_tests {
    use super::*;

    fn named(name: &str) -> Arc<Service> {
        Arc::new(Service {
            sid: format!("VA{}", "0".repeat(32)),
            account_sid: "AC1".to_owned(),
            friendly_name: name.to_owned(),
            code_length: 6,
            lookup_enabled: false,
            psd2_enabled: false,
            skip_sms_to_landlines: false,
            dtmf_input_required: false,
            do_not_share_warning_enabled: false,
            custom_code_enabled: false,
            created_ms: 0,
            updated_ms: 0,
            code_ttl_secs: None,
            texts: BTreeMap::new(),
            rate_limits: Vec::new(),
            totp: ServiceTotp::default(),
        })
    }

    #[test]
    fn a_late_older_revision_never_replaces_a_newer_one() {
        let recent = RecentServices::default();
        let sid = named("").sid.clone();
        recent.put(3, named("third"));
        // A read or update that began earlier answers after: it is not remembered.
        recent.put(2, named("second"));
        assert_eq!(recent.get("AC1", &sid).unwrap().friendly_name, "third");
        recent.put(4, named("fourth"));
        assert_eq!(recent.get("AC1", &sid).unwrap().friendly_name, "fourth");
        // The same revision read again refreshes it.
        recent.put(4, named("fourth"));
        assert_eq!(recent.get("AC1", &sid).unwrap().friendly_name, "fourth");
        assert!(recent.get("AC2", &sid).is_none(), "another account's");
    }
}
