//! The fraud-guard role of the Redis store: every key under the one hash tag `{guard}`
//! (keys.rs), so each step is one script on one node. Counters are hashes per scope and hour,
//! fields per minute, expiring after the retention; blocks are one hash of JSON records.
//! The guard's keys share no slot with a phone's: on one node (and Sentinel's primary) the code
//! scripts take the send's and the verify's steps in their own (`add_admission`,
//! `add_conversion`), as they reserve the client and global budgets; on a Cluster they are
//! steps apart.

use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::sync::LazyLock;
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

use super::keys::{
    FraudScope, fraud_attribution, fraud_blocks, fraud_minutes, fraud_tally,
    push_fraud_attribution, push_fraud_minutes, push_fraud_tally,
};
use super::*;
use crate::domain::traffic::{BUCKET_MS, Counts, RETENTION_MINUTES, Tally, Window};
use crate::store::events::{PREFIX_SUBJECT, block_detail};
use crate::store::{
    Admission, Conversion, FraudSend, FraudStore, GuardStep, MinuteCounts, PrefixBlock, SendMark,
    TrafficCounts,
};

/// A mark as the attribution key (and a message's index, receipts.rs) holds it:
/// `<minute>:<token>`.
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

/// The running tallies the admit, release and convert scripts keep (`fraud_tally.lua`).
pub(super) const TALLY_PRELUDE: &str = include_str!("fraud_tally.lua");

struct FraudScripts {
    admit: Script,
    release: Script,
    convert: Script,
    undelivered: Script,
    block: Script,
    lift: Script,
}

static FRAUD_SCRIPTS: LazyLock<FraudScripts> = LazyLock::new(|| FraudScripts {
    admit: Script::new(&[TALLY_PRELUDE, include_str!("fraud_admit.lua")].concat()),
    release: Script::new(&[TALLY_PRELUDE, include_str!("fraud_release.lua")].concat()),
    convert: Script::new(&[TALLY_PRELUDE, include_str!("fraud_convert.lua")].concat()),
    undelivered: Script::new(&[TALLY_PRELUDE, include_str!("fraud_undelivered.lua")].concat()),
    block: Script::new(&[EVENTS_PRELUDE, include_str!("fraud_block.lua")].concat()),
    lift: Script::new(&[EVENTS_PRELUDE, include_str!("fraud_lift.lua")].concat()),
});

/// How long the hourly counters live: the retention and the hour they cover.
const COUNTERS_TTL_MS: u64 = (RETENTION_MINUTES + 60) * BUCKET_MS;

/// `KEYS` of `fraud_admit.lua`.
#[cfg(test)]
pub(super) fn admit_keys(
    prefix: &str,
    country: &str,
    attribution: &str,
    minute: u64,
) -> Vec<String> {
    let mut keys = Vec::with_capacity(11);
    each_admit_key(prefix, country, attribution, minute, |key| {
        keys.push(key.to_owned())
    });
    keys
}

/// `KEYS` of `fraud_admit.lua`, each handed to `add` in `KEYS` order: those that name no
/// prefix, hour or code built once, the others in turn in one buffer (the caller copies each).
fn each_admit_key(
    prefix: &str,
    country: &str,
    attribution: &str,
    minute: u64,
    mut add: impl FnMut(&str),
) {
    let [blocks, prefixes, countries, service_tally] = &*CONSTANT_KEYS;
    let hour = minute / 60;
    let before = hour.saturating_sub(1);
    add(blocks);
    add(prefixes);
    add(countries);
    let mut key = String::with_capacity(96);
    let mut built = |push: &dyn Fn(&mut String)| {
        key.clear();
        push(&mut key);
        add(&key);
    };
    built(&|key| push_fraud_attribution(key, attribution));
    built(&|key| push_fraud_minutes(key, FraudScope::Prefix(prefix), hour));
    built(&|key| push_fraud_minutes(key, FraudScope::Prefix(prefix), before));
    built(&|key| push_fraud_minutes(key, FraudScope::Country(country), hour));
    built(&|key| push_fraud_minutes(key, FraudScope::Service, hour));
    built(&|key| push_fraud_minutes(key, FraudScope::Service, before));
    built(&|key| push_fraud_tally(key, FraudScope::Prefix(prefix)));
    add(service_tally);
}

