//! The code role of the PostgreSQL store: issue, undo, verify, inspect, each one function call
//! (one transaction) that serialises on the phone's advisory lock. A verify is only the code's:
//! the traffic report counts its conversion apart (`FraudStore::add_traffic`).

use std::time::Duration;

use async_trait::async_trait;
use tokio_postgres::types::{ToSql, Type};

use super::{PostgresStore, as_bigint, column, millis, ms_duration, rule_arrays, unix_ms};
use crate::domain::{CodeDigest, Destination, Purpose, SealedCode, VerificationId};
use crate::store::{
    Budgets, Candidates, CodeCandidate, CodeStore, DeliveryStatus, IssueKind, IssueOutcome,
    IssueParams, IssueUndo, IssuedCode, PendingCode, PreviousIssue, QuotaToken, ResendPolicy,
    StoreError, VerificationRecord, VerificationStatus, VerificationTarget, VerifyOutcome,
    VerifyParams, VerifyStep,
};

const ISSUE: &str =
    "SELECT * FROM vcode_issue($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)";
/// `vcode_issue`'s thirteen arguments, then the guard's three (`fraud::BlockArgs`): the issue
/// with a read of the prefix's block (functions.sql).
pub(super) const ISSUE_GUARDED: &str = "SELECT * FROM vcode_issue_guarded($1, $2, $3, $4, $5, $6, $7, $8, \
     $9, $10, $11, $12, $13, $14, $15, $16)";
/// The same, then the levels' shard token and six arguments (`levels::LevelArgs`): the send's
/// levels counted in its statement (`vcode_issue_guarded_levels`).
pub(super) const ISSUE_GUARDED_LEVELS: &str = "SELECT * FROM vcode_issue_guarded_levels($1, $2, \
     $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, \
     $23)";
const UNDO: &str = "SELECT vcode_undo_issue($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)";
const UNDO_TYPES: [Type; 11] = [
    Type::TEXT,
    Type::TEXT,
    Type::BYTEA,
    Type::INT8,
    Type::INT4,
    Type::INT8,
    Type::BYTEA,
    Type::BYTEA,
    Type::INT8,
    Type::INT8,
    Type::TEXT,
];
const VERIFY: &str = "SELECT * FROM vcode_verify($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";
const VERIFY_BY_ID: &str =
    "SELECT * FROM vcode_verify_by_id($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)";
const LOCATE: &str = "SELECT phone, purpose FROM vcode_verifications
                      WHERE id = $1 AND expires_at_ms > vcode_now_ms()";
/// With the receipts' columns (0005), read in the same statement.
const VERIFICATION: &str = "SELECT r.*, v.delivery, v.delivery_error
                            FROM vcode_verification($1, $2) r
                            LEFT JOIN vcode_verifications v ON v.id = $1";
const UNCONFIRMED: &str = "UPDATE vcode_verifications SET unconfirmed = true WHERE id = $1";
const PENDING: &str = "SELECT digest, sealed, failed_attempts, deliveries FROM vcode_codes
                       WHERE phone = $1 AND purpose = $2 AND expires_at_ms > vcode_now_ms()";

fn digest(bytes: Vec<u8>) -> Result<CodeDigest, StoreError> {
    CodeDigest::from_slice(&bytes).ok_or_else(|| StoreError::Protocol("code digest".to_owned()))
}

fn sealed(bytes: Option<Vec<u8>>) -> Option<SealedCode> {
    bytes.map(|bytes| SealedCode(bytes.into()))
}

fn count(value: i32) -> Result<u32, StoreError> {
    u32::try_from(value).map_err(|_| StoreError::Protocol(format!("count {value}")))
}

