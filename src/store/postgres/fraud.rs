//! The fraud-guard role of the PostgreSQL store: one function per step
//! (`migrations/0003_fraud.sql`, sharded counts since `0010_fraud_shards.sql`), each one
//! statement and one transaction; the reports are plain reads that sum a minute's shards. A
//! send's step is taken in its issue's statement (`vcode_issue_guarded`, codes.rs), with the
//! arguments and the answer's columns read here; it counts in a shard no other send of this
//! instance is writing (shards.rs), named in the token the admission hands back.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::shards::SendToken;
use super::{PostgresStore, column, millis};
use crate::domain::traffic::{BUCKET_MS, Counts, RETENTION_MINUTES, Tally, Window};
use crate::store::{
    Admission, FraudSend, FraudStore, GuardStep, MinuteCounts, PrefixBlock, SendMark, StoreError,
    TrafficCounts,
};

/// How long counters are kept: the retention and a minute's slack.
const RETENTION_MS: i64 = ((RETENTION_MINUTES + 1) * BUCKET_MS) as i64;

fn bigint(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn unsigned(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

fn parse_block(raw: &str) -> Result<PrefixBlock, StoreError> {
    serde_json::from_str(raw).map_err(|e| StoreError::Protocol(format!("fraud block: {e}")))
}

fn tally(values: &[i64]) -> Result<Tally, StoreError> {
    let [js, jc, us, uc] = values else {
        return Err(StoreError::Protocol(format!("fraud tally: {values:?}")));
    };
    Ok(Tally {
        judged: Counts {
            sends: unsigned(*js),
            conversions: unsigned(*jc),
            undelivered: 0,
        },
        unjudged: Counts {
            sends: unsigned(*us),
            conversions: unsigned(*uc),
            undelivered: 0,
        },
    })
}

/// `vcode_fraud_admit`'s arguments (and `vcode_issue_guarded`'s last eleven) for one send's
/// step, in their order; the token last, whose shard the statement claims
/// (`PostgresStore::query_one_sharded`).
pub(super) struct AdmitArgs<'a> {
    send: FraudSend<'a>,
    now_ms: i64,
    minute: i64,
    from: i64,
    judged_before: i64,
    enforce: bool,
    attribution_ttl_ms: i64,
    pub(super) token: SendToken,
}

impl<'a> AdmitArgs<'a> {
    pub(super) fn of(step: &GuardStep<'a>) -> Self {
        Self {
            send: step.send,
            now_ms: bigint(step.send.now_ms),
            minute: bigint(step.window.minute),
            from: bigint(step.window.from),
            judged_before: bigint(step.window.judged_before),
            enforce: step.enforce,
            attribution_ttl_ms: millis(step.attribution_ttl).max(1),
            token: SendToken::new(step.send.token),
        }
    }

    /// The mark the statement counted the send under, once it has run: the window's minute
    /// and the token, with the shard it claimed.
    pub(super) fn mark(&self) -> SendMark {
        SendMark {
            minute: unsigned(self.minute),
            token: self.token.get(),
        }
    }

    pub(super) fn params(&self) -> [&(dyn ToSql + Sync); 11] {
        [
            &self.send.prefix,
            &self.send.country,
            &self.send.attribution,
            &self.now_ms,
            &self.minute,
            &self.from,
            &self.judged_before,
            &self.enforce,
            &self.attribution_ttl_ms,
            &RETENTION_MS,
            &self.token,
        ]
    }
}

/// The block of a refused send from column `at` of a row.
pub(super) fn refusal_at(row: &Row, at: usize) -> Result<PrefixBlock, StoreError> {
    block_at(row, at)?.ok_or_else(|| StoreError::Protocol("fraud admit: no block".into()))
}

fn block_at(row: &Row, at: usize) -> Result<Option<PrefixBlock>, StoreError> {
    column::<Option<String>>(row, at)?
        .map(|raw| parse_block(&raw))
        .transpose()
}

/// A counted send's admission from the columns from `at` on: the block, the prefix's and the
/// service's tallies, the attribution's previous mark (minute and token); counted under `mark`.
pub(super) fn admitted_at(row: &Row, at: usize, mark: SendMark) -> Result<Admission, StoreError> {
    let block = block_at(row, at)?;
    let prefix: Vec<i64> = column(row, at + 1)?;
    let service: Vec<i64> = column(row, at + 2)?;
    let previous: Option<i64> = column(row, at + 3)?;
    let previous_token: Option<i64> = column(row, at + 4)?;
    Ok(Admission::Admitted {
        prefix: tally(&prefix)?,
        service: tally(&service)?,
        block,
        previous: previous
            .zip(previous_token)
            .map(|(minute, token)| SendMark {
                minute: unsigned(minute),
                token: token as u64,
            }),
        mark,
        levels: None,
    })
}

#[async_trait]
impl FraudStore for PostgresStore {
    async fn admit_send(
        &self,
        send: &FraudSend<'_>,
        window: &Window,
        enforce: bool,
        attribution_ttl: Duration,
    ) -> Result<Admission, StoreError> {
        let step = GuardStep {
            levels: None,
            send: *send,
            window,
            enforce,
            attribution_ttl,
        };
        let args = AdmitArgs::of(&step);
        let row = self
            .query_one_sharded(
                "SELECT * FROM vcode_fraud_admit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                &args.params(),
                &args.token,
            )
            .await?;
        let refused: bool = column(&row, 0)?;
        if refused {
            return Ok(Admission::Refused(refusal_at(&row, 1)?));
        }
        admitted_at(&row, 1, args.mark())
    }

    async fn release_send(
        &self,
        send: &FraudSend<'_>,
        mark: SendMark,
        previous: Option<SendMark>,
        refused: bool,
    ) -> Result<(), StoreError> {
        self.query(
            "SELECT vcode_fraud_release($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            &[
                &send.prefix,
                &send.country,
                &send.attribution,
                &bigint(mark.minute),
                &(mark.token as i64),
                &previous.map(|mark| bigint(mark.minute)),
                &previous.map(|mark| mark.token as i64),
                &refused,
                &bigint(send.now_ms),
                &RETENTION_MS,
            ],
        )
        .await
        .map(drop)
    }

    async fn count_conversion(
        &self,
        attribution: &str,
        prefix: &str,
        country: &str,
        since_minute: u64,
    ) -> Result<Option<u64>, StoreError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let row = self
            .query_one(
                "SELECT vcode_fraud_convert($1, $2, $3, $4, $5, $6)",
                &[
                    &attribution,
                    &prefix,
                    &country,
                    &bigint(since_minute),
                    &millis(now),
                    &RETENTION_MS,
                ],
            )
            .await?;
        let minute: i64 = column(&row, 0)?;
        Ok(u64::try_from(minute).ok())
    }

    async fn count_undelivered(
        &self,
        prefix: &str,
        country: &str,
        mark: SendMark,
    ) -> Result<(), StoreError> {
        self.query(
            "SELECT vcode_fraud_undelivered($1, $2, $3, $4)",
            &[
                &prefix,
                &country,
                &bigint(mark.minute),
                &(mark.token as i64),
            ],
        )
        .await?;
        Ok(())
    }

    async fn block_prefix(&self, block: &PrefixBlock, now_ms: u64) -> Result<bool, StoreError> {
        let row = self
            .query_one(
                "SELECT vcode_fraud_block($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
                &[
                    &block.prefix,
                    &block.country,
                    &block.reason.as_str(),
                    &bigint(block.since_ms),
                    &bigint(block.until_ms),
                    &i32::try_from(block.strikes).unwrap_or(i32::MAX),
                    &bigint(block.struck_ms),
                    &bigint(block.sends),
                    &bigint(block.conversions),
                    &bigint(block.lifted_ms),
                    &bigint(now_ms),
                    &block.evidence,
                ],
            )
            .await?;
        column(&row, 0)
    }

    async fn prefix_blocks(&self) -> Result<Vec<PrefixBlock>, StoreError> {
        self.query("SELECT row_to_json(b)::text FROM vcode_fraud_blocks b", &[])
            .await?
            .iter()
            .map(|row| parse_block(&column::<String>(row, 0)?))
            .collect()
    }

    async fn lift_block(&self, prefix: &str, now_ms: u64) -> Result<bool, StoreError> {
        let rows = self
            .query(
                "UPDATE vcode_fraud_blocks SET until_ms = $2, lifted_ms = $2
                 WHERE prefix = $1 AND until_ms > $2 RETURNING prefix",
                &[&prefix, &bigint(now_ms)],
            )
            .await?;
        Ok(!rows.is_empty())
    }

    async fn fraud_traffic(&self, from: u64, to: u64) -> Result<TrafficCounts, StoreError> {
        let rows = self
            .query(
                // An undelivered send has left `sends` for `undelivered` (migration 0012).
                "SELECT scope, minute, sum(sends + undelivered)::bigint, sum(conversions)::bigint,
                   sum(refused)::bigint, sum(undelivered)::bigint
                 FROM vcode_fraud_counts WHERE minute BETWEEN $1 AND $2
                 GROUP BY scope, minute ORDER BY minute",
                &[&bigint(from), &bigint(to)],
            )
            .await?;
        let countries_of = self
            .query("SELECT prefix, country FROM vcode_fraud_prefixes", &[])
            .await?;
        let mut scopes: HashMap<String, Vec<MinuteCounts>> = HashMap::new();
        for row in &rows {
            let scope: String = column(row, 0)?;
            scopes.entry(scope).or_default().push(MinuteCounts {
                minute: unsigned(column(row, 1)?),
                sends: unsigned(column(row, 2)?),
                conversions: unsigned(column(row, 3)?),
                refused: unsigned(column(row, 4)?),
                undelivered: unsigned(column(row, 5)?),
            });
        }
        let mut traffic = TrafficCounts {
            service: scopes.remove("*").unwrap_or_default(),
            ..TrafficCounts::default()
        };
        let mut country_of: HashMap<String, String> = HashMap::new();
        for row in &countries_of {
            country_of.insert(column(row, 0)?, column(row, 1)?);
        }
        for (scope, minutes) in scopes {
            if let Some(country) = scope.strip_prefix("c:") {
                traffic.countries.push((country.to_owned(), minutes));
            } else if let Some(prefix) = scope.strip_prefix("p:") {
                let country = country_of.get(prefix).cloned().unwrap_or_default();
                traffic.prefixes.push((prefix.to_owned(), country, minutes));
            }
        }
        Ok(traffic)
    }
}
