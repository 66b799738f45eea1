//! The PostgreSQL store: every read-compare-write is one PL/pgSQL function
//! (`migrations/*.sql`), called in one statement, so each operation is one transaction and one
//! round trip on a pooled connection (deadpool). Time is the database's clock; expired rows
//! read as absent and a background task deletes them in small batches. Every call is bounded
//! by the statement timeout, end to end.

mod captchas;
mod codes;
mod connection;
mod dev_inbox;
mod events;
mod factors;
mod fraud;
mod fused;
mod health;
mod idempotency;
mod levels;
mod migrations;
mod pow;
mod quotas;
mod receipts;
mod safe_list;
mod settings;
mod shards;
mod stats;
mod sweep;
mod twilio;

use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;
use tokio_postgres::Row;
use tokio_postgres::types::{ToSql, Type};

pub use self::settings::{PostgresSettings, PostgresVariables};
use self::shards::{SendToken, Shards};

use super::{QuotaRule, StoreError};

#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    statement_timeout: Duration,
    /// The level records' shards this instance's statements are writing now.
    shards: Arc<Shards>,
}

/// One statement's parameters.
type Params<'a> = [&'a (dyn ToSql + Sync)];

impl PostgresStore {
    /// Prepares the pool without waiting for the database (a database down at start-up makes
    /// `/readyz` fail until it is up). Call [`PostgresStore::migrate`] before serving.
    pub fn connect(settings: &PostgresSettings) -> Result<Self, StoreError> {
        let pool = connection::pool(settings)
            .map_err(|e| StoreError::Unavailable(format!("bad PostgreSQL settings: {e}")))?;
        Ok(Self {
            pool,
            statement_timeout: settings.statement_timeout,
            shards: Arc::new(Shards::new()),
        })
    }