/// `vcode_issue`'s answer (the first ten columns of `vcode_issue_guarded`'s) but a run too late.
pub(super) fn issue_outcome(
    row: &tokio_postgres::Row,
    candidate: CodeCandidate,
    quota_token: QuotaToken,
) -> Result<IssueOutcome, StoreError> {
    let kind = match column::<i32>(row, 0)? {
        0 => {
            return Ok(IssueOutcome::Cooldown {
                retry_after: ms_duration(column(row, 1)?),
            });
        }
        -1 => {
            return Ok(IssueOutcome::QuotaExceeded {
                retry_after: ms_duration(column(row, 1)?),
            });
        }
        1 => IssueKind::Created,
        2 => IssueKind::Redelivered,
        3 => IssueKind::Rotated,
        other => return Err(StoreError::Protocol(format!("issue kind {other}"))),
    };
    let previous = match kind {
        IssueKind::Created => None,
        _ => Some(PreviousIssue {
            digest: digest(column(row, 6)?)?,
            sealed: sealed(column(row, 7)?),
            sent_at_ms: unix_ms(column(row, 8)?)?,
            expires_at_ms: unix_ms(column(row, 9)?)?,
            latest_send: None,
        }),
    };
    Ok(IssueOutcome::Send(IssuedCode {
        sealed: match kind {
            IssueKind::Redelivered => sealed(column(row, 3)?),
            _ => None,
        },
        kind,
        budgets_reserved: false,
        undo: IssueUndo {
            verification: candidate.verification,
            quota_token,
            digest: digest(column(row, 2)?)?,
            sent_at_ms: unix_ms(column(row, 4)?)?,
            deliveries: count(column(row, 5)?)?,
            previous,
        },
    }))
}

/// `vcode_verify`'s and `vcode_verify_by_id`'s answer.
fn verify_outcome(row: &tokio_postgres::Row) -> Result<VerifyOutcome, StoreError> {
    let value: Option<i64> = column(row, 1)?;
    let value = value.unwrap_or(0);
    Ok(match column::<i32>(row, 0)? {
        1 => VerifyOutcome::Verified,
        0 => VerifyOutcome::Mismatch {
            remaining_attempts: u32::try_from(value).unwrap_or(0),
        },
        -1 => VerifyOutcome::CodeExpired,
        -2 => VerifyOutcome::Destroyed,
        -3 => VerifyOutcome::QuotaExceeded {
            retry_after: Duration::from_millis(u64::try_from(value).unwrap_or(0)),
        },
        -4 => VerifyOutcome::Canceled,
        other => return Err(StoreError::Protocol(format!("verify outcome {other}"))),
    })
}

/// `vcode_issue`'s arguments (the first thirteen of `vcode_issue_guarded`'s).
pub(super) struct IssueArgs<'a> {
    destination: &'a str,
    purpose: &'a str,
    digest: &'a [u8],
    sealed: Option<&'a [u8]>,
    ttl_ms: i64,
    cooldown_ms: i64,
    rotate: bool,
    quota_token: i64,
    /// The time after which the statement must not run (`give_up_at_ms`).
    not_after_ms: i64,
    limits: &'a [i32],
    windows: &'a [i64],
    verification: &'a str,
    retention_ms: i64,
}

impl<'a> IssueArgs<'a> {
    pub(super) fn of(
        destination: &'a Destination,
        purpose: &'a Purpose,
        candidate: &'a CodeCandidate,
        (params, quota_token, not_after_ms): (&IssueParams, QuotaToken, i64),
        (limits, windows): (&'a [i32], &'a [i64]),
    ) -> Self {
        Self {
            destination: destination.key(),
            purpose: purpose.as_str(),
            digest: candidate.digest.as_bytes(),
            sealed: candidate.sealed.as_ref().map(|sealed| &sealed.0[..]),
            ttl_ms: millis(params.ttl),
            cooldown_ms: millis(params.cooldown),
            rotate: params.policy == ResendPolicy::Rotate,
            quota_token: as_bigint(quota_token.0),
            not_after_ms,
            limits,
            windows,
            verification: candidate.verification.as_str(),
            retention_ms: millis(params.retention),
        }
    }

