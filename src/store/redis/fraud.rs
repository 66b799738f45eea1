//! The fraud-guard role of the Redis store: every key under the one hash tag `{guard}`
//! (keys.rs), so that each step is one script on one node, a Cluster's included. It owns the
//! prefixes' blocks (one hash of JSON records, which a send's step reads: `issue.lua` on one
//! node, a plain `HGET` here on a Cluster, whose code scripts cannot reach the guard's slot)
//! and the traffic report's minutes (hashes per scope and hour, fields per minute, expiring
//! after the retention), which each instance adds to once a flush (`fraud_traffic.lua`).

use std::collections::HashMap;
use std::sync::LazyLock;

use async_trait::async_trait;

use super::keys::{FraudScope, fraud_blocks, fraud_countries, fraud_minutes, fraud_prefixes};
use super::*;
use crate::domain::traffic::{BUCKET_MS, RETENTION_MINUTES};
use crate::store::events::{PREFIX_SUBJECT, block_detail};
use crate::store::{
    Admission, FraudSend, FraudStore, GuardStep, MinuteCounts, PrefixBlock, SendMark,
    TrafficChange, TrafficCounts,
};

/// A mark as a message's index holds it (receipts.rs): `<minute>:<token>`.
pub(super) fn encode_mark(mark: SendMark) -> String {
    format!("{}:{}", mark.minute, mark.token)
}

/// `encode_mark`'s text read back.
pub(super) fn decode_mark(raw: &str) -> Option<SendMark> {
    let (minute, token) = raw.split_once(':')?;
    Some(SendMark {
        minute: minute.parse().ok()?,
        token: token.parse().ok()?,
    })
}

struct FraudScripts {
    block: Script,
    lift: Script,
    traffic: Script,
}

static FRAUD_SCRIPTS: LazyLock<FraudScripts> = LazyLock::new(|| FraudScripts {
    block: Script::new(&[EVENTS_PRELUDE, include_str!("fraud_block.lua")].concat()),
    lift: Script::new(&[EVENTS_PRELUDE, include_str!("fraud_lift.lua")].concat()),
    traffic: Script::new(include_str!("fraud_traffic.lua")),
});

/// How long the hourly counters live: the retention and the hour they cover.
const COUNTERS_TTL_MS: u64 = (RETENTION_MINUTES + 60) * BUCKET_MS;

/// The blocks' key, built once: every guarded send names it.
static BLOCKS: LazyLock<String> = LazyLock::new(fraud_blocks);

/// Adds the guard's step of one send to `issue.lua`'s call, after the script's own keys and
/// arguments: its one key (the blocks) and its one argument (`guard_arg`).
pub(super) fn add_guard(invocation: &mut Invocation<'_>, step: &GuardStep<'_>) {
    invocation.key(BLOCKS.as_str()).arg(guard_arg(step));
}

/// The guard's argument of `issue.lua`: `<enforce 0|1><prefix>`, read with one `string.byte`
/// and one `string.sub` (a number or fields to split would cost Redis a `strtod` or a
/// `string.match` a send); the script compares the block with its own clock (`TIME`).
fn guard_arg(step: &GuardStep<'_>) -> String {
    let prefix = step.send.prefix;
    let mut arg = String::with_capacity(1 + prefix.len());
    arg.push(if step.enforce { '1' } else { '0' });
    arg.push_str(prefix);
    arg
}

/// A delivered send's admission from `issue.lua`'s reply, whose `at` holds the prefix's block
/// record (JSON) or `''`; the levels' records, if asked, are the caller's to add.
pub(super) fn admitted_at(reply: &[Value], at: usize) -> Result<Admission, StoreError> {
    Ok(Admission::Admitted {
        block: block_at(reply, at)?,
        levels: None,
    })
}

/// The block of a refused send at `at` of a reply.
pub(super) fn refusal_at(reply: &[Value], at: usize) -> Result<PrefixBlock, StoreError> {
    block_at(reply, at)?.ok_or_else(|| protocol("fraud refusal", reply))
}

