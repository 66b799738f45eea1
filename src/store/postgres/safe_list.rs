//! The PostgreSQL store's safe list (`migrations/0016_safe_list.sql`): one row per entry,
//! keyed by (tenant, digits); each operation one statement. An add inserts unless the key is
//! there (`ON CONFLICT DO NOTHING`: of concurrent adds of one entry exactly one inserts it).

use async_trait::async_trait;

use super::{PostgresStore, as_bigint, column, unix_ms};
use crate::store::{SafeEntry, SafeListStore, StoreError};

#[async_trait]
impl SafeListStore for PostgresStore {
    async fn add_safe_entry(&self, entry: &SafeEntry) -> Result<bool, StoreError> {
        let tenant = entry.tenant.as_deref().unwrap_or_default();
        let rows = self
            .query(
                "INSERT INTO vcode_fraud_safe_list (tenant, digits, added_by, added_at_ms)
                 VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING RETURNING 1",
                &[
                    &tenant,
                    &entry.digits,
                    &entry.added_by,
                    &as_bigint(entry.added_at_ms),
                ],
            )
            .await?;
        Ok(!rows.is_empty())
    }

    async fn remove_safe_entry(
        &self,
        tenant: Option<&str>,
        digits: &str,
    ) -> Result<bool, StoreError> {
        let rows = self
            .query(
                "DELETE FROM vcode_fraud_safe_list WHERE tenant = $1 AND digits = $2 RETURNING 1",
                &[&tenant.unwrap_or_default(), &digits],
            )
            .await?;
        Ok(!rows.is_empty())
    }

    async fn safe_entries(&self) -> Result<Vec<SafeEntry>, StoreError> {
        let rows = self
            .query(
                "SELECT tenant, digits, added_by, added_at_ms FROM vcode_fraud_safe_list",
                &[],
            )
            .await?;
        rows.iter()
            .map(|row| {
                let tenant: String = column(row, 0)?;
                Ok(SafeEntry {
                    tenant: (!tenant.is_empty()).then_some(tenant),
                    digits: column(row, 1)?,
                    added_by: column(row, 2)?,
                    added_at_ms: unix_ms(column(row, 3)?)?,
                })
            })
            .collect()
    }
}
