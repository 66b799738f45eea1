//! `POST /api/v1/otp/send` and `POST /api/v1/otp/verify`.

use std::net::IpAddr;

use actix_web::{HttpRequest, HttpResponse, web};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tracing::Instrument;

use crate::domain::{Code, Purpose};
use crate::envelope::{self, Reply};
use crate::error::ApiError;
use crate::idempotency::{self, IdempotencyKey};
use crate::startup::AppState;
use crate::stats::Event;

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::resource("/otp/send").route(web::post().to(send)))
        .service(super::resource("/otp/verify").route(web::post().to(verify)));
}

/// Serialised only to fingerprint it for `Idempotency-Key`.
#[derive(Deserialize, Serialize)]
struct SendRequest {
    phone: String,
    purpose: Option<String>,
    captcha_id: Option<String>,
    captcha_answer: Option<String>,
}

#[derive(Deserialize)]
struct VerifyRequest {
    phone: String,
    code: String,
    purpose: Option<String>,
}

fn parse_purpose(raw: Option<&str>) -> Result<Purpose, ApiError> {
    raw.map_or(Ok(Purpose::default()), |raw| {
        Purpose::parse(raw).ok_or(ApiError::InvalidPurpose)
    })
}

async fn send(
    request: HttpRequest,
    state: web::Data<AppState>,
    body: web::Json<SendRequest>,
) -> Result<HttpResponse, ApiError> {
    let key = IdempotencyKey::from_request(&request)?;
    let client_ip = super::client_ip(&request, &state);
    let body = body.into_inner();
    // Runs to the end even if the client goes away, so a code is never left stored without
    // its SMS or its roll-back, nor an idempotency record half-written.
    let task = async move {
        state.stats.record(Event::SendRequest);
        let Some(key) = key else {
            return Ok::<_, ApiError>(send_once(&state, &body, client_ip).await);
        };
        let abuse = &state.abuse;
        let fingerprint = idempotency::fingerprint(&body);
        let run = || send_once(&state, &body, client_ip);
        let (response, replayed) = idempotency::once(
            &*state.store,
            &key,
            &fingerprint,
            abuse.idempotency_ttl,
            abuse.idempotency_wait,
            run,
        )
        .await?;
        if replayed {
            state.stats.record(Event::DedupIdempotency);
            tracing::info!("send deduplicated: Idempotency-Key repeat answered from the store");
        }
        Ok(response)
    };
    let reply = tokio::spawn(task.instrument(tracing::Span::current()))
        .await
        .map_err(|e| ApiError::Internal(e.into()))??;
    Ok(reply.into_response())
}

/// One send, answered as plain data (it runs in its own task).
async fn send_once(state: &AppState, body: &SendRequest, client_ip: IpAddr) -> Reply {
    match try_send(state, body, client_ip).await {
        Ok(data) => Reply::ok(data),
        Err(error) => error.reply(),
    }
}

async fn try_send(
    state: &AppState,
    body: &SendRequest,
    client_ip: IpAddr,
) -> Result<serde_json::Value, ApiError> {
    let phone = state.otp.parse_phone(&body.phone)?;
    let purpose = parse_purpose(body.purpose.as_deref())?;
    if state.captcha.settings().send_requires_captcha {
        // Consumed before any code or SMS exists: one solved captcha buys one send.
        state
            .captcha
            .verify(body.captcha_id.as_deref(), body.captcha_answer.as_deref())
            .await?;
    }
    let receipt = state.otp.send(&phone, &purpose, client_ip).await?;
    Ok(json!({
        "expires_in": receipt.expires_in.as_secs(),
        "resend_after": receipt.resend_after.as_secs(),
    }))
}

async fn verify(
    state: web::Data<AppState>,
    body: web::Json<VerifyRequest>,
) -> Result<HttpResponse, ApiError> {
    let phone = state.otp.parse_phone(&body.phone)?;
    let purpose = parse_purpose(body.purpose.as_deref())?;
    let code =
        Code::parse(&body.code, state.otp.settings().code_length).ok_or(ApiError::InvalidCode)?;
    state.otp.verify(&phone, &purpose, &code).await?;
    Ok(envelope::ok(json!({ "verified": true })))
}