/// What the guard's step makes of a prefix's block record (`FraudStore::admit_send`).
fn admission_of(block: Option<PrefixBlock>, enforce: bool, now_ms: u64) -> Admission {
    match block {
        Some(block) if enforce && block.is_active(now_ms) => Admission::Refused(block),
        block => Admission::Admitted {
            block,
            levels: None,
        },
    }
}

/// Whether a change adds nothing anywhere (not sent: it would only touch keys).
fn adds_nothing(change: &TrafficChange) -> bool {
    change.sends == 0 && change.conversions == 0 && change.refused == 0 && change.undelivered == 0
}

/// `KEYS` of `fraud_traffic.lua`: the registries, then per change the prefix's, the country's
/// and the service's minutes of its hour.
pub(super) fn traffic_keys<'a>(
    changes: impl IntoIterator<Item = &'a TrafficChange>,
) -> Vec<String> {
    let mut keys = vec![fraud_prefixes(), fraud_countries()];
    for change in changes {
        let hour = change.minute / 60;
        keys.push(fraud_minutes(FraudScope::Prefix(&change.prefix), hour));
        keys.push(fraud_minutes(FraudScope::Country(&change.country), hour));
        keys.push(fraud_minutes(FraudScope::Service, hour));
    }
    keys
}

/// `ARGV` of `fraud_traffic.lua` after the counters' ttl: per change, prefix, country, minute
/// and the deltas of its fields `s` (sends that were not undelivered: the hashes keep those in
/// `x`, as `minutes_of` reads them), `c`, `x` and `r`.
fn traffic_args(change: &TrafficChange) -> [String; 7] {
    [
        change.prefix.clone(),
        change.country.clone(),
        change.minute.to_string(),
        change.sends.saturating_sub(change.undelivered).to_string(),
        change.conversions.to_string(),
        change.undelivered.to_string(),
        change.refused.to_string(),
    ]
}

fn parse_block(raw: &[u8]) -> Result<PrefixBlock, StoreError> {
    serde_json::from_slice(raw).map_err(|e| StoreError::Protocol(format!("fraud block: {e}")))
}

fn encode_block(block: &PrefixBlock) -> Result<String, StoreError> {
    serde_json::to_string(block).map_err(|e| StoreError::Protocol(format!("fraud block: {e}")))
}

/// A block in a reply: a bulk string, empty for none.
fn block_at(reply: &[Value], at: usize) -> Result<Option<PrefixBlock>, StoreError> {
    match bytes_at(reply, at) {
        Some(raw) if !raw.is_empty() => parse_block(raw).map(Some),
        Some(_) => Ok(None),
        None => Err(protocol("fraud admit", reply)),
    }
}

/// One scope's hourly hash, read into per-minute counts; a count that changes took below 0
/// (a send given back after its minute was flushed elsewhere) reads as 0.
fn minutes_of(fields: &HashMap<String, i64>, into: &mut HashMap<u64, MinuteCounts>) {
    for (field, value) in fields {
        let (kind, minute) = field.split_at(1);
        let Ok(minute) = minute.parse::<u64>() else {
            continue;
        };
        let value = u64::try_from(*value).unwrap_or(0);
        let counts = into.entry(minute).or_insert(MinuteCounts {
            minute,
            ..MinuteCounts::default()
        });
        // An undelivered send is kept in 'x', not in 's': sends are both.
        match kind {
            "s" => counts.sends += value,
            "c" => counts.conversions = value,
            "r" => counts.refused = value,
            "x" => {
                counts.undelivered = value;
                counts.sends += value;
            }
            _ => {}
        }
    }
}

fn within(minutes: HashMap<u64, MinuteCounts>, from: u64, to: u64) -> Vec<MinuteCounts> {
    let mut minutes: Vec<MinuteCounts> = minutes
        .into_values()
        .filter(|counts| (from..=to).contains(&counts.minute))
        .collect();
    minutes.sort_by_key(|counts| counts.minute);
    minutes
}

