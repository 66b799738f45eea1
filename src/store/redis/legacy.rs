//! The postmortem's verify strategies, kept on purpose to reproduce its outage (dev mode only).
//!
//! Both legacy strategies store codes as the Go service did: one plain string per phone,
//! `verify_code:<E.164>` (no purpose, no hash tag), which every send overwrites with
//! `SET key code EX <ttl>` — no cooldown, no dedup, so every send is a new code and a new SMS.
//! A verify is two separate round trips, a `GET` compared in the app and then a `DEL` of the
//! key, so whatever happens between them is lost:
//! - `legacy-original`: the login succeeds on the GET; its own work (the gap) follows, and the
//!   login ends with an unconditional `DEL`, which removes a code sent meanwhile.
//! - `legacy-postmortem-fix`: the `DEL` comes right after the compare, on a match. It is still
//!   a second command (the gap stands for the network between them), so a send in between is
//!   still lost and two concurrent verifies of one code can both pass.
//!
//! Neither counts failed attempts (the Go service had no limit) nor takes a phone quota. Every
//! other operation (outbox, captchas, quotas, idempotency keys, stats, ping) is the real
//! `RedisStore`'s.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::{RedisStore, keys};
use crate::domain::{CaptchaId, Code, Phone, Purpose};
use crate::idempotency::{IdempotencyKey, IdempotencyRecord};
use crate::store::{
    Budget, Delivery, DeliveryKind, IssueOutcome, IssueParams, IssueUndo, OutboxMessage,
    PendingCode, QuotaDecision, QuotaScope, QuotaToken, Store, StoreError, StoredCaptcha,
    VerifyOutcome, VerifyParams,
};

/// How verifies read, compare and delete codes (`VCODE_VERIFY_STRATEGY`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum VerifyStrategy {
    /// vcode's design: every read-compare-write is one Lua script.
    #[default]
    Atomic,
    /// The Go service before the postmortem.
    LegacyOriginal,
    /// The Go service after the postmortem's fix.
    LegacyPostmortemFix,
}

impl VerifyStrategy {
    pub const ALL: [Self; 3] = [
        Self::Atomic,
        Self::LegacyOriginal,
        Self::LegacyPostmortemFix,
    ];

    /// The name `VCODE_VERIFY_STRATEGY` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Atomic => "atomic",
            Self::LegacyOriginal => "legacy-original",
            Self::LegacyPostmortemFix => "legacy-postmortem-fix",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == raw)
    }

    pub fn is_legacy(self) -> bool {
        self != Self::Atomic
    }
}

impl std::fmt::Display for VerifyStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The store a strategy runs on: `store` itself for `atomic`, a `LegacyRedisStore` around it
/// otherwise. `gap` is the pause between a legacy verify's GET and its DEL.
pub fn store_for(strategy: VerifyStrategy, store: RedisStore, gap: Duration) -> Arc<dyn Store> {
    let flavour = match strategy {
        VerifyStrategy::Atomic => return Arc::new(store),
        VerifyStrategy::LegacyOriginal => Legacy::Original,
        VerifyStrategy::LegacyPostmortemFix => Legacy::PostmortemFix,
    };
    tracing::warn!(
        strategy = %strategy,
        gap_ms = gap.as_millis() as u64,
        "legacy verify strategy: codes are lost and reused by design (reproduction only)"
    );
    Arc::new(LegacyRedisStore::new(store, flavour, gap))
}

/// Which of the two legacy verifies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Legacy {
    Original,
    PostmortemFix,
}

/// `verify_code:+8613800138000`: the Go service's key, one per phone, whatever the purpose.
pub fn key(phone: &Phone) -> String {
    format!("{}{}", keys::PREFIX, phone.as_e164())
}

