//! `POST /api/v1/otp/send` and `POST /api/v1/otp/verify`.

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use serde_json::json;
use tracing::Instrument;

use super::envelope;
use super::{ApiError, AppState};
use crate::idempotency::IdempotencyKey;
use crate::otp::SendRequest;

/// The request header that makes retries of one logical send one send.
const IDEMPOTENCY_KEY: &str = "idempotency-key";

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::resource("/otp/send").route(web::post().to(send)))
        .service(super::resource("/otp/verify").route(web::post().to(verify)));
}

#[derive(Deserialize)]
struct SendBody {
    phone: String,
    purpose: Option<String>,
    captcha_id: Option<String>,
    captcha_answer: Option<String>,
    locale: Option<String>,
    /// The ALTCHA widget's payload, for the proof-of-work gate.
    altcha: Option<String>,
}

#[derive(Deserialize)]
struct VerifyBody {
    phone: String,
    code: String,
    purpose: Option<String>,
}

fn idempotency_key(request: &HttpRequest) -> Result<Option<IdempotencyKey>, ApiError> {
    let Some(value) = request.headers().get(IDEMPOTENCY_KEY) else {
        return Ok(None);
    };
    IdempotencyKey::parse(value.as_bytes())
        .map(Some)
        .ok_or_else(|| {
            ApiError::Malformed(
                "Idempotency-Key must be 1 to 255 visible ASCII characters".to_owned(),
            )
        })
}

async fn send(
    request: HttpRequest,
    state: web::Data<AppState>,
    body: web::Json<SendBody>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let send = SendRequest {
        phone: body.phone,
        purpose: body.purpose,
        captcha_id: body.captcha_id,
        captcha_answer: body.captcha_answer,
        locale: body.locale,
        altcha: body.altcha,
        client_ip: super::client_ip(&request, &state),
        idempotency_key: idempotency_key(&request)?,
    };
    let otp = state.otp.clone();
    // Runs to the end even if the client goes away, so a code is never left stored without
    // its SMS or its roll-back, nor an idempotency record half-written.
    let task = async move { otp.send(send).await };
    let receipt = tokio::spawn(task.instrument(tracing::Span::current()))
        .await
        .map_err(|e| ApiError::Internal(e.into()))??;
    Ok(envelope::ok(json!({
        "expires_in": receipt.expires_in.as_secs(),
        "resend_after": receipt.resend_after.as_secs(),
    })))
}

async fn verify(
    request: HttpRequest,
    state: web::Data<AppState>,
    body: web::Json<VerifyBody>,
) -> Result<HttpResponse, ApiError> {
    let client = super::client_ip(&request, &state);
    state
        .otp
        .verify(&body.phone, body.purpose.as_deref(), &body.code, client)
        .await?;
    Ok(envelope::ok(json!({ "verified": true })))
}
