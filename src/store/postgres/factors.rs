//! The PostgreSQL store's TOTP records (`migrations/0017_totp.sql`): each read, each
//! compare-and-set and an identity's delete is one statement.

use async_trait::async_trait;

use super::{PostgresStore, column};
use crate::store::{ENTITY, FactorStore, OutboxEntry, Revised, StoreError};

/// The fact and detail of `event` as the statements take them (`''`: none), and when.
fn fact_of(event: Option<&OutboxEntry>) -> (&str, &str, &str, i64) {
    event.map_or(("", "", "", 0), |event| {
        (
            event.fact.as_str(),
            event.subject.as_str(),
            event.detail.as_str(),
            i64::try_from(event.at_ms).unwrap_or(i64::MAX),
        )
    })
}

/// A statement that changes one row (`written`, a CTE) and appends its fact to the outbox in
/// the same statement, while events are recorded (the verifications' trigger is on, as
/// `vcode_events_record` leaves it): `$6` the fact (`''`: none), `$7` the subject, `$8` the
/// detail, `$9` when.
macro_rules! with_fact {
    ($written:literal) => {
        concat!(
            "WITH written AS (",
            $written,
            " RETURNING 1)
             SELECT (SELECT count(*) FROM (SELECT vcode_fact_append($6, $7, '', '', $9, $9, $8)
               WHERE $6 <> '' AND EXISTS (SELECT 1 FROM pg_trigger
                 WHERE tgrelid = 'vcode_verifications'::regclass
                   AND tgname = 'vcode_verification_events' AND tgenabled <> 'D')) appended)
             FROM written"
        )
    };
}

fn revised(row: &tokio_postgres::Row) -> Result<Revised, StoreError> {
    let revision: i64 = column(row, 0)?;
    Ok(Revised {
        revision: u64::try_from(revision).unwrap_or(0),
        body: column(row, 1)?,
    })
}

#[async_trait]
impl FactorStore for PostgresStore {
    async fn totp_entities(&self, scope: &str) -> Result<Vec<(String, Revised)>, StoreError> {
        let rows = self
            .query(
                "SELECT revision, body, identity FROM vcode_totp_records
                 WHERE scope = $1 AND sid = ''",
                &[&scope],
            )
            .await?;
        rows.iter()
            .map(|row| Ok((column(row, 2)?, revised(row)?)))
            .collect()
    }

    async fn totp_records(
        &self,
        scope: &str,
        identity: &str,
    ) -> Result<Vec<(String, Revised)>, StoreError> {
        let rows = self
            .query(
                "SELECT revision, body, sid FROM vcode_totp_records
                 WHERE scope = $1 AND identity = $2",
                &[&scope, &identity],
            )
            .await?;
        rows.iter()
            .map(|row| Ok((column(row, 2)?, revised(row)?)))
            .collect()
    }

    async fn totp_record(
        &self,
        scope: &str,
        identity: &str,
        sid: &str,
    ) -> Result<Option<Revised>, StoreError> {
        let rows = self
            .query(
                "SELECT revision, body FROM vcode_totp_records
                 WHERE scope = $1 AND identity = $2 AND sid = $3",
                &[&scope, &identity, &sid],
            )
            .await?;
        rows.first().map(revised).transpose()
    }

    async fn put_totp_record(
        &self,
        scope: &str,
        identity: &str,
        sid: &str,
        expected: Option<u64>,
        body: &str,
        event: Option<&OutboxEntry>,
    ) -> Result<bool, StoreError> {
        let (fact, subject, detail, at) = fact_of(event);
        let rows = match expected {
            None => {
                self.query(
                    with_fact!(
                        "INSERT INTO vcode_totp_records (scope, identity, sid, revision, body)
                         SELECT $1, $2, $3, 1, $5 WHERE $4::bigint = 0
                         ON CONFLICT DO NOTHING"
                    ),
                    &[
                        &scope, &identity, &sid, &0i64, &body, &fact, &subject, &detail, &at,
                    ],
                )
                .await?
            }
            Some(expected) => {
                let expected = i64::try_from(expected).unwrap_or(i64::MAX);
                self.query(
                    with_fact!(
                        "UPDATE vcode_totp_records SET revision = revision + 1, body = $5
                         WHERE scope = $1 AND identity = $2 AND sid = $3 AND revision = $4"
                    ),
                    &[
                        &scope, &identity, &sid, &expected, &body, &fact, &subject, &detail, &at,
                    ],
                )
                .await?
            }
        };
        Ok(!rows.is_empty())
    }

    async fn delete_totp_record(
        &self,
        scope: &str,
        identity: &str,
        sid: &str,
        event: Option<&OutboxEntry>,
    ) -> Result<bool, StoreError> {
        if sid == ENTITY {
            return Ok(false);
        }
        let (fact, subject, detail, at) = fact_of(event);
        // $4 and $5 unused: the same parameters as a put's.
        let rows = self
            .query(
                with_fact!(
                    "DELETE FROM vcode_totp_records
                     WHERE scope = $1 AND identity = $2 AND sid = $3
                       AND $4::bigint IS NOT NULL AND $5::text IS NOT NULL"
                ),
                &[
                    &scope, &identity, &sid, &0i64, &"", &fact, &subject, &detail, &at,
                ],
            )
            .await?;
        Ok(!rows.is_empty())
    }

    async fn delete_totp_identity(&self, scope: &str, identity: &str) -> Result<bool, StoreError> {
        let rows = self
            .query(
                "DELETE FROM vcode_totp_records WHERE scope = $1 AND identity = $2 RETURNING sid",
                &[&scope, &identity],
            )
            .await?;
        let mut entity = false;
        for row in &rows {
            let sid: String = column(row, 0)?;
            entity |= sid == ENTITY;
        }
        Ok(entity)
    }
}
