//! `POST /api/v1/otp/send` and `POST /api/v1/otp/verify`.

use actix_web::{HttpRequest, HttpResponse, web};
use tracing::Instrument;
use vcode_wire::{Delivery, SendData, SendRequest, VerifyData, VerifyRequest, headers, paths};

use super::api_key::{MaySend, MayVerify};
use super::envelope;
use super::openapi::Api;
use super::{ApiError, AppState};
use crate::api_keys::{ApiKeyName, Operation};
use crate::idempotency::IdempotencyKey;
use crate::otp::{DeliveryStatus, SendCommand};

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::post_resource(paths::OTP_SEND).route(web::post().to(send)))
        .service(super::post_resource(paths::OTP_VERIFY).route(web::post().to(verify)));
}

/// What `config` serves, for the OpenAPI description.
pub fn describe(api: &mut Api, api_key_required: &[Operation]) {
    use vcode_wire::ErrorCode::*;
    api.security_scheme(
        "apiKey",
        serde_json::json!({
            "type": "http",
            "scheme": "bearer",
            "description": "An API key (`vcode api-key NAME`), on the operations VCODE_REQUIRE_API_KEY lists",
        }),
    );
    let key_for = |operation: Operation, api: &mut Api, path: &'static str| {
        if api_key_required.contains(&operation) {
            api.operation_mut(path)
                .security(serde_json::json!([{"apiKey": []}]))
                .errors(&[Unauthorized]);
        }
    };
    let body = api.schema::<SendRequest>();
    let data = api.schema::<SendData>();
    api.post(paths::OTP_SEND, "otp", "Send a code by SMS")
        .describe(
            "One code per phone and purpose: a send during the cooldown changes nothing (42900); \
             after it the same code is sent again or replaced (VCODE_RESEND). An SMS the provider \
             refused rolls the code back (50200). An SMS whose provider never answered (a timeout \
             after the request went out) may still arrive: its code and cooldown stay, no other \
             provider is tried, and the answer is 200 with `delivery` `unconfirmed` (`sent` when \
             the provider confirmed). Over a quota, vcode's own or the SMS provider's limit on the \
             number or the account (not failed over to another provider), the answer is 42902 \
             with retry_after, and the code is rolled back. With VCODE_SEND_GATE the body also \
             carries a solved captcha (40020 otherwise) or an ALTCHA payload (40021 otherwise). Only \
             numbers of the allowed types (mobile, fixed-line-or-mobile by default; 40004 \
             otherwise: premium rate, toll-free, non-geographic…) in served countries (the \
             default region's by default; 40005 otherwise) get an SMS. A destination prefix the \
             fraud guard suspended (its sends stopped converting) or held back (a surge of \
             unverified sends) is refused with 40300 and retry_after, before the gate is consumed.",
        )
        .parameter(
            "header",
            "Idempotency-Key",
            false,
            serde_json::json!({"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x21-\\x7e]+$"}),
            "Retries of one logical send carry the same key: one code, one SMS, the same answer \
             (40000 when not 1 to 255 visible ASCII characters). With API keys, each caller's \
             keys are its own",
        )
        .body(body)
        .ok_envelope(data)
        .errors(&[
            InvalidPhone,
            InvalidPurpose,
            NumberTypeRefused,
            RegionRefused,
            DestinationSuspended,
            WrongCaptcha,
            PowRejected,
            IdempotencyInProgress,
            IdempotencyMismatch,
            ResendCooldown,
            QuotaExceeded,
            Internal,
            SmsDelivery,
            StoreUnavailable,
        ]);
    key_for(Operation::Send, api, paths::OTP_SEND);
    let body = api.schema::<VerifyRequest>();
    let data = api.schema::<VerifyData>();
    api.post(paths::OTP_VERIFY, "otp", "Verify a code")
        .describe(
            "One atomic step: a match consumes the code; a mismatch counts a failed attempt \
             (40010 with the attempts left) and the last one destroys the code (42901).",
        )
        .body(body)
        .ok_envelope(data)
        .errors(&[
            InvalidPhone,
            InvalidCode,
            InvalidPurpose,
            WrongCode,
            CodeExpired,
            TooManyAttempts,
            QuotaExceeded,
            Internal,
            StoreUnavailable,
        ]);
    key_for(Operation::Verify, api, paths::OTP_VERIFY);
}

/// The request's `Idempotency-Key`, in the namespace of the API-key `caller` that sent it.
fn idempotency_key(
    request: &HttpRequest,
    caller: Option<&ApiKeyName>,
) -> Result<Option<IdempotencyKey>, ApiError> {
    let Some(value) = request.headers().get(headers::IDEMPOTENCY_KEY) else {
        return Ok(None);
    };
    IdempotencyKey::parse(value.as_bytes(), caller)
        .map(Some)
        .ok_or_else(|| {
            ApiError::Malformed(
                "Idempotency-Key must be 1 to 255 visible ASCII characters".to_owned(),
            )
        })
}

async fn send(
    MaySend(caller): MaySend,
    request: HttpRequest,
    state: web::Data<AppState>,
    body: web::Json<SendRequest>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let command = SendCommand {
        phone: body.phone,
        purpose: body.purpose,
        captcha_id: body.captcha_id,
        captcha_answer: body.captcha_answer,
        locale: body.locale,
        altcha: body.altcha,
        client_ip: super::client_ip(&request, &state)?,
        idempotency_key: idempotency_key(&request, caller.as_ref())?,
    };
    let otp = state.otp.clone();
    // Runs to the end even if the client goes away, so a code is never left stored without
    // its SMS or its roll-back, nor an idempotency record half-written.
    let task = async move { otp.send(command).await };
    let receipt = tokio::spawn(task.instrument(tracing::Span::current()))
        .await
        .map_err(|e| ApiError::Internal(e.into()))??;
    Ok(envelope::ok(SendData {
        expires_in: receipt.expires_in.as_secs(),
        resend_after: receipt.resend_after.as_secs(),
        delivery: match receipt.delivery {
            DeliveryStatus::Sent => Delivery::Sent,
            DeliveryStatus::Unconfirmed => Delivery::Unconfirmed,
        },
    }))
}

async fn verify(
    _caller: MayVerify,
    request: HttpRequest,
    state: web::Data<AppState>,
    body: web::Json<VerifyRequest>,
) -> Result<HttpResponse, ApiError> {
    let client = super::client_ip(&request, &state)?;
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
