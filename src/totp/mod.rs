//! Authenticator-app factors (issue 40): TOTP as RFC 6238 defines it, for an identity of a
//! scope (a Twilio Service's SID, or `key:<name>` for an API key on `/api/v1`). Enrolment draws a
//! 160-bit secret from the CSPRNG, seals it with the keyring (never stored in clear, shown only
//! in the enrolment's answer) and hands out its `otpauth://` URI and a QR code; the factor is
//! `unverified` until a first right code confirms it. A check accepts a code at most once per
//! factor and step (and no step before one accepted), locks the factor after five wrong codes
//! (`Retry-After`), and counts a named end user's wrong codes as other verifies do
//! (`VCODE_QUOTA_CLIENT_FAILS_DAY`). Every change of a factor is one
//! compare-and-set of its record (`crate::store::FactorStore`), so two concurrent checks of
//! one code never both pass. Both APIs (`routes::totp`, `twilio_compat::entities`) call this.

mod check;
mod factor;
mod uri;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngExt;
use serde::{Deserialize, Serialize};

use crate::keyring::Keyring;
use crate::store::{
    ENTITY, FactorStore, OutboxEntry, QuotaRule, QuotaStore, Revised, StoreError, TotpFact,
};
use crate::token::TokenIssuer;

pub use self::factor::{
    Challenge, ChallengeStatus, Entity, Factor, FactorStatus, Judgement, MAX_FAILURES,
};
pub use self::uri::{otpauth_uri, qr_png};

/// A secret's bytes: 160 bits, RFC 4226's recommendation (and Twilio's).
pub const SECRET_BYTES: usize = 20;
/// Factors one identity may have.
pub const MAX_FACTORS: usize = 20;
/// Challenges kept per identity (the oldest go first).
const MAX_CHALLENGES: usize = 20;
/// How long a challenge is shown as pending before it expires.
const CHALLENGE_TTL_MS: u64 = 5 * 60 * 1000;
/// Tries of a compare-and-set before giving up to a storm of concurrent writers.
const WRITE_TRIES: usize = 8;
/// SID prefixes, as Twilio's: an entity, a factor, a challenge.
pub const ENTITY_PREFIX: &str = "YE";
pub const FACTOR_PREFIX: &str = "YF";
pub const CHALLENGE_PREFIX: &str = "YC";

/// HMAC's hash.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    #[default]
    Sha1,
    Sha256,
    Sha512,
}

impl Algorithm {
    /// Twilio's spelling (`sha1`…), which vcode's API uses too.
    pub fn parse(raw: &str) -> Option<Self> {
        match raw.to_ascii_lowercase().as_str() {
            "sha1" => Some(Self::Sha1),
            "sha256" => Some(Self::Sha256),
            "sha512" => Some(Self::Sha512),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sha1 => "sha1",
            Self::Sha256 => "sha256",
            Self::Sha512 => "sha512",
        }
    }

    /// As the Key URI Format spells it.
    fn uri_name(self) -> &'static str {
        match self {
            Self::Sha1 => "SHA1",
            Self::Sha256 => "SHA256",
            Self::Sha512 => "SHA512",
        }
    }

    fn of_crate(self) -> totp_rs::Algorithm {
        match self {
            Self::Sha1 => totp_rs::Algorithm::SHA1,
            Self::Sha256 => totp_rs::Algorithm::SHA256,
            Self::Sha512 => totp_rs::Algorithm::SHA512,
        }
    }
}

/// A factor's code settings: RFC 6238's with vcode's bounds (6 to 8 digits, a step of 20 to
/// 60 s, at most one step of skew each way).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TotpConfig {
    pub algorithm: Algorithm,
    pub digits: u8,
    pub step_secs: u64,
    pub skew: u8,
}

pub const DIGITS: std::ops::RangeInclusive<u8> = 6..=8;
pub const STEP_SECS: std::ops::RangeInclusive<u64> = 20..=60;
pub const MAX_SKEW: u8 = 1;

impl Default for TotpConfig {
    fn default() -> Self {
        Self {
            algorithm: Algorithm::Sha1,
            digits: 6,
            step_secs: 30,
            skew: 1,
        }
    }
}

impl TotpConfig {
    /// The first setting out of bounds, by its name in `names` (digits, step, skew).
    pub fn check(&self) -> Result<(), Setting> {
        if !DIGITS.contains(&self.digits) {
            return Err(Setting::Digits);
        }
        if !STEP_SECS.contains(&self.step_secs) {
            return Err(Setting::Step);
        }
        if self.skew > MAX_SKEW {
            return Err(Setting::Skew);
        }
        Ok(())
    }

