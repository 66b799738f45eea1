//! Liveness (`/healthz`: the process answers) and readiness (`/readyz`: the store answers).

use actix_web::{HttpResponse, web};
use vcode_wire::{Health, HealthStatus, paths};

use super::ApiError;
use super::AppState;
use super::envelope;
use super::openapi::Api;

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::get_resource(paths::HEALTHZ).route(super::get().to(healthz)))
        .service(super::get_resource(paths::READYZ).route(super::get().to(readyz)));
}

/// What `config` serves, for the OpenAPI description.
pub fn describe(api: &mut Api) {
    let health = api.schema::<Health>();
    api.get(paths::HEALTHZ, "health", "Liveness: the process answers")
        .ok_envelope(health.clone());
    api.get(paths::READYZ, "health", "Readiness: the store answers too")
        .ok_envelope(health)
        .errors(&[
            vcode_wire::ErrorCode::Internal,
            vcode_wire::ErrorCode::StoreUnavailable,
        ]);
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
