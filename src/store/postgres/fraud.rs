//! The fraud-guard role of the PostgreSQL store: the prefixes' blocks (`vcode_fraud_blocks`,
//! migration 0003), which a send's step only reads, and the traffic report's minutes
//! (`vcode_fraud_counts`), which each instance's flush adds to in one statement. A send's step
//! is also taken in its issue's statement (`vcode_issue_guarded`, functions.sql), with the
//! arguments and the answer's columns read here.

use std::collections::HashMap;

use async_trait::async_trait;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::{PostgresStore, column};
use crate::domain::traffic::{BUCKET_MS, RETENTION_MINUTES};
use crate::store::{
    Admission, FraudSend, FraudStore, GuardStep, MinuteCounts, PrefixBlock, StoreError,
    TrafficChange, TrafficCounts,
};

/// How long counters are kept: the retention and a minute's slack.
const RETENTION_MS: i64 = ((RETENTION_MINUTES + 1) * BUCKET_MS) as i64;

/// The prefix's block record, whole (the row's columns are `PrefixBlock`'s fields).
const BLOCK: &str = "SELECT row_to_json(b)::text FROM vcode_fraud_blocks b WHERE b.prefix = $1";

/// One flush: each change goes to its prefix's, its country's and the service's minute (its
/// refusals to the service's alone), summed per row first (one statement may not update a row
/// twice), into shard 0. The shards (migration 0010) kept concurrent sends of one prefix off
/// each other's rows; a flush is one writer an instance about once a second, so one row a
/// minute and scope is enough, and rows written before in other shards are still summed by
/// `fraud_traffic`. `sends` excludes the undelivered (migration 0012), which `fraud_traffic`
/// adds back. Rows are written in (scope, minute) and (prefix) order, the one order every
/// flush takes them in, so two instances' flushes never deadlock. A prefix's registry row is
/// rewritten only when its country changed or its expiry is a minute behind.
const ADD_TRAFFIC: &str = "
WITH changes AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[],
      $6::bigint[], $7::bigint[])
    AS c(prefix, country, minute, sends, conversions, refused, undelivered)
), scoped AS (
  SELECT 'p:' || prefix AS scope, minute, sends - undelivered AS sends, conversions,
      0::bigint AS refused, undelivered
    FROM changes
  UNION ALL
  SELECT 'c:' || country, minute, sends - undelivered, conversions, 0, undelivered
    FROM changes
  UNION ALL
  SELECT '*', minute, sends - undelivered, conversions, refused, undelivered FROM changes
), counted AS (
  INSERT INTO vcode_fraud_counts AS f
      (scope, minute, shard, sends, conversions, refused, undelivered, expires_at_ms)
    SELECT scope, minute, 0, sum(sends), sum(conversions), sum(refused), sum(undelivered),
        vcode_now_ms() + $8
      FROM scoped GROUP BY scope, minute ORDER BY scope, minute
    ON CONFLICT (scope, minute, shard) DO UPDATE
      SET sends = f.sends + excluded.sends,
          conversions = f.conversions + excluded.conversions,
          refused = f.refused + excluded.refused,
          undelivered = f.undelivered + excluded.undelivered,
          expires_at_ms = greatest(f.expires_at_ms, excluded.expires_at_ms)
), registered AS (
  INSERT INTO vcode_fraud_prefixes AS r (prefix, country, expires_at_ms)
    SELECT DISTINCT ON (prefix) prefix, country, vcode_now_ms() + $8
      FROM changes ORDER BY prefix, minute DESC
    ON CONFLICT (prefix) DO UPDATE
      SET country = excluded.country,
          expires_at_ms = greatest(r.expires_at_ms, excluded.expires_at_ms)
      WHERE r.country <> excluded.country OR r.expires_at_ms < excluded.expires_at_ms - 60000
)
SELECT 1";

/// The minutes of a span, per scope and minute, summed over the shards. A count reads as
/// at least 0: a flush's negative change (a send given back, a receipt counted on another
/// instance) may reach a row before the change it takes from. An undelivered send has left
/// `sends` for `undelivered` (migration 0012), so the sends add them back.
const TRAFFIC: &str = "
SELECT scope, minute, greatest(sum(sends + undelivered), 0)::bigint,
    greatest(sum(conversions), 0)::bigint, greatest(sum(refused), 0)::bigint,
    greatest(sum(undelivered), 0)::bigint
  FROM vcode_fraud_counts WHERE minute BETWEEN $1 AND $2
  GROUP BY scope, minute ORDER BY minute";