    fn totp(&self, secret: &[u8]) -> totp_rs::Totp {
        totp_rs::Builder::new()
            .with_algorithm(self.algorithm.of_crate())
            .with_digits(self.digits)
            .with_skew(u16::from(self.skew))
            .with_step_duration(self.step_secs)
            .with_secret(secret.to_vec())
            .build_noncompliant()
    }
}

/// A setting a request may get wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    Identity,
    FriendlyName,
    Algorithm,
    Digits,
    Step,
    Skew,
    Issuer,
}

#[derive(Debug, thiserror::Error)]
pub enum TotpError {
    #[error("invalid {0:?}")]
    Invalid(Setting),
    /// Not digits of the factor's length: nothing is counted.
    #[error("the code must be the factor's digits")]
    InvalidCode,
    #[error("no such entity")]
    EntityNotFound,
    #[error("no such factor")]
    FactorNotFound,
    #[error("no such challenge")]
    ChallengeNotFound,
    /// A check against a factor not yet confirmed by its first code.
    #[error("the factor is not verified")]
    NotVerified,
    #[error("an identity has at most {MAX_FACTORS} factors")]
    TooManyFactors,
    /// Wrong or replayed, with the tries left before the factor locks.
    #[error("wrong code")]
    WrongCode { remaining_attempts: u32 },
    /// Five wrong codes: the factor is locked until `retry_after` from now.
    #[error("too many wrong codes: the factor is locked")]
    Locked { retry_after: Duration },
    /// The client's wrong codes reached `VCODE_QUOTA_CLIENT_FAILS_DAY`.
    #[error("too many wrong codes from this client")]
    QuotaExceeded { retry_after: Duration },
    /// Writers of one factor kept racing: the client may retry.
    #[error("too many concurrent changes")]
    Busy,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("internal: {0}")]
    Internal(String),
}

/// What an enrolment hands out, once: the secret, its URI and the QR code of the URI.
pub struct Enrolment {
    pub factor: Factor,
    pub secret_base32: String,
    pub uri: String,
    pub qr_png: Vec<u8>,
}

/// A checked code's outcome where a wrong code is an answer, not an error (Twilio's factor
/// update and challenge): the factor as it now stands.
pub struct Checked {
    pub factor: Factor,
    pub passed: bool,
}

pub struct TotpService {
    store: Arc<dyn FactorStore>,
    quotas: Arc<dyn QuotaStore>,
    keyring: Arc<Keyring>,
    tokens: Arc<TokenIssuer>,
    /// Wrong codes per (identity, client) (`VCODE_QUOTA_CLIENT_FAILS_DAY`).
    client_failures: Option<QuotaRule>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

/// A new SID: the prefix and 128 CSPRNG bits in lower-case hex, as Twilio's.
fn new_sid(prefix: &str) -> String {
    [prefix, &hex::encode(rand::rng().random::<[u8; 16]>())].concat()
}

/// An identity as both APIs take it: 1 to 64 of letters, digits and `-_.@+`.
pub fn is_identity(raw: &str) -> bool {
    (1..=64).contains(&raw.len())
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.@+".contains(&b))
}

fn is_sid(raw: &str, prefix: &str) -> bool {
    raw.len() == 34 && raw.starts_with(prefix) && raw[2..].bytes().all(|b| b.is_ascii_hexdigit())
}

/// What a sealed secret is bound to: its factor, wherever it is.
fn seal_context(scope: &str, identity: &str, sid: &str) -> String {
    [scope, "\0", identity, "\0", sid].concat()
}

/// A factor's event (`factor.created`…, `challenge.failed`): its SID is the subject, the detail
/// names the identity, the Twilio Service or the API key, and the challenge if any. Never a
/// secret or a code.
fn event(
    fact: TotpFact,
    scope: &str,
    identity: &str,
    factor: &str,
    extra: &str,
    at_ms: u64,
) -> OutboxEntry {
    let owner = match scope.strip_prefix("key:") {
        Some(key) => ["api_key=", key].concat(),
        None => ["service_sid=", scope].concat(),
    };
    let mut detail = ["identity=", identity, ";", &owner].concat();
    if !extra.is_empty() {
        detail.push(';');
        detail.push_str(extra);
    }
    OutboxEntry::of_factor(fact, factor, at_ms, detail)
}

fn decode<T: for<'de> Deserialize<'de>>(record: &Revised) -> Result<T, TotpError> {
    serde_json::from_str(&record.body).map_err(|error| TotpError::Internal(error.to_string()))
}

fn encode<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("a TOTP record serialises")
}

