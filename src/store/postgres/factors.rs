//! The PostgreSQL store's TOTP records (`migrations/0017_totp.sql`): each read, each
//! compare-and-set and an identity's delete is one statement.

use async_trait::async_trait;

use super::{PostgresStore, column};
use crate::store::{ENTITY, FactorStore, Revised, StoreError};

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
    ) -> Result<bool, StoreError> {
        let rows = match expected {
            None => {
                self.query(
                    "INSERT INTO vcode_totp_records (scope, identity, sid, revision, body)
                     VALUES ($1, $2, $3, 1, $4) ON CONFLICT DO NOTHING RETURNING 1",
                    &[&scope, &identity, &sid, &body],
                )
                .await?
            }
            Some(expected) => {
                let expected = i64::try_from(expected).unwrap_or(i64::MAX);
                self.query(
                    "UPDATE vcode_totp_records SET revision = revision + 1, body = $5
                     WHERE scope = $1 AND identity = $2 AND sid = $3 AND revision = $4
                     RETURNING 1",
                    &[&scope, &identity, &sid, &expected, &body],
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
    ) -> Result<bool, StoreError> {
        if sid == ENTITY {
            return Ok(false);
        }
        let rows = self
            .query(
                "DELETE FROM vcode_totp_records
                 WHERE scope = $1 AND identity = $2 AND sid = $3 RETURNING 1",
                &[&scope, &identity, &sid],
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
