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
use crate::config::{Settings, SmsSettings, StoreSettings};
use crate::health::Readiness;
use crate::otp::{OtpService, SendGate};
use crate::pow::{self, PowService};
use crate::routes::{self, AppState};
use crate::sms::{LogSender, SmsSender, WebhookSender};
use crate::stats::Stats;
use crate::store::redis::{RedisTopology, legacy};
use crate::store::{HealthCheck, MemoryStore, RedisStore, Stores};
use crate::telemetry::RequestSpan;

/// How often the daily counters counted in-process are added to the store.
const STATS_FLUSH_INTERVAL: Duration = Duration::from_secs(1);

pub struct Application {
    port: u16,
    server: Server,
    stores: Stores,
}

impl Application {
    /// Binds the listener and prepares the server; `run_until_stopped` serves.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        settings.validate()?;
        let stores = match &settings.store {
            StoreSettings::Embedded => Stores::of(MemoryStore::spawn(settings.sweep_interval)),
            StoreSettings::Redis(redis) => {
                let store = RedisStore::connect(redis).context("Redis store")?;
                if let Err(error) = HealthCheck::ping(&store).await {
                    tracing::warn!(%error, "Redis is not reachable yet: /readyz answers 503 until it is");
                }
                let url = match &redis.topology {
                    RedisTopology::Single { url } => Some(url.as_str()),
                    _ => None,
                };
                legacy::stores_for(
                    settings.verify_strategy,
                    store,
                    url,
                    settings.legacy_gap,
                    redis.command_timeout,
                )
                .context("legacy store")?
            }
        };
        let sender: Arc<dyn SmsSender> = match &settings.sms {
            SmsSettings::Log => Arc::new(LogSender::new()),
            SmsSettings::Webhook { url, timeout } => {
                Arc::new(WebhookSender::new(url.clone(), *timeout).context("SMS webhook sender")?)
            }
        };
        if settings.dev_mode {
            tracing::warn!("dev mode: the dev routes expose codes; never run it in production");
        }
        crate::domain::Phone::warm_up(settings.otp.default_region);
        let stats = Stats::spawn(stores.stats.clone(), STATS_FLUSH_INTERVAL);
        let captcha = Arc::new(CaptchaService::new(
            stores.captchas.clone(),
            settings.captcha.clone(),
            stats.clone(),
        ));
        let pow = Arc::new(PowService::new(
            stores.pow_replays.clone(),
            settings.pow.clone(),
            &pow_key(&settings),
        ));
        let gate = SendGate {
            captcha: settings
                .captcha
                .send_requires_captcha
                .then(|| captcha.clone()),
            pow: settings.pow.send_requires_pow.then(|| pow.clone()),
        };
        let otp = Arc::new(OtpService::new(
            &stores,
            sender,
            settings.otp.clone(),
            &settings.abuse,
            gate,
            stats.clone(),
            settings.dev_mode,
        ));
        let state = web::Data::new(AppState {
            otp,
            captcha,
            pow,
            stats,
            readiness: Readiness::new(stores.health.clone()),
            trusted_proxies: settings.abuse.trusted_proxies.clone(),
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
            stores,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The stores the application uses (tests inspect them directly).
    pub fn stores(&self) -> Stores {
        self.stores.clone()
    }

    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        self.server.await
    }
}

/// The key that signs proof-of-work challenges: `VCODE_POW_HMAC_KEY`, or one of this process's
/// own, which other instances refuse.
fn pow_key(settings: &Settings) -> Vec<u8> {
    if let Some(key) = &settings.pow.hmac_key {
        return key.as_bytes().to_vec();
    }
    if matches!(settings.store, StoreSettings::Redis(_)) {
        tracing::warn!(
            "VCODE_POW_HMAC_KEY is not set: a proof-of-work challenge works only on the instance that issued it"
        );
    }
    pow::random_key().to_vec()
}