/// What a legacy verify's first round trip found: the GET's value compared with the submitted
/// code. Nothing is written yet; `LegacyRedisStore::finish_verify` sends the second command.
#[derive(Debug)]
#[must_use = "a read step does nothing until it is finished"]
pub struct ReadStep {
    key: String,
    found: Found,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Found {
    Missing,
    Mismatch,
    Match,
}

impl ReadStep {
    /// Whether the GET returned the submitted code (the login will succeed).
    pub fn matched(&self) -> bool {
        self.found == Found::Match
    }
}

/// The Go service's code handling on a real Redis, with real separate round trips.
#[derive(Clone)]
pub struct LegacyRedisStore {
    inner: RedisStore,
    flavour: Legacy,
    gap: Duration,
}

impl LegacyRedisStore {
    pub fn new(inner: RedisStore, flavour: Legacy, gap: Duration) -> Self {
        Self {
            inner,
            flavour,
            gap,
        }
    }

    pub fn flavour(&self) -> Legacy {
        self.flavour
    }

    /// First round trip of a verify: `GET`, then compare in the app.
    pub async fn read_step(&self, phone: &Phone, code: &Code) -> Result<ReadStep, StoreError> {
        let key = key(phone);
        let mut connection = self.inner.connection.clone();
        let command = redis::cmd("GET").arg(&key).to_owned();
        let stored: Option<String> = self
            .inner
            .bounded(command.query_async(&mut connection))
            .await?;
        let found = match stored {
            None => Found::Missing,
            Some(stored) if Code::from_stored(stored.clone()).matches(code) => Found::Match,
            Some(_) => Found::Mismatch,
        };
        Ok(ReadStep { key, found })
    }

    /// Second round trip: on a match, `DEL` the key — whatever it holds by now (the original
    /// login's cleanup and the fix's delete are the same command). Nothing is counted on a
    /// mismatch, so `remaining_attempts` is always `max_attempts`.
    pub async fn finish_verify(
        &self,
        step: ReadStep,
        max_attempts: u32,
    ) -> Result<VerifyOutcome, StoreError> {
        match step.found {
            Found::Missing => Ok(VerifyOutcome::Missing),
            Found::Mismatch => Ok(VerifyOutcome::Mismatch {
                remaining_attempts: max_attempts,
            }),
            Found::Match => {
                let mut connection = self.inner.connection.clone();
                let command = redis::cmd("DEL").arg(&step.key).to_owned();
                self.inner
                    .bounded(command.query_async::<i64>(&mut connection))
                    .await?;
                Ok(VerifyOutcome::Verified)
            }
        }
    }
}

#[async_trait]
impl Store for LegacyRedisStore {
    /// `SET verify_code:<phone> <code> EX <ttl>`: overwrites any pending code, every time.
    async fn issue_code(
        &self,
        phone: &Phone,
        _purpose: &Purpose,
        candidate: Code,
        params: &IssueParams,
    ) -> Result<IssueOutcome, StoreError> {
        let mut connection = self.inner.connection.clone();
        let command = redis::cmd("SET")
            .arg(key(phone))
            .arg(candidate.expose())
            .arg("EX")
            .arg(params.ttl.as_secs().max(1))
            .to_owned();
        self.inner
            .bounded(command.query_async::<()>(&mut connection))
            .await?;
        Ok(IssueOutcome::Deliver(Delivery {
            code: candidate.clone(),
            // The Go service could not tell whether it overwrote a code.
            kind: DeliveryKind::Created,
            undo: IssueUndo {
                quota_token: QuotaToken(0),
                code: candidate,
                sent_at_ms: 0,
                deliveries: 1,
                previous: None,
            },
        }))
    }

    /// A no-op, as in the Go service, which rolled nothing back when an SMS failed: the code
    /// stays until it expires or a later send overwrites it.
    async fn undo_issue(
        &self,
        _phone: &Phone,
        _purpose: &Purpose,
        _undo: &IssueUndo,
    ) -> Result<bool, StoreError> {
        Ok(false)
    }

    /// `GET`, compare, and on a match the gap then `DEL`: two round trips with a window between.
    async fn verify_code(
        &self,
        phone: &Phone,
        _purpose: &Purpose,
        code: &Code,
        params: VerifyParams,
    ) -> Result<VerifyOutcome, StoreError> {
        let step = self.read_step(phone, code).await?;
        if step.matched() && !self.gap.is_zero() {
            // `legacy-original`: the login's own work; `legacy-postmortem-fix`: a slow network.
            tokio::time::sleep(self.gap).await;
        }
        self.finish_verify(step, params.max_attempts).await
    }