    pub(super) fn params(&self) -> [&(dyn ToSql + Sync); 13] {
        [
            &self.destination,
            &self.purpose,
            &self.digest,
            &self.sealed,
            &self.ttl_ms,
            &self.cooldown_ms,
            &self.rotate,
            &self.quota_token,
            &self.not_after_ms,
            &self.limits,
            &self.windows,
            &self.verification,
            &self.retention_ms,
        ]
    }
}

impl PostgresStore {
    /// `vcode_verify_by_id` (by id) or `vcode_verify` (by destination): the same arguments
    /// but the id, after the purpose.
    async fn call_verify(&self, step: VerifyStep<'_>) -> Result<VerifyOutcome, StoreError> {
        let VerifyStep {
            destination,
            purpose,
            id,
            candidates,
            client,
            params,
        } = step;
        let statement = if id.is_some() { VERIFY_BY_ID } else { VERIFY };
        let (phone_limits, phone_windows) = rule_arrays(params.destination_failures.as_slice());
        let (client_limits, client_windows) = rule_arrays(params.client_failures.as_slice());
        let candidates: Vec<&[u8]> = candidates
            .digests()
            .iter()
            .map(CodeDigest::as_bytes)
            .collect();
        let (e164, purpose, id) = (
            destination.key(),
            purpose.as_str(),
            id.map(VerificationId::as_str),
        );
        let (client, max_attempts) = (
            client.to_string(),
            i32::try_from(params.max_attempts).unwrap_or(i32::MAX),
        );
        let token = as_bigint(QuotaToken::generate().0);
        let mut arguments: Vec<&(dyn ToSql + Sync)> = vec![&e164, &purpose];
        if let Some(id) = &id {
            arguments.push(id);
        }
        arguments.extend([
            &client as &(dyn ToSql + Sync),
            &candidates,
            &max_attempts,
            &token,
            &phone_limits,
            &phone_windows,
            &client_limits,
            &client_windows,
        ]);
        let row = self.query_one(statement, &arguments).await?;
        verify_outcome(&row)
    }
}

#[async_trait]
impl CodeStore for PostgresStore {
    /// One statement, by id or by destination (the default's two calls are the same).
    async fn verify(&self, step: VerifyStep<'_>) -> Result<VerifyOutcome, StoreError> {
        self.call_verify(step).await
    }

    async fn issue_code(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        candidate: CodeCandidate,
        params: &IssueParams,
        _budgets: Budgets<'_>,
    ) -> Result<IssueOutcome, StoreError> {
        let quota_token = QuotaToken::generate();
        let (limits, windows) = rule_arrays(&params.destination_quota);
        let args = IssueArgs::of(
            destination,
            purpose,
            &candidate,
            (params, quota_token, self.give_up_at_ms()),
            (&limits, &windows),
        );
        let row = self.query_one(ISSUE, &args.params()).await?;
        if column::<i32>(&row, 0)? == -2 {
            return Err(self.ran_too_late());
        }
        issue_outcome(&row, candidate, quota_token)
    }

    async fn undo_issue(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        undo: &IssueUndo,
    ) -> Result<bool, StoreError> {
        let previous = undo.previous.as_ref();
        // At once: an undo that meets a stalled server must still run when it resumes.
        let rows = self
            .query_at_once(
                UNDO,
                &[
                    &destination.key(),
                    &purpose.as_str(),
                    &undo.digest.as_bytes(),
                    &(undo.sent_at_ms as i64),
                    &(undo.deliveries as i32),
                    &as_bigint(undo.quota_token.0),
                    &previous.map(|p| p.digest.as_bytes()),
                    &previous.and_then(|p| p.sealed.as_ref().map(|sealed| &sealed.0[..])),
                    &previous.map(|p| p.sent_at_ms as i64),
                    &previous.map(|p| p.expires_at_ms as i64),
                    &undo.verification.as_str(),
                ],
                &UNDO_TYPES,
            )
            .await?;
        let row = rows
            .first()
            .ok_or_else(|| StoreError::Protocol(format!("no row from {UNDO}")))?;
        column(row, 0)
    }

