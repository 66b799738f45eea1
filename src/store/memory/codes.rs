//! The code role of the embedded store: issue, undo, verify, inspect, each one atomic step.

use async_trait::async_trait;

use super::quotas::{budgets_exceeded, record_budgets};
use super::*;
use crate::store::{Admission, Candidates, CodeStore, GuardStep, GuardedIssue, VerifyStep};

/// A send that does not issue: nothing for the guard to count.
fn not_issued(outcome: IssueOutcome) -> GuardedIssue {
    GuardedIssue::Issued {
        outcome,
        admission: None,
    }
}

impl MemoryStore {
    /// The issue, with the send's budgets and the fraud guard's step of the send when there is
    /// one (`guard`), taken under the code's lock once the send is sure to deliver (no
    /// cooldown, the phone's quota and every budget have room) and before anything is written:
    /// a refused send leaves nothing but the refusal's count, and a counted one is issued and
    /// has its budgets reserved (`budgets_reserved`). Lock order: the code's shard, the phone's
    /// quota log's, the budgets' shards, the guard's counts.
    pub(super) fn issue_now(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        candidate: CodeCandidate,
        params: &IssueParams,
        budgets: Budgets<'_>,
        guard: Option<&GuardStep<'_>>,
    ) -> Result<GuardedIssue, StoreError> {
        let key = self.keys.code(destination, purpose);
        let sends_key = self.keys.sends(destination);
        let now = self.now_ms();
        let expires_at_ms = now.saturating_add(duration_ms(params.ttl));
        // Lock order everywhere: the code's shard, then the quota log's shard.
        let mut shard = self.codes.lock(key);
        let pending = shard.get_mut(&key).filter(|e| e.expires_at_ms > now);
        if let Some(entry) = &pending {
            let ready_at = entry
                .sent_at_ms
                .saturating_add(duration_ms(params.cooldown));
            if ready_at > now {
                let cooldown = IssueOutcome::Cooldown {
                    retry_after: Duration::from_millis(ready_at - now),
                };
                return Ok(not_issued(cooldown));
            }
        }
        let quota_token = QuotaToken::generate();
        let mut phone_logs =
            (!params.destination_quota.is_empty()).then(|| self.quotas.lock(sends_key));
        let mut phone_log = phone_logs
            .as_mut()
            .map(|logs| logs.entry(sends_key).or_default());
        if let Some(log) = phone_log.as_deref_mut() {
            let wait = log.wait(now, &params.destination_quota);
            if wait > 0 {
                let exceeded = IssueOutcome::QuotaExceeded {
                    retry_after: Duration::from_millis(wait),
                };
                return Ok(not_issued(exceeded));
            }
        }
        let mut budget_logs =
            (!budgets.budgets.is_empty()).then(|| self.lock_budgets(budgets.budgets));
        if let Some(logs) = budget_logs.as_mut()
            && let Some((scope, retry_after)) = budgets_exceeded(logs, budgets.budgets, now)
        {
            return Ok(not_issued(IssueOutcome::BudgetExceeded {
                scope,
                retry_after,
            }));
        }
        let admission = match self.admit_locked(guard) {
            Some(Admission::Refused(block)) => return Ok(GuardedIssue::Refused(block)),
            admission => admission,
        };
        if let Some(log) = phone_log {
            log.record(now, &params.destination_quota, quota_token);
        }
        if let Some(logs) = budget_logs.as_mut() {
            record_budgets(logs, budgets.budgets, now, budgets.token);
        }
        drop((phone_logs, budget_logs));
        let outcome = |outcome| GuardedIssue::Issued { outcome, admission };

        if let Some(entry) = pending {
            let previous = PreviousIssue {
                digest: entry.digest,
                sealed: entry.sealed.clone(),
                sent_at_ms: entry.sent_at_ms,
                expires_at_ms: entry.expires_at_ms,
                latest_send: Some(entry.verification.clone()),
            };
            let (kind, sealed) = match params.policy {
                ResendPolicy::Reuse => (IssueKind::Redelivered, entry.sealed.clone()),
                ResendPolicy::Rotate => {
                    entry.digest = candidate.digest;
                    entry.sealed = candidate.sealed;
                    (IssueKind::Rotated, None)
                }
            };
            entry.deliveries += 1;
            entry.sent_at_ms = now;
            entry.expires_at_ms = expires_at_ms;
            entry.verification = candidate.verification.clone();
            self.bind_verification(
                destination,
                purpose,
                &candidate.verification,
                entry.digest,
                now,
                params,
            );
            return Ok(outcome(IssueOutcome::Send(IssuedCode {
                sealed,
                kind,
                budgets_reserved: true,
                undo: IssueUndo {
                    verification: candidate.verification,
                    quota_token,
                    digest: entry.digest,
                    sent_at_ms: now,
                    deliveries: entry.deliveries,
                    previous: Some(previous),
                },
            })));
        }
        self.bind_verification(
            destination,
            purpose,
            &candidate.verification,
            candidate.digest,
            now,
            params,
        );
        shard.insert(
            key,
            PendingEntry {
                digest: candidate.digest,
                sealed: candidate.sealed,
                failed_attempts: 0,
                deliveries: 1,
                sent_at_ms: now,
                expires_at_ms,
                verification: candidate.verification.clone(),
            },
        );
        Ok(outcome(IssueOutcome::Send(IssuedCode {
            sealed: None,
            kind: IssueKind::Created,
            budgets_reserved: true,
            undo: IssueUndo {
                verification: candidate.verification,
                quota_token,
                digest: candidate.digest,
                sent_at_ms: now,
                deliveries: 1,
                previous: None,
            },
        })))
    }

