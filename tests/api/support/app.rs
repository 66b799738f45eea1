//! The application on a random port, against either store, with helpers that speak its API.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use vcode::settings::{SmsSettings, StoreSettings};
use vcode::store::Stores;
use vcode::store::postgres::PostgresSettings;
use vcode::store::redis::{RedisSettings, RedisTopology};
use vcode::{Application, Settings};
use vcode_wire::{
    DevInboxData, DevInboxQuery, Envelope, SendData, SendRequest, VerifyRequest, paths,
};

use super::{Deployment, RedisServer};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Memory,
    Redis,
    /// A Redis Cluster (three primaries).
    Cluster,
    /// A primary found through Redis Sentinel.
    Sentinel,
    /// A fresh database on the test binary's PostgreSQL.
    Postgres,
}

pub struct TestApp {
    pub address: String,
    /// The operator listener (metrics, stats).
    pub admin_address: String,
    pub client: reqwest::Client,
    pub store: Stores,
    /// The test's own Redis (Redis backend only); it dies with the test.
    pub redis: Option<RedisServer>,
    /// The Cluster or Sentinel deployment (those backends only); it lives as long as the app.
    pub deployment: Option<Deployment>,
    /// The test's own database (PostgreSQL backend only).
    pub postgres_url: Option<String>,
}

/// Test defaults: dev mode (the outbox is how a test reads its SMS), the log sender, and the
/// service's own `VCODE_VERIFY_BY=id`: a verify names the id its send answered
/// (`TestApp::verify` does it for the latest send to the phone). A test of the phone path sets
/// `VerifyBy::Phone` (or `Either`) itself and says why.
pub fn test_settings() -> Settings {
    Settings {
        bind: "127.0.0.1:0".parse().expect("valid address"),
        admin_bind: "127.0.0.1:0".parse().expect("valid address"),
        dev_mode: true,
        secret_key: Some(super::codes::test_secret_key()),
        // Tests send to fresh numbers of a few test ranges and rarely verify: to the guard's
        // levels (issue 39) that is a bot pumping ranges without history, refused after a
        // handful. Out of reach here; the guard's own tests set it (tests/api/fraud_levels.rs).
        fraud: vcode::fraud::FraudSettings {
            evidence: 1_000_000,
            ..Default::default()
        },
        ..Settings::default()
    }
}

pub async fn spawn_app(backend: Backend) -> TestApp {
    spawn_app_with(backend, |_| {}).await
}

/// The settings of a test's own Redis.
pub fn redis_settings_of(server: &RedisServer) -> StoreSettings {
    redis_settings(server)
}

/// An instance on `store` (a store another instance used before), with test settings.
pub async fn spawn_on(store: StoreSettings, customise: impl FnOnce(&mut Settings)) -> TestApp {
    let mut settings = test_settings();
    settings.store = store;
    customise(&mut settings);
    start(settings, None).await
}

fn redis_settings(server: &RedisServer) -> StoreSettings {
    StoreSettings::Redis(RedisSettings {
        topology: RedisTopology::Single { url: server.url() },
        connect_timeout: Duration::from_millis(500),
        command_timeout: Duration::from_millis(500),
        ca_file: None,
        older_instances: false,
    })
}

/// The suites' PostgreSQL settings: a statement timeout with room for a busy CI machine.
pub fn postgres_settings(url: &str) -> StoreSettings {
    StoreSettings::Postgres(PostgresSettings {
        statement_timeout: Duration::from_millis(2000),
        pool_size: 8,
        ..PostgresSettings::new(url)
    })
}

pub async fn spawn_app_with(backend: Backend, customise: impl FnOnce(&mut Settings)) -> TestApp {
    let mut settings = test_settings();
    let postgres_url = match backend {
        Backend::Postgres => {
            let url = super::PostgresServer::shared().fresh_database().await;
            settings.store = postgres_settings(&url);
            Some(url)
        }
        _ => None,
    };
    let redis = match backend {
        Backend::Memory | Backend::Cluster | Backend::Sentinel | Backend::Postgres => None,
        Backend::Redis => {
            let server = RedisServer::start();
            settings.store = redis_settings(&server);
            Some(server)
        }
    };
    let deployment = Deployment::start(backend);
    if let Some(deployment) = &deployment {
        settings.store = StoreSettings::Redis(deployment.settings());
    }
    customise(&mut settings);
    let mut app = start(settings, redis).await;
    app.deployment = deployment;
    app.postgres_url = postgres_url;
    app
}

