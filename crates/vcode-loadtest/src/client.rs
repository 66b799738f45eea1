//! The HTTP side of a load test: the API calls a user makes, spread in turn over the targets,
//! each timed and classified by its envelope code, with the data the service answered.

use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use reqwest::Url;
use serde::Serialize;
use serde::de::DeserializeOwned;
use vcode_wire::{
    DevInboxData, DevInboxQuery, DevMessage, Envelope, ErrorCode, SendData, SendRequest,
    VerifyRequest, WrongCodeData, paths,
};

use crate::ledger::Refusal;

/// A phone no user gets: the preflight's outbox read.
const PROBE_PHONE: &str = "+8613800000000";
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// What a send came back with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SendAnswer {
    /// 200: a code was stored and its SMS handed to the provider (`delivery` says whether it
    /// confirmed); how long it lives and when a resend may deliver again.
    Delivered(SendData),
    /// 429/42900: a code is pending and its cooldown runs (vcode's dedup; not an anomaly).
    Cooldown,
    /// Anything else: the description says what.
    Failed(String),
}

/// What a verify came back with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VerifyAnswer {
    /// 200: the code was accepted.
    Accepted,
    /// The code was compared and refused: 40010 wrong, 41000 missing, 42901 destroyed.
    Refused(Refusal),
    /// Anything else (including a quota refusal, where nothing was compared).
    Failed(String),
}

/// One API call: its answer and when it ran, on the monotonic and on the wall clock (the
/// outbox's `sent_at_ms` is wall-clock time of the same machine).
#[derive(Clone, Debug)]
pub struct Timed<T> {
    pub answer: T,
    pub started: Instant,
    pub started_ms: u64,
    pub ended: Instant,
    pub ended_ms: u64,
    /// Set when the service answered (failed connections have no latency).
    pub latency: Option<Duration>,
}

/// Milliseconds since the Unix epoch, as the outbox writes them.
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

pub struct Client {
    http: reqwest::Client,
    targets: Vec<Url>,
    next: AtomicUsize,
}

impl Client {
    pub fn new(targets: Vec<Url>) -> anyhow::Result<Self> {
        if targets.is_empty() {
            bail!("no target");
        }
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .context("HTTP client")?;
        Ok(Self {
            http,
            targets,
            next: AtomicUsize::new(0),
        })
    }

    /// Checks every target before the load starts: ready, and in dev mode (the outbox is how
    /// users read their SMS).
    pub async fn preflight(&self) -> anyhow::Result<()> {
        for target in &self.targets {
            let ready = self
                .http
                .get(join(target, paths::READYZ))
                .send()
                .await
                .with_context(|| format!("{target} does not answer"))?;
            if !ready.status().is_success() {
                bail!(
                    "{target} is not ready (/readyz answered {})",
                    ready.status()
                );
            }
            let outbox = self
                .http
                .get(join(target, paths::DEV_INBOX))
                .query(&DevInboxQuery {
                    phone: Some(PROBE_PHONE.to_owned()),
                    email: None,
                })
                .send()
                .await
                .with_context(|| format!("{target} does not answer"))?;
            if !outbox.status().is_success() {
                bail!(
                    "{target} has no dev inbox (answered {}): start it with VCODE_DEV_MODE=1",
                    outbox.status()
                );
            }
        }
        Ok(())
    }

    /// `POST /api/v1/otp/send`.
    pub async fn send(&self, phone: &str) -> Timed<SendAnswer> {
        let body = SendRequest::new(phone);
        self.timed(async {
            match self.post(paths::OTP_SEND, &body, None).await {
                Ok(answer) => (answer.into_send(), true),
                Err(error) => (SendAnswer::Failed(transport("send", &error)), false),
            }
        })
        .await
    }

    /// `POST /api/v1/otp/verify`: under the send's `verification_id` (with the phone, which
    /// must match it), or by phone alone for a service that verifies by phone.
    pub async fn verify(
        &self,
        verification_id: Option<&str>,
        phone: &str,
        code: &str,
    ) -> Timed<VerifyAnswer> {
        let body = VerifyRequest {
            verification_id: verification_id.map(str::to_owned),
            ..VerifyRequest::new(phone, code)
        };
        self.timed(async {
            match self.post(paths::OTP_VERIFY, &body, None).await {
                Ok(answer) => (answer.into_verify(), true),
                Err(error) => (VerifyAnswer::Failed(transport("verify", &error)), false),
            }
        })
        .await
    }