    /// `CodeStore::verify_code`, answered at once: the verify path calls it without the
    /// trait's boxed future (`fused.rs`). The candidates are made only once a pending code is
    /// there to compare, under its shard's lock (a miss makes none).
    pub(super) fn verify_code_now(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        candidates: &Candidates<'_>,
        client: crate::domain::Client,
        params: VerifyParams,
    ) -> VerifyOutcome {
        let key = self.keys.code(destination, purpose);
        let now = self.now_ms();
        let mut shard = self.codes.lock(key);
        // The code's latest send's verification takes the outcome (verifications.rs); its
        // shard is locked before the logs', as everywhere.
        let latest = shard.get(&key).map(|entry| {
            let id = entry.verification.clone();
            let key = self.keys.verification(&id);
            (id, key)
        });
        let mut verifications = latest
            .as_ref()
            .map(|(_, key)| self.verifications.lock(*key));
        let mut limits = FailureLimits::lock(self, destination, client, &params);
        let wait = limits.wait(now);
        if wait > 0 {
            return VerifyOutcome::QuotaExceeded {
                retry_after: Duration::from_millis(wait),
            };
        }
        let Some(entry) = shard.get_mut(&key) else {
            return VerifyOutcome::CodeExpired;
        };
        if entry.expires_at_ms <= now {
            shard.remove(&key);
            return VerifyOutcome::CodeExpired;
        }
        let verification = match (&latest, verifications.as_deref_mut()) {
            (Some((_, id_key)), Some(verifications)) => {
                self.bound_verification(verifications, *id_key, entry.digest, now)
            }
            _ => None,
        };
        if entry.digest.is_any_of(candidates.digests()) {
            shard.remove(&key);
            if let (Some((id, _)), Some(verification)) = (&latest, verification) {
                self.approve_by_destination(id, verification);
            }
            return VerifyOutcome::Verified;
        }
        limits.record(now);
        entry.failed_attempts += 1;
        let destroyed = entry.failed_attempts >= params.max_attempts;
        if let (Some((id, _)), Some(verification)) = (&latest, verification) {
            self.fail_by_destination(id, verification, entry.failed_attempts, destroyed);
        }
        if destroyed {
            shard.remove(&key);
            return VerifyOutcome::Destroyed;
        }
        VerifyOutcome::Mismatch {
            remaining_attempts: params.max_attempts - entry.failed_attempts,
        }
    }
}

#[async_trait]
impl CodeStore for MemoryStore {
    async fn issue_code(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        candidate: CodeCandidate,
        params: &IssueParams,
        budgets: Budgets<'_>,
    ) -> Result<IssueOutcome, StoreError> {
        match self.issue_now(destination, purpose, candidate, params, budgets, None)? {
            GuardedIssue::Issued { outcome, .. } => Ok(outcome),
            GuardedIssue::Refused(_) => Err(StoreError::Protocol(
                "issue: a guard's answer unasked".to_owned(),
            )),
        }
    }

