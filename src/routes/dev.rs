//! Dev-mode routes (`VCODE_DEV_MODE=1`, loopback only): they let tests and load tests act as a
//! user who reads the SMS or the picture. Outside dev mode they are not registered at all.

use actix_web::{HttpResponse, web};
use serde::Deserialize;
use serde_json::json;

use super::ApiError;
use super::AppState;
use super::envelope;

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
    cfg.service(super::resource("/outbox").route(super::get().to(outbox)))
        .service(super::resource("/captcha/{id}").route(super::get().to(captcha_answer)));
}

#[derive(Deserialize)]
struct OutboxQuery {
    phone: String,
}

async fn outbox(
    state: web::Data<AppState>,
    query: web::Query<OutboxQuery>,
) -> Result<HttpResponse, ApiError> {
    let messages = state.otp.outbox(&query.phone).await?;
    Ok(envelope::ok(json!({ "messages": messages })))
}

async fn captcha_answer(
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let answer = state.captcha.peek_answer(&id).await?;
    Ok(envelope::ok(json!({ "answer": answer })))
}