/// `KEYS` of `fraud_release.lua`.
pub(super) fn release_keys(
    prefix: &str,
    country: &str,
    attribution: &str,
    minute: u64,
) -> Vec<String> {
    let hour = minute / 60;
    vec![
        fraud_attribution(attribution),
        fraud_minutes(FraudScope::Prefix(prefix), hour),
        fraud_minutes(FraudScope::Country(country), hour),
        fraud_minutes(FraudScope::Service, hour),
        fraud_tally(FraudScope::Prefix(prefix)),
        fraud_tally(FraudScope::Service),
    ]
}

/// `KEYS` of `fraud_undelivered.lua`: the send's hour of the prefix, the country and the
/// service, then the prefix's and the service's tallies.
pub(super) fn undelivered_keys(prefix: &str, country: &str, minute: u64) -> Vec<String> {
    let hour = minute / 60;
    vec![
        fraud_minutes(FraudScope::Prefix(prefix), hour),
        fraud_minutes(FraudScope::Country(country), hour),
        fraud_minutes(FraudScope::Service, hour),
        fraud_tally(FraudScope::Prefix(prefix)),
        fraud_tally(FraudScope::Service),
    ]
}

/// `KEYS` of `fraud_convert.lua`: the attribution, the prefix's and the service's tallies,
/// then three per hour of `minutes`.
pub(super) fn convert_keys(
    prefix: &str,
    country: &str,
    attribution: &str,
    minutes: RangeInclusive<u64>,
) -> Vec<String> {
    let hours = minutes.start() / 60..=minutes.end() / 60;
    [
        fraud_attribution(attribution),
        fraud_tally(FraudScope::Prefix(prefix)),
        fraud_tally(FraudScope::Service),
    ]
    .into_iter()
    .chain(hours.flat_map(|hour| {
        [
            fraud_minutes(FraudScope::Prefix(prefix), hour),
            fraud_minutes(FraudScope::Country(country), hour),
            fraud_minutes(FraudScope::Service, hour),
        ]
    }))
    .collect()
}

/// The guard's keys that name no prefix, hour or code, built once.
static CONSTANT_KEYS: LazyLock<[String; 4]> = LazyLock::new(|| {
    [
        fraud_blocks(),
        super::keys::fraud_prefixes(),
        super::keys::fraud_countries(),
        fraud_tally(FraudScope::Service),
    ]
});

/// Adds the guard's step of one send to a script, as `fraud_admit.lua` reads it (`issue.lua`
/// after its own keys and arguments): its eleven keys (`each_admit_key`), then its one argument,
/// the step's ten fields separated by spaces (`fraud_step` in fraud_tally.lua): a send names
/// about twenty values for the guard, and each value of a script call costs the caller an
/// allocation and two copies, more than writing its digits into one string.
pub(super) fn add_admission(invocation: &mut redis::ScriptInvocation<'_>, step: &GuardStep<'_>) {
    let send = &step.send;
    each_admit_key(
        send.prefix,
        send.country,
        send.attribution,
        step.window.minute,
        |key| {
            invocation.key(key);
        },
    );
    invocation.arg(step_fields(step));
}

