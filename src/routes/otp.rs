//! `POST /api/v1/otp/send` and `POST /api/v1/otp/verify`.

use actix_web::{HttpRequest, HttpResponse, web};
use tracing::Instrument;
use vcode_wire::{
    SendData, SendRequest as WireSendRequest, VerifyData, VerifyRequest, headers, paths,
};

use super::api_key::{MaySend, MayVerify};
use super::envelope;
use super::{ApiError, AppState};
use crate::idempotency::IdempotencyKey;
use crate::otp::SendRequest;

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::resource(paths::OTP_SEND).route(web::post().to(send)))
        .service(super::resource(paths::OTP_VERIFY).route(web::post().to(verify)));
}

fn idempotency_key(request: &HttpRequest) -> Result<Option<IdempotencyKey>, ApiError> {
    let Some(value) = request.headers().get(headers::IDEMPOTENCY_KEY) else {
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
    _caller: MaySend,
    request: HttpRequest,
    state: web::Data<AppState>,
    body: web::Json<WireSendRequest>,
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
    Ok(envelope::ok(SendData {
        expires_in: receipt.expires_in.as_secs(),
        resend_after: receipt.resend_after.as_secs(),
    }))
}

async fn verify(
    _caller: MayVerify,
    request: HttpRequest,
    state: web::Data<AppState>,
    body: web::Json<VerifyRequest>,
) -> Result<HttpResponse, ApiError> {
    let client = super::client_ip(&request, &state);
    let token = state
        .otp
        .verify(
            &body.phone,
            body.purpose.as_deref(),
            &body.code,
            body.audience.as_deref(),
            client,
        )
        .await?;
    Ok(envelope::ok(VerifyData {
        verified: true,
        token: Some(token),
    }))
}
