//! A real local HTTP server standing in for an SMS gateway: it records what it receives, counts
//! every request, and fails or stalls on demand.

use std::net::TcpListener;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{App, HttpResponse, HttpServer, web};

#[derive(Default)]
struct GatewayState {
    received: Mutex<Vec<serde_json::Value>>,
    /// Every request that arrived, whatever the answer.
    hits: AtomicU64,
    /// 0 = answer 200; otherwise answer with this status.
    fail_status: AtomicU16,
    delay_ms: AtomicU64,
}

#[derive(Clone)]
pub struct SmsGateway {
    state: Arc<GatewayState>,
    url: String,
}

async fn receive(
    state: web::Data<Arc<GatewayState>>,
    body: web::Json<serde_json::Value>,
) -> HttpResponse {
    state.hits.fetch_add(1, Ordering::SeqCst);
    let delay = state.delay_ms.load(Ordering::SeqCst);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    match state.fail_status.load(Ordering::SeqCst) {
        0 => {
            state
                .received
                .lock()
                .expect("gateway lock")
                .push(body.into_inner());
            HttpResponse::Ok().json(serde_json::json!({"accepted": true}))
        }
        status => HttpResponse::build(
            actix_web::http::StatusCode::from_u16(status).expect("valid status"),
        )
        .finish(),
    }
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

    pub fn succeed(&self) {
        self.state.fail_status.store(0, Ordering::SeqCst);
        self.state.delay_ms.store(0, Ordering::SeqCst);
    }

    pub fn stall_for(&self, delay: Duration) {
        self.state
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// Bodies of the messages accepted so far.
    pub fn received(&self) -> Vec<serde_json::Value> {
        self.state.received.lock().expect("gateway lock").clone()
    }

    /// How many requests arrived, whatever they were answered.
    pub fn hits(&self) -> u64 {
        self.state.hits.load(Ordering::SeqCst)
    }
}