fn bigint(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn unsigned(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

fn parse_block(raw: &str) -> Result<PrefixBlock, StoreError> {
    serde_json::from_str(raw).map_err(|e| StoreError::Protocol(format!("fraud block: {e}")))
}

/// The guard's verdict on a send given its prefix's block record: refused only when the
/// block is active at the send's time and enforced.
fn admission(block: Option<PrefixBlock>, now_ms: u64, enforce: bool) -> Admission {
    match block {
        Some(block) if enforce && block.is_active(now_ms) => Admission::Refused(block),
        block => Admission::Admitted {
            block,
            levels: None,
        },
    }
}

/// The guard's arguments of `vcode_issue_guarded` (after the issue's thirteen), in their
/// order: the prefix whose block is read, the send's time it is active at, and whether it
/// refuses.
pub(super) struct BlockArgs<'a> {
    prefix: &'a str,
    now_ms: i64,
    enforce: bool,
}

impl<'a> BlockArgs<'a> {
    pub(super) fn of(step: &GuardStep<'a>) -> Self {
        Self {
            prefix: step.send.prefix,
            now_ms: bigint(step.send.now_ms),
            enforce: step.enforce,
        }
    }

    pub(super) fn params(&self) -> [&(dyn ToSql + Sync); 3] {
        [&self.prefix, &self.now_ms, &self.enforce]
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

/// An admitted send's answer from column `at`: its prefix's block record, if any.
pub(super) fn admitted_at(row: &Row, at: usize) -> Result<Admission, StoreError> {
    Ok(Admission::Admitted {
        block: block_at(row, at)?,
        levels: None,
    })
}

/// `ADD_TRAFFIC`'s arrays: the changes column by column.
#[derive(Debug, Default, PartialEq)]
struct TrafficArrays<'a> {
    prefixes: Vec<&'a str>,
    countries: Vec<&'a str>,
    minutes: Vec<i64>,
    sends: Vec<i64>,
    conversions: Vec<i64>,
    refused: Vec<i64>,
    undelivered: Vec<i64>,
}

impl<'a> TrafficArrays<'a> {
    fn of(changes: &'a [TrafficChange]) -> Self {
        let mut arrays = Self::default();
        for change in changes {
            arrays.prefixes.push(&change.prefix);
            arrays.countries.push(&change.country);
            arrays.minutes.push(bigint(change.minute));
            arrays.sends.push(change.sends);
            arrays.conversions.push(change.conversions);
            arrays.refused.push(change.refused);
            arrays.undelivered.push(change.undelivered);
        }
        arrays
    }
}

#[async_trait]
impl FraudStore for PostgresStore {
    async fn admit_send(
        &self,
        send: &FraudSend<'_>,
        enforce: bool,
    ) -> Result<Admission, StoreError> {
        let rows = self.query(BLOCK, &[&send.prefix]).await?;
        let block = rows
            .first()
            .map(|row| parse_block(&column::<String>(row, 0)?))
            .transpose()?;
        Ok(admission(block, send.now_ms, enforce))
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

    async fn add_traffic(&self, changes: &[TrafficChange]) -> Result<(), StoreError> {
        if changes.is_empty() {
            return Ok(());
        }
        let arrays = TrafficArrays::of(changes);
        self.query(
            ADD_TRAFFIC,
            &[
                &arrays.prefixes,
                &arrays.countries,
                &arrays.minutes,
                &arrays.sends,
                &arrays.conversions,
                &arrays.refused,
                &arrays.undelivered,
                &RETENTION_MS,
            ],
        )
        .await
        .map(drop)
    }

    async fn fraud_traffic(&self, from: u64, to: u64) -> Result<TrafficCounts, StoreError> {
        let rows = self.query(TRAFFIC, &[&bigint(from), &bigint(to)]).await?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::traffic::Reason;

    fn block(until_ms: u64) -> PrefixBlock {
        PrefixBlock {
            prefix: "44740".into(),
            country: "GB".into(),
            reason: Reason::Surge,
            since_ms: 1_000,
            until_ms,
            strikes: 1,
            struck_ms: 1_000,
            sends: 40,
            conversions: 0,
            lifted_ms: 0,
            evidence: String::new(),
        }
    }

    #[test]
    fn only_an_enforced_block_active_at_the_send_refuses_it() {
        let active = block(5_000);
        assert_eq!(
            admission(Some(active.clone()), 4_999, true),
            Admission::Refused(active.clone())
        );
        // Monitored: admitted, the block answered.
        assert_eq!(
            admission(Some(active.clone()), 4_999, false),
            Admission::Admitted {
                block: Some(active.clone()),
                levels: None
            }
        );
        // Over at its end: admitted, the record answered.
        assert_eq!(
            admission(Some(active.clone()), 5_000, true),
            Admission::Admitted {
                block: Some(active),
                levels: None
            }
        );
        assert_eq!(
            admission(None, 5_000, true),
            Admission::Admitted {
                block: None,
                levels: None
            }
        );
    }

    #[test]
    fn a_block_record_reads_back_from_its_row_s_json() {
        let raw = r#"{"prefix":"44740","country":"GB","reason":"surge","since_ms":1000,
            "until_ms":5000,"strikes":1,"struck_ms":1000,"sends":40,"conversions":0,
            "lifted_ms":0,"evidence":""}"#;
        assert_eq!(parse_block(raw).unwrap(), block(5_000));
        assert!(parse_block(r#"{"prefix":"44740"}"#).is_err());
    }

    #[test]
    fn a_flush_s_changes_become_one_array_a_column_in_order() {
        let changes = [
            TrafficChange {
                prefix: "44740".into(),
                country: "GB".into(),
                minute: 7,
                sends: 3,
                conversions: 1,
                refused: 2,
                undelivered: 1,
            },
            TrafficChange {
                prefix: "3361".into(),
                country: "FR".into(),
                minute: u64::MAX,
                sends: -1,
                ..TrafficChange::default()
            },
        ];
        assert_eq!(
            TrafficArrays::of(&changes),
            TrafficArrays {
                prefixes: vec!["44740", "3361"],
                countries: vec!["GB", "FR"],
                minutes: vec![7, i64::MAX],
                sends: vec![3, -1],
                conversions: vec![1, 0],
                refused: vec![2, 0],
                undelivered: vec![1, 0],
            }
        );
    }
}
