//! Deletes expired rows in batches of `BATCH`, each its own short transaction, so the sweep
//! never holds many row locks or one long snapshot; rows a request has locked are skipped and
//! taken on the next pass.

use std::time::Duration;

use deadpool_postgres::Pool;

const BATCH: i64 = 1000;

/// Every table with an `expires_at_ms` column.
const TABLES: &[&str] = &[
    "vcode_codes",
    "vcode_verifications",
    "vcode_messages",
    "vcode_quota_events",
    "vcode_captchas",
    "vcode_idempotency",
    "vcode_pow_replays",
    "vcode_stats",
    "vcode_dev_inbox",
    "vcode_fraud_counts",
    "vcode_fraud_prefixes",
    "vcode_fraud_levels",
    "vcode_fraud_returning",
    "vcode_twilio_sends",
    "vcode_delivery_counts",
];

/// One batch of `table`; the outer condition is checked again on the row's newest version, so
/// a row renewed meanwhile stays.
fn batch_sql(table: &str) -> String {
    format!(
        "DELETE FROM {table} WHERE ctid = ANY (ARRAY(
           SELECT ctid FROM {table} WHERE expires_at_ms <= vcode_now_ms()
           LIMIT $1 FOR UPDATE SKIP LOCKED))
         AND expires_at_ms <= vcode_now_ms()"
    )
}

pub(super) async fn sweep_all(
    client: &deadpool_postgres::Client,
) -> Result<u64, tokio_postgres::Error> {
    let mut removed = 0;
    for table in TABLES {
        let statement = client.prepare_cached(&batch_sql(table)).await?;
        loop {
            let deleted = client.execute(&statement, &[&BATCH]).await?;
            removed += deleted;
            if deleted < BATCH as u64 {
                break;
            }
            // Let requests have the database between batches.
            tokio::task::yield_now().await;
        }
    }
    Ok(removed)
}

pub(super) fn spawn(pool: Pool, every: Duration) {
    let weak = pool.weak();
    drop(pool);
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            ticker.tick().await;
            let Some(pool) = weak.upgrade() else { return };
            let swept = async {
                let client = pool.get().await.map_err(|e| e.to_string())?;
                sweep_all(&client).await.map_err(|e| e.to_string())
            };
            match swept.await {
                Ok(0) => {}
                Ok(removed) => tracing::debug!(removed, "swept expired rows"),
                Err(error) => tracing::debug!(%error, "sweep skipped: the database is unreachable"),
            }
        }
    });
}
