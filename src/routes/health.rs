//! Liveness (`/healthz`: the process answers) and readiness (`/readyz`: the store answers).

use actix_web::{HttpResponse, web};
use serde_json::json;

use super::ApiError;
use super::AppState;
use super::envelope;

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::resource("/healthz").route(super::get().to(healthz)))
        .service(super::resource("/readyz").route(super::get().to(readyz)));
}

async fn healthz() -> HttpResponse {
    envelope::ok(json!({ "status": "up" }))
}

async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    state.readiness.check().await?;
    Ok(envelope::ok(json!({ "status": "ready" })))
}
