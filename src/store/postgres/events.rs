//! The event outbox of the PostgreSQL store (`migrations/0004_events.sql`): triggers write the
//! events in the transaction of the change they describe; a claim is one function, a settle
//! one statement guarded by the claim's lease.

use std::time::Duration;

use async_trait::async_trait;
use tokio_postgres::Row;

use super::{PostgresStore, column, millis};
use crate::store::events::CLAIM_WINDOW;
use crate::store::{
    ClaimedEntry, EventStore, Fact, FailedEntry, OutboxEntry, OutboxStatus, Settlement, StoreError,
};

fn bigint(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn unsigned(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// An outbox row (`seq` … `lease` first): the event, its tries, the endpoints that took it,
/// its lease.
fn event_of(row: &Row) -> Result<ClaimedEntry, StoreError> {
    let fact: String = column(row, 1)?;
    let event = OutboxEntry {
        seq: unsigned(column(row, 0)?),
        fact: Fact::parse(&fact)
            .ok_or_else(|| StoreError::Protocol(format!("outbox fact {fact:?}")))?,
        subject: column(row, 2)?,
        phone_e164: column(row, 3)?,
        purpose: column(row, 4)?,
        at_ms: unsigned(column(row, 5)?),
        order_ms: unsigned(column(row, 6)?),
        detail: column(row, 7)?,
    };
    let attempts: i32 = column(row, 8)?;
    let delivered_to: i64 = column(row, 9)?;
    let lease: i64 = column(row, 10)?;
    Ok(ClaimedEntry {
        event,
        attempts: u32::try_from(attempts).unwrap_or(0),
        delivered_to: delivered_to as u64,
        lease: lease as u64,
    })
}

#[async_trait]
impl EventStore for PostgresStore {
    /// The database records events once any instance sharing it has turned them on (its
    /// triggers enabled): the outbox is the shared store's, and that instance delivers what the
    /// others write. Off is left to the operator (`ALTER TABLE … DISABLE TRIGGER`).
    async fn record_events(&self, on: bool) -> Result<(), StoreError> {
        if !on {
            return Ok(());
        }
        self.query("SELECT vcode_events_record()", &[])
            .await
            .map(drop)
    }

    async fn claim_events(
        &self,
        limit: usize,
        lease: Duration,
    ) -> Result<Vec<ClaimedEntry>, StoreError> {
        let limit = i32::try_from(limit).unwrap_or(i32::MAX);
        let window = CLAIM_WINDOW as i32;
        self.query(
            "SELECT seq, fact, subject, phone, purpose, at_ms, order_ms, detail, attempts,
                    delivered_to, lease, failed_at_ms, error
             FROM vcode_events_claim($1, $2, $3) ORDER BY seq",
            &[&limit, &window, &millis(lease)],
        )
        .await?
        .iter()
        .map(event_of)
        .collect()
    }

    async fn settle_event(
        &self,
        claim: &ClaimedEntry,
        settlement: &Settlement,
    ) -> Result<bool, StoreError> {
        let seq = bigint(claim.event.seq);
        let lease = claim.lease as i64;
        let rows = match settlement {
            Settlement::Done => {
                self.query(
                    "DELETE FROM vcode_event_outbox WHERE seq = $1 AND lease = $2
                     AND failed_at_ms IS NULL RETURNING seq",
                    &[&seq, &lease],
                )
                .await?
            }
            Settlement::Retry {
                due_ms,
                delivered_to,
                error,
            } => {
                self.query(
                    "UPDATE vcode_event_outbox SET due_ms = $3, delivered_to = $4, error = $5,
                       attempts = attempts + 1, lease = 0
                     WHERE seq = $1 AND lease = $2 AND failed_at_ms IS NULL RETURNING seq",
                    &[
                        &seq,
                        &lease,
                        &bigint(*due_ms),
                        &(*delivered_to as i64),
                        error,
                    ],
                )
                .await?
            }
            Settlement::Failed {
                delivered_to,
                error,
            } => {
                self.query(
                    "UPDATE vcode_event_outbox SET failed_at_ms = vcode_now_ms(),
                       delivered_to = $3, error = $4, attempts = attempts + 1, lease = 0
                     WHERE seq = $1 AND lease = $2 AND failed_at_ms IS NULL RETURNING seq",
                    &[&seq, &lease, &(*delivered_to as i64), error],
                )
                .await?
            }
        };
        Ok(!rows.is_empty())
    }

    async fn failed_events(&self, limit: usize) -> Result<Vec<FailedEntry>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.query(
            "SELECT seq, fact, subject, phone, purpose, at_ms, order_ms, detail, attempts,
                    delivered_to, lease, failed_at_ms, error
             FROM vcode_event_outbox WHERE failed_at_ms IS NOT NULL ORDER BY seq LIMIT $1",
            &[&limit],
        )
        .await?
        .iter()
        .map(|row| {
            let ClaimedEntry {
                event,
                attempts,
                delivered_to,
                ..
            } = event_of(row)?;
            Ok(FailedEntry {
                event,
                attempts,
                delivered_to,
                error: column(row, 12)?,
                failed_at_ms: unsigned(column::<Option<i64>>(row, 11)?.unwrap_or(0)),
            })
        })
        .collect()
    }

    async fn replay_failed(&self, seqs: &[u64]) -> Result<u64, StoreError> {
        let seqs: Vec<i64> = seqs.iter().map(|seq| bigint(*seq)).collect();
        let rows = self
            .query(
                "UPDATE vcode_event_outbox SET failed_at_ms = NULL, attempts = 0, lease = 0,
                   due_ms = vcode_now_ms()
                 WHERE failed_at_ms IS NOT NULL AND (cardinality($1::bigint[]) = 0 OR seq = ANY($1))
                 RETURNING seq",
                &[&seqs],
            )
            .await?;
        Ok(rows.len() as u64)
    }

    async fn outbox_status(&self) -> Result<OutboxStatus, StoreError> {
        let row = self
            .query(
                "SELECT count(*) FILTER (WHERE failed_at_ms IS NULL AND order_ms <= vcode_now_ms()),
                        min(order_ms) FILTER (WHERE failed_at_ms IS NULL AND order_ms <= vcode_now_ms()),
                        count(*) FILTER (WHERE failed_at_ms IS NOT NULL)
                 FROM vcode_event_outbox",
                &[],
            )
            .await?;
        let row = row
            .first()
            .ok_or_else(|| StoreError::Protocol("outbox status: no row".into()))?;
        Ok(OutboxStatus {
            pending: unsigned(column(row, 0)?),
            oldest_ms: column::<Option<i64>>(row, 1)?.map(unsigned),
            failed: unsigned(column(row, 2)?),
        })
    }
}
