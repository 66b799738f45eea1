//! The Go service's code handling, as a code store on a real Redis node (the legacy strategies).
//!
//! Both legacy strategies store codes as the Go service did: one string per destination,
//! `verify_code:<E.164>` (no purpose, no hash tag), which every send overwrites with
//! `SET key code EX <ttl>` — no cooldown, no dedup, so every send is a new code and a new SMS.
//! The string is the code's keyed digest (hex) rather than the code: the races are the same,
//! and the store stays unreadable even here.
//! Like go-redis, every command checks a connection out of a pool (`deadpool-redis`). A verify
//! is two separate round trips, a `GET` compared in the app and then a `DEL`:
//! - `legacy-original`: the login succeeds on the GET, the login's own work follows (the gap),
//!   and the login ends with an unconditional `DEL`, which removes a code sent meanwhile.
//! - `legacy-postmortem-fix`: the `DEL` comes right after the compare, on a match, and the
//!   login's work follows it. Only the network between GET and DEL is left as a window: a send
//!   in it is still lost and two concurrent verifies of one code can both pass.
//!
//! Neither counts failed attempts (the Go service had no limit) nor takes a phone quota.

use std::time::Duration;

use async_trait::async_trait;
use deadpool_redis::{Config, Pool, Runtime};

use crate::domain::{CodeDigest, Destination, Purpose, VerificationId};
use crate::store::{
    Budgets, CodeCandidate, CodeStore, IssueKind, IssueOutcome, IssueParams, IssueUndo, IssuedCode,
    PendingCode, QuotaToken, StoreError, VerificationRecord, VerificationTarget, VerifyOutcome,
    VerifyParams,
};

/// The Go service's key prefix. vcode's own keys share it, but this one is the Go service's
/// and must not follow a change of vcode's layout.
const GO_SERVICE_PREFIX: &str = "verify_code:";

/// Which of the two legacy verifies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Legacy {
    Original,
    PostmortemFix,
}

/// `verify_code:+8613800138000`: the Go service's key, one per destination, whatever the purpose.
pub fn key(destination: &Destination) -> String {
    format!("{GO_SERVICE_PREFIX}{}", destination.key())
}

