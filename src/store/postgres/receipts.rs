//! The PostgreSQL store's delivery receipts: `vcode_messages` leads a provider's message to its
//! verification (one `INSERT` after the SMS went out); `vcode_receipt` moves the verification's
//! delivery under its row lock, in one call (migration 0005), which appends a final word's event
//! (migration 0007).

use std::time::Duration;

use async_trait::async_trait;

use super::unix_ms;
use super::{PostgresStore, column, millis};
use crate::domain::VerificationId;
use crate::store::{
    DeliveryCount, DeliveryStatus, DeliveryTransition, Receipt, ReceiptOutcome, ReceiptStore,
    SendMark, SentMessage, StoreError, VerificationTarget,
};

const RECORD: &str = "INSERT INTO vcode_messages
                        (provider, message_id, verification, expires_at_ms, country,
                         guard_minute, guard_token)
                      VALUES ($1, $2, $3, vcode_now_ms() + $4, $5, $6, $7)
                      ON CONFLICT (provider, message_id) DO UPDATE
                      SET verification = excluded.verification,
                          expires_at_ms = excluded.expires_at_ms,
                          country = excluded.country,
                          guard_minute = excluded.guard_minute,
                          guard_token = excluded.guard_token";
const COUNTS: &str = "SELECT hour, provider, country, delivered, undelivered
                      FROM vcode_delivery_counts WHERE hour >= $1
                      ORDER BY hour, provider, country";
/// The receipt's step, and the guard's mark its message keeps (migration 0012).
const RECEIPT: &str = "SELECT r.*, m.guard_minute, m.guard_token
                       FROM vcode_receipt($1, $2, $3, $4) r
                       LEFT JOIN vcode_messages m ON m.provider = $1 AND m.message_id = $2";

/// A delivery as the columns spell it.
pub(super) fn delivery_of(text: &str) -> Result<DeliveryStatus, StoreError> {
    Ok(match text {
        "sent" => DeliveryStatus::Sent,
        "unconfirmed" => DeliveryStatus::Unconfirmed,
        "delivered" => DeliveryStatus::Delivered,
        "undelivered" => DeliveryStatus::Undelivered,
        other => return Err(StoreError::Protocol(format!("delivery {other:?}"))),
    })
}

#[async_trait]
impl ReceiptStore for PostgresStore {
    async fn record_message(
        &self,
        message: &SentMessage<'_>,
        keep: Duration,
    ) -> Result<(), StoreError> {
        let SentMessage {
            destination,
            verification: id,
            provider,
            message_id,
            guarded,
            ..
        } = *message;
        // The receipt counts under the country (migration 0009): the function cannot tell it.
        let country = destination.country();
        let guard_minute = guarded.map(|mark| mark.minute as i64);
        let guard_token = guarded.map(|mark| mark.token as i64);
        self.query(
            RECORD,
            &[
                &provider,
                &message_id,
                &id.as_str(),
                &millis(keep),
                &country,
                &guard_minute,
                &guard_token,
            ],
        )
        .await?;
        Ok(())
    }

    async fn apply_receipt(&self, receipt: &Receipt<'_>) -> Result<ReceiptOutcome, StoreError> {
        let row = self
            .query_one(
                RECEIPT,
                &[
                    &receipt.provider,
                    &receipt.message_id,
                    &receipt.delivery.as_str(),
                    &receipt.error_code,
                ],
            )
            .await?;
        match column::<i32>(&row, 0)? {
            0 => return Ok(ReceiptOutcome::Unknown),
            1 => return Ok(ReceiptOutcome::Unchanged),
            _ => {}
        }
        let id: String = column(&row, 1)?;
        let previous: String = column(&row, 4)?;
        let guard_minute: Option<i64> = column(&row, 7)?;
        let guard_token: Option<i64> = column(&row, 8)?;
        Ok(ReceiptOutcome::Changed(DeliveryTransition {
            verification: VerificationId::parse(&id)
                .ok_or_else(|| StoreError::Protocol(format!("verification id {id:?}")))?,
            target: VerificationTarget {
                phone_e164: column(&row, 2)?,
                purpose: column(&row, 3)?,
            },
            provider: receipt.provider.to_owned(),
            message_id: receipt.message_id.to_owned(),
            previous: delivery_of(&previous)?,
            delivery: receipt.delivery,
            error_code: receipt.error_code.map(str::to_owned),
            created_at_ms: unix_ms(column(&row, 5)?)?,
            guarded: guard_minute
                .zip(guard_token)
                .map(|(minute, token)| SendMark {
                    minute: minute as u64,
                    token: token as u64,
                }),
            changed_at_ms: unix_ms(column(&row, 6)?)?,
        }))
    }

    async fn delivery_counts(&self, from_hour: u64) -> Result<Vec<DeliveryCount>, StoreError> {
        let from = i64::try_from(from_hour).unwrap_or(i64::MAX);
        let rows = self.query(COUNTS, &[&from]).await?;
        let number = |row, at| {
            let value: i64 = column(row, at)?;
            u64::try_from(value).map_err(|_| StoreError::Protocol(format!("count {value}")))
        };
        rows.iter()
            .map(|row| {
                Ok(DeliveryCount {
                    hour: number(row, 0)?,
                    provider: column(row, 1)?,
                    country: column(row, 2)?,
                    delivered: number(row, 3)?,
                    undelivered: number(row, 4)?,
                })
            })
            .collect()
    }
}
