//! What the OTP use cases are configured with: the codes' life-cycle (`OtpSettings`) and the
//! abuse limits (`AbuseSettings`). Each field's serde name is its variable; the defaults are
//! the `Default` impls.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::destinations::{Destinations, GeoPermissions, NumberTypes, Regions};
use crate::client_ip::TrustedProxies;
use crate::config::text::{Flag, Secs, Whole, list, parse_text, show_text};
use crate::domain::{Code, CodeLength, Phone, Purpose, Region};
use crate::store::ResendPolicy;

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default)]
pub struct OtpSettings {
    #[serde(rename = "VCODE_CODE_LENGTH", with = "code_length")]
    pub code_length: CodeLength,
    #[serde(rename = "VCODE_CODE_TTL_SECS", with = "Secs::<1, 86_400>")]
    pub code_ttl: Duration,
    #[serde(rename = "VCODE_RESEND_COOLDOWN_SECS", with = "Secs::<0, 86_400>")]
    pub resend_cooldown: Duration,
    #[serde(rename = "VCODE_MAX_ATTEMPTS", with = "Whole::<1, 100>")]
    pub max_attempts: u32,
    #[serde(rename = "VCODE_RESEND", with = "resend_policy")]
    pub resend: ResendPolicy,
    #[serde(rename = "VCODE_DEFAULT_REGION", with = "region")]
    pub default_region: Region,
    /// The purposes a code may be for (`VCODE_PURPOSES`); any other is refused. The first is
    /// the default unless `login` is listed.
    #[serde(rename = "VCODE_PURPOSES", with = "purposes")]
    pub purposes: Vec<Purpose>,
    /// Phones whose sends store a fixed code and send no SMS (app-store review, end-to-end
    /// tests): `phone=code,…`, or the file's `[test_numbers]` table.
    #[serde(rename = "VCODE_TEST_NUMBERS")]
    pub test_numbers: TestNumbers,
    /// Test numbers on a non-loopback `VCODE_BIND`: refused unless this says so.
    #[serde(rename = "VCODE_TEST_NUMBERS_ON_PUBLIC_BIND", with = "Flag")]
    pub test_numbers_on_public_bind: bool,
    /// What `otp/verify` goes by: the send's verification id (the default), the phone (as
    /// before ids existed), or either.
    #[serde(rename = "VCODE_VERIFY_BY", with = "verify_by")]
    pub verify_by: VerifyBy,
    /// How long a verification can still be read after its code's TTL (`GET
    /// /otp/verifications/{id}`: approved, expired…).
    #[serde(
        rename = "VCODE_VERIFICATION_RETENTION_SECS",
        with = "Secs::<0, 86_400>"
    )]
    pub verification_retention: Duration,
}

/// What `otp/verify` goes by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VerifyBy {
    /// The `verification_id` `otp/send` answered: required; each id has its own attempts, so
    /// nobody without it can spend or destroy the code.
    #[default]
    Id,
    /// The phone, as before ids existed: any caller may try the phone's code, and
    /// `VCODE_MAX_ATTEMPTS` wrong tries destroy it. For clients that cannot carry an id.
    Phone,
    /// The id when the request carries one, else the phone.
    Either,
}

/// `VCODE_TEST_NUMBERS` as written: (phone, code) pairs, read against the default region and
/// the code length by [`OtpSettings::test_numbers`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TestNumbers(Vec<(String, String)>);

impl TestNumbers {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn parse(raw: &str) -> Result<Self, String> {
        list(raw, |item| {
            let (phone, code) = item
                .split_once('=')
                .ok_or_else(|| format!("{item:?}: expected phone=code"))?;
            Ok((phone.trim().to_owned(), code.trim().to_owned()))
        })
        .map(Self)
    }
}

impl Serialize for TestNumbers {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let pairs: Vec<String> = self.0.iter().map(|(p, c)| format!("{p}={c}")).collect();
        show_text(pairs.join(","), s)
    }
}

