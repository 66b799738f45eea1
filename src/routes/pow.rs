//! `GET /api/v1/pow/challenge` (the ALTCHA challenge as the widget fetches it: no envelope) and
//! `POST /api/v1/pow/verify` (a solved one, accepted once, for an action of the integrator's).

use actix_web::http::header::CACHE_CONTROL;
use actix_web::{HttpResponse, web};
use vcode_wire::{PowVerifyRequest, Verified, paths};

use super::envelope;
use super::{ApiError, AppState};

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::resource(paths::POW_CHALLENGE).route(super::get().to(challenge)))
        .service(super::resource(paths::POW_VERIFY).route(web::post().to(verify)));
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
    body: web::Json<PowVerifyRequest>,
) -> Result<HttpResponse, ApiError> {
    state.pow.verify(body.payload.as_deref()).await?;
    Ok(envelope::ok(Verified { verified: true }))
}