/// Another instance on the Redis of `first` (which keeps owning it), as a second server of a
/// deployment would be.
pub async fn spawn_second_instance(
    first: &TestApp,
    customise: impl FnOnce(&mut Settings),
) -> TestApp {
    let mut settings = test_settings();
    settings.store = match (&first.redis, &first.postgres_url) {
        (Some(server), _) => redis_settings(server),
        (None, Some(url)) => postgres_settings(url),
        (None, None) => panic!("the first instance runs on Redis or PostgreSQL"),
    };
    customise(&mut settings);
    start(settings, None).await
}

async fn start(settings: Settings, redis: Option<RedisServer>) -> TestApp {
    // Server logs only on request: `TEST_LOG=1 cargo test ...`.
    if std::env::var_os("TEST_LOG").is_some() {
        vcode::telemetry::init(&Default::default());
    }
    let application = Application::build(settings)
        .await
        .expect("the application builds");
    let address = format!("http://127.0.0.1:{}", application.port());
    let admin_address = format!("http://127.0.0.1:{}", application.admin_port());
    let store = application.stores();
    tokio::spawn(application.run_until_stopped());
    TestApp {
        address,
        admin_address,
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("client"),
        store,
        redis,
        deployment: None,
        postgres_url: None,
    }
}

/// A webhook SMS sender pointing at `url`.
pub fn webhook(url: &str) -> SmsSettings {
    SmsSettings::webhook(url, Duration::from_millis(500))
}

/// An HTTP answer: status, the `Retry-After` header, and the JSON envelope.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub retry_after: Option<String>,
    pub body: Value,
}

impl Answer {
    pub fn code(&self) -> i64 {
        self.body["code"].as_i64().unwrap_or_default()
    }

    /// The `verification_id` of an accepted send's answer; panics with the answer otherwise.
    pub fn verification_id(&self) -> String {
        let id = self.data::<SendData>().verification_id;
        assert!(
            !id.is_empty(),
            "a send answers its verification_id: {self:?}"
        );
        id
    }

    /// The envelope's `data` read as the wire type `T`; panics with the answer if it is not one.
    pub fn data<T: DeserializeOwned>(&self) -> T {
        serde_json::from_value(self.body["data"].clone()).unwrap_or_else(|error| {
            panic!(
                "data is no {}: {error}: {self:?}",
                std::any::type_name::<T>()
            )
        })
    }
}

/// The body of a 200 answer carrying `data`, as JSON to compare answers with.
pub fn ok_body(data: impl Serialize) -> Value {
    serde_json::to_value(Envelope::ok(data)).expect("wire types serialise")
}

/// The `verification_id` of the latest accepted send to each phone and purpose, by any
/// instance of the test binary: `TestApp::verify` verifies under it, as a client carries the
/// id of its send. Keyed by the number's last ten digits, so a national and an E.164 form are
/// one phone (each test draws phones of its own).
static VERIFICATION_IDS: LazyLock<Mutex<HashMap<(String, String), String>>> =
    LazyLock::new(Mutex::default);

fn send_key(phone: &str, purpose: Option<&str>) -> (String, String) {
    let digits: Vec<char> = phone.chars().filter(char::is_ascii_digit).collect();
    let phone = digits[digits.len().saturating_sub(10)..].iter().collect();
    // The service's default purpose.
    (phone, purpose.unwrap_or("login").to_owned())
}

/// Notes the id a send answered, if it was accepted.
fn remember_verification(send: &Value, answer: &Answer) {
    if answer.status != 200 {
        return;
    }
    if let (Some(phone), Some(id)) = (
        send["phone"].as_str(),
        answer.body["data"]["verification_id"].as_str(),
    ) {
        let key = send_key(phone, send["purpose"].as_str());
        VERIFICATION_IDS.lock().unwrap().insert(key, id.to_owned());
    }
}

/// The id of the latest send to `phone` for `purpose` (`login` if `None`) these tests saw
/// answered.
pub fn verification_id(phone: &str, purpose: Option<&str>) -> Option<String> {
    VERIFICATION_IDS
        .lock()
        .unwrap()
        .get(&send_key(phone, purpose))
        .cloned()
}

