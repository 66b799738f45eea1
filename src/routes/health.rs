//! Liveness (`/healthz`: the process answers) and readiness (`/readyz`: the store answers).

use actix_web::{HttpResponse, web};
use vcode_wire::{Health, HealthStatus, paths};

use super::ApiError;
use super::AppState;
use super::envelope;

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::resource(paths::HEALTHZ).route(super::get().to(healthz)))
        .service(super::resource(paths::READYZ).route(super::get().to(readyz)));
}

async fn healthz() -> HttpResponse {
    envelope::ok(Health {
        status: HealthStatus::Up,
    })
}

async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    state.readiness.check().await?;
    Ok(envelope::ok(Health {
        status: HealthStatus::Ready,
    }))
}
