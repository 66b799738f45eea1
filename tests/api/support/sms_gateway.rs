//! A real local HTTP server standing in for an SMS gateway: it records what it receives (the
//! exact body bytes and the headers, for signature checks), counts every request, and fails,
//! stalls, answers late or redirects on demand.

use std::io::Write;
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use secrecy::SecretString;
use vcode::settings::SmsSettings;

/// A request as it arrived.
#[derive(Clone, Debug)]
pub struct CapturedRequest {
    /// Names lower-case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl CapturedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("the gateway received JSON")
    }
}

#[derive(Default)]
struct GatewayState {
    /// Requests answered 200.
    received: Mutex<Vec<CapturedRequest>>,
    /// Every request that arrived, whatever the answer.
    hits: AtomicU64,
    /// 0 = answer 200; otherwise answer with this status.
    fail_status: AtomicU16,
    delay_ms: AtomicU64,
    /// Take each message on arrival (it goes out to the phone), answer 200 only this late.
    late_ms: AtomicU64,
    /// Answer `fail_status` (a 3xx) with this `Location`.
    location: Mutex<Option<String>>,
    /// Answer `fail_status` with this `Retry-After`.
    retry_after: Mutex<Option<String>>,
    /// Run on each arrival, before the answer (e.g. to stall the store mid-send).
    on_arrival: Mutex<Option<Arc<dyn Fn() + Send + Sync>>>,
}

#[derive(Clone)]
pub struct SmsGateway {
    state: Arc<GatewayState>,
    url: String,
}

async fn receive(
    state: web::Data<Arc<GatewayState>>,
    request: HttpRequest,
    body: web::Bytes,
) -> HttpResponse {
    state.hits.fetch_add(1, Ordering::SeqCst);
    let hook = state.on_arrival.lock().expect("gateway lock").clone();
    if let Some(hook) = hook {
        hook();
    }
    let late = state.late_ms.load(Ordering::SeqCst);
    if late > 0 {
        // Taken before the sender gives up waiting: this SMS reaches the phone either way.
        capture(&state, &request, &body);
        tokio::time::sleep(Duration::from_millis(late)).await;
        return HttpResponse::Ok().json(serde_json::json!({"accepted": true}));
    }
    let delay = state.delay_ms.load(Ordering::SeqCst);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    match state.fail_status.load(Ordering::SeqCst) {
        0 => {
            capture(&state, &request, &body);
            HttpResponse::Ok().json(serde_json::json!({"accepted": true}))
        }
        status => {
            let mut answer = HttpResponse::build(
                actix_web::http::StatusCode::from_u16(status).expect("valid status"),
            );
            if let Some(location) = state.location.lock().expect("gateway lock").as_deref() {
                answer.insert_header(("location", location));
            }
            if let Some(wait) = state.retry_after.lock().expect("gateway lock").as_deref() {
                answer.insert_header(("retry-after", wait));
            }
            answer.finish()
        }
    }
}

fn capture(state: &GatewayState, request: &HttpRequest, body: &[u8]) {
    let headers = request
        .headers()
        .iter()
        .map(|(name, value)| {
            let value = value.to_str().unwrap_or_default().to_owned();
            (name.as_str().to_owned(), value)
        })
        .collect();
    state
        .received
        .lock()
        .expect("gateway lock")
        .push(CapturedRequest {
            headers,
            body: body.to_vec(),
        });
}

async fn list_received(state: web::Data<Arc<GatewayState>>) -> HttpResponse {
    let received: Vec<serde_json::Value> = state
        .received
        .lock()
        .expect("gateway lock")
        .iter()
        .map(CapturedRequest::json)
        .collect();
    HttpResponse::Ok().json(received)
}

/// Any other method or path: counted (a redirect followed as a GET must show), not taken.
async fn elsewhere(state: web::Data<Arc<GatewayState>>) -> HttpResponse {
    state.hits.fetch_add(1, Ordering::SeqCst);
    HttpResponse::NotFound().finish()
}

