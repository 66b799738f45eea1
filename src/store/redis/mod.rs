//! The Redis store: every read-compare-write is one Lua script (the `.lua` files beside this
//! one), sent over one shared, auto-reconnecting multiplexed connection (to one node, a Cluster
//! or the primary Sentinel names; `connection.rs`) so that requests never wait for an exclusive
//! connection. Every call is bounded by the command timeout.

mod cluster;
mod connection;
pub mod keys;
pub mod legacy;
mod sentinel;

use std::collections::HashMap;
use std::future::Future;
use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use redis::{RedisError, Script, Value};

use self::connection::RedisConnection;

use crate::config::redact_url_password;

use super::{
    Budget, Delivery, DeliveryKind, IssueOutcome, IssueParams, IssueUndo, OUTBOX_CAPACITY,
    OUTBOX_TTL, OutboxMessage, PendingCode, PreviousIssue, QuotaDecision, QuotaRule, QuotaScope,
    QuotaToken, ResendPolicy, Store, StoreError, StoredCaptcha, VerifyOutcome, VerifyParams,
};
use crate::domain::{CaptchaId, Code, Phone, Purpose};
use crate::idempotency::{IdempotencyKey, IdempotencyRecord};

/// The scripts, hashed once per process; `Script` sends EVALSHA and loads the body again on
/// NOSCRIPT, so a Redis restart or `SCRIPT FLUSH` costs one extra round trip, not an error.
struct Scripts {
    issue: Script,
    undo_issue: Script,
    verify: Script,
    reserve_quota: Script,
    abandon_idempotent: Script,
}

/// The sliding-window functions the quota-enforcing scripts share.
const QUOTA_PRELUDE: &str = include_str!("quota.lua");

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    issue: Script::new(&[QUOTA_PRELUDE, include_str!("issue.lua")].concat()),
    undo_issue: Script::new(include_str!("undo_issue.lua")),
    verify: Script::new(&[QUOTA_PRELUDE, include_str!("verify.lua")].concat()),
    reserve_quota: Script::new(&[QUOTA_PRELUDE, include_str!("reserve_quota.lua")].concat()),
    abandon_idempotent: Script::new(include_str!("abandon_idempotent.lua")),
});

/// Quota rules as the scripts read them: limit, window in ms, ...
fn rule_args(rules: &[QuotaRule]) -> Vec<u64> {
    rules
        .iter()
        .flat_map(|rule| [u64::from(rule.limit), duration_ms(rule.window)])
        .collect()
}

#[derive(Clone, Debug)]
pub struct RedisSettings {
    pub topology: RedisTopology,
    pub connect_timeout: Duration,
    pub command_timeout: Duration,
}

/// Where the data lives; the store code and the scripts are the same on all three. `Debug`
/// hides the URLs' passwords, so settings can be printed and logged.
#[derive(Clone, PartialEq, Eq)]
pub enum RedisTopology {
    /// One node (`VCODE_REDIS_URL`).
    Single { url: String },
    /// A Redis Cluster, discovered from any of these seed nodes (`VCODE_REDIS_CLUSTER_NODES`).
    Cluster { nodes: Vec<String> },
    /// The primary that these sentinels name `master` (`VCODE_REDIS_SENTINELS`,
    /// `VCODE_REDIS_SENTINEL_MASTER`).
    Sentinel {
        sentinels: Vec<String>,
        master: String,
    },
}

impl std::fmt::Debug for RedisTopology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redacted = |urls: &[String]| -> Vec<String> {
            urls.iter().map(|u| redact_url_password(u)).collect()
        };
        match self {
            Self::Single { url } => f
                .debug_struct("Single")
                .field("url", &redact_url_password(url))
                .finish(),
            Self::Cluster { nodes } => f
                .debug_struct("Cluster")
                .field("nodes", &redacted(nodes))
                .finish(),
            Self::Sentinel { sentinels, master } => f
                .debug_struct("Sentinel")
                .field("sentinels", &redacted(sentinels))
                .field("master", master)
                .finish(),
        }
    }
}

#[derive(Clone)]
pub struct RedisStore {
    connection: RedisConnection,
    command_timeout: Duration,
}

impl RedisStore {
    /// Prepares the connection without waiting for Redis: a Redis that is down at start-up
    /// makes `/readyz` fail until it is up, instead of stopping the service. Cluster and
    /// Sentinel connections are opened inside a Tokio runtime: their tasks run on it.
    pub fn connect(settings: &RedisSettings) -> Result<Self, StoreError> {
        let connection = RedisConnection::open(settings)
            .map_err(|e| StoreError::Unavailable(format!("bad Redis settings: {e}")))?;
        LazyLock::force(&SCRIPTS);
        Ok(Self {
            connection,
            command_timeout: settings.command_timeout,
        })
    }