    async fn undo_issue(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        undo: &IssueUndo,
    ) -> Result<bool, StoreError> {
        let key = self.keys.code(destination, purpose);
        let sends_key = self.keys.sends(destination);
        let now = self.now_ms();
        let mut shard = self.codes.lock(key);
        let id_key = self.keys.verification(&undo.verification);
        self.verifications.lock(id_key).remove(&id_key);
        self.events.forget_subject(undo.verification.as_str());
        if let Some(log) = self.quotas.lock(sends_key).get_mut(&sends_key) {
            log.remove(undo.quota_token);
        }
        let Some(entry) = shard.get_mut(&key) else {
            return Ok(false);
        };
        let unchanged = entry.digest.is_any_of(std::slice::from_ref(&undo.digest))
            && entry.sent_at_ms == undo.sent_at_ms
            && entry.deliveries == undo.deliveries;
        if !unchanged {
            return Ok(false);
        }
        match &undo.previous {
            Some(previous) if previous.expires_at_ms > now => {
                entry.digest = previous.digest;
                entry.sealed = previous.sealed.clone();
                entry.sent_at_ms = previous.sent_at_ms;
                entry.expires_at_ms = previous.expires_at_ms;
                entry.deliveries -= 1;
                if let Some(latest) = &previous.latest_send {
                    entry.verification = latest.clone();
                }
            }
            _ => {
                shard.remove(&key);
            }
        }
        Ok(true)
    }

    /// The verify answered at once, not through `verify_by_id`'s or `verify_code`'s boxed
    /// futures (an allocation more on every verify), and with the digests made only for a
    /// pending code (`Candidates::lazy`).
    async fn verify(&self, step: VerifyStep<'_>) -> Result<VerifyOutcome, StoreError> {
        let VerifyStep {
            destination,
            purpose,
            id,
            candidates,
            client,
            params,
        } = step;
        Ok(match id {
            Some(id) => {
                let candidates = candidates.digests();
                self.verify_id(destination, purpose, id, candidates, client, params)
            }
            None => self.verify_code_now(destination, purpose, candidates, client, params),
        })
    }

    async fn verify_code(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        candidates: &[CodeDigest],
        client: crate::domain::Client,
        params: VerifyParams,
    ) -> Result<VerifyOutcome, StoreError> {
        let candidates = Candidates::known(candidates);
        Ok(self.verify_code_now(destination, purpose, &candidates, client, params))
    }

    async fn pending_code(
        &self,
        destination: &Destination,
        purpose: &Purpose,
    ) -> Result<Option<PendingCode>, StoreError> {
        let key = self.keys.code(destination, purpose);
        let now = self.now_ms();
        Ok(self
            .codes
            .lock(key)
            .get(&key)
            .filter(|entry| entry.expires_at_ms > now)
            .map(|entry| PendingCode {
                digest: entry.digest,
                sealed: entry.sealed.clone(),
                failed_attempts: entry.failed_attempts,
                deliveries: entry.deliveries,
            }))
    }

    async fn locate_verification(
        &self,
        id: &VerificationId,
    ) -> Result<Option<VerificationTarget>, StoreError> {
        Ok(self.locate(id))
    }

    async fn verify_by_id(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        id: &VerificationId,
        candidates: &[CodeDigest],
        client: crate::domain::Client,
        params: VerifyParams,
    ) -> Result<VerifyOutcome, StoreError> {
        Ok(self.verify_id(destination, purpose, id, candidates, client, params))
    }

    async fn verification(
        &self,
        id: &VerificationId,
        _located: Option<&VerificationTarget>,
    ) -> Result<Option<VerificationRecord>, StoreError> {
        Ok(self.read_verification(id, false))
    }

    async fn cancel_verification(
        &self,
        id: &VerificationId,
        _located: Option<&VerificationTarget>,
    ) -> Result<Option<VerificationRecord>, StoreError> {
        Ok(self.read_verification(id, true))
    }

    async fn mark_unconfirmed(
        &self,
        _destination: &Destination,
        id: &VerificationId,
    ) -> Result<(), StoreError> {
        self.set_unconfirmed(id);
        Ok(())
    }
}