impl SmsGateway {
    pub fn start() -> Self {
        let state = Arc::new(GatewayState::default());
        let listener = TcpListener::bind("127.0.0.1:0").expect("free port");
        let port = listener.local_addr().expect("bound").port();
        let data = web::Data::new(state.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .route("/sms", web::post().to(receive))
                // The messages taken so far (JSON), for a test driven from outside (the
                // console's browser flow posts their receipts).
                .route("/sms/received", web::get().to(list_received))
                .default_service(web::to(elsewhere))
        })
        .workers(1)
        .listen(listener)
        .expect("gateway listens")
        .run();
        tokio::spawn(server);
        Self {
            state,
            url: format!("http://127.0.0.1:{port}/sms"),
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Answer every request with `status` (e.g. 500) until `succeed` is called.
    pub fn fail_with(&self, status: u16) {
        self.state.fail_status.store(status, Ordering::SeqCst);
    }

    /// Answer every request with `status` (301, 302, 307, 308) pointing at `location`.
    pub fn redirect_to(&self, status: u16, location: &str) {
        *self.state.location.lock().expect("gateway lock") = Some(location.to_owned());
        self.fail_with(status);
    }

    /// Answer every request `429 Too Many Requests` with `Retry-After: <seconds>`.
    pub fn throttle(&self, seconds: u64) {
        *self.state.retry_after.lock().expect("gateway lock") = Some(seconds.to_string());
        self.fail_with(429);
    }

    /// Run `hook` when each request arrives, before it is answered (until `succeed`).
    pub fn on_arrival(&self, hook: impl Fn() + Send + Sync + 'static) {
        *self.state.on_arrival.lock().expect("gateway lock") = Some(Arc::new(hook));
    }

    pub fn succeed(&self) {
        *self.state.on_arrival.lock().expect("gateway lock") = None;
        self.state.fail_status.store(0, Ordering::SeqCst);
        self.state.delay_ms.store(0, Ordering::SeqCst);
        self.state.late_ms.store(0, Ordering::SeqCst);
        *self.state.location.lock().expect("gateway lock") = None;
        *self.state.retry_after.lock().expect("gateway lock") = None;
    }

    pub fn stall_for(&self, delay: Duration) {
        self.state
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// Take every message as it arrives (it counts as received: it reaches the phone) but
    /// answer 200 only after `delay`, as a gateway slower than the sender's timeout.
    pub fn answer_late(&self, delay: Duration) {
        self.state
            .late_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// Bodies of the messages accepted so far.
    pub fn received(&self) -> Vec<serde_json::Value> {
        self.requests().iter().map(CapturedRequest::json).collect()
    }

    /// The messages accepted so far, as they arrived.
    pub fn requests(&self) -> Vec<CapturedRequest> {
        self.state.received.lock().expect("gateway lock").clone()
    }

    /// How many requests arrived, whatever they were answered.
    pub fn hits(&self) -> u64 {
        self.state.hits.load(Ordering::SeqCst)
    }
}

/// The webhook sender pointing at `url`, signing with `secret`.
pub fn signed_webhook(url: &str, secret: &str) -> SmsSettings {
    let mut settings = super::app::webhook(url);
    settings
        .webhook
        .as_mut()
        .expect("the webhook sender")
        .secret = Some(SecretString::from(secret.to_owned()));
    settings
}

/// The gateway's check as docs/security-at-rest.md shows it.
pub const RECIPE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/webhook/verify_signature.py"
);

/// Runs the documented check with python3, as a gateway would: whether it takes `body` with
/// these header values under `secret`, checked at `now` (Unix seconds; None: the clock).
pub fn recipe_accepts(
    secret: &str,
    timestamp: &str,
    signature: &str,
    body: &[u8],
    now: Option<u64>,
) -> bool {
    let mut child = Command::new("python3")
        .arg(RECIPE)
        .args([timestamp, signature])
        .args(now.map(|now| now.to_string()))
        .env("WEBHOOK_SECRET", secret)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| {
            panic!("python3 runs the documented signature check {RECIPE}: {error}; install python3")
        });
    let mut stdin = child.stdin.take().expect("piped");
    stdin.write_all(body).expect("python3 reads the body");
    drop(stdin);
    let output = child.wait_with_output().expect("python3 ran");
    match output.status.code() {
        Some(0) => true,
        Some(1) => false,
        _ => panic!(
            "the recipe failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ),
    }
}
