//! `GET /api/v1/pow/challenge` (the ALTCHA challenge as the widget fetches it: no envelope; no
//! HEAD) and `POST /api/v1/pow/verify` (a solved one, accepted once, for an action of the
//! integrator's).

use actix_web::http::header::CACHE_CONTROL;
use actix_web::{HttpResponse, web};
use vcode_wire::{PowVerifyRequest, Verified, paths};

use super::envelope;
use super::openapi::Api;
use super::{ApiError, AppState};

pub fn config(cfg: &mut web::ServiceConfig) {
    // GET only: a HEAD would sign a challenge (a key derivation, a counted challenge) only for
    // its body to be dropped.
    cfg.service(super::get_only_resource(paths::POW_CHALLENGE).route(web::get().to(challenge)))
        .service(super::post_resource(paths::POW_VERIFY).route(web::post().to(verify)));
}

/// What `config` serves, for the OpenAPI description.
pub fn describe(api: &mut Api) {
    use vcode_wire::ErrorCode::*;
    api.get_without_head(paths::POW_CHALLENGE, "pow", "An ALTCHA challenge")
        .describe(
            "ALTCHA's own format (PoW v2), not enveloped: the widget reads it as it is. \
             GET only: every GET makes a new challenge.",
        )
        .ok_content(
            "application/json",
            serde_json::json!({
                "type": "object",
                "required": ["parameters", "signature"],
                "properties": {"parameters": {"type": "object"}, "signature": {"type": "string"}},
            }),
            "the challenge (Cache-Control: no-store)",
        )
        .errors(&[Internal]);
    let body = api.schema::<PowVerifyRequest>();
    let verified = api.schema::<Verified>();
    api.post(paths::POW_VERIFY, "pow", "Verify a solved challenge")
        .describe("A payload is accepted once, before its challenge expires.")
        .body(body)
        .ok_envelope(verified)
        .errors(&[PowRejected, Internal, StoreUnavailable]);
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