impl TotpService {
    pub fn new(
        store: Arc<dyn FactorStore>,
        quotas: Arc<dyn QuotaStore>,
        keyring: Arc<Keyring>,
        tokens: Arc<TokenIssuer>,
        client_failures: Option<QuotaRule>,
    ) -> Self {
        Self {
            store,
            quotas,
            keyring,
            tokens,
            client_failures,
        }
    }

    /// The identity's entity, created if it has none.
    pub async fn create_entity(&self, scope: &str, identity: &str) -> Result<Entity, TotpError> {
        if !is_identity(identity) {
            return Err(TotpError::Invalid(Setting::Identity));
        }
        for _ in 0..WRITE_TRIES {
            if let Some(record) = self.store.totp_record(scope, identity, ENTITY).await? {
                return decode(&record);
            }
            let now = now_ms();
            let entity = Entity {
                sid: new_sid(ENTITY_PREFIX),
                identity: identity.to_owned(),
                created_ms: now,
                updated_ms: now,
            };
            if self
                .store
                .put_totp_record(scope, identity, ENTITY, None, &encode(&entity), None)
                .await?
            {
                return Ok(entity);
            }
        }
        Err(TotpError::Busy)
    }

    pub async fn entity(&self, scope: &str, identity: &str) -> Result<Entity, TotpError> {
        if !is_identity(identity) {
            return Err(TotpError::EntityNotFound);
        }
        let record = self.store.totp_record(scope, identity, ENTITY).await?;
        decode(&record.ok_or(TotpError::EntityNotFound)?)
    }

    /// The scope's entities, oldest first.
    pub async fn entities(&self, scope: &str) -> Result<Vec<Entity>, TotpError> {
        let mut entities = self
            .store
            .totp_entities(scope)
            .await?
            .iter()
            .map(|(_, record)| decode::<Entity>(record))
            .collect::<Result<Vec<_>, _>>()?;
        entities.sort_by(|a, b| (a.created_ms, &a.sid).cmp(&(b.created_ms, &b.sid)));
        Ok(entities)
    }

    /// Deletes the identity's entity, its factors (each with its `factor.deleted`) and
    /// challenges.
    pub async fn delete_entity(&self, scope: &str, identity: &str) -> Result<(), TotpError> {
        if !is_identity(identity) {
            return Err(TotpError::EntityNotFound);
        }
        for factor in self.factors(scope, identity).await? {
            let deleted = event(
                TotpFact::FactorDeleted,
                scope,
                identity,
                &factor.sid,
                "",
                now_ms(),
            );
            self.store
                .delete_totp_record(scope, identity, &factor.sid, Some(&deleted))
                .await?;
        }
        if self.store.delete_totp_identity(scope, identity).await? {
            tracing::info!(scope, "TOTP entity deleted");
            return Ok(());
        }
        Err(TotpError::EntityNotFound)
    }

    /// Enrols a new factor for `identity` (its entity created if need be): a fresh secret,
    /// sealed; the answer is the only place it is ever shown. `account` is the name the
    /// authenticator app shows under `issuer`.
    pub async fn enrol(
        &self,
        scope: &str,
        identity: &str,
        friendly_name: &str,
        issuer: &str,
        config: TotpConfig,
    ) -> Result<Enrolment, TotpError> {
        config.check().map_err(TotpError::Invalid)?;
        if friendly_name.trim().is_empty() || friendly_name.chars().count() > 64 {
            return Err(TotpError::Invalid(Setting::FriendlyName));
        }
        // The Key URI Format's label is `issuer:account`: an issuer may hold no colon.
        if issuer.trim().is_empty() || issuer.chars().count() > 64 || issuer.contains(':') {
            return Err(TotpError::Invalid(Setting::Issuer));
        }
        let entity = self.create_entity(scope, identity).await?;
        let factors = self.factors(scope, identity).await?;
        if factors.len() >= MAX_FACTORS {
            return Err(TotpError::TooManyFactors);
        }
        let mut secret = [0u8; SECRET_BYTES];
        rand::rng().fill(&mut secret[..]);
        let now = now_ms();
        let sid = new_sid(FACTOR_PREFIX);
        let sealed = self
            .keyring
            .seal_secret(&seal_context(scope, identity, &sid), &secret);
        let factor = Factor {
            sid,
            entity_sid: entity.sid,
            identity: identity.to_owned(),
            friendly_name: friendly_name.to_owned(),
            status: FactorStatus::Unverified,
            config,
            sealed_secret: URL_SAFE_NO_PAD.encode(sealed),
            created_ms: now,
            updated_ms: now,
            last_step: 0,
            failures: 0,
            locked_until_ms: 0,
            locks: 0,
        };
        let created = event(
            TotpFact::FactorCreated,
            scope,
            identity,
            &factor.sid,
            "",
            now,
        );
        if !self
            .store
            .put_totp_record(
                scope,
                identity,
                &factor.sid,
                None,
                &encode(&factor),
                Some(&created),
            )
            .await?
        {
            return Err(TotpError::Internal("a new factor SID already taken".into()));
        }
        let secret_base32 = totp_rs::Secret::from(secret.to_vec()).to_base32();
        let uri = otpauth_uri(issuer, friendly_name, &secret_base32, &config);
        let qr_png = qr_png(&uri).map_err(TotpError::Internal)?;
        tracing::info!(scope, factor = %factor.sid, "TOTP factor enrolled");
        Ok(Enrolment {
            factor,
            secret_base32,
            uri,
            qr_png,
        })
    }