    /// Brings the schema to this version of vcode, under an advisory lock: of several
    /// instances starting at once, one applies each migration and the others wait for it.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let mut client = self.pool.get().await.map_err(pool_error)?;
        migrations::apply(&mut client).await.map_err(db_error)
    }

    /// Migrates now, or (the database is unreachable) warns and keeps trying in the background
    /// every second: meanwhile every call fails and `/readyz` answers 503, as for a Redis that
    /// is down at start-up.
    pub async fn migrate_or_retry(&self) {
        let Err(error) = self.migrate().await else {
            return;
        };
        tracing::warn!(%error, "PostgreSQL is not reachable yet: /readyz answers 503 until the schema is applied");
        let weak = self.pool.weak();
        let statement_timeout = self.statement_timeout;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let Some(pool) = weak.upgrade() else { return };
                let store = Self {
                    pool,
                    statement_timeout,
                    shards: Arc::new(Shards::new()),
                };
                if store.migrate().await.is_ok() {
                    tracing::info!("PostgreSQL reached: schema applied");
                    return;
                }
            }
        });
    }

    /// Deletes expired rows every `every`, in batches; ends when the store is dropped.
    pub fn spawn_sweeper(&self, every: Duration) {
        sweep::spawn(self.pool.clone(), every);
    }

    /// Deletes every expired row now; returns how many (tests and measurements).
    pub async fn sweep(&self) -> Result<u64, StoreError> {
        let client = self.pool.get().await.map_err(pool_error)?;
        sweep::sweep_all(&client).await.map_err(db_error)
    }

    /// When a write sent now must no longer apply (unix ms): the moment its caller gives up
    /// waiting. A function that runs later (it waited on a lock or a stalled server) writes
    /// nothing, so a retry finds no ghost code, cooldown or quota event. Assumes this host's
    /// and the database's clocks agree (NTP) within the statement timeout.
    fn give_up_at_ms(&self) -> i64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        millis(now + super::deadline::bound(self.statement_timeout))
    }

    fn ran_too_late(&self) -> StoreError {
        StoreError::Timeout(self.statement_timeout)
    }

    /// Runs one statement (prepared once per connection) within the statement timeout, the
    /// wait for a pooled connection included. A connection whose reply did not come in time
    /// is closed rather than reused: its late reply must not answer another request.
    async fn query(&self, sql: &'static str, params: &Params<'_>) -> Result<Vec<Row>, StoreError> {
        self.run(sql, params, None, None).await
    }

    /// [`Self::query_one`] for a statement that counts a send's levels in the shard its
    /// `token` (one of `params`) names: once the connection is held, the token names a shard no
    /// other statement of this instance is writing, until the reply (`shards.rs`).
    async fn query_one_sharded(
        &self,
        sql: &'static str,
        params: &Params<'_>,
        token: &SendToken,
    ) -> Result<Row, StoreError> {
        self.run(sql, params, None, Some(token))
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| StoreError::Protocol(format!("no row from {sql}")))
    }

    /// Like [`Self::query`], but parsed, bound and run in one round trip (`types`: the
    /// parameters' types), and a connection whose reply is late is kept: for the steps that
    /// undo or give back what a failed request took. A statement still to be prepared costs a
    /// round trip first, and on a stalled server its caller gave up before the statement itself
    /// was sent; sent at once, it waits in the connection and runs when the server resumes.
    async fn query_at_once(
        &self,
        sql: &'static str,
        params: &Params<'_>,
        types: &[Type],
    ) -> Result<Vec<Row>, StoreError> {
        self.run(sql, params, Some(types), None).await
    }

    async fn run(
        &self,
        sql: &'static str,
        params: &Params<'_>,
        at_once: Option<&[Type]>,
        token: Option<&SendToken>,
    ) -> Result<Vec<Row>, StoreError> {
        let started = Instant::now();
        let deadline = tokio::time::Instant::from_std(
            started + super::deadline::bound(self.statement_timeout),
        );
        let timeout = StoreError::Timeout(self.statement_timeout);
        let result = async {
            let client = tokio::time::timeout_at(deadline, self.pool.get())
                .await
                .map_err(|_| StoreError::Timeout(self.statement_timeout))?
                .map_err(pool_error)?;
            // Held until the reply: the statement's transaction has committed by then.
            let _shard = token.and_then(|token| token.claim(&self.shards));
            let reply = tokio::time::timeout_at(deadline, async {
                match at_once {
                    Some(types) => {
                        let typed: Vec<_> =
                            params.iter().copied().zip(types.iter().cloned()).collect();
                        client.query_typed(sql, &typed).await
                    }
                    None => {
                        let statement = client.prepare_cached(sql).await?;
                        client.query(&statement, params).await
                    }
                }
            })
            .await;
            match reply {
                Ok(rows) => rows.map_err(db_error),
                // A statement sent at once stays queued in its connection and runs when the
                // server resumes; the connection goes back to the pool, so that the failed
                // request's other undo steps queue behind it instead of waiting for a new
                // connection to a stalled server. (Its late reply goes to no one: each reply
                // belongs to the call that sent its statement.)
                Err(_) if at_once.is_some() => Err(timeout),
                Err(_) => {
                    drop(deadpool_postgres::Object::take(client));
                    Err(timeout)
                }
            }
        }
        .await;
        let error_kind = result.as_ref().err().map(|error| match error {
            StoreError::Timeout(_) => "timeout",
            StoreError::Unavailable(_) => "unavailable",
            StoreError::Protocol(_) => "protocol",
        });
        crate::metrics::observe_store_call("postgres", started.elapsed().as_secs_f64(), error_kind);
        result
    }

    async fn query_one(&self, sql: &'static str, params: &Params<'_>) -> Result<Row, StoreError> {
        self.query(sql, params)
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| StoreError::Protocol(format!("no row from {sql}")))
    }
}

fn pool_error(error: deadpool_postgres::PoolError) -> StoreError {
    match error {
        deadpool_postgres::PoolError::Backend(error) => db_error(error),
        other => StoreError::Unavailable(other.to_string()),
    }
}

/// A cancelled statement is the server's statement timeout; anything else means the store
/// cannot serve (the functions report outcomes, never errors).
fn db_error(error: tokio_postgres::Error) -> StoreError {
    if error.code() == Some(&tokio_postgres::error::SqlState::QUERY_CANCELED) {
        return StoreError::Unavailable(format!("statement timeout: {error}"));
    }
    match error.as_db_error() {
        Some(db) => StoreError::Unavailable(format!("{}: {}", db.code().code(), db.message())),
        None => StoreError::Unavailable(error.to_string()),
    }
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

fn ms_duration(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// Quota rules as the functions read them: limits and windows (ms), index by index.
fn rule_arrays(rules: &[QuotaRule]) -> (Vec<i32>, Vec<i64>) {
    rules
        .iter()
        .map(|rule| {
            (
                i32::try_from(rule.limit).unwrap_or(i32::MAX),
                millis(rule.window),
            )
        })
        .unzip()
}

/// Quota tokens and captcha seeds are u64; bigint columns hold their bits.
fn as_bigint(value: u64) -> i64 {
    value as i64
}

/// A time in unix milliseconds as a column holds it (never negative).
fn unix_ms(value: i64) -> Result<u64, StoreError> {
    u64::try_from(value).map_err(|_| StoreError::Protocol(format!("time {value}")))
}

fn column<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a Row,
    index: usize,
) -> Result<T, StoreError> {
    row.try_get(index)
        .map_err(|error| StoreError::Protocol(format!("column {index}: {error}")))
}
