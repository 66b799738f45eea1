//! Builds the application from `Settings`: opens the stores, builds the services (the use
//! cases, the SMS sender, the token issuer) and the public and operator servers, each bound to
//! its listener (port 0 in tests).

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::Server;
use actix_web::middleware::from_fn;
use actix_web::{App, HttpServer, web};
use anyhow::Context;

use crate::api_keys::ApiKeyGate;
use crate::captcha::CaptchaService;
use crate::credential_failures::CredentialFailures;
use crate::domain::SendBudget;
use crate::email::{EmailSender, LogMailer, SmtpMailer};
use crate::events::{Dispatcher, Dispatching, EventOperations};
use crate::fraud::spend::SpendGuard;
use crate::fraud::{FraudGuard, SafeList};
use crate::health::Readiness;
use crate::keyring::{Keyring, SecretKey};
use crate::otp::{OtpDependencies, OtpService, ReceiptSecrets, ReceiptService, SendGate, TenantId};
use crate::postmortem;
use crate::pow::PowService;
use crate::routes::{self, AppState, BodyLimits};
use crate::settings::{Settings, StoreSettings};
use crate::stats::Stats;
use crate::store::QuotaRule;
use crate::store::redis::{RedisSettings, RedisTopology};
use crate::store::{HealthCheck, MemoryStore, PostgresStore, RedisStore, Stores};
use crate::token::{SigningKey, TokenIssuer};
use crate::totp::TotpService;
use crate::twilio_compat::TwilioCompat;

/// How often the daily counters counted in-process are added to the store.
const STATS_FLUSH_INTERVAL: Duration = Duration::from_secs(1);

pub struct Application {
    port: u16,
    admin_port: u16,
    server: Server,
    /// The operator listener: metrics and stats, apart from the public API.
    admin: Server,
    stores: Stores,
    /// What `/readyz` answers: turned to 503 when a signal starts the shutdown.
    readiness: Arc<Readiness>,
    /// `VCODE_SHUTDOWN_DRAIN_MS`, `VCODE_SHUTDOWN_GRACE_SECS`.
    drain: Duration,
    grace: Duration,
    /// The event dispatcher, stopped last: its batch under way settles, no lease is left.
    delivering: Option<Dispatching>,
}