/// `request` under the id of the latest send to its phone and purpose (if any), as a client
/// carrying its send's id would send it.
pub fn with_latest_id(request: VerifyRequest) -> VerifyRequest {
    let id = request
        .phone
        .as_deref()
        .and_then(|phone| verification_id(phone, request.purpose.as_deref()));
    VerifyRequest {
        verification_id: id,
        ..request
    }
}

/// A verify of `code` for `phone` (`login`) under the id of the latest send to it.
pub fn verify_request(phone: &str, code: &str) -> VerifyRequest {
    with_latest_id(VerifyRequest::new(phone, code))
}

impl TestApp {
    pub async fn post_json(&self, path: &str, body: &impl Serialize) -> Answer {
        let answer = self
            .request(self.client.post(self.url(path)).json(body))
            .await;
        if path == paths::OTP_SEND
            && let Ok(send) = serde_json::to_value(body)
        {
            remember_verification(&send, &answer);
        }
        answer
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.request(self.client.get(self.url(path))).await
    }

    /// A URL of the operator listener.
    pub fn admin_url(&self, path: &str) -> String {
        format!("{}{}", self.admin_address, path)
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    pub async fn request(&self, request: reqwest::RequestBuilder) -> Answer {
        let response = request.send().await.expect("the app answers");
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let text = response.text().await.expect("a body");
        let body = serde_json::from_str(&text)
            .unwrap_or_else(|_| panic!("not a JSON envelope ({status}): {text:?}"));
        Answer {
            status,
            retry_after,
            body,
        }
    }

    pub async fn send(&self, phone: &str) -> Answer {
        self.post_json(paths::OTP_SEND, &SendRequest::new(phone))
            .await
    }

    /// An accepted send to `phone`: the `verification_id` it answered.
    pub async fn send_id(&self, phone: &str) -> String {
        let sent = self.send(phone).await;
        assert_eq!(sent.status, 200, "{sent:?}");
        sent.verification_id()
    }

    pub async fn send_for(&self, phone: &str, purpose: &str) -> Answer {
        let body = SendRequest {
            purpose: Some(purpose.to_owned()),
            ..SendRequest::new(phone)
        };
        self.post_json(paths::OTP_SEND, &body).await
    }

    /// A verify of `code` for `phone`, under the id of the latest send to it (if any), as a
    /// client carrying its send's id would.
    pub async fn verify(&self, phone: &str, code: &str) -> Answer {
        self.post_json(paths::OTP_VERIFY, &verify_request(phone, code))
            .await
    }

    /// A verify of `code` under `id` alone.
    pub async fn verify_id(&self, id: &str, code: &str) -> Answer {
        self.post_json(paths::OTP_VERIFY, &VerifyRequest::with_id(id, code))
            .await
    }

    pub async fn verify_for(&self, phone: &str, code: &str, purpose: &str) -> Answer {
        let body = with_latest_id(VerifyRequest {
            purpose: Some(purpose.to_owned()),
            ..VerifyRequest::new(phone, code)
        });
        self.post_json(paths::OTP_VERIFY, &body).await
    }

    /// The dev inbox's answer for `phone`.
    pub async fn outbox(&self, phone: &str) -> Answer {
        let query = DevInboxQuery {
            phone: Some(phone.to_owned()),
            email: None,
        };
        self.request(self.client.get(self.url(paths::DEV_INBOX)).query(&query))
            .await
    }

    /// The codes delivered to `phone`, oldest first, read from the dev inbox as a user reads
    /// their SMS.
    pub async fn inbox(&self, phone: &str) -> Vec<String> {
        let answer = self.outbox(phone).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        let outbox: DevInboxData = answer.data();
        outbox.messages.into_iter().map(|m| m.code).collect()
    }

    /// The latest code delivered to `phone`.
    pub async fn last_code(&self, phone: &str) -> String {
        self.inbox(phone)
            .await
            .pop()
            .expect("at least one SMS was delivered")
    }

    /// The code pending for `phone` (the default purpose), read from the store.
    pub async fn pending_code(&self, phone: &str) -> Option<vcode::store::PendingCode> {
        self.store
            .codes
            .pending_code(&super::phone(phone), &vcode::domain::Purpose::default())
            .await
            .unwrap()
    }
}