    /// Runs one Redis call within the command timeout; a reconnect in progress counts too.
    async fn bounded<T>(
        &self,
        call: impl Future<Output = Result<T, RedisError>>,
    ) -> Result<T, StoreError> {
        let started = std::time::Instant::now();
        let result = match tokio::time::timeout(self.command_timeout, call).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(store_error(error)),
            Err(_) => {
                self.connection.timed_out();
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

fn code_at(reply: &[Value], index: usize) -> Option<Code> {
    match reply.get(index)? {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok().map(Code::from_stored),
        _ => None,
    }
}

/// A captcha as one small string, `<seed>:<ANSWER>`: a plain string is the most compact value
/// Redis has, and GETDEL takes it in one step.
fn encode_captcha(captcha: &StoredCaptcha) -> String {
    format!("{}:{}", captcha.seed, captcha.answer)
}

fn decode_captcha(raw: &str) -> Result<StoredCaptcha, StoreError> {
    raw.split_once(':')
        .and_then(|(seed, answer)| {
            Some(StoredCaptcha {
                seed: seed.parse().ok()?,
                answer: answer.to_owned(),
            })
        })
        .ok_or_else(|| StoreError::Protocol(format!("captcha value {raw:?}")))
}

fn encode_record(record: &IdempotencyRecord) -> Result<String, StoreError> {
    serde_json::to_string(record)
        .map_err(|e| StoreError::Protocol(format!("idempotency record: {e}")))
}

fn decode_record(raw: &str) -> Result<IdempotencyRecord, StoreError> {
    serde_json::from_str(raw).map_err(|e| StoreError::Protocol(format!("idempotency record: {e}")))
}

fn parse_issue(reply: &[Value], quota_token: QuotaToken) -> Option<IssueOutcome> {
    let kind = match int_at(reply, 0)? {
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
        1 => DeliveryKind::Created,
        2 => DeliveryKind::Redelivered,
        3 => DeliveryKind::Rotated,
        _ => return None,
    };
    let code = code_at(reply, 1)?;
    let previous = match kind {
        DeliveryKind::Created => None,
        _ => Some(PreviousIssue {
            code: code_at(reply, 4)?,
            sent_at_ms: u64_at(reply, 5)?,
            expires_at_ms: u64_at(reply, 6)?,
        }),
    };
    Some(IssueOutcome::Deliver(Delivery {
        code: code.clone(),
        kind,
        undo: IssueUndo {
            quota_token,
            code,
            sent_at_ms: u64_at(reply, 2)?,
            deliveries: u32_at(reply, 3)?,
            previous,
        },
    }))
}

fn parse_verify(reply: &[Value]) -> Option<VerifyOutcome> {
    Some(match int_at(reply, 0)? {
        1 => VerifyOutcome::Verified,
        0 => VerifyOutcome::Mismatch {
            remaining_attempts: u32_at(reply, 1)?,
        },
        -1 => VerifyOutcome::Missing,
        -2 => VerifyOutcome::Destroyed,
        -3 => VerifyOutcome::QuotaExceeded {
            retry_after: Duration::from_millis(u64_at(reply, 1)?),
        },
        _ => return None,
    })
}

#[async_trait]
impl Store for RedisStore {
    async fn issue_code(
        &self,
        phone: &Phone,
        purpose: &Purpose,
        candidate: Code,
        params: &IssueParams,
    ) -> Result<IssueOutcome, StoreError> {
        let policy = match params.policy {
            ResendPolicy::Reuse => "reuse",
            ResendPolicy::Rotate => "rotate",
        };
        let quota_token = QuotaToken::generate();
        let mut invocation = SCRIPTS.issue.prepare_invoke();
        invocation
            .key(&keys::issue(phone, purpose))
            .arg(candidate.expose())
            .arg(duration_ms(params.ttl))
            .arg(duration_ms(params.cooldown))
            .arg(policy)
            .arg(quota_token.0)
            .arg(rule_args(&params.phone_quota));
        let mut connection = self.connection.clone();
        let reply: Vec<Value> = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        parse_issue(&reply, quota_token).ok_or_else(|| protocol("issue", &reply))
    }

    async fn undo_issue(
        &self,
        phone: &Phone,
        purpose: &Purpose,
        undo: &IssueUndo,
    ) -> Result<bool, StoreError> {
        let mut invocation = SCRIPTS.undo_issue.prepare_invoke();
        invocation
            .key(&keys::issue(phone, purpose))
            .arg(undo.code.expose())
            .arg(undo.sent_at_ms)
            .arg(undo.deliveries)
            .arg(undo.quota_token.0);
        if let Some(previous) = &undo.previous {
            invocation
                .arg(previous.code.expose())
                .arg(previous.sent_at_ms)
                .arg(previous.expires_at_ms);
        }
        let mut connection = self.connection.clone();
        let undone: i64 = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        Ok(undone == 1)
    }

    async fn verify_code(
        &self,
        phone: &Phone,
        purpose: &Purpose,
        code: &Code,
        params: VerifyParams,
    ) -> Result<VerifyOutcome, StoreError> {
        let mut invocation = SCRIPTS.verify.prepare_invoke();
        invocation
            .key(&keys::verify(phone, purpose))
            .arg(code.expose())
            .arg(params.max_attempts)
            .arg(QuotaToken::generate().0)
            .arg(rule_args(params.phone_failures.as_slice()));
        let mut connection = self.connection.clone();
        let reply: Vec<Value> = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        parse_verify(&reply).ok_or_else(|| protocol("verify", &reply))
    }

    async fn reserve_quota(
        &self,
        budgets: &[Budget<'_>],
        token: QuotaToken,
    ) -> Result<QuotaDecision, StoreError> {
        let mut invocation = SCRIPTS.reserve_quota.prepare_invoke();
        invocation.arg(token.0);
        for budget in budgets {
            invocation
                .key(keys::quota(budget.scope))
                .arg(budget.rules.len())
                .arg(rule_args(budget.rules));
        }
        let mut connection = self.connection.clone();
        let (refused, wait_ms): (usize, u64) = self
            .bounded(invocation.invoke_async(&mut connection))
            .await?;
        Ok(
            match refused.checked_sub(1).and_then(|index| budgets.get(index)) {
                None => QuotaDecision::Granted,
                Some(budget) => QuotaDecision::Exceeded {
                    scope: budget.scope,
                    retry_after: Duration::from_millis(wait_ms),
                },
            },
        )
    }

    async fn release_quota(
        &self,
        scopes: &[QuotaScope],
        token: QuotaToken,
    ) -> Result<(), StoreError> {
        let mut pipeline = redis::pipe();
        for scope in scopes {
            pipeline
                .cmd("ZREM")
                .arg(keys::quota(*scope))
                .arg(token.0)
                .ignore();
        }
        let mut connection = self.connection.clone();
        self.bounded(pipeline.query_async::<()>(&mut connection))
            .await
    }

    async fn pending_code(
        &self,
        phone: &Phone,
        purpose: &Purpose,
    ) -> Result<Option<PendingCode>, StoreError> {
        let mut connection = self.connection.clone();
        let command = redis::cmd("HMGET")
            .arg(keys::code(phone, purpose))
            .arg(&["c", "a", "n"])
            .to_owned();
        let reply: (Option<String>, Option<u32>, Option<u32>) =
            self.bounded(command.query_async(&mut connection)).await?;
        Ok(match reply {
            (Some(code), failed_attempts, deliveries) => Some(PendingCode {
                code: Code::from_stored(code),
                failed_attempts: failed_attempts.unwrap_or(0),
                deliveries: deliveries.unwrap_or(0),
            }),
            (None, ..) => None,
        })
    }

    async fn push_outbox(&self, message: &OutboxMessage) -> Result<(), StoreError> {
        let key = keys::outbox(&message.phone);
        let json = serde_json::to_string(message)
            .map_err(|e| StoreError::Protocol(format!("outbox message: {e}")))?;
        let mut connection = self.connection.clone();
        let pipeline = redis::pipe()
            .atomic()
            .rpush(&key, json)
            .ignore()
            .ltrim(&key, -(OUTBOX_CAPACITY as isize), -1)
            .ignore()
            .pexpire(&key, duration_ms(OUTBOX_TTL) as i64)
            .ignore()
            .to_owned();
        self.bounded(pipeline.query_async::<()>(&mut connection))
            .await
    }

    async fn outbox(&self, phone: &Phone) -> Result<Vec<OutboxMessage>, StoreError> {
        let mut connection = self.connection.clone();
        let command = redis::cmd("LRANGE")
            .arg(keys::outbox(phone.as_e164()))
            .arg(0)
            .arg(-1)
            .to_owned();
        let raw: Vec<String> = self.bounded(command.query_async(&mut connection)).await?;
        raw.iter()
            .map(|json| {
                serde_json::from_str(json)
                    .map_err(|e| StoreError::Protocol(format!("outbox message: {e}")))
            })
            .collect()
    }

    async fn put_captcha(
        &self,
        id: &CaptchaId,
        captcha: &StoredCaptcha,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        let mut connection = self.connection.clone();
        let command = redis::cmd("SET")
            .arg(keys::captcha(id))
            .arg(encode_captcha(captcha))
            .arg("PX")
            .arg(duration_ms(ttl))
            .to_owned();
        self.bounded(command.query_async::<()>(&mut connection))
            .await
    }

    async fn captcha(&self, id: &CaptchaId) -> Result<Option<StoredCaptcha>, StoreError> {
        let mut connection = self.connection.clone();
        let command = redis::cmd("GET").arg(keys::captcha(id)).to_owned();
        let raw: Option<String> = self.bounded(command.query_async(&mut connection)).await?;
        raw.map(|raw| decode_captcha(&raw)).transpose()
    }

    async fn take_captcha(&self, id: &CaptchaId) -> Result<Option<StoredCaptcha>, StoreError> {
        let mut connection = self.connection.clone();
        // GETDEL is atomic: of concurrent verifies exactly one receives the value.
        let command = redis::cmd("GETDEL").arg(keys::captcha(id)).to_owned();
        let raw: Option<String> = self.bounded(command.query_async(&mut connection)).await?;
        raw.map(|raw| decode_captcha(&raw)).transpose()
    }

    async fn begin_idempotent(
        &self,
        key: &IdempotencyKey,
        running: &IdempotencyRecord,
        lease: Duration,
    ) -> Result<Option<IdempotencyRecord>, StoreError> {
        let mut connection = self.connection.clone();
        // SET NX GET: claims the key, or returns what holds it, in one command.
        let command = redis::cmd("SET")
            .arg(keys::idempotency(key))
            .arg(encode_record(running)?)
            .arg("NX")
            .arg("GET")
            .arg("PX")
            .arg(duration_ms(lease))
            .to_owned();
        let held: Option<String> = self.bounded(command.query_async(&mut connection)).await?;
        held.map(|raw| decode_record(&raw)).transpose()
    }

    async fn finish_idempotent(
        &self,
        key: &IdempotencyKey,
        done: &IdempotencyRecord,
        retention: Duration,
    ) -> Result<(), StoreError> {
        let mut connection = self.connection.clone();
        let command = redis::cmd("SET")
            .arg(keys::idempotency(key))
            .arg(encode_record(done)?)
            .arg("PX")
            .arg(duration_ms(retention))
            .to_owned();
        self.bounded(command.query_async::<()>(&mut connection))
            .await
    }

    async fn abandon_idempotent(
        &self,
        key: &IdempotencyKey,
        running: &IdempotencyRecord,
    ) -> Result<(), StoreError> {
        let mut invocation = SCRIPTS.abandon_idempotent.key(keys::idempotency(key));
        invocation.arg(encode_record(running)?);
        let mut connection = self.connection.clone();
        self.bounded(invocation.invoke_async::<i64>(&mut connection))
            .await
            .map(drop)
    }

    async fn add_stats(
        &self,
        date: &str,
        counts: &[(&'static str, u64)],
    ) -> Result<(), StoreError> {
        let key = keys::stats(date);
        let mut pipeline = redis::pipe();
        for (field, n) in counts {
            pipeline.hincr(&key, *field, *n).ignore();
        }
        // Kept 7 days after the day ends.
        pipeline.expire(&key, 8 * 86_400).ignore();
        let mut connection = self.connection.clone();
        self.bounded(pipeline.query_async::<()>(&mut connection))
            .await
    }

    async fn stats(&self, dates: &[String]) -> Result<Vec<HashMap<String, u64>>, StoreError> {
        // One command per day, not one pipeline: the days' keys lie in different Cluster slots.
        let mut connection = self.connection.clone();
        let days = async {
            let mut days = Vec::with_capacity(dates.len());
            for date in dates {
                let command = redis::cmd("HGETALL").arg(keys::stats(date)).to_owned();
                days.push(command.query_async(&mut connection).await?);
            }
            Ok(days)
        };
        self.bounded(days).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        let mut connection = self.connection.clone();
        let command = redis::cmd("PING");
        self.bounded(command.query_async::<String>(&mut connection))
            .await
            .map(drop)
    }
}