    async fn verify_code(
        &self,
        destination: &Destination,
        purpose: &Purpose,
        candidates: &[CodeDigest],
        client: crate::domain::Client,
        params: VerifyParams,
    ) -> Result<VerifyOutcome, StoreError> {
        let step = VerifyStep {
            destination,
            purpose,
            id: None,
            candidates: &Candidates::known(candidates),
            client,
            params,
        };
        self.call_verify(step).await
    }

    async fn pending_code(
        &self,
        destination: &Destination,
        purpose: &Purpose,
    ) -> Result<Option<PendingCode>, StoreError> {
        let rows = self
            .query(PENDING, &[&destination.key(), &purpose.as_str()])
            .await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        Ok(Some(PendingCode {
            digest: digest(column(row, 0)?)?,
            sealed: sealed(column(row, 1)?),
            failed_attempts: count(column(row, 2)?)?,
            deliveries: count(column(row, 3)?)?,
        }))
    }

    async fn locate_verification(
        &self,
        id: &VerificationId,
    ) -> Result<Option<VerificationTarget>, StoreError> {
        let rows = self.query(LOCATE, &[&id.as_str()]).await?;
        rows.first()
            .map(|row| {
                Ok(VerificationTarget {
                    phone_e164: column(row, 0)?,
                    purpose: column(row, 1)?,
                })
            })
            .transpose()
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
        let step = VerifyStep {
            destination,
            purpose,
            id: Some(id),
            candidates: &Candidates::known(candidates),
            client,
            params,
        };
        self.call_verify(step).await
    }

    async fn verification(
        &self,
        id: &VerificationId,
        _located: Option<&VerificationTarget>,
    ) -> Result<Option<VerificationRecord>, StoreError> {
        self.read_verification(id, false).await
    }

    async fn cancel_verification(
        &self,
        id: &VerificationId,
        _located: Option<&VerificationTarget>,
    ) -> Result<Option<VerificationRecord>, StoreError> {
        self.read_verification(id, true).await
    }

    async fn mark_unconfirmed(
        &self,
        _destination: &Destination,
        id: &VerificationId,
    ) -> Result<(), StoreError> {
        self.query(UNCONFIRMED, &[&id.as_str()]).await?;
        Ok(())
    }
}

impl PostgresStore {
    async fn read_verification(
        &self,
        id: &VerificationId,
        cancel: bool,
    ) -> Result<Option<VerificationRecord>, StoreError> {
        let rows = self.query(VERIFICATION, &[&id.as_str(), &cancel]).await?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let status: String = column(row, 2)?;
        let status = match status.as_str() {
            "pending" => VerificationStatus::Pending,
            "approved" => VerificationStatus::Approved,
            "canceled" => VerificationStatus::Canceled,
            "expired" => VerificationStatus::Expired,
            "max_attempts_reached" => VerificationStatus::MaxAttemptsReached,
            other => return Err(StoreError::Protocol(format!("verification status {other}"))),
        };
        let unconfirmed: bool = column(row, 3)?;
        let received: Option<String> = column(row, 7)?;
        Ok(Some(VerificationRecord {
            target: VerificationTarget {
                phone_e164: column(row, 0)?,
                purpose: column(row, 1)?,
            },
            status,
            delivery: match received.as_deref() {
                Some(text) => super::receipts::delivery_of(text)?,
                None if unconfirmed => DeliveryStatus::Unconfirmed,
                None => DeliveryStatus::Sent,
            },
            delivery_error: column(row, 8)?,
            failed_attempts: count(column(row, 4)?)?,
            created_at_ms: unix_ms(column(row, 5)?)?,
            expires_at_ms: unix_ms(column(row, 6)?)?,
        }))
    }
}
