//! One shared connection to the primary that Redis Sentinel names, kept across failovers.
//!
//! The redis crate resolves the primary (it asks the sentinels, then checks `ROLE` on the node)
//! but does not follow a failover. This keeps one multiplexed connection to the resolved
//! primary and drops it when it fails, answers READONLY, stops reporting the primary role, or
//! is no longer the node the sentinels name (a demoted primary still answers PING, and one the
//! sentinels replaced may still accept writes for a while, writes that its demotion discards);
//! the next call resolves the primary again. One resolution runs at a time, in its own task,
//! and calls wait for it only within their own command timeout.
//!
//! Sentinels and data nodes have logins of their own: the sentinel URLs' user and password
//! (one for all sentinels) log in to the sentinels, `VCODE_REDIS_SENTINEL_MASTER_USERNAME` and
//! `_PASSWORD` to the primary. `rediss://` sentinels mean TLS to the data nodes too, each
//! verified against the address the sentinels announce.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionAddr, ConnectionInfo, ErrorKind, IntoConnectionInfo,
    Pipeline, RedisError, RedisFuture, RedisResult, Role, ServerErrorKind, TlsCertificates,
    TlsMode, Value,
};
use secrecy::ExposeSecret;
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use super::{RedisCredentials, RedisSettings};

/// How often the connection is checked against the sentinels and the node's role: bounds how
/// long writes can go to a primary the sentinels have replaced (two small commands a tick).
const WATCH_INTERVAL: Duration = Duration::from_millis(250);
/// After a failed resolution, calls fail at once for this long instead of asking the sentinels
/// again: fast 503s during a failover, without a storm of lookups.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

#[derive(Clone)]
pub struct SentinelConnection {
    shared: Arc<Shared>,
}

struct Shared {
    /// The runtime the store was opened in: resolutions, the connections they open and the
    /// watch run there, not on whichever (actix worker) runtime made the call.
    runtime: tokio::runtime::Handle,
    /// Resolves the primary; only the resolution task (one at a time) locks it.
    sentinels: tokio::sync::Mutex<SentinelClient>,
    /// The name the sentinels monitor the primary under.
    master: String,
    config: AsyncConnectionConfig,
    /// Bound on one resolution: asking a sentinel, checking the primary, connecting to it.
    resolve_timeout: Duration,
    command_timeout: Duration,
    state: Mutex<State>,
    /// Counts finished resolutions, to wake the calls waiting for one.
    resolved: watch::Sender<u64>,
}

#[derive(Default)]
struct State {
    current: Option<Primary>,
    resolving: bool,
    last_failure: Option<(Instant, RedisError)>,
    generations: u64,
    watch_started: bool,
}

/// The connection to one resolved primary; `generation` tells it from later ones.
#[derive(Clone)]
struct Primary {
    generation: u64,
    address: String,
    connection: MultiplexedConnection,
}

/// What a call does next.
enum Next {
    Use(Primary),
    Fail(RedisError),
    Wait,
}