fn parse_digest(hex_digest: &str) -> Option<CodeDigest> {
    CodeDigest::from_slice(&hex::decode(hex_digest).ok()?)
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

/// The Go service's code handling on a real Redis, with real separate round trips, each on a
/// connection checked out of a pool as go-redis does.
#[derive(Clone)]
pub struct LegacyRedisStore {
    pool: Pool,
    flavour: Legacy,
    gap: Duration,
    command_timeout: Duration,
}

impl LegacyRedisStore {
    /// A pool of connections to the Redis node at `url`, opened as commands need them.
    pub fn connect(
        url: &str,
        flavour: Legacy,
        gap: Duration,
        command_timeout: Duration,
    ) -> Result<Self, StoreError> {
        let pool = Config::from_url(url)
            .create_pool(Some(Runtime::Tokio1))
            .map_err(|e| StoreError::Unavailable(format!("bad Redis settings: {e}")))?;
        Ok(Self {
            pool,
            flavour,
            gap,
            command_timeout,
        })
    }

    pub fn flavour(&self) -> Legacy {
        self.flavour
    }

    /// One command on a pooled connection, within the command timeout (checkout included).
    async fn query<T: redis::FromRedisValue>(&self, command: redis::Cmd) -> Result<T, StoreError> {
        let call = async {
            let mut connection = self
                .pool
                .get()
                .await
                .map_err(|e| StoreError::Unavailable(format!("Redis pool: {e}")))?;
            command
                .query_async(&mut connection)
                .await
                .map_err(|e| StoreError::Unavailable(e.to_string()))
        };
        tokio::time::timeout(self.command_timeout, call)
            .await
            .map_err(|_| StoreError::Timeout(self.command_timeout))?
    }

    /// First round trip of a verify: `GET`, then compare in the app.
    pub async fn read_step(
        &self,
        destination: &Destination,
        candidates: &[CodeDigest],
    ) -> Result<ReadStep, StoreError> {
        let key = key(destination);
        let stored: Option<String> = self.query(redis::cmd("GET").arg(&key).to_owned()).await?;
        let found = match stored.as_deref().and_then(parse_digest) {
            None => Found::Missing,
            Some(stored) if stored.is_any_of(candidates) => Found::Match,
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
            Found::Missing => Ok(VerifyOutcome::CodeExpired),
            Found::Mismatch => Ok(VerifyOutcome::Mismatch {
                remaining_attempts: max_attempts,
            }),
            Found::Match => {
                self.query::<i64>(redis::cmd("DEL").arg(&step.key).to_owned())
                    .await?;
                Ok(VerifyOutcome::Verified)
            }
        }
    }

    /// The login's own work after a successful GET.
    async fn login_work(&self) {
        if !self.gap.is_zero() {
            tokio::time::sleep(self.gap).await;
        }
    }
}

#[async_trait]
impl CodeStore for LegacyRedisStore {
    /// `SET verify_code:<phone> <code> EX <ttl>`: overwrites any pending code, every time.
    async fn issue_code(
        &self,
        destination: &Destination,
        _purpose: &Purpose,
        candidate: CodeCandidate,
        params: &IssueParams,
        _budgets: Budgets<'_>,
    ) -> Result<IssueOutcome, StoreError> {
        let command = redis::cmd("SET")
            .arg(key(destination))
            .arg(hex::encode(candidate.digest.as_bytes()))
            .arg("EX")
            .arg(params.ttl.as_secs().max(1))
            .to_owned();
        self.query::<()>(command).await?;
        Ok(IssueOutcome::Send(IssuedCode {
            sealed: None,
            // The Go service could not tell whether it overwrote a code.
            kind: IssueKind::Created,
            budgets_reserved: false,
            undo: IssueUndo {
                verification: candidate.verification,
                quota_token: QuotaToken(0),
                digest: candidate.digest,
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
        _destination: &Destination,
        _purpose: &Purpose,
        _undo: &IssueUndo,
    ) -> Result<bool, StoreError> {
        Ok(false)
    }

    /// `GET` and compare, then the flavour's order of the login's work and the `DEL`.
    async fn verify_code(
        &self,
        destination: &Destination,
        _purpose: &Purpose,
        candidates: &[CodeDigest],
        _client: crate::domain::Client,
        params: VerifyParams,
    ) -> Result<VerifyOutcome, StoreError> {
        let step = self.read_step(destination, candidates).await?;
        let matched = step.matched();
        match self.flavour {
            Legacy::Original => {
                if matched {
                    self.login_work().await;
                }
                self.finish_verify(step, params.max_attempts).await
            }
            Legacy::PostmortemFix => {
                let outcome = self.finish_verify(step, params.max_attempts).await?;
                if matched {
                    self.login_work().await;
                }
                Ok(outcome)
            }
        }
    }

    /// The legacy key's code; attempts are never counted and each SET is one delivery.
    async fn pending_code(
        &self,
        destination: &Destination,
        _purpose: &Purpose,
    ) -> Result<Option<PendingCode>, StoreError> {
        let stored: Option<String> = self
            .query(redis::cmd("GET").arg(key(destination)).to_owned())
            .await?;
        Ok(stored
            .as_deref()
            .and_then(parse_digest)
            .map(|digest| PendingCode {
                digest,
                sealed: None,
                failed_attempts: 0,
                deliveries: 1,
            }))
    }

    /// The Go service knew no verification ids (the reproduction verifies by destination).
    async fn locate_verification(
        &self,
        _id: &VerificationId,
    ) -> Result<Option<VerificationTarget>, StoreError> {
        Ok(None)
    }

    async fn verify_by_id(
        &self,
        _destination: &Destination,
        _purpose: &Purpose,
        _id: &VerificationId,
        _candidates: &[CodeDigest],
        _client: crate::domain::Client,
        _params: VerifyParams,
    ) -> Result<VerifyOutcome, StoreError> {
        Ok(VerifyOutcome::CodeExpired)
    }

    async fn verification(
        &self,
        _id: &VerificationId,
        _located: Option<&VerificationTarget>,
    ) -> Result<Option<VerificationRecord>, StoreError> {
        Ok(None)
    }

    async fn cancel_verification(
        &self,
        _id: &VerificationId,
        _located: Option<&VerificationTarget>,
    ) -> Result<Option<VerificationRecord>, StoreError> {
        Ok(None)
    }

    async fn mark_unconfirmed(
        &self,
        _destination: &Destination,
        _id: &VerificationId,
    ) -> Result<(), StoreError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Phone, Region};

    #[test]
    fn the_legacy_key_is_the_go_services() {
        let phone = Phone::parse("13800138000", Region::default()).unwrap();
        assert_eq!(key(&phone.into()), "verify_code:+8613800138000");
    }
}
