//! `POST /api/v1/captcha`, `GET /api/v1/captcha/{id}.png`, `POST /api/v1/captcha/verify`.

use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use actix_web::{HttpResponse, web};
use vcode_wire::{CaptchaCreated, CaptchaVerifyRequest, Verified, paths};

use super::ApiError;
use super::AppState;
use super::envelope;

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::resource(paths::CAPTCHA).route(web::post().to(create)))
        .service(super::resource(paths::CAPTCHA_VERIFY).route(web::post().to(verify)))
        .service(super::resource(paths::CAPTCHA_IMAGE).route(super::get().to(image)));
}

async fn create(
    request: actix_web::HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = state
        .captcha
        .create(super::client_ip(&request, &state))
        .await?;
    Ok(envelope::ok(CaptchaCreated {
        captcha_id: id.as_str().to_owned(),
        image_url: paths::captcha_image(id.as_str()),
        expires_in: state.captcha.settings().ttl.as_secs(),
    }))
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
    body: web::Json<CaptchaVerifyRequest>,
) -> Result<HttpResponse, ApiError> {
    state
        .captcha
        .verify(body.captcha_id.as_deref(), body.answer.as_deref())
        .await?;
    Ok(envelope::ok(Verified { verified: true }))
}
