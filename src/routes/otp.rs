//! `POST /api/v1/otp/send` and `POST /api/v1/otp/verify`.

use actix_web::{HttpResponse, web};
use serde::Deserialize;
use serde_json::json;
use tracing::Instrument;

use crate::domain::{Code, Phone, Purpose};
use crate::envelope;
use crate::error::ApiError;
use crate::startup::AppState;

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::resource("/otp/send").route(web::post().to(send)))
        .service(super::resource("/otp/verify").route(web::post().to(verify)));
}

#[derive(Deserialize)]
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

fn parse_phone(state: &AppState, raw: &str) -> Result<Phone, ApiError> {
    Phone::parse(raw, state.otp.settings().default_region).ok_or(ApiError::InvalidPhone)
}

fn parse_purpose(raw: Option<&str>) -> Result<Purpose, ApiError> {
    raw.map_or(Ok(Purpose::default()), |raw| {
        Purpose::parse(raw).ok_or(ApiError::InvalidPurpose)
    })
}

async fn send(
    state: web::Data<AppState>,
    body: web::Json<SendRequest>,
) -> Result<HttpResponse, ApiError> {
    let phone = parse_phone(&state, &body.phone)?;
    let purpose = parse_purpose(body.purpose.as_deref())?;
    if state.captcha.settings().send_requires_captcha {
        // Consumed before any code or SMS exists: one solved captcha buys one send.
        state
            .captcha
            .verify(body.captcha_id.as_deref(), body.captcha_answer.as_deref())
            .await?;
    }
    // Runs to the end even if the client goes away, so a code is never left stored without
    // its SMS or its roll-back.
    let otp = state.otp.clone();
    let task = async move { otp.send(&phone, &purpose).await };
    let receipt = tokio::spawn(task.instrument(tracing::Span::current()))
        .await
        .map_err(|e| ApiError::Internal(e.into()))??;
    Ok(envelope::ok(json!({
        "expires_in": receipt.expires_in.as_secs(),
        "resend_after": receipt.resend_after.as_secs(),
    })))
}

async fn verify(
    state: web::Data<AppState>,
    body: web::Json<VerifyRequest>,
) -> Result<HttpResponse, ApiError> {
    let phone = parse_phone(&state, &body.phone)?;
    let purpose = parse_purpose(body.purpose.as_deref())?;
    let code =
        Code::parse(&body.code, state.otp.settings().code_length).ok_or(ApiError::InvalidCode)?;
    state.otp.verify(&phone, &purpose, &code).await?;
    Ok(envelope::ok(json!({ "verified": true })))
}
