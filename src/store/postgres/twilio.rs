//! The PostgreSQL store's Twilio-compatible records (`migrations/0006_twilio_services.sql`):
//! each read and each compare-and-set is one statement.

use std::time::Duration;

use async_trait::async_trait;

use super::{PostgresStore, column, millis};
use crate::domain::Destination;
use crate::store::{Revised, StoreError, TwilioStore};

fn revised(row: &tokio_postgres::Row) -> Result<Revised, StoreError> {
    let revision: i64 = column(row, 0)?;
    Ok(Revised {
        revision: u64::try_from(revision).unwrap_or(0),
        body: column(row, 1)?,
    })
}

fn revision(expected: u64) -> i64 {
    i64::try_from(expected).unwrap_or(i64::MAX)
}

#[async_trait]
impl TwilioStore for PostgresStore {
    async fn twilio_services(&self, account: &str) -> Result<Vec<(String, Revised)>, StoreError> {
        let rows = self
            .query(
                "SELECT revision, body, sid FROM vcode_twilio_services WHERE account_sid = $1",
                &[&account],
            )
            .await?;
        rows.iter()
            .map(|row| Ok((column(row, 2)?, revised(row)?)))
            .collect()
    }

    async fn twilio_service(
        &self,
        account: &str,
        sid: &str,
    ) -> Result<Option<Revised>, StoreError> {
        let rows = self
            .query(
                "SELECT revision, body FROM vcode_twilio_services
                 WHERE account_sid = $1 AND sid = $2",
                &[&account, &sid],
            )
            .await?;
        rows.first().map(revised).transpose()
    }

    async fn put_twilio_service(
        &self,
        account: &str,
        sid: &str,
        expected: Option<u64>,
        body: &str,
    ) -> Result<bool, StoreError> {
        let rows = match expected {
            None => {
                self.query(
                    "INSERT INTO vcode_twilio_services (account_sid, sid, revision, body)
                     VALUES ($1, $2, 1, $3) ON CONFLICT DO NOTHING RETURNING 1",
                    &[&account, &sid, &body],
                )
                .await?
            }
            Some(expected) => {
                self.query(
                    "UPDATE vcode_twilio_services SET revision = revision + 1, body = $4
                     WHERE account_sid = $1 AND sid = $2 AND revision = $3 RETURNING 1",
                    &[&account, &sid, &revision(expected), &body],
                )
                .await?
            }
        };
        Ok(!rows.is_empty())
    }

    async fn delete_twilio_service(&self, account: &str, sid: &str) -> Result<bool, StoreError> {
        let rows = self
            .query(
                "DELETE FROM vcode_twilio_services WHERE account_sid = $1 AND sid = $2
                 RETURNING 1",
                &[&account, &sid],
            )
            .await?;
        Ok(!rows.is_empty())
    }

    // The `phone` column holds the destination's key (an E.164 or a folded address), as
    // `vcode_codes.phone` does since email.
    async fn twilio_sends(
        &self,
        service: &str,
        destination: &Destination,
    ) -> Result<Option<Revised>, StoreError> {
        let rows = self
            .query(
                "SELECT revision, body FROM vcode_twilio_sends
                 WHERE service_sid = $1 AND phone = $2 AND expires_at_ms > vcode_now_ms()",
                &[&service, &destination.key()],
            )
            .await?;
        rows.first().map(revised).transpose()
    }

    async fn put_twilio_sends(
        &self,
        service: &str,
        destination: &Destination,
        expected: Option<u64>,
        body: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let ttl = millis(ttl);
        let rows = match expected {
            // An expired row is as good as none.
            None => {
                self.query(
                    "INSERT INTO vcode_twilio_sends AS log
                       (service_sid, phone, revision, body, expires_at_ms)
                     VALUES ($1, $2, 1, $3, vcode_now_ms() + $4)
                     ON CONFLICT (service_sid, phone) DO UPDATE
                       SET revision = 1, body = EXCLUDED.body,
                           expires_at_ms = EXCLUDED.expires_at_ms
                       WHERE log.expires_at_ms <= vcode_now_ms()
                     RETURNING 1",
                    &[&service, &destination.key(), &body, &ttl],
                )
                .await?
            }
            Some(expected) => {
                self.query(
                    "UPDATE vcode_twilio_sends
                     SET revision = revision + 1, body = $4,
                         expires_at_ms = vcode_now_ms() + $5
                     WHERE service_sid = $1 AND phone = $2 AND revision = $3
                       AND expires_at_ms > vcode_now_ms()
                     RETURNING 1",
                    &[
                        &service,
                        &destination.key(),
                        &revision(expected),
                        &body,
                        &ttl,
                    ],
                )
                .await?
            }
        };
        Ok(!rows.is_empty())
    }
}
