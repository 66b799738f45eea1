//! Liveness (`/healthz`: the process answers) and readiness (`/readyz`: the store answers).

use actix_web::{HttpResponse, web};
use serde_json::json;

use crate::envelope;
use crate::error::ApiError;
use crate::startup::AppState;

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::resource("/healthz").route(web::get().to(healthz)))
        .service(super::resource("/readyz").route(web::get().to(readyz)));
}

async fn healthz() -> HttpResponse {
    envelope::ok(json!({ "status": "up" }))
}

async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    state.store.ping().await?;
    Ok(envelope::ok(json!({ "status": "ready" })))
}
