//! `POST /api/v1/captcha`, `GET /api/v1/captcha/{id}.png`, `POST /api/v1/captcha/verify`.

use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use actix_web::{HttpResponse, web};
use vcode_wire::{CaptchaCreated, CaptchaVerifyRequest, Verified, paths};

use super::ApiError;
use super::AppState;
use super::envelope;
use super::openapi::Api;

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::post_resource(paths::CAPTCHA).route(web::post().to(create)))
        .service(super::post_resource(paths::CAPTCHA_VERIFY).route(web::post().to(verify)))
        .service(super::get_resource(paths::CAPTCHA_IMAGE).route(super::get().to(image)));
}

/// What `config` serves, for the OpenAPI description.
pub fn describe(api: &mut Api) {
    use vcode_wire::ErrorCode::*;
    let created = api.schema::<CaptchaCreated>();
    api.post(paths::CAPTCHA, "captcha", "Create a captcha")
        .describe("No body. The picture is at `image_url`; the captcha is single use.")
        .ok_envelope(created)
        .link("get", paths::CAPTCHA_IMAGE, "id", "captcha_id")
        .link("get", paths::DEV_CAPTCHA_ANSWER, "id", "captcha_id")
        .errors(&[Malformed, QuotaExceeded, Internal, StoreUnavailable]);
    api.get(paths::CAPTCHA_IMAGE, "captcha", "A captcha's picture")
        .describe("The same bytes on every fetch; 40400 once the captcha is used or expired.")
        .parameter(
            "path",
            "id",
            true,
            serde_json::json!({"type": "string"}),
            "`captcha_id` of the creation",
        )
        .ok_content(
            "image/png",
            serde_json::json!({"type": "string", "contentMediaType": "image/png"}),
            "the picture (Cache-Control: no-store)",
        )
        .errors(&[NotFound, Internal, StoreUnavailable]);
    let body = api.schema::<CaptchaVerifyRequest>();
    let verified = api.schema::<Verified>();
    api.post(paths::CAPTCHA_VERIFY, "captcha", "Verify a captcha")
        .describe("The first verify consumes the captcha, whatever the answer.")
        .body(body)
        .ok_envelope(verified)
        .errors(&[WrongCaptcha, Internal, StoreUnavailable]);
}

async fn create(
    request: actix_web::HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let id = state
        .captcha
        .create(super::client_ip(&request, &state)?)
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
