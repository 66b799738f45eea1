//! `GET /.well-known/jwks.json`: the public keys that check verification tokens (RFC 7517),
//! cacheable for `JWKS_MAX_AGE_SECS` (a key is published that long before it signs).

use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use actix_web::{HttpResponse, web};
use vcode_wire::paths;

use super::AppState;

/// How long a backend may cache the key set; docs/tokens.md's rotation waits this long.
pub const JWKS_MAX_AGE_SECS: u64 = 300;

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::resource(paths::JWKS).route(super::get().to(jwks)));
}

async fn jwks(state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, "application/jwk-set+json"))
        .insert_header((
            CACHE_CONTROL,
            format!("public, max-age={JWKS_MAX_AGE_SECS}"),
        ))
        .json(state.tokens.jwks())
}
