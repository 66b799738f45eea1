//! Dev-mode routes (`VCODE_DEV_MODE=1`, loopback only): they let tests and load tests act as a
//! user who reads the SMS or the picture. Outside dev mode they are not registered at all.

use actix_web::{HttpResponse, guard, web};
use vcode_wire::{CaptchaAnswer, OutboxData, OutboxMessage, OutboxQuery, paths};

use super::ApiError;
use super::AppState;
use super::envelope;
use super::openapi::Api;

/// Whether the request comes straight from this host: a loopback peer carrying no forwarding
/// header. A same-host reverse proxy is a loopback peer too, so its headers disqualify it.
pub fn is_direct_local(head: &actix_web::dev::RequestHead) -> bool {
    let loopback = head.peer_addr.is_some_and(|peer| peer.ip().is_loopback());
    let forwarded = ["forwarded", "x-forwarded-for", "x-real-ip"]
        .iter()
        .any(|name| head.headers().contains_key(*name));
    loopback && !forwarded
}

pub fn config(cfg: &mut web::ServiceConfig) {
    let direct_local = || guard::fn_guard(|ctx| is_direct_local(ctx.head()));
    cfg.service(
        super::get_resource(paths::DEV_OUTBOX)
            .guard(direct_local())
            .route(super::get().to(outbox)),
    )
    .service(
        super::get_resource(paths::DEV_CAPTCHA_ANSWER)
            .guard(direct_local())
            .route(super::get().to(captcha_answer)),
    );
}

/// What `config` serves, for the OpenAPI description (dev mode only).
pub fn describe(api: &mut Api) {
    use vcode_wire::ErrorCode::*;
    let outbox = api.schema::<OutboxData>();
    api.get(
        paths::DEV_OUTBOX,
        "dev",
        "The SMS sent to a phone (dev mode, loopback only)",
    )
    .parameter(
        "query",
        "phone",
        true,
        serde_json::json!({"type": "string", "examples": ["+8613800138000"]}),
        "E.164, or national in the default region",
    )
    .ok_envelope(outbox)
    .errors(&[Malformed, InvalidPhone, Internal, StoreUnavailable]);
    let answer = api.schema::<CaptchaAnswer>();
    api.get(
        paths::DEV_CAPTCHA_ANSWER,
        "dev",
        "A captcha's answer (dev mode, loopback only)",
    )
    .describe("The captcha stays unused.")
    .parameter(
        "path",
        "id",
        true,
        serde_json::json!({"type": "string"}),
        "`captcha_id` of the creation",
    )
    .ok_envelope(answer)
    .errors(&[NotFound, Internal, StoreUnavailable]);
}

async fn outbox(
    state: web::Data<AppState>,
    query: web::Query<OutboxQuery>,
) -> Result<HttpResponse, ApiError> {
    let messages = state.otp.outbox(&query.phone).await?;
    let messages = messages
        .into_iter()
        .map(|message| OutboxMessage {
            code: message.code,
            phone: message.phone,
            purpose: message.purpose,
            sent_at_ms: message.sent_at_ms,
        })
        .collect();
    Ok(envelope::ok(OutboxData { messages }))
}

async fn captcha_answer(
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let answer = state.captcha.peek_answer(&id).await?;
    Ok(envelope::ok(CaptchaAnswer { answer }))
}