impl SentinelConnection {
    /// Prepares the connection, inside a Tokio runtime; nothing is resolved until the first
    /// call.
    pub fn new(
        sentinels: &[String],
        master: &str,
        master_credentials: Option<&RedisCredentials>,
        certificates: Option<&TlsCertificates>,
        settings: &RedisSettings,
    ) -> RedisResult<Self> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            RedisError::from((
                ErrorKind::Client,
                "a Redis Sentinel connection is opened inside a Tokio runtime",
            ))
        })?;
        let client = sentinel_client(sentinels, master, master_credentials, certificates)?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(settings.connect_timeout))
            .set_response_timeout(Some(settings.command_timeout));
        Ok(Self {
            shared: Arc::new(Shared {
                runtime,
                sentinels: tokio::sync::Mutex::new(client),
                master: master.to_owned(),
                config,
                resolve_timeout: settings.connect_timeout * 3,
                command_timeout: settings.command_timeout,
                state: Mutex::new(State::default()),
                resolved: watch::Sender::new(0),
            }),
        })
    }

    /// Sends one request to the primary. A READONLY answer means the node was demoted and ran
    /// nothing, so the request is sent once more, to the primary the sentinels name now.
    async fn call<T, F, Fut>(&self, request: F) -> RedisResult<T>
    where
        F: Fn(MultiplexedConnection) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let primary = self.primary().await?;
        match request(primary.connection).await {
            Err(error) if is_read_only(&error) => {
                self.shared.forget(primary.generation, &error);
                let primary = self.primary().await?;
                let result = request(primary.connection).await;
                self.shared.inspect(primary.generation, result)
            }
            result => self.shared.inspect(primary.generation, result),
        }
    }

    /// The current primary, resolved first if there is none.
    async fn primary(&self) -> RedisResult<Primary> {
        // Subscribed before looking, so a resolution finishing in between is not missed.
        let mut resolved = self.shared.resolved.subscribe();
        match self.shared.next() {
            Next::Use(primary) => return Ok(primary),
            Next::Fail(error) => return Err(error),
            Next::Wait => {}
        }
        // `Shared` owns the sender, so this only returns once a resolution has finished.
        let _ = resolved.changed().await;
        let state = self.shared.lock();
        match (&state.current, &state.last_failure) {
            (Some(primary), _) => Ok(primary.clone()),
            (None, Some((_, error))) => Err(error.clone()),
            (None, None) => Err(RedisError::from((
                ErrorKind::Io,
                "the Redis primary was lost again while resolving it",
            ))),
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent even if a holder panicked: every update is one assignment.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn next(self: &Arc<Self>) -> Next {
        let mut state = self.lock();
        if let Some(primary) = &state.current {
            return Next::Use(primary.clone());
        }
        if !state.resolving {
            if let Some((at, error)) = &state.last_failure
                && at.elapsed() < RETRY_PAUSE
            {
                return Next::Fail(error.clone());
            }
            state.resolving = true;
            self.runtime.spawn(resolve(self.clone()));
        }
        Next::Wait
    }

    /// Drops the connection to a primary that failed, unless it was replaced already.
    fn forget(&self, generation: u64, reason: &dyn std::fmt::Display) {
        let mut state = self.lock();
        if state
            .current
            .as_ref()
            .is_some_and(|primary| primary.generation == generation)
        {
            state.current = None;
            tracing::warn!(%reason, "Redis primary connection dropped; asking Sentinel again");
        }
    }

    /// Forgets the primary if `result` shows its connection can no longer be trusted.
    fn inspect<T>(&self, generation: u64, result: RedisResult<T>) -> RedisResult<T> {
        if let Err(error) = &result
            && must_reconnect(error)
        {
            self.forget(generation, error);
        }
        result
    }

    async fn connect_primary(&self) -> RedisResult<(String, MultiplexedConnection)> {
        // The crate asks the sentinels, then checks that the node named reports the role.
        let client = self.sentinels.lock().await.async_get_client().await?;
        let address = client.get_connection_info().addr().to_string();
        tracing::info!(primary = %address, "Redis primary resolved through Sentinel");
        let connection = client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await?;
        Ok((address, connection))
    }

    /// Ok while the connection reaches a primary, and the one the sentinels name. `sentinel`
    /// is the watch's own connection to a sentinel, opened when needed.
    async fn confirm(
        &self,
        primary: &Primary,
        sentinel: &mut Option<MultiplexedConnection>,
    ) -> Result<(), String> {
        let mut connection = primary.connection.clone();
        let command = redis::cmd("ROLE");
        let role = command.query_async::<Role>(&mut connection);
        match tokio::time::timeout(self.command_timeout, role).await {
            Ok(Ok(Role::Primary { .. })) => {}
            Ok(Ok(_)) => return Err("the Redis primary was demoted".to_owned()),
            Ok(Err(error)) => return Err(error.to_string()),
            Err(_) => return Err("the Redis primary did not answer ROLE in time".to_owned()),
        }
        let named = self.named_address(sentinel);
        match tokio::time::timeout(self.resolve_timeout, named).await {
            Ok(Ok(named)) if named != primary.address => Err(format!(
                "the sentinels name {named} instead of {}",
                primary.address
            )),
            Ok(Ok(_)) => Ok(()),
            // A sentinel that does not answer proves nothing: keep the connection that works,
            // and ask another sentinel next time.
            _ => {
                *sentinel = None;
                Ok(())
            }
        }
    }

    /// `host:port` of the primary the sentinels name now.
    async fn named_address(
        &self,
        sentinel: &mut Option<MultiplexedConnection>,
    ) -> RedisResult<String> {
        let connection = match sentinel {
            Some(connection) => connection,
            None => {
                let client = self
                    .sentinels
                    .lock()
                    .await
                    .async_get_sentinel_client()
                    .await?;
                let connection = client
                    .get_multiplexed_async_connection_with_config(&self.config)
                    .await?;
                sentinel.insert(connection)
            }
        };
        let (host, port): (String, u16) = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(&self.master)
            .query_async(connection)
            .await?;
        Ok(format!("{host}:{port}"))
    }
}

/// The crate's client for `master`: logs in to the sentinels as their URLs say and to the data
/// nodes with `master_credentials`, over TLS to both when the sentinel URLs are `rediss://`.
fn sentinel_client(
    sentinels: &[String],
    master: &str,
    master_credentials: Option<&RedisCredentials>,
    certificates: Option<&TlsCertificates>,
) -> RedisResult<SentinelClient> {
    let infos = sentinels
        .iter()
        .map(|url| url.as_str().into_connection_info())
        .collect::<RedisResult<Vec<ConnectionInfo>>>()?;
    let Some(first) = infos.first() else {
        return Err(RedisError::from((
            ErrorKind::InvalidClientConfig,
            "at least one sentinel URL is needed",
        )));
    };
    // The crate logs in to every sentinel with one user and password.
    if infos.iter().any(|info| login(info) != login(first)) {
        return Err(RedisError::from((
            ErrorKind::InvalidClientConfig,
            "every sentinel URL must carry the same user and password",
        )));
    }
    let uses_tls = matches!(first.addr(), ConnectionAddr::TcpTls { .. });
    let mut builder = SentinelClientBuilder::new(
        infos.iter().map(|info| info.addr().clone()),
        master,
        SentinelServerType::Master,
    )?
    .set_client_to_sentinel_protocol(first.redis_settings().protocol());
    let (username, password) = login(first);
    if let Some(username) = username {
        builder = builder.set_client_to_sentinel_username(username);
    }
    if let Some(password) = password {
        builder = builder.set_client_to_sentinel_password(password);
    }
    if uses_tls {
        builder = builder.set_client_to_redis_tls_mode(TlsMode::Secure);
    }
    if let Some(certificates) = certificates {
        builder = builder
            .set_client_to_sentinel_certificates(certificates.clone())
            .set_client_to_redis_certificates(certificates.clone());
    }
    if let Some(credentials) = master_credentials {
        if let Some(username) = &credentials.username {
            builder = builder.set_client_to_redis_username(username);
        }
        builder = builder.set_client_to_redis_password(credentials.password.expose_secret());
    }
    builder.build()
}

/// The user and password a URL logs in with.
fn login(info: &ConnectionInfo) -> (Option<&str>, Option<&str>) {
    let settings = info.redis_settings();
    (settings.username(), settings.password())
}

/// Resolves the primary and connects to it, then wakes the waiting calls.
async fn resolve(shared: Arc<Shared>) {
    let outcome = tokio::time::timeout(shared.resolve_timeout, shared.connect_primary())
        .await
        .unwrap_or_else(|_| {
            Err(RedisError::from((
                ErrorKind::Io,
                "resolving the Redis primary through Sentinel timed out",
            )))
        });
    let start_watch = {
        let mut state = shared.lock();
        state.resolving = false;
        match outcome {
            Ok((address, connection)) => {
                state.generations += 1;
                state.current = Some(Primary {
                    generation: state.generations,
                    address,
                    connection,
                });
                state.last_failure = None;
                !std::mem::replace(&mut state.watch_started, true)
            }
            Err(error) => {
                // Once per outage at warn level: a call may retry every `RETRY_PAUSE`.
                if state.last_failure.is_none() {
                    tracing::warn!(%error, "no Redis primary through Sentinel");
                } else {
                    tracing::debug!(%error, "no Redis primary through Sentinel");
                }
                state.last_failure = Some((Instant::now(), error));
                false
            }
        }
    };
    if start_watch {
        shared.runtime.spawn(watch(Arc::downgrade(&shared)));
    }
    shared.resolved.send_modify(|finished| *finished += 1);
}

/// Checks the connection every `WATCH_INTERVAL` until it is dropped with its store: catches a
/// primary replaced, demoted or frozen without its connection failing.
async fn watch(shared: Weak<Shared>) {
    let mut ticks = tokio::time::interval(WATCH_INTERVAL);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut sentinel = None;
    loop {
        ticks.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let Some(primary) = shared.lock().current.clone() else {
            continue;
        };
        if let Err(reason) = shared.confirm(&primary, &mut sentinel).await {
            shared.forget(primary.generation, &reason);
        }
    }
}

fn is_read_only(error: &RedisError) -> bool {
    error.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
}

/// Errors after which the connection may point at a dead, stalled or demoted node.
fn must_reconnect(error: &RedisError) -> bool {
    is_read_only(error)
        || error.is_io_error()
        || error.is_connection_dropped()
        || error.is_unrecoverable_error()
        || error.is_timeout()
}

impl ConnectionLike for SentinelConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(
            self.call(
                move |mut connection| async move { connection.req_packed_command(cmd).await },
            ),
        )
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(self.call(move |mut connection| async move {
            connection
                .req_packed_commands(pipeline, offset, count)
                .await
        }))
    }

    fn get_db(&self) -> i64 {
        0
    }
}