impl Application {
    /// Opens the stores, builds the services and binds both listeners; `run_until_stopped`
    /// serves.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        settings.validate()?;
        let stores = open_stores(&settings).await?;
        if settings.dev_mode {
            tracing::warn!("dev mode: the dev routes expose codes; never run it in production");
        }
        if !settings.otp.test_numbers.is_empty() {
            tracing::warn!(
                numbers = %settings.otp.test_numbers_masked(),
                "test numbers (VCODE_TEST_NUMBERS): each verifies with its fixed code; no SMS, no quota, no destination check"
            );
        }
        let delivering = start_events(&settings, &stores).await?;
        let services = Services::build(&settings, &stores)?;
        // The safe list in effect before the first send (a store not answering yet leaves the
        // configured entries, and the refresh tries again).
        if let Err(error) = services.safe_list.reload().await {
            tracing::warn!(%error, "fraud guard: the stored safe list not read at start; the configured entries apply until it is");
        }
        let state = web::Data::new(app_state(&settings, &stores, services));
        let readiness = state.readiness.clone();
        let (port, server) = serve_public(&settings, state.clone())?;
        let (admin_port, admin) = serve_operator(&settings, state)?;
        Ok(Self {
            port,
            admin_port,
            server,
            admin,
            stores,
            readiness,
            drain: settings.shutdown_drain,
            grace: settings.shutdown_grace,
            delivering,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The operator listener's port.
    pub fn admin_port(&self) -> u16 {
        self.admin_port
    }

    /// The stores the application uses (tests inspect them directly).
    pub fn stores(&self) -> Stores {
        self.stores.clone()
    }

    /// Serves until SIGTERM or SIGINT, then shuts down gracefully: `/readyz` answers 503 at
    /// once, requests are still served for `VCODE_SHUTDOWN_DRAIN_MS`, then no new connection
    /// is taken and the requests in flight finish within `VCODE_SHUTDOWN_GRACE_SECS` (the
    /// servers' own signal handling is off: this is it).
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let (public, admin) = (self.server.handle(), self.admin.handle());
        let (readiness, drain, grace) = (self.readiness.clone(), self.drain, self.grace);
        let delivering = self.delivering;
        let shutdown = async move {
            shutdown_signal().await;
            readiness.drain();
            tracing::info!(
                drain_ms = drain.as_millis() as u64,
                "shutting down: not ready"
            );
            tokio::time::sleep(drain).await;
            tracing::info!("shutting down: finishing the requests in flight");
            tokio::join!(public.stop(true), admin.stop(true));
            if let Some(delivering) = delivering {
                delivering.stop(grace).await;
            }
        };
        let (server, admin_server) = (self.server, self.admin);
        tokio::pin!(shutdown);
        tokio::select! {
            served = server => served,
            served = admin_server => served,
            () = &mut shutdown => Ok(()),
        }
    }
}

/// The store the settings choose, one backend playing every role (but the codes', under a
/// legacy verify strategy).
async fn open_stores(settings: &Settings) -> anyhow::Result<Stores> {
    Ok(match &settings.store {
        StoreSettings::Embedded => Stores::of(MemoryStore::spawn(settings.sweep_interval)),
        StoreSettings::Redis(redis) => open_redis(settings, redis).await?,
        StoreSettings::Postgres(postgres) => {
            let store = PostgresStore::connect(postgres).context("PostgreSQL store")?;
            store.migrate_or_retry().await;
            store.spawn_sweeper(postgres.sweep_interval);
            Stores::of(Arc::new(store))
        }
    })
}

/// The Redis store, wrapped by the postmortem's reproduction when `VCODE_VERIFY_STRATEGY` is
/// a legacy one. A Redis that is down only makes `/readyz` fail.
async fn open_redis(settings: &Settings, redis: &RedisSettings) -> anyhow::Result<Stores> {
    let store = RedisStore::connect(redis).context("Redis store")?;
    if let Err(error) = HealthCheck::ping(&store).await {
        tracing::warn!(%error, "Redis is not reachable yet: /readyz answers 503 until it is");
    }
    let url = match &redis.topology {
        RedisTopology::Single { url } => Some(url.as_str()),
        _ => None,
    };
    postmortem::stores_for(
        settings.verify_strategy,
        Stores::of(Arc::new(store)),
        url,
        settings.legacy_gap,
        redis.command_timeout,
    )
    .context("legacy store")
}

/// Turns the outbox writes on when an endpoint is configured, and starts this instance's
/// dispatcher. Several instances may each run one: the store's leases keep them apart.
async fn start_events(settings: &Settings, stores: &Stores) -> anyhow::Result<Option<Dispatching>> {
    let events = &settings.events;
    if !events.is_on() {
        return Ok(None);
    }
    if matches!(settings.store, StoreSettings::Embedded) {
        tracing::warn!(
            "events (VCODE_EVENTS_*) on the embedded store: its outbox is in this process's memory, and the events not yet delivered are lost when it stops; use Redis or PostgreSQL to keep them"
        );
    }
    if let Err(error) = stores.events.record_events(true).await {
        // PostgreSQL not reachable yet: the dispatcher turns them on once it is.
        tracing::warn!(%error, "event outbox: not turned on yet, retrying");
    }
    let dispatcher = Dispatcher::new(stores.events.clone(), stores.codes.clone(), events.clone())?;
    let delivering = Arc::new(dispatcher).spawn();
    tracing::info!(
        endpoints = events.endpoints.len(),
        "events: delivering to the configured webhooks (VCODE_EVENTS_*)"
    );
    Ok(Some(delivering))
}

/// The email channel's sender: the relay of `VCODE_EMAIL_SMTP_URL`, else in dev mode one that
/// only logs (the dev inbox shows its codes), else none (email destinations refused).
fn mailer(settings: &Settings) -> anyhow::Result<Option<Arc<dyn EmailSender>>> {
    let default_locale = settings.sms.locales.default().clone();
    Ok(match &settings.email.smtp {
        Some(smtp) => {
            tracing::info!(relay = %smtp.shown_url, dkim = smtp.dkim.is_some(), "email: codes mailed through the relay (VCODE_EMAIL_*)");
            let mailer = SmtpMailer::new(smtp.clone(), default_locale)
                .map_err(|error| anyhow::anyhow!("email relay: {error}"))?;
            Some(Arc::new(mailer))
        }
        None if settings.dev_mode => Some(Arc::new(LogMailer::new(default_locale))),
        None => None,
    })
}

/// The use cases and what they share, built once for every worker.
struct Services {
    otp: Arc<OtpService>,
    receipts: Arc<ReceiptService>,
    fraud: Arc<FraudGuard>,
    safe_list: Arc<SafeList>,
    captcha: Arc<CaptchaService>,
    pow: Arc<PowService>,
    tokens: Arc<TokenIssuer>,
    stats: Arc<Stats>,
    totp: Arc<TotpService>,
}

impl Services {
    fn build(settings: &Settings, stores: &Stores) -> anyhow::Result<Self> {
        crate::domain::Phone::warm_up(settings.otp.default_region);
        let stats = Stats::spawn(stores.stats.clone(), STATS_FLUSH_INTERVAL);
        // The routed sender; the daily stats count every provider's attempts.
        let sender =
            crate::sms::build_sender(&settings.sms, stats.clone()).context("SMS sender")?;
        let mailer = mailer(settings)?;
        let keyring = Arc::new(keyring(settings));
        let tokens = Arc::new(token_issuer(settings, &keyring));
        let captcha = Arc::new(CaptchaService::new(
            stores,
            keyring.clone(),
            settings.captcha.clone(),
            settings.abuse.captchas_per_client_minute,
            stats.clone(),
        ));
        let pow = Arc::new(PowService::new(
            stores.pow_replays.clone(),
            settings.pow.clone(),
            &settings.pow.signing_key(keyring.pow_key()),
            stats.clone(),
        ));
        let gate = SendGate {
            captcha: settings
                .captcha
                .send_requires_captcha
                .then(|| captcha.clone()),
            pow: settings.pow.send_requires_pow.then(|| pow.clone()),
        };
        let safe_list = SafeList::spawn(
            stores.safe_list.clone(),
            settings.fraud.safe_list.clone(),
            settings.fraud.safe_list_refresh,
        );
        let fraud = Arc::new(
            FraudGuard::new(
                (stores.fraud.clone(), stores.levels.clone()),
                keyring.clone(),
                settings.fraud.clone(),
                stats.clone(),
            )
            .with_safe_list(safe_list.clone())
            .with_spend(SpendGuard::new(
                settings.fraud.spend_caps(),
                settings.sms.prices.clone(),
                stats.clone(),
            )),
        );
        fraud.spawn_spend_refresh();
        fraud.spawn_flushes();
        tracing::info!(guard = %fraud.describe(), "fraud guard (VCODE_FRAUD_*)");
        // Authenticator apps' factors: the same keyring, tokens and per-client wrong-code rule
        // as the OTP verifies.
        let totp = Arc::new(TotpService::new(
            stores.factors.clone(),
            stores.quotas.clone(),
            keyring.clone(),
            tokens.clone(),
            QuotaRule::new(
                settings.abuse.failed_verifies_per_client_day,
                Duration::from_secs(86_400),
            ),
        ));
        let otp = Arc::new(OtpService::new(
            OtpDependencies {
                stores: stores.clone(),
                keyring,
                tokens: tokens.clone(),
                sender,
                mailer,
                gate,
                fraud: fraud.clone(),
                stats: stats.clone(),
                track_deliveries: settings.sms.receipts.enabled(),
                tenant_budgets: tenant_budgets(settings),
            },
            settings.otp.clone(),
            &settings.abuse,
            settings.dev_mode,
        ));
        tracing::info!(
            served = %otp.destinations().describe(),
            "SMS destinations (VCODE_ALLOWED_NUMBER_TYPES, VCODE_ALLOWED_REGIONS, VCODE_MONITORED_REGIONS, VCODE_BLOCKED_REGIONS)"
        );
        let receipts = Arc::new(ReceiptService::new(
            stores.receipts.clone(),
            fraud.clone(),
            ReceiptSecrets::from_sms(&settings.sms),
            settings.otp.default_region,
        ));
        Ok(Self {
            otp,
            receipts,
            fraud,
            safe_list,
            captcha,
            pow,
            tokens,
            stats,
            totp,
        })
    }
}

/// The keyring of the secret key, or of a random one.
fn keyring(settings: &Settings) -> Keyring {
    match &settings.secret_key {
        Some(key) => Keyring::new(key, settings.secret_key_previous.as_deref()),
        // Embedded store only (validated): codes live and die with this process.
        None => Keyring::new(&SecretKey::random(), None),
    }
}

/// What the handlers reach: the services, and the settings the HTTP layer applies itself.
fn app_state(settings: &Settings, stores: &Stores, services: Services) -> AppState {
    let twilio = Arc::new(TwilioCompat::new(
        services.otp.clone(),
        stores.twilio.clone(),
        services.safe_list.clone(),
        settings.twilio_accounts.clone().unwrap_or_default(),
        settings.abuse.twilio_services_per_account as usize,
    ));
    AppState {
        totp: services.totp,
        twilio,
        otp: services.otp,
        receipts: services.receipts,
        fraud: services.fraud,
        safe_list: services.safe_list,
        events: Arc::new(EventOperations::new(stores.events.clone())),
        captcha: services.captcha,
        pow: services.pow,
        tokens: services.tokens,
        stats: services.stats,
        readiness: Arc::new(Readiness::new(stores.health.clone())),
        trusted_proxies: settings.abuse.trusted_proxies.clone(),
        client_ipv6_prefix: settings.abuse.client_ipv6_prefix,
        credential_failures: Arc::new(CredentialFailures::new(
            settings.abuse.credential_failures_per_client_minute,
        )),
        admin_token: settings.admin_token.clone(),
        api_keys: ApiKeyGate::new(
            &settings.api_key,
            settings.api_keys.clone().unwrap_or_default(),
        ),
        sms_prices: settings.sms.prices.clone(),
    }
}

/// A listener on `address` (`variable` names it in the error) and the port it got.
fn bind(address: SocketAddr, variable: &str) -> anyhow::Result<(TcpListener, u16)> {
    let listener = TcpListener::bind(address)
        .with_context(|| format!("cannot bind {address} ({variable})"))?;
    let port = listener.local_addr()?.port();
    Ok((listener, port))
}

/// The public API's server on `VCODE_BIND`, and its port.
fn serve_public(settings: &Settings, state: web::Data<AppState>) -> anyhow::Result<(u16, Server)> {
    let (listener, port) = bind(settings.bind, "VCODE_BIND")?;
    let limits = BodyLimits {
        max_bytes: settings.max_body_bytes,
        deadline: settings.body_timeout,
    };
    let public_routes = public_routes(settings);
    let openapi = web::Bytes::from(public_routes.openapi().to_string());
    let server = HttpServer::new(move || {
        App::new()
            // The span and metrics, the API key, then the body, and the default headers on
            // every answer: one layer.
            .wrap(from_fn(move |request, next| {
                routes::front_door(limits, request, next)
            }))
            .app_data(state.clone())
            .configure(|cfg| routes::public(cfg, &public_routes, openapi.clone()))
            .default_service(web::to(routes::not_found))
    })
    .shutdown_timeout(settings.shutdown_grace.as_secs())
    .disable_signals()
    .client_request_timeout(Duration::from_secs(5))
    .listen(listener)?
    .run();
    tracing::info!(address = %settings.bind, port, "vcode listening");
    Ok((port, server))
}

/// Which public routes the settings turn on.
fn public_routes(settings: &Settings) -> routes::PublicRoutes {
    routes::PublicRoutes {
        max_body_bytes: settings.max_body_bytes,
        dev_mode: settings.dev_mode,
        demo: (settings.demo || settings.dev_mode).then_some(routes::DemoSettings {
            captcha_gate: settings.captcha.send_requires_captcha,
            pow_gate: settings.pow.send_requires_pow,
            dev_mode: settings.dev_mode,
        }),
        api_key_required: settings.api_key.required.clone(),
    }
}

/// The operator routes' server on `VCODE_ADMIN_BIND` (metrics, and stats with an admin
/// token; with one, every route requires it), and its port.
fn serve_operator(
    settings: &Settings,
    state: web::Data<AppState>,
) -> anyhow::Result<(u16, Server)> {
    let (listener, port) = bind(settings.admin_bind, "VCODE_ADMIN_BIND")?;
    let stats_route = settings.admin_token.is_some();
    let admin = HttpServer::new(move || {
        App::new()
            // Inside the default headers: a 401 says nosniff and no-store too.
            .wrap(from_fn(routes::require_admin_token))
            .wrap(routes::default_headers())
            .app_data(state.clone())
            .configure(|cfg| routes::operator(cfg, stats_route))
            .default_service(web::to(routes::not_found))
    })
    .workers(1)
    .shutdown_timeout(settings.shutdown_grace.as_secs())
    .disable_signals()
    .client_request_timeout(Duration::from_secs(5))
    .listen(listener)?
    .run();
    tracing::info!(address = %settings.admin_bind, port, "operator routes listening");
    Ok((port, admin))
}

/// The token issuer: the configured keys, or keys derived from the secret key (the same on
/// every instance sharing a store, which all have it; random per process without one).
fn token_issuer(settings: &Settings, keyring: &Keyring) -> TokenIssuer {
    let keys = match &settings.token_keys {
        Some(keys) => keys.to_vec(),
        None => {
            if settings.secret_key.is_none() {
                tracing::warn!(
                    "no VCODE_TOKEN_KEY nor VCODE_SECRET_KEY: verification tokens are signed with a random key of this process and stop verifying at its restart"
                );
            }
            keyring
                .token_seeds()
                .into_iter()
                .map(SigningKey::from_seed)
                .collect()
        }
    };
    let issuer = TokenIssuer::new(keys, settings.token.clone());
    tracing::info!(
        kid = issuer.signing_kid(),
        "verification tokens signed with this key"
    );
    issuer
}

/// The tenants whose credential entries set a send budget of their own: API-key callers by
/// name, Twilio accounts by SID.
fn tenant_budgets(settings: &Settings) -> Vec<(TenantId, SendBudget)> {
    let keys = settings.api_keys.iter().flat_map(|keys| {
        keys.budgets()
            .map(|(name, budget)| (TenantId::api_key(name.as_str()), budget))
    });
    let accounts = settings.twilio_accounts.iter().flat_map(|accounts| {
        accounts
            .budgets()
            .map(|(account, budget)| (TenantId::twilio_account(account), budget))
    });
    keys.chain(accounts).collect()
}

/// SIGTERM (an orchestrator's stop) or SIGINT (Ctrl-C).
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut terminate), Ok(mut interrupt)) => {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = interrupt.recv() => {}
            }
        }
        _ => std::future::pending().await,
    }
}

/// Whether `/readyz` on the listener bound to `bind` answers 200 within `timeout` (`vcode
/// healthcheck`): an unspecified address is asked on its loopback. Plain HTTP/1.1 over a
/// socket: no client to configure, nothing but std on the path.
pub fn check_ready(bind: SocketAddr, timeout: Duration) -> Result<(), String> {
    use std::io::{Read, Write};
    let mut address = bind;
    if address.ip().is_unspecified() {
        address.set_ip(match address.ip() {
            std::net::IpAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::IpAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    let mut stream = std::net::TcpStream::connect_timeout(&address, timeout)
        .map_err(|error| format!("{address}: {error}"))?;
    stream.set_read_timeout(Some(timeout)).ok();
    stream.set_write_timeout(Some(timeout)).ok();
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n",
        vcode_wire::paths::READYZ
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|error| format!("{address}: {error}"))?;
    let mut head = [0u8; 12];
    stream
        .read_exact(&mut head)
        .map_err(|error| format!("{address}: {error}"))?;
    match &head {
        b"HTTP/1.1 200" => Ok(()),
        other => Err(format!(
            "{address} answered {}",
            String::from_utf8_lossy(other)
        )),
    }
}