    async fn reserve_quota(
        &self,
        budgets: &[Budget<'_>],
        token: QuotaToken,
    ) -> Result<QuotaDecision, StoreError> {
        self.inner.reserve_quota(budgets, token).await
    }

    async fn release_quota(
        &self,
        scopes: &[QuotaScope],
        token: QuotaToken,
    ) -> Result<(), StoreError> {
        self.inner.release_quota(scopes, token).await
    }

    /// The legacy key's code; attempts are never counted and each SET is one delivery.
    async fn pending_code(
        &self,
        phone: &Phone,
        _purpose: &Purpose,
    ) -> Result<Option<PendingCode>, StoreError> {
        let mut connection = self.inner.connection.clone();
        let command = redis::cmd("GET").arg(key(phone)).to_owned();
        let stored: Option<String> = self
            .inner
            .bounded(command.query_async(&mut connection))
            .await?;
        Ok(stored.map(|code| PendingCode {
            code: Code::from_stored(code),
            failed_attempts: 0,
            deliveries: 1,
        }))
    }

    async fn push_outbox(&self, message: &OutboxMessage) -> Result<(), StoreError> {
        self.inner.push_outbox(message).await
    }

    async fn outbox(&self, phone: &Phone) -> Result<Vec<OutboxMessage>, StoreError> {
        self.inner.outbox(phone).await
    }

    async fn put_captcha(
        &self,
        id: &CaptchaId,
        captcha: &StoredCaptcha,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        self.inner.put_captcha(id, captcha, ttl).await
    }

    async fn captcha(&self, id: &CaptchaId) -> Result<Option<StoredCaptcha>, StoreError> {
        self.inner.captcha(id).await
    }

    async fn take_captcha(&self, id: &CaptchaId) -> Result<Option<StoredCaptcha>, StoreError> {
        self.inner.take_captcha(id).await
    }

    async fn begin_idempotent(
        &self,
        key: &IdempotencyKey,
        running: &IdempotencyRecord,
        lease: Duration,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        self.inner.begin_idempotent(key, running, lease).await
    }

    async fn finish_idempotent(
        &self,
        key: &IdempotencyKey,
        done: &IdempotencyRecord,
        retention: Duration,
    ) -> Result<(), StoreError> {
        self.inner.finish_idempotent(key, done, retention).await
    }

    async fn abandon_idempotent(
        &self,
        key: &IdempotencyKey,
        running: &IdempotencyRecord,
    ) -> Result<(), StoreError> {
        self.inner.abandon_idempotent(key, running).await
    }

    async fn add_stats(
        &self,
        date: &str,
        counts: &[(&'static str, u64)],
    ) -> Result<(), StoreError> {
        self.inner.add_stats(date, counts).await
    }

    async fn stats(
        &self,
        dates: &[String],
    ) -> Result<Vec<std::collections::HashMap<String, u64>>, StoreError> {
        self.inner.stats(dates).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Region;

    #[test]
    fn strategy_names_round_trip() {
        for strategy in VerifyStrategy::ALL {
            assert_eq!(VerifyStrategy::parse(strategy.as_str()), Some(strategy));
        }
        assert_eq!(VerifyStrategy::default(), VerifyStrategy::Atomic);
        assert!(!VerifyStrategy::Atomic.is_legacy());
        assert!(VerifyStrategy::LegacyOriginal.is_legacy());
        assert_eq!(VerifyStrategy::parse("Atomic"), None);
        assert_eq!(VerifyStrategy::parse("legacy"), None);
    }

    #[test]
    fn the_legacy_key_is_the_go_services() {
        let phone = Phone::parse("13800138000", Region::default()).unwrap();
        assert_eq!(key(&phone), "verify_code:+8613800138000");
    }
}
