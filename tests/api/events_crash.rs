//! kill -9 of the instance between a change and its event's delivery loses no event: the
//! outbox is written in the step of the change, on Redis (one node and Cluster) and
//! PostgreSQL. The instance is the
//! `vcode` binary, killed while the receiver refuses everything; another instance on the same
//! store delivers afterwards.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use vcode::otp::VerifyBy;
use vcode::settings::StoreSettings;

use crate::support::event_receiver::{Receiver, events_to, new_secret};
use crate::support::free_port;
use crate::support::{
    ClusterLease, PostgresServer, RedisServer, TestApp, app::postgres_settings, eventually,
    random_phone,
};

/// The binary, serving on its own ports against the store `store_vars` name, delivering its
/// events to `receiver_url`.
struct Instance {
    child: Child,
    address: String,
}

impl Instance {
    async fn start(store_vars: &[(&str, String)], receiver_url: &str, secret: &str) -> Self {
        let port = free_port();
        let key: [u8; 32] = rand::random();
        let child = Command::new(env!("CARGO_BIN_EXE_vcode"))
            .env_clear()
            .envs([
                ("VCODE_BIND", format!("127.0.0.1:{port}")),
                ("VCODE_ADMIN_BIND", format!("127.0.0.1:{}", free_port())),
                ("VCODE_DEV_MODE", "1".to_owned()),
                ("VCODE_SECRET_KEY", hex::encode(key)),
                ("VCODE_FRAUD_GUARD", "off".to_owned()),
                ("VCODE_EVENTS_WEBHOOK_URL", receiver_url.to_owned()),
                ("VCODE_EVENTS_WEBHOOK_SECRET", secret.to_owned()),
                ("VCODE_EVENTS_RETRY_BACKOFF_MS", "100".to_owned()),
            ])
            .envs(
                store_vars
                    .iter()
                    .map(|(name, value)| (*name, value.as_str())),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the vcode binary runs");
        let instance = Self {
            child,
            address: format!("http://127.0.0.1:{port}"),
        };
        let client = reqwest::Client::new();
        let up = eventually(Duration::from_secs(20), || async {
            client
                .get(format!("{}/readyz", instance.address))
                .send()
                .await
                .is_ok_and(|answer| answer.status().is_success())
        })
        .await;
        assert!(up, "the vcode binary serves");
        instance
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        reqwest::Client::new()
            .post(format!("{}{path}", self.address))
            .json(&body)
            .send()
            .await
            .expect("the instance answers")
            .json()
            .await
            .expect("JSON")
    }

    /// Sends a code, verifies it once wrong and once right: three events. Returns the id.
    async fn verify_a_code(&self) -> String {
        let phone = random_phone();
        let sent = self.post("/api/v1/otp/send", json!({"phone": phone})).await;
        let id = sent["data"]["verification_id"]
            .as_str()
            .expect("an id")
            .to_owned();
        let outbox: Value = reqwest::Client::new()
            .get(format!("{}/api/v1/dev/inbox", self.address))
            .query(&[("phone", &phone)])
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let code = outbox["data"]["messages"][0]["code"]
            .as_str()
            .unwrap()
            .to_owned();
        let wrong: String = code
            .chars()
            .map(|d| if d == '0' { '1' } else { '0' })
            .collect();
        let refused = self
            .post(
                "/api/v1/otp/verify",
                json!({"verification_id": id, "code": wrong}),
            )
            .await;
        assert_eq!(refused["code"], 40010, "{refused}");
        let verified = self
            .post(
                "/api/v1/otp/verify",
                json!({"verification_id": id, "code": code}),
            )
            .await;
        assert_eq!(verified["code"], 200, "{verified}");
        id
    }

    /// SIGKILL: no shutdown, no flush.
    fn kill_9(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("the instance ends");
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn no_event_is_lost_to_a_kill_9(store_vars: &[(&str, String)], store: StoreSettings) {
    let secret = new_secret();
    let Some(receiver) = Receiver::start(&secret, "no_event_is_lost_to_a_kill_9") else {
        return;
    };
    receiver.set_mode(503, 0).await;
    let instance = Instance::start(store_vars, &receiver.url, &secret).await;
    let ids = [
        instance.verify_a_code().await,
        instance.verify_a_code().await,
    ];
    instance.kill_9();
    assert!(
        receiver.deliveries().await.iter().all(|d| !d.accepted()),
        "nothing was delivered before the kill"
    );

    receiver.set_mode(200, 0).await;
    let events = events_to(&receiver.url, &[&secret]);
    let _survivor: TestApp = crate::support::app::spawn_on(store, |settings| {
        settings.otp.verify_by = VerifyBy::Id;
        settings.events = events;
    })
    .await;
    for id in &ids {
        assert!(
            eventually(Duration::from_secs(20), || async {
                receiver.accepted_types(id).await.len() >= 3
            })
            .await,
            "{id}: {:?}",
            receiver.accepted_types(id).await
        );
        assert_eq!(
            receiver.accepted_types(id).await,
            [
                "verification.created",
                "verification.failed_attempt",
                "verification.approved"
            ]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_event_is_lost_to_a_kill_9_on_redis() {
    let server = RedisServer::start();
    let store = crate::support::app::redis_settings_of(&server);
    no_event_is_lost_to_a_kill_9(&[("VCODE_REDIS_URL", server.url())], store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_event_is_lost_to_a_kill_9_on_a_cluster() {
    let cluster = ClusterLease::take();
    let settings = cluster.settings(Duration::from_millis(500));
    no_event_is_lost_to_a_kill_9(
        &[("VCODE_REDIS_CLUSTER_NODES", cluster.seeds().join(","))],
        StoreSettings::Redis(settings),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_event_is_lost_to_a_kill_9_on_postgres() {
    let url = PostgresServer::shared().fresh_database().await;
    no_event_is_lost_to_a_kill_9(
        &[("VCODE_DATABASE_URL", url.clone())],
        postgres_settings(&url),
    )
    .await;
}