/// `fraud_step`'s argument: prefix, country, now, minute, the window's first minute and first
/// minute within grace, enforce (1/0), the attribution's and the counters' ttl (ms), and the
/// send's mark, space-separated.
fn step_fields(step: &GuardStep<'_>) -> String {
    let (send, window) = (&step.send, step.window);
    let mut fields = String::with_capacity(send.prefix.len() + send.country.len() + 120);
    let mut number = itoa::Buffer::new();
    for part in [send.prefix, " ", send.country, " "] {
        fields.push_str(part);
    }
    for value in [
        send.now_ms,
        window.minute,
        window.from,
        window.judged_before,
        u64::from(step.enforce),
        duration_ms(step.attribution_ttl).max(1),
        COUNTERS_TTL_MS,
        window.minute,
    ] {
        fields.push_str(number.format(value));
        fields.push(' ');
    }
    // The mark, `<minute>:<token>`: the last number is its minute.
    fields.pop();
    fields.push(':');
    fields.push_str(number.format(send.token));
    fields
}

/// A counted send's admission from a reply whose `at` holds `fraud_count`'s string: the two
/// tallies' eight counts comma-separated, `|`, the previous mark (`<minute>:<token>`) or
/// nothing, `|`, the block or nothing. The send is counted under its step's `mark`.
pub(super) fn admitted_at(
    reply: &[Value],
    at: usize,
    mark: SendMark,
) -> Result<Admission, StoreError> {
    let parsed = bytes_at(reply, at).and_then(|raw| {
        let mut fields = Fields(raw);
        // The service's last count ends at the first `|`.
        let mut tally = |last: u8| {
            Some(Tally {
                judged: Counts {
                    sends: fields.number(b',')?,
                    conversions: fields.number(b',')?,
                    undelivered: 0,
                },
                unjudged: Counts {
                    sends: fields.number(b',')?,
                    conversions: fields.number(last)?,
                    undelivered: 0,
                },
            })
        };
        let prefix = tally(b',')?;
        let service = tally(b'|')?;
        let previous = match fields.take(b'|')? {
            [] => None,
            mark => {
                let mut mark = Fields(mark);
                Some(SendMark {
                    minute: mark.number(b':')?,
                    token: decimal(mark.0)?,
                })
            }
        };
        Some((prefix, service, previous, fields.0))
    });
    let Some((prefix, service, previous, block)) = parsed else {
        return Err(protocol("fraud admit", reply));
    };
    Ok(Admission::Admitted {
        prefix,
        service,
        block: match block {
            [] => None,
            raw => Some(parse_block(raw)?),
        },
        previous,
        mark,
        levels: None,
    })
}

/// What is left of a reply string, read field by field.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    /// The bytes before the next `end` (consumed with it); `None` if there is no `end`.
    fn take(&mut self, end: u8) -> Option<&'a [u8]> {
        let at = self.0.iter().position(|&b| b == end)?;
        let field = &self.0[..at];
        self.0 = &self.0[at + 1..];
        Some(field)
    }

    /// The decimal number before the next `end` (consumed with it).
    fn number(&mut self, end: u8) -> Option<u64> {
        decimal(self.take(end)?)
    }
}

