//! The schema, embedded in the binary: numbered SQL files applied in order, each once, inside
//! one transaction that holds an advisory lock, so instances starting together apply each
//! migration exactly once and none serves before the schema is complete.

use tokio_postgres::Client;

/// (version, SQL), ascending, each applied once (the versions are recorded, not checksums).
/// Tables and data never change in one that has shipped: add the next. Their function bodies
/// were moved to `functions.sql` (issue 37), which an applied migration never re-runs and a new
/// database gets after the migrations, as every start does.
const MIGRATIONS: &[(i32, &str)] = &[
    (1, include_str!("migrations/0001_store.sql")),
    (2, include_str!("migrations/0002_verifications.sql")),
    (3, include_str!("migrations/0003_fraud.sql")),
    (4, include_str!("migrations/0004_events.sql")),
    (5, include_str!("migrations/0005_receipts.sql")),
    (6, include_str!("migrations/0006_twilio_services.sql")),
    (7, include_str!("migrations/0007_receipt_events.sql")),
    (8, include_str!("migrations/0008_guarded_issue.sql")),
    (9, include_str!("migrations/0009_delivery_counts.sql")),
    (10, include_str!("migrations/0010_fraud_shards.sql")),
    (
        11,
        include_str!("migrations/0011_verify_by_phone_events.sql"),
    ),
    (12, include_str!("migrations/0012_undelivered_sends.sql")),
    (
        13,
        include_str!("migrations/0013_undelivered_lock_order.sql"),
    ),
    (14, include_str!("migrations/0014_names.sql")),
    (15, include_str!("migrations/0015_fraud_levels.sql")),
    (16, include_str!("migrations/0016_safe_list.sql")),
    (17, include_str!("migrations/0017_totp.sql")),
    (18, include_str!("migrations/0018_traffic_flush.sql")),
    (19, include_str!("migrations/0019_level_rows_in_place.sql")),
];

/// Every function at its current definition, applied after the migrations at each start-up.
const FUNCTIONS: &str = include_str!("functions.sql");

/// The advisory lock key of migrations ("vcode" in ASCII, plus 1).
const MIGRATION_LOCK: i64 = 0x7663_6f64_6501;

pub(super) async fn apply(client: &mut Client) -> Result<(), tokio_postgres::Error> {
    let transaction = client.transaction().await?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    transaction
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS vcode_migrations (
               version integer PRIMARY KEY,
               applied_at timestamptz NOT NULL DEFAULT now())",
        )
        .await?;
    let applied: i32 = transaction
        .query_one(
            "SELECT coalesce(max(version), 0) FROM vcode_migrations",
            &[],
        )
        .await?
        .get(0);
    for (version, sql) in MIGRATIONS.iter().filter(|(version, _)| *version > applied) {
        transaction.batch_execute(sql).await?;
        transaction
            .execute(
                "INSERT INTO vcode_migrations (version) VALUES ($1)",
                &[version],
            )
            .await?;
        tracing::info!(version, "applied a PostgreSQL migration");
    }
    transaction.batch_execute(FUNCTIONS).await?;
    transaction.commit().await
}
