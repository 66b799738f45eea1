//! `GET /.well-known/jwks.json`: the public keys that check verification tokens (RFC 7517),
//! cacheable for `JWKS_MAX_AGE_SECS` (a key is published that long before it signs).

use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use actix_web::{HttpResponse, web};
use vcode_wire::paths;

use super::AppState;
use super::openapi::Api;

/// How long a backend may cache the key set; docs/tokens.md's rotation waits this long.
pub const JWKS_MAX_AGE_SECS: u64 = 300;

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::get_resource(paths::JWKS).route(super::get().to(jwks)));
}

/// What `config` serves, for the OpenAPI description.
pub fn describe(api: &mut Api) {
    let key = serde_json::json!({
        "type": "object",
        "required": ["kty", "kid"],
        "properties": {
            "kty": {"type": "string", "examples": ["OKP"]},
            "crv": {"type": "string", "examples": ["Ed25519"]},
            "x": {"type": "string", "description": "the public key, base64url"},
            "kid": {"type": "string", "description": "the RFC 7638 thumbprint; a token's header names it"},
            "alg": {"type": "string", "examples": ["EdDSA"]},
            "use": {"type": "string", "examples": ["sig"]},
        },
    });
    api.get(
        paths::JWKS,
        "otp",
        "The public keys that check verification tokens (RFC 7517)",
    )
    .describe(
        "A backend checks a verify's `token` (a JWT) against these keys without calling \
             vcode; cacheable for 5 minutes.",
    )
    .ok_content(
        "application/jwk-set+json",
        serde_json::json!({
            "type": "object",
            "required": ["keys"],
            "properties": {"keys": {"type": "array", "items": key}},
        }),
        "the key set",
    );
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