impl<'de> Deserialize<'de> for TestNumbers {
    /// A variable's `phone=code,…`, or the file's table of `"phone" = "code"` (a code as a
    /// string: a TOML integer would lose its leading zeros).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = TestNumbers;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("phone=code pairs, or a table of \"phone\" = \"code\"")
            }

            fn visit_str<E: serde::de::Error>(self, raw: &str) -> Result<TestNumbers, E> {
                TestNumbers::parse(raw.trim()).map_err(E::custom)
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<TestNumbers, A::Error> {
                let mut pairs = Vec::new();
                while let Some((phone, code)) = map.next_entry::<String, String>()? {
                    pairs.push((phone, code));
                }
                Ok(TestNumbers(pairs))
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl OtpSettings {
    /// The test numbers, each a valid phone (in the default region) with a code of the code
    /// length; the reason names the first that is not.
    pub fn test_numbers(&self) -> Result<Vec<(Phone, Code)>, String> {
        let mut numbers: Vec<(Phone, Code)> = Vec::new();
        for (raw_phone, raw_code) in &self.test_numbers.0 {
            let phone = Phone::parse(raw_phone, self.default_region)
                .ok_or_else(|| format!("{raw_phone:?} is not a valid phone number"))?;
            let code = Code::parse(raw_code, self.code_length).ok_or_else(|| {
                format!(
                    "the code of {phone} is not {} digits (VCODE_CODE_LENGTH)",
                    self.code_length.get()
                )
            })?;
            if numbers
                .iter()
                .any(|(known, _)| known.as_e164() == phone.as_e164())
            {
                return Err(format!("{phone} is listed twice"));
            }
            numbers.push((phone, code));
        }
        Ok(numbers)
    }

    /// The test numbers as logs and `check-config` show them: masked, without their codes.
    pub fn test_numbers_masked(&self) -> String {
        match self.test_numbers() {
            Ok(numbers) => numbers
                .iter()
                .map(|(phone, _)| format!("{phone}=***"))
                .collect::<Vec<_>>()
                .join(","),
            Err(_) => "(invalid)".to_owned(),
        }
    }
}

/// Limits against SMS pumping and guessing. A limit of 0 is off.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default)]
pub struct AbuseSettings {
    #[serde(rename = "VCODE_QUOTA_PHONE_HOUR", with = "Limit")]
    pub sends_per_phone_hour: u32,
    #[serde(rename = "VCODE_QUOTA_PHONE_DAY", with = "Limit")]
    pub sends_per_phone_day: u32,
    /// Code emails per address (its folded form: `John@` and `john@` are one), all purposes.
    #[serde(rename = "VCODE_QUOTA_EMAIL_HOUR", with = "Limit")]
    pub sends_per_email_hour: u32,
    #[serde(rename = "VCODE_QUOTA_EMAIL_DAY", with = "Limit")]
    pub sends_per_email_day: u32,
    /// Code emails per recipient domain (all its addresses), beside the client's and global
    /// budgets: a ceiling on what one domain can be sent, whoever asks.
    #[serde(rename = "VCODE_QUOTA_EMAIL_DOMAIN_HOUR", with = "Limit")]
    pub sends_per_email_domain_hour: u32,
    #[serde(rename = "VCODE_QUOTA_EMAIL_DOMAIN_DAY", with = "Limit")]
    pub sends_per_email_domain_day: u32,
    /// SMS and mails per client: a browser's address, or an end user a tenant names.
    #[serde(rename = "VCODE_QUOTA_IP_HOUR", with = "Limit")]
    pub sends_per_ip_hour: u32,
    /// SMS and mails per tenant (an API-key caller, a Twilio account), in place of its server
    /// address's client budget.
    #[serde(rename = "VCODE_QUOTA_TENANT_HOUR", with = "Limit")]
    pub sends_per_tenant_hour: u32,
    #[serde(rename = "VCODE_QUOTA_TENANT_DAY", with = "Limit")]
    pub sends_per_tenant_day: u32,
    /// A ceiling per phone that no one client reaches alone.
    #[serde(rename = "VCODE_QUOTA_PHONE_FAILS_DAY", with = "Limit")]
    pub failed_verifies_per_phone_day: u32,
    /// Failed verifies per (phone, client): what stops a guesser.
    #[serde(rename = "VCODE_QUOTA_CLIENT_FAILS_DAY", with = "Limit")]
    pub failed_verifies_per_client_day: u32,
    /// Failed credentials (API keys, Twilio Auth Tokens) per client address in a minute,
    /// after which the address is answered 429 until the minute ends; per instance.
    #[serde(rename = "VCODE_QUOTA_CREDENTIAL_FAILS_MINUTE", with = "Limit")]
    pub credential_failures_per_client_minute: u32,
    /// Services one Twilio-compatible account may have.
    #[serde(rename = "VCODE_QUOTA_TWILIO_SERVICES", with = "Whole::<1, 100_000>")]
    pub twilio_services_per_account: u32,
    /// IPv6 clients count per network of this prefix length (IPv4 ones per address).
    #[serde(rename = "VCODE_CLIENT_IPV6_PREFIX", with = "Whole::<32, 128>")]
    pub client_ipv6_prefix: u8,
    /// Captchas one client may create per minute.
    #[serde(rename = "VCODE_QUOTA_CAPTCHA_IP_MINUTE", with = "Limit")]
    pub captchas_per_client_minute: u32,
    #[serde(rename = "VCODE_QUOTA_GLOBAL_MINUTE", with = "Limit")]
    pub sends_global_minute: u32,
    /// The number types an SMS may go to (and `non_geographic`: numbers of the
    /// non-geographic calling codes); every other is refused.
    #[serde(rename = "VCODE_ALLOWED_NUMBER_TYPES", with = "number_types")]
    pub allowed_number_types: NumberTypes,
    /// Regions whose numbers are served; empty: the default region's; `*`: every region no
    /// other list names.
    #[serde(rename = "VCODE_ALLOWED_REGIONS", with = "regions")]
    pub allowed_regions: Regions,
    /// Regions whose numbers are served, each SMS counted and logged; `*` as above.
    #[serde(rename = "VCODE_MONITORED_REGIONS", with = "regions")]
    pub monitored_regions: Regions,
    /// Regions whose numbers are refused; `*` as above (the default for unnamed regions).
    #[serde(rename = "VCODE_BLOCKED_REGIONS", with = "regions")]
    pub blocked_regions: Regions,
    #[serde(rename = "VCODE_TRUSTED_PROXIES", with = "trusted_proxies")]
    pub trusted_proxies: TrustedProxies,
    /// How long an `Idempotency-Key` answer is kept for repeats.
    #[serde(skip)]
    pub idempotency_ttl: Duration,
    /// How long a repeat waits for the first request with its key before answering 409.
    #[serde(skip)]
    pub idempotency_wait: Duration,
}

/// A quota: 0 (off) up to a million.
type Limit = Whole<0, 1_000_000>;

impl Default for AbuseSettings {
    fn default() -> Self {
        Self {
            sends_per_phone_hour: 5,
            sends_per_phone_day: 10,
            sends_per_email_hour: 5,
            sends_per_email_day: 10,
            sends_per_email_domain_hour: 1_000,
            sends_per_email_domain_day: 10_000,
            sends_per_ip_hour: 20,
            sends_per_tenant_hour: 1_000,
            sends_per_tenant_day: 10_000,
            failed_verifies_per_phone_day: 100,
            failed_verifies_per_client_day: 10,
            credential_failures_per_client_minute: 10,
            twilio_services_per_account: 100,
            client_ipv6_prefix: 64,
            captchas_per_client_minute: 30,
            sends_global_minute: 0,
            allowed_number_types: NumberTypes::default(),
            allowed_regions: Regions::default(),
            monitored_regions: Regions::default(),
            blocked_regions: Regions::default(),
            trusted_proxies: TrustedProxies::default(),
            idempotency_ttl: Duration::from_secs(600),
            idempotency_wait: Duration::from_secs(5),
        }
    }
}

impl AbuseSettings {
    /// Every limit off: for load tests, which must measure the service, not its brakes.
    pub fn unlimited() -> Self {
        Self {
            sends_per_phone_hour: 0,
            sends_per_phone_day: 0,
            sends_per_email_hour: 0,
            sends_per_email_day: 0,
            sends_per_email_domain_hour: 0,
            sends_per_email_domain_day: 0,
            sends_per_ip_hour: 0,
            sends_per_tenant_hour: 0,
            sends_per_tenant_day: 0,
            failed_verifies_per_phone_day: 0,
            failed_verifies_per_client_day: 0,
            captchas_per_client_minute: 0,
            sends_global_minute: 0,
            ..Self::default()
        }
    }
}

impl AbuseSettings {
    /// Which numbers an SMS may go to, `default_region` standing for an empty allow list.
    pub fn destinations(&self, default_region: Region) -> Destinations {
        Destinations::new(
            self.allowed_number_types,
            GeoPermissions::new(
                &self.allowed_regions,
                &self.monitored_regions,
                &self.blocked_regions,
                default_region,
            ),
        )
    }

    /// A region named in two of the geo permission lists, if any.
    pub fn geo_conflicts(&self) -> Option<String> {
        GeoPermissions::conflicts(
            &self.allowed_regions,
            &self.monitored_regions,
            &self.blocked_regions,
        )
    }
}

impl Default for OtpSettings {
    fn default() -> Self {
        Self {
            code_length: CodeLength::default(),
            code_ttl: Duration::from_secs(300),
            resend_cooldown: Duration::from_secs(60),
            max_attempts: 5,
            resend: ResendPolicy::Reuse,
            default_region: Region::default(),
            purposes: ["login", "register", "reset_password", "bind_phone"]
                .into_iter()
                .filter_map(Purpose::parse)
                .collect(),
            test_numbers: TestNumbers::default(),
            test_numbers_on_public_bind: false,
            verify_by: VerifyBy::Id,
            verification_retention: Duration::from_secs(600),
        }
    }
}

mod code_length {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<CodeLength, D::Error> {
        parse_text(d, |raw| {
            raw.parse::<u8>()
                .ok()
                .and_then(CodeLength::new)
                .ok_or_else(|| {
                    format!(
                        "expected a length from {} to {}",
                        CodeLength::MIN,
                        CodeLength::MAX
                    )
                })
        })
    }

    pub fn serialize<S: Serializer>(length: &CodeLength, s: S) -> Result<S::Ok, S::Error> {
        show_text(length.get(), s)
    }
}

mod resend_policy {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ResendPolicy, D::Error> {
        parse_text(d, |raw| match raw {
            "reuse" => Ok(ResendPolicy::Reuse),
            "rotate" => Ok(ResendPolicy::Rotate),
            _ => Err("expected reuse or rotate".to_owned()),
        })
    }

    pub fn serialize<S: Serializer>(policy: &ResendPolicy, s: S) -> Result<S::Ok, S::Error> {
        show_text(
            match policy {
                ResendPolicy::Reuse => "reuse",
                ResendPolicy::Rotate => "rotate",
            },
            s,
        )
    }
}

mod verify_by {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<VerifyBy, D::Error> {
        parse_text(d, |raw| match raw {
            "id" => Ok(VerifyBy::Id),
            "phone" => Ok(VerifyBy::Phone),
            "either" => Ok(VerifyBy::Either),
            _ => Err("expected id, phone or either".to_owned()),
        })
    }

    pub fn serialize<S: Serializer>(by: &VerifyBy, s: S) -> Result<S::Ok, S::Error> {
        show_text(
            match by {
                VerifyBy::Id => "id",
                VerifyBy::Phone => "phone",
                VerifyBy::Either => "either",
            },
            s,
        )
    }
}

mod region {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Region, D::Error> {
        parse_text(d, |raw| {
            Region::parse(raw)
                .ok_or_else(|| "expected an ISO 3166 region code such as CN or US".to_owned())
        })
    }

    pub fn serialize<S: Serializer>(region: &Region, s: S) -> Result<S::Ok, S::Error> {
        show_text(region.as_str(), s)
    }
}

mod regions {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Regions, D::Error> {
        parse_text(d, Regions::parse)
    }

    pub fn serialize<S: Serializer>(regions: &Regions, s: S) -> Result<S::Ok, S::Error> {
        show_text(regions, s)
    }
}

mod number_types {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<NumberTypes, D::Error> {
        parse_text(d, NumberTypes::parse)
    }

    pub fn serialize<S: Serializer>(types: &NumberTypes, s: S) -> Result<S::Ok, S::Error> {
        show_text(types, s)
    }
}

mod purposes {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Purpose>, D::Error> {
        parse_text(d, |raw| {
            let purposes = list(raw, |item| {
                Purpose::parse(item).ok_or(format!("{item:?} is not [a-z0-9_-]{{1,32}}"))
            })?;
            if purposes.is_empty() {
                return Err("expected at least one purpose".to_owned());
            }
            Ok(purposes)
        })
    }

    pub fn serialize<S: Serializer>(purposes: &[Purpose], s: S) -> Result<S::Ok, S::Error> {
        let names: Vec<&str> = purposes.iter().map(Purpose::as_str).collect();
        show_text(names.join(","), s)
    }
}

mod trusted_proxies {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<TrustedProxies, D::Error> {
        parse_text(d, TrustedProxies::parse)
    }

    /// The default trusts none; a configured list is shown as its variable gave it.
    pub fn serialize<S: Serializer>(proxies: &TrustedProxies, s: S) -> Result<S::Ok, S::Error> {
        if proxies.is_empty() {
            show_text("", s)
        } else {
            show_text(format!("{proxies:?}"), s)
        }
    }
}
