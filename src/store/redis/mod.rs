//! The Redis store: every read-compare-write is one Lua script (the `.lua` files beside this
//! one), sent over auto-reconnecting multiplexed connections (to one node, one per worker
//! thread; to a Cluster or the primary Sentinel names, one shared; `connection.rs`), so that
//! requests never wait for an exclusive connection. Every call is bounded by the command timeout.

mod captchas;
mod codes;
mod dev_inbox;
mod events;
mod factors;
mod fraud;
mod fused;
mod health;
mod idempotency;
mod levels;
mod pow;
mod quotas;
mod receipts;
mod safe_list;
mod stats;
mod twilio;

mod cluster;
mod connection;
mod invocation;
mod keys;
mod sentinel;
mod settings;
mod tls;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::{RedisError, Script, Value};

use self::connection::Connections;
use self::events::{EVENTS_PRELUDE, EventSubject};
use self::invocation::Invocation;

pub use self::settings::{
    RedisCredentials, RedisSettings, RedisTopology, RedisVariables, SENTINEL_MASTER_PASSWORD,
};
pub use self::tls::read_ca_file;

use super::{
    Budget, Budgets, CodeCandidate, DEV_INBOX_CAPACITY, DEV_INBOX_TTL, DeliveryStatus, DevMessage,
    IssueKind, IssueOutcome, IssueParams, IssueUndo, IssuedCode, PendingCode, PreviousIssue,
    QuotaDecision, QuotaRule, QuotaScope, QuotaToken, ResendPolicy, StoreError, StoredCaptcha,
    VerificationRecord, VerificationStatus, VerificationTarget, VerifyOutcome, VerifyParams,
};
use crate::domain::{
    CaptchaId, CodeDigest, Destination, Phone, Purpose, SealedCode, VerificationId,
};

/// The scripts, hashed once per process; `Script` sends EVALSHA and loads the body again on
/// NOSCRIPT, so a Redis restart or `SCRIPT FLUSH` costs one extra round trip, not an error.
struct Scripts {
    issue: Script,
    verify: Script,
    verify_id: Script,
    verification: Script,
    reserve_quota: Script,
    begin_idempotent: Script,
    record_pow: Script,
    take_captcha: Script,
    receipt: Script,
}

/// The scripts that undo what a failed request took, sent whole (`EVAL`, see [`whole_script`]).
static UNDO_ISSUE: LazyLock<String> =
    LazyLock::new(|| [EVENTS_PRELUDE, include_str!("undo_issue.lua")].concat());
const ABANDON_IDEMPOTENT: &str = include_str!("abandon_idempotent.lua");

/// `EVAL` of `body` on `keys`, for the steps that undo or free what a failed request took.
/// `EVALSHA` meets `NOSCRIPT` when the script was never run since Redis started, and the client
/// loads it and retries: a second round trip, which never happens if the caller gave up while
/// Redis was stalled. Sent whole, the step waits in the connection and runs when Redis resumes.
fn whole_script(body: &str, keys: &[String]) -> redis::Cmd {
    let mut command = redis::cmd("EVAL");
    command.arg(body).arg(keys.len()).arg(keys);
    command
}

/// The sliding-window functions the quota-enforcing scripts share.
const QUOTA_PRELUDE: &str = include_str!("quota.lua");

/// How the scripts that read a verification find it under either of its names.
const VERIFICATION_PRELUDE: &str = include_str!("verification_prelude.lua");

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    issue: Script::new(
        &[
            EVENTS_PRELUDE,
            QUOTA_PRELUDE,
            levels::LEVELS_PRELUDE,
            include_str!("issue.lua"),
        ]
        .concat(),
    ),
    verify: Script::new(
        &[
            EVENTS_PRELUDE,
            QUOTA_PRELUDE,
            VERIFICATION_PRELUDE,
            include_str!("verify.lua"),
        ]
        .concat(),
    ),
    verify_id: Script::new(
        &[
            EVENTS_PRELUDE,
            QUOTA_PRELUDE,
            VERIFICATION_PRELUDE,
            include_str!("verify_id.lua"),
        ]
        .concat(),
    ),
    verification: Script::new(
        &[
            EVENTS_PRELUDE,
            VERIFICATION_PRELUDE,
            include_str!("verification.lua"),
        ]
        .concat(),
    ),
    reserve_quota: Script::new(&[QUOTA_PRELUDE, include_str!("reserve_quota.lua")].concat()),
    begin_idempotent: Script::new(include_str!("begin_idempotent.lua")),
    record_pow: Script::new(include_str!("record_pow.lua")),
    take_captcha: Script::new(include_str!("take_captcha.lua")),
    receipt: Script::new(
        &[
            EVENTS_PRELUDE,
            VERIFICATION_PRELUDE,
            include_str!("receipt.lua"),
        ]
        .concat(),
    ),
});