/// An unsigned decimal of ASCII digits (the Lua side writes integers only).
fn decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &digit| {
        let digit = digit.checked_sub(b'0').filter(|d| *d < 10)?;
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

/// The block of a refused send at `at` of a reply.
pub(super) fn refusal_at(reply: &[Value], at: usize) -> Result<PrefixBlock, StoreError> {
    block_at(reply, at)?.ok_or_else(|| protocol("fraud refusal", reply))
}

/// Adds a verified code's conversion to a script, as `fraud_convert.lua` reads it (the verify
/// scripts after their own keys and arguments): the attribution, the tallies and the hours
/// from the oldest its send can be in, then the arguments.
pub(super) fn add_conversion(
    invocation: &mut redis::ScriptInvocation<'_>,
    conversion: &Conversion<'_>,
) {
    let now_minute = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
        / BUCKET_MS;
    // No attribution outlives the counters: never more hours than they keep.
    let first = conversion
        .since_minute
        .max(now_minute.saturating_sub(RETENTION_MINUTES))
        .min(now_minute);
    invocation
        .key(convert_keys(
            conversion.prefix,
            conversion.country,
            conversion.attribution,
            first..=now_minute,
        ))
        .arg(first / 60)
        .arg(conversion.since_minute)
        .arg(COUNTERS_TTL_MS);
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

/// One scope's hourly hash, read into per-minute counts.
fn minutes_of(fields: HashMap<String, u64>, into: &mut HashMap<u64, MinuteCounts>) {
    for (field, value) in fields {
        let (kind, minute) = field.split_at(1);
        let Ok(minute) = minute.parse::<u64>() else {
            continue;
        };
        let counts = into.entry(minute).or_insert(MinuteCounts {
            minute,
            ..MinuteCounts::default()
        });
        // An undelivered send has left 's' (the judgement's sends) for 'x'.
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
    async fn admit_send(
        &self,
        send: &FraudSend<'_>,
        window: &Window,
        enforce: bool,
        attribution_ttl: Duration,
    ) -> Result<Admission, StoreError> {
        let mut invocation = FRAUD_SCRIPTS.admit.prepare_invoke();
        let step = GuardStep {
            levels: None,
            send: *send,
            window,
            enforce,
            attribution_ttl,
        };
        add_admission(&mut invocation, &step);
        let mut connection = self.connections.get();
        let reply: Vec<Value> = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        if int_at(&reply, 0) == Some(1) {
            let block = block_at(&reply, 1)?.ok_or_else(|| protocol("fraud admit", &reply))?;
            return Ok(Admission::Refused(block));
        }
        admitted_at(&reply, 1, step.mark())
    }

    async fn release_send(
        &self,
        send: &FraudSend<'_>,
        ours: SendMark,
        previous: Option<SendMark>,
        refused: bool,
    ) -> Result<(), StoreError> {
        let minute = ours.minute;
        let mut invocation = FRAUD_SCRIPTS.release.prepare_invoke();
        invocation
            .key(release_keys(
                send.prefix,
                send.country,
                send.attribution,
                minute,
            ))
            .arg(minute)
            .arg(previous.map(encode_mark).unwrap_or_default())
            .arg(u8::from(refused))
            .arg(COUNTERS_TTL_MS)
            .arg(encode_mark(ours));
        let mut connection = self.connections.get();
        self.bounded(invocation.invoke_async::<i64>(&mut connection))
            .await
            .map(drop)
    }

    async fn count_undelivered(
        &self,
        prefix: &str,
        country: &str,
        mark: SendMark,
    ) -> Result<(), StoreError> {
        let mut invocation = FRAUD_SCRIPTS.undelivered.prepare_invoke();
        invocation
            .key(undelivered_keys(prefix, country, mark.minute))
            .arg(mark.minute);
        let mut connection = self.connections.get();
        self.bounded(invocation.invoke_async::<i64>(&mut connection))
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
        let mut invocation = FRAUD_SCRIPTS.convert.prepare_invoke();
        add_conversion(
            &mut invocation,
            &Conversion {
                attribution,
                prefix,
                country,
                since_minute,
            },
        );
        let mut connection = self.connections.get();
        let minute: i64 = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        Ok(u64::try_from(minute).ok())
    }

    async fn block_prefix(&self, block: &PrefixBlock, now_ms: u64) -> Result<bool, StoreError> {
        let mut invocation = FRAUD_SCRIPTS.block.prepare_invoke();
        invocation
            .key(fraud_blocks())
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
        let command = redis::cmd("HGETALL").arg(fraud_blocks()).to_owned();
        let raw: HashMap<String, Vec<u8>> =
            self.bounded(command.query_async(&mut connection)).await?;
        raw.values().map(|raw| parse_block(raw)).collect()
    }

    async fn lift_block(&self, prefix: &str, now_ms: u64) -> Result<bool, StoreError> {
        let mut invocation = FRAUD_SCRIPTS.lift.prepare_invoke();
        invocation.key(fraud_blocks()).arg(prefix).arg(now_ms);
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
            .arg(super::keys::fraud_prefixes())
            .cmd("HGETALL")
            .arg(super::keys::fraud_countries())
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
        let replies: Vec<HashMap<String, u64>> =
            self.bounded(pipeline.query_async(&mut connection)).await?;
        let mut per_scope = replies.chunks(hours.len().max(1)).map(|chunk| {
            let mut minutes = HashMap::new();
            for fields in chunk {
                minutes_of(fields.clone(), &mut minutes);
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

    const MARK: SendMark = SendMark {
        minute: 482_000,
        token: 7,
    };

    fn counted(raw: &[u8]) -> Result<Admission, StoreError> {
        admitted_at(&[Value::Int(1), Value::BulkString(raw.to_vec())], 1, MARK)
    }

    fn tally(counts: [u64; 4]) -> Tally {
        Tally {
            judged: Counts {
                sends: counts[0],
                conversions: counts[1],
                undelivered: 0,
            },
            unjudged: Counts {
                sends: counts[2],
                conversions: counts[3],
                undelivered: 0,
            },
        }
    }

    #[test]
    fn a_step_travels_as_ten_space_separated_fields() {
        let window = Window {
            now_ms: 28_920_001_234,
            minute: 482_000,
            from: 481_941,
            judged_before: 481_998,
        };
        let step = GuardStep {
            levels: None,
            send: FraudSend {
                prefix: "44770",
                country: "GB",
                attribution: "+447700900123:login",
                token: u64::MAX,
                now_ms: window.now_ms,
            },
            window: &window,
            enforce: true,
            attribution_ttl: Duration::from_secs(300),
        };
        assert_eq!(
            step_fields(&step),
            format!(
                "44770 GB 28920001234 482000 481941 481998 1 300000 {COUNTERS_TTL_MS} 482000:{}",
                u64::MAX
            )
        );
    }

    #[test]
    fn an_admission_is_read_from_one_string() {
        let Admission::Admitted {
            prefix,
            service,
            block,
            previous,
            mark,
            levels,
        } = counted(b"1,2,3,4,50,60,70,80|481999:18446744073709551615|").unwrap()
        else {
            panic!("admitted");
        };
        assert_eq!(mark, MARK, "counted under the step's own mark");
        assert_eq!(levels, None, "the levels' records are the issue's to add");
        assert_eq!(prefix, tally([1, 2, 3, 4]));
        assert_eq!(service, tally([50, 60, 70, 80]));
        assert_eq!(block, None);
        assert_eq!(
            previous,
            Some(SendMark {
                minute: 481_999,
                token: u64::MAX
            })
        );

        // A block's JSON is the rest of the string, `|` and all.
        let recorded = PrefixBlock {
            prefix: "44770".to_owned(),
            country: "GB|".to_owned(),
            reason: Reason::Surge,
            since_ms: 1,
            until_ms: 2,
            strikes: 3,
            struck_ms: 4,
            sends: 5,
            conversions: 6,
            lifted_ms: 0,
            evidence: "range7 | and all".to_owned(),
        };
        let raw = format!("0,0,1,0,9,9,9,9||{}", encode_block(&recorded).unwrap());
        let Admission::Admitted {
            block, previous, ..
        } = counted(raw.as_bytes()).unwrap()
        else {
            panic!("admitted");
        };
        assert_eq!(block, Some(recorded));
        assert_eq!(previous, None);
    }

    #[test]
    fn a_malformed_admission_is_a_protocol_error() {
        for raw in [
            &b""[..],
            b"1,2,3,4,5,6,7|x:1|",
            b"1,2,3,4,5,6,7,8",
            b"1,2,3,4,5,6,7,8|",
            b"1,2,3,-4,5,6,7,8||",
            b"1,2,3,4,5,6,7,99999999999999999999||",
            b"1,2,3,4,5,6,7,8|12|",
        ] {
            assert!(
                matches!(counted(raw), Err(StoreError::Protocol(_))),
                "{}",
                String::from_utf8_lossy(raw)
            );
        }
    }
}