#[async_trait]
impl FraudStore for RedisStore {
    /// A plain read of the prefix's block: on one node `issue.lua` takes this step itself.
    async fn admit_send(
        &self,
        send: &FraudSend<'_>,
        enforce: bool,
    ) -> Result<Admission, StoreError> {
        let command = redis::cmd("HGET")
            .arg(BLOCKS.as_str())
            .arg(send.prefix)
            .to_owned();
        let mut connection = self.connections.get();
        let raw: Option<Vec<u8>> = self.bounded(command.query_async(&mut connection)).await?;
        let block = raw.as_deref().map(parse_block).transpose()?;
        Ok(admission_of(block, enforce, send.now_ms))
    }

    /// One `fraud_traffic.lua` for the whole flush: every key is under `{guard}`.
    async fn add_traffic(&self, changes: &[TrafficChange]) -> Result<(), StoreError> {
        let changes: Vec<&TrafficChange> = changes
            .iter()
            .filter(|change| !adds_nothing(change))
            .collect();
        if changes.is_empty() {
            return Ok(());
        }
        let mut invocation = Invocation::of(&FRAUD_SCRIPTS.traffic);
        invocation
            .key(traffic_keys(changes.iter().copied()))
            .arg(COUNTERS_TTL_MS);
        for change in &changes {
            invocation.arg(&traffic_args(change)[..]);
        }
        let mut connection = self.connections.get();
        self.bounded(invocation.invoke_async::<i64>(&mut connection))
            .await
            .map(drop)
    }

    async fn block_prefix(&self, block: &PrefixBlock, now_ms: u64) -> Result<bool, StoreError> {
        let mut invocation = Invocation::of(&FRAUD_SCRIPTS.block);
        invocation
            .key(BLOCKS.as_str())
            .arg(&block.prefix)
            .arg(encode_block(block)?)
            .arg(now_ms);
        let subject = [PREFIX_SUBJECT, &block.prefix].concat();
        let detail = block_detail(block);
        self.add_outbox(&mut invocation, &EventSubject::prefix(&subject, &detail));
        let mut connection = self.connections.get();
        let recorded: i64 = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        Ok(recorded == 1)
    }

    async fn prefix_blocks(&self) -> Result<Vec<PrefixBlock>, StoreError> {
        let mut connection = self.connections.get();
        let command = redis::cmd("HGETALL").arg(BLOCKS.as_str()).to_owned();
        let raw: HashMap<String, Vec<u8>> =
            self.bounded(command.query_async(&mut connection)).await?;
        raw.values().map(|raw| parse_block(raw)).collect()
    }

    async fn lift_block(&self, prefix: &str, now_ms: u64) -> Result<bool, StoreError> {
        let mut invocation = Invocation::of(&FRAUD_SCRIPTS.lift);
        invocation.key(BLOCKS.as_str()).arg(prefix).arg(now_ms);
        let subject = [PREFIX_SUBJECT, prefix].concat();
        self.add_outbox(&mut invocation, &EventSubject::prefix(&subject, ""));
        let mut connection = self.connections.get();
        let lifted: i64 = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        Ok(lifted == 1)
    }

