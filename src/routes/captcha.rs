//! `POST /api/v1/captcha`, `GET /api/v1/captcha/{id}.png`, `POST /api/v1/captcha/verify`.

use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use actix_web::{HttpResponse, web};
use serde::Deserialize;
use serde_json::json;

use super::ApiError;
use super::AppState;
use super::envelope;

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::resource("/captcha").route(web::post().to(create)))
        .service(super::resource("/captcha/verify").route(web::post().to(verify)))
        .service(super::resource("/captcha/{id}.png").route(super::get().to(image)));
}

#[derive(Deserialize)]
struct VerifyRequest {
    captcha_id: Option<String>,
    answer: Option<String>,
}

async fn create(
    request: actix_web::HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = state
        .captcha
        .create(super::client_ip(&request, &state))
        .await?;
    Ok(envelope::ok(json!({
        "captcha_id": id.as_str(),
        "image_url": format!("/api/v1/captcha/{id}.png"),
        "expires_in": state.captcha.settings().ttl.as_secs(),
    })))
}

async fn image(
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let png = state.captcha.png(&id).await?;
    Ok(HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, "image/png"))
        // A captcha is single-use and secret-bearing: no cache may keep or replay it.
        .insert_header((CACHE_CONTROL, "no-store"))
        .body(png))
}

async fn verify(
    state: web::Data<AppState>,
    body: web::Json<VerifyRequest>,
) -> Result<HttpResponse, ApiError> {
    state
        .captcha
        .verify(body.captcha_id.as_deref(), body.answer.as_deref())
        .await?;
    Ok(envelope::ok(json!({ "verified": true })))
}
