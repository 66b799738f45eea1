//! The event tests' webhook receiver: `tests/events/receiver.py`, which verifies every request
//! with the official Standard Webhooks library (PyPI `standardwebhooks`). Missing library:
//! the test is skipped loudly, or fails under `TEST_REQUIRE_SDK=1` (CI).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};
use vcode::events::{Endpoint, EventSettings, WebhookSecret};

/// One request the receiver got.
#[derive(Clone, Debug, Deserialize)]
pub struct ReceivedWebhook {
    /// `webhook-id`.
    pub id: String,
    /// Whether the library verified its signature.
    pub verified: bool,
    /// What the receiver answered.
    pub status: u16,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub data: Option<Value>,
    pub raw: String,
}

impl ReceivedWebhook {
    pub fn accepted(&self) -> bool {
        self.verified && self.status == 200
    }

    pub fn subject(&self) -> Option<&str> {
        self.data.as_ref()?["verification_id"].as_str()
    }
}

pub struct Receiver {
    child: Child,
    pub url: String,
    base: String,
    client: reqwest::Client,
}

/// A new `whsec_` secret of 32 random bytes.
pub fn new_secret() -> String {
    let key: [u8; 32] = rand::random();
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    )
}

/// Event settings that deliver to `url`, signed with `secrets`, retrying fast.
pub fn events_to(url: &str, secrets: &[&str]) -> EventSettings {
    EventSettings {
        endpoints: vec![Endpoint {
            url: url.to_owned(),
            secrets: secrets
                .iter()
                .map(|secret| WebhookSecret::parse(secret).expect("a test secret"))
                .collect(),
            events: None,
        }],
        timeout: Duration::from_secs(2),
        backoff: Duration::from_millis(100),
        retry_for: Duration::from_secs(24 * 3600),
        poll: Duration::from_millis(50),
    }
}

impl Receiver {
    /// The receiver holding `secret`, or `None` (skipped) without the library.
    pub fn start(secret: &str, test: &str) -> Option<Self> {
        Self::start_on(secret, test, 0)
    }

    fn start_on(secret: &str, test: &str, port: u16) -> Option<Self> {
        let python = std::env::var("TEST_SDK_PYTHON").unwrap_or_else(|_| "python3".to_owned());
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/events/receiver.py");
        let spawned = Command::new(&python)
            .arg(&script)
            .env("RECEIVER_SECRET", secret)
            .env("RECEIVER_PORT", port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let why = match spawned {
            Ok(mut child) => {
                let mut line = String::new();
                let stdout = child.stdout.take().expect("piped");
                BufReader::new(stdout).read_line(&mut line).ok();
                match line.trim().parse::<u16>() {
                    Ok(port) => {
                        let base = format!("http://127.0.0.1:{port}");
                        return Some(Self {
                            child,
                            url: format!("{base}/hook"),
                            base,
                            client: reqwest::Client::new(),
                        });
                    }
                    Err(_) => {
                        let output = child.wait_with_output().expect("the receiver ends");
                        String::from_utf8_lossy(&output.stderr).trim().to_owned()
                    }
                }
            }
            Err(error) => format!("{python} cannot be run: {error}"),
        };
        if std::env::var_os("TEST_REQUIRE_SDK").is_some() {
            panic!("TEST_REQUIRE_SDK is set but the Standard Webhooks receiver cannot run: {why}");
        }
        eprintln!(
            "\n*** SKIPPED {test}: {why}\n*** install it: python3 -m pip install -r tests/events/requirements.txt\n"
        );
        None
    }

    /// Answers the next requests with `status`, after `delay_ms`.
    pub async fn set_mode(&self, status: u16, delay_ms: u64) {
        self.client
            .post(format!("{}/mode", self.base))
            .json(&json!({"status": status, "delay_ms": delay_ms}))
            .send()
            .await
            .expect("the receiver answers");
    }

    pub async fn deliveries(&self) -> Vec<ReceivedWebhook> {
        self.client
            .get(format!("{}/deliveries", self.base))
            .send()
            .await
            .expect("the receiver answers")
            .json()
            .await
            .expect("the receiver's JSON")
    }

    /// Waits up to `wait` until each verification has accepted as many events as it expects,
    /// then `quiet` more (time for a copy that should not exist to arrive), and asserts that
    /// each has accepted exactly the types it expects, in that order.
    pub async fn assert_settled(
        &self,
        expected: &[(&str, &[&str])],
        wait: Duration,
        quiet: Duration,
    ) {
        let arrived = super::eventually(wait, || async {
            for (id, types) in expected {
                if self.accepted_types(id).await.len() < types.len() {
                    return false;
                }
            }
            true
        })
        .await;
        assert!(arrived, "{:?}", self.deliveries().await);
        tokio::time::sleep(quiet).await;
        for (id, types) in expected {
            assert_eq!(self.accepted_types(id).await, *types, "verification {id}");
        }
    }

    /// The types accepted for verification `id`, in the order they were first accepted.
    pub async fn accepted_types(&self, id: &str) -> Vec<String> {
        let mut seen = std::collections::HashSet::new();
        self.deliveries()
            .await
            .into_iter()
            .filter(|delivery| delivery.accepted() && delivery.subject() == Some(id))
            .filter(|delivery| seen.insert(delivery.id.clone()))
            .filter_map(|delivery| delivery.kind)
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