    async fn factor_revised(
        &self,
        scope: &str,
        identity: &str,
        sid: &str,
    ) -> Result<(u64, Factor), TotpError> {
        if !is_identity(identity) || !is_sid(sid, FACTOR_PREFIX) {
            return Err(TotpError::FactorNotFound);
        }
        let record = self
            .store
            .totp_record(scope, identity, sid)
            .await?
            .ok_or(TotpError::FactorNotFound)?;
        Ok((record.revision, decode(&record)?))
    }

    pub async fn factor(
        &self,
        scope: &str,
        identity: &str,
        sid: &str,
    ) -> Result<Factor, TotpError> {
        Ok(self.factor_revised(scope, identity, sid).await?.1)
    }

    /// The identity's factors, oldest first.
    pub async fn factors(&self, scope: &str, identity: &str) -> Result<Vec<Factor>, TotpError> {
        self.records(scope, identity, FACTOR_PREFIX).await
    }

    /// The identity's challenges, oldest first (those pending past their time shown expired
    /// by the routes).
    pub async fn challenges(
        &self,
        scope: &str,
        identity: &str,
    ) -> Result<Vec<Challenge>, TotpError> {
        self.records(scope, identity, CHALLENGE_PREFIX).await
    }

    async fn records<T: for<'de> Deserialize<'de> + Created>(
        &self,
        scope: &str,
        identity: &str,
        prefix: &str,
    ) -> Result<Vec<T>, TotpError> {
        if !is_identity(identity) {
            return Err(TotpError::Invalid(Setting::Identity));
        }
        let mut records = self
            .store
            .totp_records(scope, identity)
            .await?
            .iter()
            .filter(|(sid, _)| sid.starts_with(prefix))
            .map(|(_, record)| decode::<T>(record))
            .collect::<Result<Vec<_>, _>>()?;
        records.sort_by(|a, b| a.order().cmp(&b.order()));
        Ok(records)
    }

    pub async fn challenge(
        &self,
        scope: &str,
        identity: &str,
        sid: &str,
    ) -> Result<Challenge, TotpError> {
        if !is_identity(identity) || !is_sid(sid, CHALLENGE_PREFIX) {
            return Err(TotpError::ChallengeNotFound);
        }
        let record = self
            .store
            .totp_record(scope, identity, sid)
            .await?
            .ok_or(TotpError::ChallengeNotFound)?;
        decode(&record)
    }

    pub async fn delete_factor(
        &self,
        scope: &str,
        identity: &str,
        sid: &str,
    ) -> Result<(), TotpError> {
        let deleted = event(TotpFact::FactorDeleted, scope, identity, sid, "", now_ms());
        if is_identity(identity)
            && is_sid(sid, FACTOR_PREFIX)
            && self
                .store
                .delete_totp_record(scope, identity, sid, Some(&deleted))
                .await?
        {
            tracing::info!(scope, factor = %sid, "TOTP factor deleted");
            return Ok(());
        }
        Err(TotpError::FactorNotFound)
    }
}

/// A record's place in its listing.
trait Created {
    fn order(&self) -> (u64, &str);
}

impl Created for Factor {
    fn order(&self) -> (u64, &str) {
        (self.created_ms, &self.sid)
    }
}

impl Created for Challenge {
    fn order(&self) -> (u64, &str) {
        (self.created_ms, &self.sid)
    }
}

impl Challenge {
    /// Its status as shown at `now_ms`: a pending challenge past its time is `expired`.
    pub fn shown_status(&self, now_ms: u64) -> &'static str {
        match self.status {
            ChallengeStatus::Pending if now_ms >= self.expires_ms => "expired",
            status => status.as_str(),
        }
    }
}

/// The wall clock, for the routes' dates.
pub fn wall_ms() -> u64 {
    now_ms()
}
