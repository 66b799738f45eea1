//! `GET /api/v1/pow/challenge` (the ALTCHA challenge as the widget fetches it: no envelope) and
//! `POST /api/v1/pow/verify` (a solved one, accepted once, for an action of the integrator's).

use actix_web::http::header::CACHE_CONTROL;
use actix_web::{HttpResponse, web};
use serde::Deserialize;
use serde_json::json;

use super::envelope;
use super::{ApiError, AppState};

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::resource("/pow/challenge").route(web::get().to(challenge)))
        .service(super::resource("/pow/verify").route(web::post().to(verify)));
}

#[derive(Deserialize)]
struct VerifyBody {
    payload: Option<String>,
}

async fn challenge(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let challenge = state.pow.challenge().await?;
    Ok(HttpResponse::Ok()
        // Each challenge is for one solver and one use: no cache may hand it to another.
        .insert_header((CACHE_CONTROL, "no-store"))
        .json(challenge))
}

async fn verify(
    state: web::Data<AppState>,
    body: web::Json<VerifyBody>,
) -> Result<HttpResponse, ApiError> {
    state.pow.verify(body.payload.as_deref()).await?;
    Ok(envelope::ok(json!({ "verified": true })))
}