    /// `POST /api/v1/otp/send` for the client at `from`, as its proxy (`X-Forwarded-For`, which
    /// an instance believes when it trusts this load generator's address): the envelope code
    /// (200 on success) and the `verification_id` a success answered, or the kind of failure
    /// that kept an answer from coming.
    pub async fn send_from(
        &self,
        phone: &str,
        from: IpAddr,
    ) -> Result<(u32, Option<String>), String> {
        let body = if is_email(phone) {
            SendRequest::email(phone)
        } else {
            SendRequest::new(phone)
        };
        match self.post(paths::OTP_SEND, &body, Some(from)).await {
            Ok(answer) => {
                let code = answer.envelope.code;
                let id = match answer.into_send() {
                    SendAnswer::Delivered(sent) => Some(sent.verification_id),
                    SendAnswer::Cooldown | SendAnswer::Failed(_) => None,
                };
                Ok((code, id))
            }
            Err(error) => Err(transport("send", &error)),
        }
    }

    /// `POST /api/v1/otp/verify` for the client at `from`, as [`Self::send_from`] sends, under
    /// the send's `verification_id` (by phone alone without one): the envelope code.
    pub async fn verify_from(
        &self,
        verification_id: Option<&str>,
        phone: &str,
        code: &str,
        from: IpAddr,
    ) -> Result<u32, String> {
        let mut body = VerifyRequest {
            verification_id: verification_id.map(str::to_owned),
            ..VerifyRequest::new(phone, code)
        };
        if is_email(phone) {
            body.email = body.phone.take();
        }
        match self.post(paths::OTP_VERIFY, &body, Some(from)).await {
            Ok(answer) => Ok(answer.envelope.code),
            Err(error) => Err(transport("verify", &error)),
        }
    }

    /// `GET /api/v1/dev/inbox?phone=` (`?email=` for an address): every message the
    /// destination got, oldest first.
    pub async fn outbox(&self, phone: &str) -> anyhow::Result<Vec<DevMessage>> {
        let target = self.target();
        let (phone, email) = if is_email(phone) {
            (None, Some(phone.to_owned()))
        } else {
            (Some(phone.to_owned()), None)
        };
        let response = self
            .http
            .get(join(target, paths::DEV_INBOX))
            .query(&DevInboxQuery { phone, email })
            .send()
            .await
            .context("outbox read failed")?;
        let status = response.status();
        let envelope: Envelope<Option<DevInboxData>> =
            response.json().await.context("outbox read failed")?;
        match envelope.data {
            Some(data) if status.is_success() => Ok(data.messages),
            _ => bail!("outbox read answered {status}/{}", envelope.code),
        }
    }

    /// The next target in turn.
    fn target(&self) -> &Url {
        let index = self.next.fetch_add(1, Ordering::Relaxed) % self.targets.len();
        &self.targets[index]
    }

    /// Posts JSON, forwarded for `client` if there is one; the HTTP status and the envelope.
    async fn post(
        &self,
        path: &str,
        body: &impl Serialize,
        client: Option<IpAddr>,
    ) -> Result<Answered, reqwest::Error> {
        let mut request = self.http.post(join(self.target(), path)).json(body);
        if let Some(client) = client {
            request = request.header("x-forwarded-for", client.to_string());
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let envelope = response.json().await?;
        Ok(Answered { status, envelope })
    }

    /// Runs one call, noting when it started and ended. The call says whether the service
    /// answered, which is when a latency is recorded.
    async fn timed<T>(&self, call: impl Future<Output = (T, bool)>) -> Timed<T> {
        let (started, started_ms) = (Instant::now(), wall_ms());
        let (answer, answered) = call.await;
        let ended = Instant::now();
        Timed {
            answer,
            started,
            started_ms,
            ended,
            ended_ms: wall_ms(),
            latency: answered.then(|| ended - started),
        }
    }
}

/// An answer of the service: the HTTP status and the envelope, its data not read yet.
struct Answered {
    status: u16,
    envelope: Envelope<serde_json::Value>,
}

impl Answered {
    /// The answer to a send.
    fn into_send(self) -> SendAnswer {
        match (self.status, self.envelope.error_code()) {
            (200, _) if self.envelope.is_ok() => self
                .data("send")
                .map_or_else(SendAnswer::Failed, SendAnswer::Delivered),
            (429, Some(ErrorCode::ResendCooldown)) => SendAnswer::Cooldown,
            _ => SendAnswer::Failed(self.describe("send")),
        }
    }

    /// The answer to a verify.
    fn into_verify(self) -> VerifyAnswer {
        if self.status == 200 && self.envelope.is_ok() {
            return VerifyAnswer::Accepted;
        }
        // The envelope code's first three digits are the HTTP status.
        match self.envelope.error_code() {
            Some(ErrorCode::WrongCode) => self.data("verify").map_or_else(
                VerifyAnswer::Failed,
                |WrongCodeData { remaining_attempts }| {
                    VerifyAnswer::Refused(Refusal::Wrong { remaining_attempts })
                },
            ),
            Some(ErrorCode::TooManyAttempts) => VerifyAnswer::Refused(Refusal::Destroyed),
            Some(ErrorCode::CodeExpired) => VerifyAnswer::Refused(Refusal::Missing),
            _ => VerifyAnswer::Failed(self.describe("verify")),
        }
    }