/// Quota rules as the scripts read them: limit, window in ms, ...
fn rule_args(rules: &[QuotaRule]) -> Vec<u64> {
    rules
        .iter()
        .flat_map(|rule| [u64::from(rule.limit), duration_ms(rule.window)])
        .collect()
}

/// Adds each budget's log as a key and its rules as arguments (the number of rules, then the
/// rules), as `quota.lua`'s `quota_budgets` reads them.
fn add_budgets(invocation: &mut Invocation<'_>, budgets: &[Budget<'_>]) {
    for budget in budgets {
        invocation
            .key(keys::quota_key(budget.scope))
            .arg(budget.rules.len());
        for rule in budget.rules {
            invocation.arg(rule.limit).arg(duration_ms(rule.window));
        }
    }
}

#[derive(Clone)]
pub struct RedisStore {
    connections: Connections,
    command_timeout: Duration,
    /// Whether the scripts append events (`EventStore::record_events`).
    events_on: Arc<AtomicBool>,
    /// On a Cluster, the slots whose outboxes to claim from (`events.rs`).
    cluster_outboxes: Arc<std::sync::Mutex<events::ClusterOutboxes>>,
    /// Write verifications as builds before 2026-12-07 read them (`VCODE_REDIS_OLDER_INSTANCES`:
    /// a rolling upgrade; [`RedisSettings::older_instances`]).
    older_instances: bool,
}

impl RedisStore {
    /// Prepares the connection without waiting for Redis: a Redis that is down at start-up
    /// makes `/readyz` fail until it is up, instead of stopping the service. Cluster and
    /// Sentinel connections are opened inside a Tokio runtime: their tasks run on it.
    pub fn connect(settings: &RedisSettings) -> Result<Self, StoreError> {
        let connections = Connections::open(settings)
            .map_err(|e| StoreError::Unavailable(format!("bad Redis settings: {e}")))?;
        LazyLock::force(&SCRIPTS);
        Ok(Self {
            connections,
            command_timeout: settings.command_timeout,
            events_on: Arc::default(),
            cluster_outboxes: Arc::default(),
            older_instances: settings.older_instances,
        })
    }

    /// When a write this instance sends now must no longer apply: the moment its caller gives
    /// up waiting (unix ms). A script that Redis runs later (it was stalled, the reply timed
    /// out and the client was told 503) does nothing, so its retry finds no ghost code,
    /// cooldown or quota event. Assumes this host's and Redis's clocks agree (NTP) within the
    /// command timeout.
    fn give_up_at_ms(&self) -> u64 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        duration_ms(now + super::deadline::bound(self.command_timeout))
    }

    /// A script that refused to run past its caller's deadline: only seen when Redis's clock
    /// is ahead of this host's by more than the command timeout.
    fn ran_too_late(&self) -> StoreError {
        StoreError::Timeout(self.command_timeout)
    }

    /// Runs one Redis call within the command timeout; a reconnect in progress counts too.
    async fn bounded<T>(
        &self,
        call: impl Future<Output = Result<T, RedisError>>,
    ) -> Result<T, StoreError> {
        self.bounded_for(super::deadline::bound(self.command_timeout), call)
            .await
    }

    /// `bounded`, within `limit` (what is left of one operation's command timeout).
    async fn bounded_for<T>(
        &self,
        limit: Duration,
        call: impl Future<Output = Result<T, RedisError>>,
    ) -> Result<T, StoreError> {
        let started = std::time::Instant::now();
        let result = match tokio::time::timeout(limit, call).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(store_error(error)),
            Err(_) => {
                self.connections.timed_out();
                Err(StoreError::Timeout(self.command_timeout))
            }
        };
        let error_kind = result.as_ref().err().map(|error| match error {
            StoreError::Timeout(_) => "timeout",
            StoreError::Unavailable(_) => "unavailable",
            StoreError::Protocol(_) => "protocol",
        });
        crate::metrics::observe_store_call("redis", started.elapsed().as_secs_f64(), error_kind);
        result
    }
}

