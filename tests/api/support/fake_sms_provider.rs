//! A local stand-in for Alibaba Cloud SMS, Tencent Cloud SMS or Twilio on a free loopback
//! port: it checks every request as the provider does (the signature recomputed from the
//! secret it was given, the required parameters, the timestamp window, replayed nonces) and
//! answers with the provider's documented success and error bodies, or as scripted.

use std::collections::{HashSet, VecDeque};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use actix_web::http::StatusCode;
use actix_web::web::Bytes;
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use serde_json::{Value, json};

use super::fake_sms_checks::{self, Checked};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    Aliyun,
    Tencent,
    Twilio,
}

/// What the fake does with the next request that passes its checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Deliver,
    /// The provider's documented per-number limit (Aliyun: hourly flow control; Tencent: 30 s;
    /// Twilio: 429, 20429).
    Throttle,
    InvalidNumber,
    /// Template or sign name not approved (Twilio: an invalid `From`).
    TemplateNotApproved,
    /// A 5xx answer.
    ServerError,
    /// Takes the message (it reaches the phone) but answers, with success, only after this
    /// long.
    Stall(Duration),
    /// A 302 to another address.
    Redirect,
}

/// A message the fake accepted.
#[derive(Clone, Debug)]
pub struct Accepted {
    /// As the provider received it (`8613800138000` for Aliyun, E.164 for the others).
    pub phone: String,
    /// Aliyun's `TemplateCode`, Tencent's `TemplateId`; empty for Twilio.
    pub template: String,
    pub sign_name: String,
    /// Aliyun: the `TemplateParam` object; Tencent: the `TemplateParamSet` array; Twilio: the
    /// `Body` text.
    pub params: Value,
    /// The request's `Content-Length` header as it arrived, if any.
    pub content_length: Option<String>,
    /// Twilio's `MessagingServiceSid` (its `From` is in `sign_name`).
    pub messaging_service_sid: Option<String>,
}

pub struct State {
    pub provider: Provider,
    /// The key id and the secret the fake accepts.
    pub key_id: String,
    pub secret: String,
    script: Mutex<VecDeque<Outcome>>,
    accepted: Mutex<Vec<Accepted>>,
    pub nonces: Mutex<HashSet<String>>,
    /// Twilio: an API key (SID, secret) of the account that authenticates as well.
    pub api_key: Mutex<Option<(String, String)>>,
    requests: AtomicUsize,
    /// The last check failure, for test messages.
    pub last_refusal: Mutex<Option<String>>,
}

#[derive(Clone)]
pub struct FakeSmsProvider {
    state: Arc<State>,
    base_url: String,
}

pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

impl FakeSmsProvider {
    /// Starts the fake; it accepts requests signed with `key_id` and `secret`.
    pub fn start(provider: Provider, key_id: &str, secret: &str) -> Self {
        let state = Arc::new(State {
            provider,
            key_id: key_id.to_owned(),
            secret: secret.to_owned(),
            script: Mutex::new(VecDeque::new()),
            accepted: Mutex::new(Vec::new()),
            nonces: Mutex::new(HashSet::new()),
            api_key: Mutex::new(None),
            requests: AtomicUsize::new(0),
            last_refusal: Mutex::new(None),
        });
        let listener = TcpListener::bind("127.0.0.1:0").expect("free port");
        let port = listener.local_addr().unwrap().port();
        let data = web::Data::new(state.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .app_data(web::PayloadConfig::new(64 * 1024))
                .default_service(web::to(handle))
        })
        .workers(2)
        .listen(listener)
        .expect("the fake listens")
        .run();
        tokio::spawn(server);
        Self {
            state,
            base_url: format!("http://127.0.0.1:{port}"),
        }
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The next requests that pass the checks get these outcomes, in order; the others are
    /// delivered.
    pub fn script(&self, outcomes: &[Outcome]) {
        self.state.script.lock().unwrap().extend(outcomes);
    }

    /// Twilio: also accept HTTP Basic with this API key of the account.
    pub fn accept_api_key(&self, sid: &str, secret: &str) {
        *self.state.api_key.lock().unwrap() = Some((sid.to_owned(), secret.to_owned()));
    }

    pub fn accepted(&self) -> Vec<Accepted> {
        self.state.accepted.lock().unwrap().clone()
    }

    /// Requests received, whatever their fate.
    pub fn requests(&self) -> usize {
        self.state.requests.load(Ordering::SeqCst)
    }

    pub fn last_refusal(&self) -> Option<String> {
        self.state.last_refusal.lock().unwrap().clone()
    }
}

async fn handle(state: web::Data<Arc<State>>, request: HttpRequest, body: Bytes) -> HttpResponse {
    state.requests.fetch_add(1, Ordering::SeqCst);
    let checked = match state.provider {
        Provider::Aliyun => fake_sms_checks::aliyun(&state, &request, &body),
        Provider::Tencent => fake_sms_checks::tencent(&state, &request, &body),
        Provider::Twilio => fake_sms_checks::twilio(&state, &request, &body),
    };
    let accepted = match checked {
        Checked::Refused {
            status,
            body,
            reason,
        } => {
            *state.last_refusal.lock().unwrap() = Some(reason);
            return json_answer(status, body);
        }
        Checked::Valid(accepted) => accepted,
    };
    let outcome = state
        .script
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or(Outcome::Deliver);
    match outcome {
        Outcome::Deliver => {}
        Outcome::Stall(delay) => {
            // Taken before the sender stops waiting, as a provider that is only slow to answer.
            state.accepted.lock().unwrap().push(accepted.clone());
            tokio::time::sleep(delay).await;
            let (status, body) = fake_sms_checks::success_answer(state.provider, &accepted);
            return json_answer(status, body);
        }
        Outcome::Redirect => {
            return HttpResponse::Found()
                .insert_header(("Location", "http://127.0.0.1:9/elsewhere"))
                .finish();
        }
        failure => {
            let (status, body) = fake_sms_checks::failure_answer(state.provider, failure);
            return json_answer(status, body);
        }
    }
    state.accepted.lock().unwrap().push(accepted.clone());
    let (status, body) = fake_sms_checks::success_answer(state.provider, &accepted);
    json_answer(status, body)
}

fn json_answer(status: u16, body: Value) -> HttpResponse {
    HttpResponse::build(StatusCode::from_u16(status).unwrap())
        .content_type("application/json;charset=utf-8")
        .body(body.to_string())
}

/// An Aliyun-style request id, for the bodies.
pub fn request_id() -> Value {
    json!("F655A8D5-B967-440B-8683-DAD6FF8DE990")
}