    async fn fraud_traffic(&self, from: u64, to: u64) -> Result<TrafficCounts, StoreError> {
        let mut connection = self.connections.get();
        let names = redis::pipe()
            .cmd("HGETALL")
            .arg(fraud_prefixes())
            .cmd("HGETALL")
            .arg(fraud_countries())
            .to_owned();
        let (prefixes, countries): (HashMap<String, String>, HashMap<String, String>) =
            self.bounded(names.query_async(&mut connection)).await?;
        let countries: Vec<String> = countries.into_keys().collect();
        let prefixes: Vec<(String, String)> = prefixes.into_iter().collect();
        let hours: Vec<u64> = (from / 60..=to / 60).collect();
        let scopes: Vec<FraudScope<'_>> = std::iter::once(FraudScope::Service)
            .chain(countries.iter().map(|c| FraudScope::Country(c)))
            .chain(prefixes.iter().map(|(p, _)| FraudScope::Prefix(p)))
            .collect();
        let mut pipeline = redis::pipe();
        for scope in &scopes {
            for hour in &hours {
                pipeline.cmd("HGETALL").arg(fraud_minutes(*scope, *hour));
            }
        }
        let replies: Vec<HashMap<String, i64>> =
            self.bounded(pipeline.query_async(&mut connection)).await?;
        let mut per_scope = replies.chunks(hours.len().max(1)).map(|chunk| {
            let mut minutes = HashMap::new();
            for fields in chunk {
                minutes_of(fields, &mut minutes);
            }
            within(minutes, from, to)
        });
        let service = per_scope.next().unwrap_or_default();
        let countries = countries
            .into_iter()
            .map(|country| (country, per_scope.next().unwrap_or_default()))
            .collect();
        let prefixes = prefixes
            .into_iter()
            .map(|(prefix, country)| (prefix, country, per_scope.next().unwrap_or_default()))
            .collect();
        Ok(TrafficCounts {
            service,
            countries,
            prefixes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fraud::Reason;

    fn block(until_ms: u64) -> PrefixBlock {
        PrefixBlock {
            prefix: "44770".to_owned(),
            country: "GB|".to_owned(),
            reason: Reason::Surge,
            since_ms: 1,
            until_ms,
            strikes: 3,
            struck_ms: 4,
            sends: 5,
            conversions: 6,
            lifted_ms: 0,
            evidence: "range7 | and all".to_owned(),
        }
    }

    fn step(prefix: &str, enforce: bool) -> GuardStep<'_> {
        GuardStep {
            send: FraudSend {
                prefix,
                country: "GB",
                now_ms: 28_920_001_234,
            },
            enforce,
            levels: None,
        }
    }

    #[test]
    fn the_guard_s_argument_is_enforce_then_the_prefix() {
        assert_eq!(guard_arg(&step("44770", true)), "144770");
        assert_eq!(guard_arg(&step("44770", false)), "044770");
        // A mail domain's prefix keeps its '@' and everything after the first byte.
        assert_eq!(guard_arg(&step("@example.com", true)), "1@example.com");
    }

    #[test]
    fn a_delivered_send_reads_its_block_record_or_none() {
        let reply = |raw: &[u8]| [Value::Int(1), Value::BulkString(raw.to_vec())];
        let Admission::Admitted {
            block: none,
            levels,
        } = admitted_at(&reply(b""), 1).unwrap()
        else {
            panic!("admitted");
        };
        assert_eq!((none, levels), (None, None));

        // The JSON is the whole value, `|` and all.
        let recorded = block(2);
        let raw = encode_block(&recorded).unwrap();
        assert_eq!(
            admitted_at(&reply(raw.as_bytes()), 1).unwrap(),
            Admission::Admitted {
                block: Some(recorded.clone()),
                levels: None
            }
        );
        assert_eq!(refusal_at(&reply(raw.as_bytes()), 1).unwrap(), recorded);
    }

    #[test]
    fn a_missing_or_malformed_block_is_a_protocol_error() {
        let short = [Value::Int(1)];
        assert!(matches!(
            admitted_at(&short, 1),
            Err(StoreError::Protocol(_))
        ));
        let broken = [Value::Int(1), Value::BulkString(b"{\"prefix\":".to_vec())];
        assert!(matches!(
            admitted_at(&broken, 1),
            Err(StoreError::Protocol(_))
        ));
        // A refusal without its block is no refusal.
        let empty = [Value::Int(-4), Value::BulkString(Vec::new())];
        assert!(matches!(
            refusal_at(&empty, 1),
            Err(StoreError::Protocol(_))
        ));
    }

    #[test]
    fn only_an_active_block_refuses_and_only_when_enforced() {
        let now = 1_000;
        assert_eq!(
            admission_of(Some(block(now + 1)), true, now),
            Admission::Refused(block(now + 1))
        );
        // Not enforced: admitted, the active record answered.
        assert_eq!(
            admission_of(Some(block(now + 1)), false, now),
            Admission::Admitted {
                block: Some(block(now + 1)),
                levels: None
            }
        );
        // Over at `until_ms` itself.
        assert_eq!(
            admission_of(Some(block(now)), true, now),
            Admission::Admitted {
                block: Some(block(now)),
                levels: None
            }
        );
        assert_eq!(
            admission_of(None, true, now),
            Admission::Admitted {
                block: None,
                levels: None
            }
        );
    }

    fn change(sends: i64, conversions: i64, refused: i64, undelivered: i64) -> TrafficChange {
        TrafficChange {
            prefix: "44770".to_owned(),
            country: "GB".to_owned(),
            minute: 482_000,
            sends,
            conversions,
            refused,
            undelivered,
        }
    }

    #[test]
    fn a_change_travels_as_seven_arguments_with_the_undelivered_apart() {
        assert_eq!(
            traffic_args(&change(5, 2, 1, 3)),
            ["44770", "GB", "482000", "2", "2", "3", "1"]
        );
        // Given back: negative, as the script adds it.
        assert_eq!(
            traffic_args(&change(-1, 0, 0, 0)),
            ["44770", "GB", "482000", "-1", "0", "0", "0"]
        );
        // As many as the script reads per change.
        assert!(include_str!("fraud_traffic.lua").contains("1 + 7 * i"));
        assert!(adds_nothing(&change(0, 0, 0, 0)));
        assert!(!adds_nothing(&change(0, 0, 1, 0)));
        assert!(!adds_nothing(&change(0, 0, 0, -1)));
    }

    #[test]
    fn a_change_names_the_hour_of_its_minute_in_each_scope() {
        let mut late = change(1, 0, 0, 0);
        late.minute = 482_039;
        late.country = "FR".to_owned();
        let keys = traffic_keys([&change(1, 0, 0, 0), &late]);
        assert_eq!(
            keys,
            [
                fraud_prefixes(),
                fraud_countries(),
                fraud_minutes(FraudScope::Prefix("44770"), 8033),
                fraud_minutes(FraudScope::Country("GB"), 8033),
                fraud_minutes(FraudScope::Service, 8033),
                fraud_minutes(FraudScope::Prefix("44770"), 8033),
                fraud_minutes(FraudScope::Country("FR"), 8033),
                fraud_minutes(FraudScope::Service, 8033),
            ]
        );
        assert_eq!(
            traffic_keys([&change(1, 0, 0, 0)])[2],
            "verify_code:fraud:{guard}:p:44770:8033"
        );
    }

    #[test]
    fn a_minute_counts_undelivered_sends_as_sends_and_negatives_as_zero() {
        let fields: HashMap<String, i64> = [
            ("s482000", 4),
            ("x482000", 2),
            ("c482000", 1),
            ("r482000", 7),
            ("s482001", -3),
            ("c482001", -1),
            ("x482001", 1),
            ("junk", 9),
        ]
        .into_iter()
        .map(|(field, value)| (field.to_owned(), value))
        .collect();
        let mut minutes = HashMap::new();
        minutes_of(&fields, &mut minutes);
        assert_eq!(
            within(minutes, 482_000, 482_001),
            [
                MinuteCounts {
                    minute: 482_000,
                    sends: 6,
                    conversions: 1,
                    refused: 7,
                    undelivered: 2,
                },
                MinuteCounts {
                    minute: 482_001,
                    sends: 1,
                    conversions: 0,
                    refused: 0,
                    undelivered: 1,
                },
            ]
        );
    }

    #[test]
    fn a_mark_reads_back_as_written() {
        let mark = SendMark {
            minute: 482_000,
            token: u64::MAX,
        };
        assert_eq!(decode_mark(&encode_mark(mark)), Some(mark));
        assert_eq!(decode_mark("482000"), None);
    }
}