fn store_error(error: RedisError) -> StoreError {
    if error.is_timeout() {
        StoreError::Unavailable(format!("timed out: {error}"))
    } else {
        StoreError::Unavailable(error.to_string())
    }
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The reply of a script that answers a value, nothing (`false`), or -1 when it ran past its
/// caller's deadline (`begin_idempotent.lua`, `take_captcha.lua`): `Err(())` for the latter.
fn value_or_too_late(reply: Value, what: &str) -> Result<Result<Option<Vec<u8>>, ()>, StoreError> {
    match reply {
        Value::Nil => Ok(Ok(None)),
        Value::BulkString(bytes) => Ok(Ok(Some(bytes))),
        Value::Int(-1) => Ok(Err(())),
        other => Err(StoreError::Protocol(format!("{what}: {other:?}"))),
    }
}

fn protocol(what: &str, reply: &[Value]) -> StoreError {
    StoreError::Protocol(format!("{what}: {reply:?}"))
}

fn int_at(reply: &[Value], index: usize) -> Option<i64> {
    match reply.get(index)? {
        Value::Int(n) => Some(*n),
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok()?.parse().ok(),
        _ => None,
    }
}

fn u64_at(reply: &[Value], index: usize) -> Option<u64> {
    int_at(reply, index).and_then(|n| u64::try_from(n).ok())
}

fn u32_at(reply: &[Value], index: usize) -> Option<u32> {
    int_at(reply, index).and_then(|n| u32::try_from(n).ok())
}

/// A captcha as one small string, its seed: a plain string is the most compact value Redis
/// has, and GETDEL takes it in one step.
fn encode_captcha(captcha: &StoredCaptcha) -> String {
    captcha.seed.to_string()
}

fn decode_captcha(raw: &str) -> Result<StoredCaptcha, StoreError> {
    raw.parse()
        .map(|seed| StoredCaptcha { seed })
        .map_err(|_| StoreError::Protocol(format!("captcha value {raw:?}")))
}

fn bytes_at(reply: &[Value], index: usize) -> Option<&[u8]> {
    match reply.get(index)? {
        Value::BulkString(bytes) => Some(bytes),
        _ => None,
    }
}

/// A code's record as the code hash keeps it in one field: the digest, then the sealed code if
/// any. One field instead of two keeps a pending code in a smaller allocation.
fn code_record(digest: &CodeDigest, sealed: Option<&SealedCode>) -> Vec<u8> {
    let sealed = sealed.map_or(&[][..], |sealed| &sealed.0[..]);
    [digest.as_bytes(), sealed].concat()
}

/// The digest and sealed code of a record (see [`code_record`]).
fn split_code_record(record: &[u8]) -> Option<(CodeDigest, Option<SealedCode>)> {
    if record.len() < CodeDigest::LEN {
        return None;
    }
    let (digest, sealed) = record.split_at(CodeDigest::LEN);
    Some((
        CodeDigest::from_slice(digest)?,
        (!sealed.is_empty()).then(|| SealedCode(sealed.into())),
    ))
}

fn record_at(reply: &[Value], index: usize) -> Option<(CodeDigest, Option<SealedCode>)> {
    split_code_record(bytes_at(reply, index)?)
}

/// How many values of `issue.lua`'s reply a created code's delivery takes (`{1, sent_at_ms}`:
/// its record is the candidate's) and a redelivered or rotated one's; the guard's block
/// record follows a delivery's.
const CREATED_FIELDS: usize = 2;
const RESENT_FIELDS: usize = 7;

/// `issue.lua`'s reply, for `candidate` (its digest and id); `budgets` are those it was given,
/// all of the send's when `budgets_reserved` (reserved if it delivers).
fn parse_issue(
    reply: &[Value],
    candidate: CodeCandidate,
    quota_token: QuotaToken,
    budgets: &[Budget<'_>],
    budgets_reserved: bool,
) -> Option<IssueOutcome> {
    let kind = match int_at(reply, 0)? {
        -3 => {
            let refused = budgets.get(usize::try_from(int_at(reply, 1)?).ok()?.checked_sub(1)?)?;
            return Some(IssueOutcome::BudgetExceeded {
                scope: refused.scope,
                retry_after: Duration::from_millis(u64_at(reply, 2)?),
            });
        }
        0 => {
            return Some(IssueOutcome::Cooldown {
                retry_after: Duration::from_millis(u64_at(reply, 1)?),
            });
        }
        -1 => {
            return Some(IssueOutcome::QuotaExceeded {
                retry_after: Duration::from_millis(u64_at(reply, 1)?),
            });
        }
        -5 => return Some(IssueOutcome::SendLogExists),
        1 => {
            return Some(IssueOutcome::Send(IssuedCode {
                sealed: None,
                kind: IssueKind::Created,
                budgets_reserved,
                undo: IssueUndo {
                    verification: candidate.verification,
                    quota_token,
                    digest: candidate.digest,
                    sent_at_ms: u64_at(reply, 1)?,
                    deliveries: 1,
                    previous: None,
                },
            }));
        }
        2 => IssueKind::Redelivered,
        3 => IssueKind::Rotated,
        _ => return None,
    };
    let (digest, sealed) = record_at(reply, 1)?;
    let (previous_digest, previous_sealed) = record_at(reply, 4)?;
    Some(IssueOutcome::Send(IssuedCode {
        sealed: match kind {
            IssueKind::Redelivered => sealed,
            _ => None,
        },
        kind,
        budgets_reserved,
        undo: IssueUndo {
            verification: candidate.verification,
            quota_token,
            digest,
            sent_at_ms: u64_at(reply, 2)?,
            deliveries: u32_at(reply, 3)?,
            previous: Some(PreviousIssue {
                digest: previous_digest,
                sealed: previous_sealed,
                sent_at_ms: u64_at(reply, 5)?,
                expires_at_ms: u64_at(reply, 6)?,
                latest_send: None,
            }),
        },
    }))
}

fn parse_verify(reply: &[Value]) -> Option<VerifyOutcome> {
    Some(match int_at(reply, 0)? {
        1 => VerifyOutcome::Verified,
        0 => VerifyOutcome::Mismatch {
            remaining_attempts: u32_at(reply, 1)?,
        },
        -1 => VerifyOutcome::CodeExpired,
        -2 => VerifyOutcome::Destroyed,
        -3 => VerifyOutcome::QuotaExceeded {
            retry_after: Duration::from_millis(u64_at(reply, 1)?),
        },
        -4 => VerifyOutcome::Canceled,
        _ => return None,
    })
}

/// The target as `issue.lua` stores it: `<E.164> <purpose>` (neither contains a space).
fn encode_target(destination: &Destination, purpose: &Purpose) -> String {
    [destination.key(), " ", purpose.as_str()].concat()
}

fn decode_target(raw: &str) -> Option<VerificationTarget> {
    let (phone, purpose) = raw.split_once(' ')?;
    Some(VerificationTarget {
        phone_e164: phone.to_owned(),
        purpose: purpose.to_owned(),
    })
}

/// `verification.lua`'s answer: `{now, bound, c, e, a, s, d}`, or `None` for `{}`.
fn parse_verification(
    reply: &[Value],
    target: VerificationTarget,
) -> Option<Option<VerificationRecord>> {
    if reply.is_empty() {
        return Some(None);
    }
    let now = u64_at(reply, 0)?;
    let bound = int_at(reply, 1)? == 1;
    let expires_at_ms = u64_at(reply, 3)?;
    let text = |index| bytes_at(reply, index);
    let status = match text(5)? {
        b"a" => VerificationStatus::Approved,
        b"c" => VerificationStatus::Canceled,
        b"m" => VerificationStatus::MaxAttemptsReached,
        b"" if bound && expires_at_ms > now => VerificationStatus::Pending,
        b"" => VerificationStatus::Expired,
        _ => return None,
    };
    Some(Some(VerificationRecord {
        target,
        status,
        delivery: delivery_of(text(6)?)?,
        delivery_error: Some(text(7)?)
            .filter(|code| !code.is_empty())
            .map(|code| String::from_utf8_lossy(code).into_owned()),
        failed_attempts: match text(4)? {
            b"" => 0,
            _ => u32_at(reply, 4)?,
        },
        created_at_ms: u64_at(reply, 2)?,
        expires_at_ms,
    }))
}

/// A verification's `d` field (`receipt.lua`).
fn delivery_of(field: &[u8]) -> Option<DeliveryStatus> {
    Some(match field {
        b"" => DeliveryStatus::Sent,
        b"u" => DeliveryStatus::Unconfirmed,
        b"d" => DeliveryStatus::Delivered,
        b"x" => DeliveryStatus::Undelivered,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripts_know_the_digest_length() {
        let line = format!("local DIGEST_BYTES = {}\n", CodeDigest::LEN);
        assert!(include_str!("verify.lua").contains(&line));
        assert!(include_str!("verify_id.lua").contains(&line));
        assert!(include_str!("issue.lua").contains(&line));
        assert!(include_str!("undo_issue.lua").contains(&line));
    }

    #[test]
    fn a_code_record_is_the_digest_then_the_sealed_code() {
        let digest = CodeDigest([7; CodeDigest::LEN]);
        let sealed = SealedCode(vec![1, 2, 3, 4, 5, 6].into());
        let record = code_record(&digest, Some(&sealed));
        assert_eq!(record.len(), CodeDigest::LEN + 6);
        assert_eq!(split_code_record(&record), Some((digest, Some(sealed))));
        assert_eq!(
            split_code_record(&code_record(&digest, None)),
            Some((digest, None))
        );
        assert_eq!(split_code_record(&[7; CodeDigest::LEN - 1]), None);
    }
}
