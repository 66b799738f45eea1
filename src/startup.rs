//! Builds the application from `Settings`: the store, the SMS sender, the OTP service and the
//! HTTP server bound to its listener (port 0 in tests).

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::Server;
use actix_web::middleware::from_fn;
use actix_web::{App, HttpServer, web};
use anyhow::Context;
use tracing_actix_web::TracingLogger;

use crate::captcha::CaptchaService;
use crate::config::{AbuseSettings, Settings, StoreSettings};
use crate::otp::OtpService;
use crate::routes;
use crate::stats::Stats;
use crate::store::redis::legacy;
use crate::store::{MemoryStore, RedisStore, Store};
use crate::telemetry::RequestSpan;

/// How often the daily counters counted in-process are added to the store.
const STATS_FLUSH_INTERVAL: Duration = Duration::from_secs(1);

/// What every handler can reach.
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub stats: Arc<Stats>,
    pub otp: Arc<OtpService>,
    pub captcha: CaptchaService,
    pub abuse: AbuseSettings,
    pub admin_token: Option<String>,
}

pub struct Application {
    port: u16,
    server: Server,
    store: Arc<dyn Store>,
}

impl Application {
    /// Binds the listener and prepares the server; `run_until_stopped` serves.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        settings.validate()?;
        let store: Arc<dyn Store> = match &settings.store {
            StoreSettings::Embedded => MemoryStore::spawn(settings.sweep_interval),
            StoreSettings::Redis(redis) => {
                let store = RedisStore::connect(redis).context("Redis store")?;
                if let Err(error) = store.ping().await {
                    tracing::warn!(%error, "Redis is not reachable yet: /readyz answers 503 until it is");
                }
                legacy::store_for(settings.verify_strategy, store, settings.legacy_gap)
            }
        };
        // SMS: the sms module builds the routed, observed sender (the stats hook is not wired yet).
        let sender = crate::sms::build_sender(&settings.sms, Arc::new(crate::sms::NoObserver))
            .context("SMS sender")?;
        if settings.dev_mode {
            tracing::warn!("dev mode: the dev routes expose codes; never run it in production");
        }
        crate::domain::Phone::warm_up(settings.otp.default_region);
        let stats = Stats::spawn(store.clone(), STATS_FLUSH_INTERVAL);
        let otp = Arc::new(OtpService::new(
            store.clone(),
            sender,
            settings.otp.clone(),
            &settings.abuse,
            stats.clone(),
            settings.dev_mode,
        ));
        let state = web::Data::new(AppState {
            store: store.clone(),
            stats: stats.clone(),
            otp,
            captcha: CaptchaService::new(store.clone(), settings.captcha.clone(), stats.clone()),
            abuse: settings.abuse.clone(),
            admin_token: settings.admin_token.clone(),
        });

        let listener = TcpListener::bind(settings.bind)
            .with_context(|| format!("cannot bind {} (VCODE_BIND)", settings.bind))?;
        let port = listener.local_addr()?.port();
        let max_body_bytes = settings.max_body_bytes;
        let dev_mode = settings.dev_mode;
        let stats_route = settings.admin_token.is_some();
        let server = HttpServer::new(move || {
            App::new()
                .wrap(from_fn(crate::metrics::track_requests))
                .wrap(TracingLogger::<RequestSpan>::new())
                .app_data(state.clone())
                .configure(|cfg| routes::config(cfg, max_body_bytes, dev_mode, stats_route))
                .default_service(web::to(routes::not_found))
        })
        .shutdown_timeout(10)
        .client_request_timeout(Duration::from_secs(5))
        .listen(listener)?
        .run();
        tracing::info!(address = %settings.bind, port, "vcode listening");
        Ok(Self {
            port,
            server,
            store,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The store the application uses (tests inspect it directly).
    pub fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        self.server.await
    }
}