    /// `send 503/50300`: the call, the status and the envelope code (a failure's kind).
    fn describe(&self, call: &str) -> String {
        format!("{call} {}/{}", self.status, self.envelope.code)
    }

    /// The envelope's data as the contract says it is; a failure's kind if it is not.
    fn data<T: DeserializeOwned>(self, call: &str) -> Result<T, String> {
        let kind = self.describe(call);
        serde_json::from_value(self.envelope.data).map_err(|_| format!("{kind}: unexpected data"))
    }
}

fn join(target: &Url, path: &str) -> Url {
    let mut url = target.clone();
    url.set_path(path);
    url
}

/// A failure without an HTTP answer, kind only (the details would make every line unique).
fn transport(call: &str, error: &reqwest::Error) -> String {
    let kind = if error.is_timeout() {
        "timeout"
    } else if error.is_connect() {
        "connection failed"
    } else if error.is_decode() {
        "not a JSON envelope"
    } else {
        "transport error"
    };
    format!("{call}: {kind}")
}

/// A destination written with an `@` is an email address (the pumping scenario's `--mail`);
/// any other is a phone number.
fn is_email(destination: &str) -> bool {
    destination.contains('@')
}

#[cfg(test)]
mod tests {
    use super::*;
    use vcode_wire::Delivery;

    /// An answer as the service would write it: the status and the envelope's JSON.
    fn answered(status: u16, json: &str) -> Answered {
        Answered {
            status,
            envelope: serde_json::from_str(json).expect("an envelope"),
        }
    }

    #[test]
    fn sends_read_the_lifetime_and_cooldown_from_the_answer() {
        let sent = r#"{"code":200,"message":"ok","data":{"verification_id":"q3Vd0m9YyTnJkqW8cXoB4A","expires_in":120,"resend_after":30,"delivery":"unconfirmed"}}"#;
        assert_eq!(
            answered(200, sent).into_send(),
            SendAnswer::Delivered(SendData {
                verification_id: "q3Vd0m9YyTnJkqW8cXoB4A".into(),
                expires_in: 120,
                resend_after: 30,
                delivery: Delivery::Unconfirmed,
            })
        );
        // A service that predates `delivery` confirmed every send it answered 200.
        let older = r#"{"code":200,"message":"ok","data":{"expires_in":120,"resend_after":30}}"#;
        let SendAnswer::Delivered(older) = answered(200, older).into_send() else {
            panic!("a delivery");
        };
        assert_eq!(older.delivery, Delivery::Sent);
        let cooldown = r#"{"code":42900,"message":"wait","data":{"retry_after":59}}"#;
        assert_eq!(answered(429, cooldown).into_send(), SendAnswer::Cooldown);
        let without_data = r#"{"code":200,"message":"ok","data":null}"#;
        assert_eq!(
            answered(200, without_data).into_send(),
            SendAnswer::Failed("send 200/200: unexpected data".into())
        );
        let quota = r#"{"code":42902,"message":"quota exceeded","data":{"retry_after":9}}"#;
        assert_eq!(
            answered(429, quota).into_send(),
            SendAnswer::Failed("send 429/42902".into())
        );
    }

    #[test]
    fn verifies_read_the_attempts_left_from_the_answer() {
        let cases = [
            (
                200,
                r#"{"code":200,"message":"ok","data":{"verified":true}}"#,
                VerifyAnswer::Accepted,
            ),
            (
                400,
                r#"{"code":40010,"message":"wrong code","data":{"remaining_attempts":3}}"#,
                VerifyAnswer::Refused(Refusal::Wrong {
                    remaining_attempts: 3,
                }),
            ),
            (
                429,
                r#"{"code":42901,"message":"too many","data":null}"#,
                VerifyAnswer::Refused(Refusal::Destroyed),
            ),
            (
                410,
                r#"{"code":41000,"message":"expired","data":null}"#,
                VerifyAnswer::Refused(Refusal::Missing),
            ),
            (
                400,
                r#"{"code":40010,"message":"wrong code","data":null}"#,
                VerifyAnswer::Failed("verify 400/40010: unexpected data".into()),
            ),
            (
                429,
                r#"{"code":42902,"message":"quota exceeded","data":{"retry_after":9}}"#,
                VerifyAnswer::Failed("verify 429/42902".into()),
            ),
        ];
        for (status, json, expected) in cases {
            assert_eq!(answered(status, json).into_verify(), expected, "{json}");
        }
    }
}
