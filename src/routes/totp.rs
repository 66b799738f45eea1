//! `/api/v1/totp/{identity}/…`: authenticator-app factors on vcode's own API, for API-key
//! callers only (the factors are the key's: another key's identity of the same name is
//! another). HTTP only: every decision is `crate::totp`'s. The demo page (demo or dev mode
//! only) has the same enrol, confirm and verify under `/demo/totp/…`, without a key, in a
//! scope of its own (`demo`).

use actix_web::{HttpRequest, HttpResponse, web};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use vcode_wire::{
    TotpConfirmRequest, TotpEnrolData, TotpEnrolRequest, TotpFactorData, TotpFactorsData,
    TotpVerifyRequest, VerifyData, paths,
};

use super::openapi::Api;
use super::{ApiError, AppState, envelope};
use crate::api_keys::{ApiKeyName, Operation};
use crate::domain::Client;
use crate::token::Audience;
use crate::totp::{Algorithm, Factor, Setting, TotpConfig, TotpError};

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(
        super::resource(paths::TOTP_FACTORS, "GET, HEAD, POST")
            .route(web::post().to(enrol))
            .route(super::get().to(list)),
    )
    .service(super::resource(paths::TOTP_FACTOR, "DELETE").route(web::delete().to(remove)))
    .service(super::post_resource(paths::TOTP_FACTOR_CONFIRM).route(web::post().to(confirm)))
    .service(super::post_resource(paths::TOTP_VERIFY).route(web::post().to(verify)));
}

/// The demo page's own routes (`VCODE_DEMO` or dev mode): a page holds no API key.
const DEMO_FACTORS: &str = paths::DEMO_TOTP_FACTORS;
const DEMO_CONFIRM: &str = paths::DEMO_TOTP_CONFIRM;
const DEMO_VERIFY: &str = paths::DEMO_TOTP_VERIFY;
/// The demo page's factors' scope.
const DEMO_SCOPE: &str = "demo";

pub fn demo_config(cfg: &mut web::ServiceConfig) {
    cfg.service(super::post_resource(DEMO_FACTORS).route(web::post().to(demo_enrol)))
        .service(super::post_resource(DEMO_CONFIRM).route(web::post().to(demo_confirm)))
        .service(super::post_resource(DEMO_VERIFY).route(web::post().to(demo_verify)));
}

/// The demo page's routes, for the OpenAPI description.
pub fn describe_demo(api: &mut Api) {
    use vcode_wire::ErrorCode::*;
    let body = api.schema::<TotpEnrolRequest>();
    let data = api.schema::<TotpEnrolData>();
    let identity = serde_json::json!({"type": "string", "pattern": "^[A-Za-z0-9._@+-]{1,64}$"});
    let factor_id = serde_json::json!({"type": "string", "pattern": "^YF[0-9a-f]{32}$"});
    api.post(DEMO_FACTORS, "demo", "The demo page: enrol an authenticator app")
        .describe("`/api/v1/totp/{identity}/factors` without a key, in the demo's own scope (VCODE_DEMO or dev mode only).")
        .parameter("path", "identity", true, identity.clone(), "The page's own user")
        .body(body)
        .ok_envelope(data)
        .errors(&[Malformed, Internal, StoreUnavailable]);
    let body = api.schema::<TotpConfirmRequest>();
    let data = api.schema::<TotpFactorData>();
    api.post(DEMO_CONFIRM, "demo", "The demo page: confirm an authenticator app")
        .describe("`/api/v1/totp/{identity}/factors/{factor_id}/confirm` without a key, in the demo's own scope.")
        .parameter("path", "identity", true, identity.clone(), "The page's own user")
        .parameter("path", "factor_id", true, factor_id, "The factor's id")
        .body(body)
        .ok_envelope(data)
        .errors(&[
            Malformed,
            InvalidCode,
            WrongCode,
            NotFound,
            QuotaExceeded,
            Internal,
            StoreUnavailable,
        ]);
    let body = api.schema::<TotpVerifyRequest>();
    let data = api.schema::<VerifyData>();
    api.post(
        DEMO_VERIFY,
        "demo",
        "The demo page: verify an authenticator app's code",
    )
    .describe("`/api/v1/totp/{identity}/verify` without a key, in the demo's own scope.")
    .parameter("path", "identity", true, identity, "The page's own user")
    .body(body)
    .ok_envelope(data)
    .errors(&[
        Malformed,
        InvalidCode,
        InvalidPurpose,
        WrongCode,
        NotFound,
        QuotaExceeded,
        Internal,
        StoreUnavailable,
    ]);
}

/// What `config` serves, for the OpenAPI description.
pub fn describe(api: &mut Api) {
    use vcode_wire::ErrorCode::*;
    let identity = serde_json::json!({"type": "string", "pattern": "^[A-Za-z0-9._@+-]{1,64}$"});
    let factor_id = serde_json::json!({"type": "string", "pattern": "^YF[0-9a-f]{32}$"});
    let body = api.schema::<TotpEnrolRequest>();
    let data = api.schema::<TotpEnrolData>();
    api.post(paths::TOTP_FACTORS, "totp", "Enrol an authenticator app")
        .describe(
            "A new TOTP factor (RFC 6238) for the identity, `unverified` until its first right \
             code (confirm). The answer is the only one that ever shows the secret: base32, its \
             `otpauth://` URI and a QR code PNG of the URI (base64). The secret is 160 random \
             bits, kept sealed with VCODE_SECRET_KEY. At most 20 factors an identity (40000). \
             API-key callers only (40100).",
        )
        .parameter(
            "path",
            "identity",
            true,
            identity.clone(),
            "The application's name for its user",
        )
        .body(body)
        .ok_envelope(data)
        .security(serde_json::json!([{"apiKey": []}]))
        .errors(&[Malformed, Unauthorized, Internal, StoreUnavailable]);
    let data = api.schema::<TotpFactorsData>();
    api.get(
        paths::TOTP_FACTORS,
        "totp",
        "An identity's authenticator apps",
    )
    .describe("Its factors, oldest first, never their secrets. API-key callers only.")
    .parameter(
        "path",
        "identity",
        true,
        identity.clone(),
        "The application's name for its user",
    )
    .ok_envelope(data)
    .security(serde_json::json!([{"apiKey": []}]))
    .errors(&[Malformed, Unauthorized, Internal, StoreUnavailable]);
    let body = api.schema::<TotpConfirmRequest>();
    let data = api.schema::<TotpFactorData>();
    api.post(
        paths::TOTP_FACTOR_CONFIRM,
        "totp",
        "Confirm an authenticator app",
    )
    .describe(
        "The factor's first code from the app: right, the factor is `verified`; wrong, \
             40010 with the tries left. A step's code is accepted once (a replay is a wrong \
             code). Five wrong codes in a row lock the factor (42902 with `Retry-After`: 5 \
             minutes, twice as long at each lock after it). With `end_user_ip` or `end_user_id`, \
             the end user's wrong codes count as a verify's \
             (VCODE_QUOTA_CLIENT_FAILS_DAY, 42902).",
    )
    .parameter(
        "path",
        "identity",
        true,
        identity.clone(),
        "The application's name for its user",
    )
    .parameter(
        "path",
        "factor_id",
        true,
        factor_id.clone(),
        "The factor's id",
    )
    .body(body)
    .ok_envelope(data)
    .security(serde_json::json!([{"apiKey": []}]))
    .errors(&[
        InvalidCode,
        WrongCode,
        NotFound,
        Unauthorized,
        QuotaExceeded,
        Internal,
        StoreUnavailable,
    ]);
    let body = api.schema::<TotpVerifyRequest>();
    let data = api.schema::<VerifyData>();
    api.post(
        paths::TOTP_VERIFY,
        "totp",
        "Verify an authenticator app's code",
    )
    .describe(
        "A code of a verified factor (40000 for one not yet confirmed). Right: the signed \
             token of an OTP verify, `channel` `totp`, `sub` the identity, `vid` the factor's \
             id, `purpose` as asked (`login` by default). Wrong or replayed: 40010 with the tries \
             left; locked after five (42902 with `Retry-After`).",
    )
    .parameter(
        "path",
        "identity",
        true,
        identity.clone(),
        "The application's name for its user",
    )
    .body(body)
    .ok_envelope(data)
    .security(serde_json::json!([{"apiKey": []}]))
    .errors(&[
        Malformed,
        InvalidCode,
        InvalidPurpose,
        WrongCode,
        NotFound,
        Unauthorized,
        QuotaExceeded,
        Internal,
        StoreUnavailable,
    ]);
    api.delete(paths::TOTP_FACTOR, "totp", "Remove an authenticator app")
        .describe("The factor is gone: its codes no longer verify. API-key callers only.")
        .parameter(
            "path",
            "identity",
            true,
            identity,
            "The application's name for its user",
        )
        .parameter("path", "factor_id", true, factor_id, "The factor's id")
        .security(serde_json::json!([{"apiKey": []}]))
        .errors(&[NotFound, Unauthorized, Internal, StoreUnavailable]);
}

/// The API key the request presented: required here whatever VCODE_REQUIRE_API_KEY says.
fn key_of(request: &HttpRequest) -> Result<ApiKeyName, ApiError> {
    super::api_key::authorize(request, Operation::Verify)?.ok_or(ApiError::Unauthorized)
}

/// The factors' scope of an API key.
fn scope(key: &ApiKeyName) -> String {
    ["key:", key.as_str()].concat()
}

fn factor_data(factor: &Factor) -> TotpFactorData {
    TotpFactorData {
        factor_id: factor.sid.clone(),
        identity: factor.identity.clone(),
        friendly_name: factor.friendly_name.clone(),
        status: factor.status.as_str().to_owned(),
        algorithm: factor.config.algorithm.as_str().to_owned(),
        digits: factor.config.digits,
        period: factor.config.step_secs,
        skew: factor.config.skew,
        created_at: factor.created_ms / 1000,
    }
}

async fn enrol(
    request: HttpRequest,
    state: web::Data<AppState>,
    identity: web::Path<String>,
    body: web::Json<serde_json::Map<String, serde_json::Value>>,
) -> Result<HttpResponse, ApiError> {
    let key = key_of(&request)?;
    enrol_in(&state, &scope(&key), &identity, enrol_body(body)?).await
}

/// An enrolment's body: a JSON object (serde would read a struct of optional fields from an
/// array too).
fn enrol_body(
    body: web::Json<serde_json::Map<String, serde_json::Value>>,
) -> Result<TotpEnrolRequest, ApiError> {
    serde_json::from_value(serde_json::Value::Object(body.into_inner()))
        .map_err(|error| ApiError::Malformed(format!("invalid body: {error}")))
}

async fn demo_enrol(
    state: web::Data<AppState>,
    identity: web::Path<String>,
    body: web::Json<serde_json::Map<String, serde_json::Value>>,
) -> Result<HttpResponse, ApiError> {
    enrol_in(&state, DEMO_SCOPE, &identity, enrol_body(body)?).await
}

async fn enrol_in(
    state: &AppState,
    scope: &str,
    identity: &str,
    body: TotpEnrolRequest,
) -> Result<HttpResponse, ApiError> {
    let defaults = TotpConfig::default();
    let config = TotpConfig {
        algorithm: match body.algorithm.as_deref() {
            None => defaults.algorithm,
            Some(raw) => Algorithm::parse(raw).ok_or(TotpError::Invalid(Setting::Algorithm))?,
        },
        digits: body.digits.unwrap_or(defaults.digits),
        step_secs: body.period.unwrap_or(defaults.step_secs),
        skew: body.skew.unwrap_or(defaults.skew),
    };
    let name = body.friendly_name.unwrap_or_else(|| identity.to_owned());
    let issuer = body.issuer.unwrap_or_else(|| "vcode".to_owned());
    let enrolment = state
        .totp
        .enrol(scope, identity, &name, &issuer, config)
        .await?;
    Ok(envelope::ok(TotpEnrolData {
        factor: factor_data(&enrolment.factor),
        secret: enrolment.secret_base32,
        uri: enrolment.uri,
        qr_png: STANDARD.encode(&enrolment.qr_png),
    }))
}

async fn list(
    request: HttpRequest,
    state: web::Data<AppState>,
    identity: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let key = key_of(&request)?;
    let factors = state.totp.factors(&scope(&key), &identity).await?;
    Ok(envelope::ok(TotpFactorsData {
        factors: factors.iter().map(factor_data).collect(),
    }))
}

async fn remove(
    request: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let key = key_of(&request)?;
    let (identity, factor) = path.into_inner();
    state
        .totp
        .delete_factor(&scope(&key), &identity, &factor)
        .await?;
    Ok(envelope::ok(serde_json::Value::Null))
}

async fn confirm(
    request: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: web::Json<TotpConfirmRequest>,
) -> Result<HttpResponse, ApiError> {
    let key = key_of(&request)?;
    let (identity, factor) = path.into_inner();
    let body = body.into_inner();
    let caller = super::otp::caller(
        &request,
        &state,
        Some(&key),
        body.end_user_ip.as_deref(),
        body.end_user_id.as_deref(),
    )?;
    let client = state.otp.client_of(&caller);
    confirm_in(&state, &scope(&key), &identity, &factor, &body.code, client).await
}

/// The demo's client is the browser's address, as the OTP demo's.
async fn demo_confirm(
    request: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: web::Json<TotpConfirmRequest>,
) -> Result<HttpResponse, ApiError> {
    let (identity, factor) = path.into_inner();
    let client = Client::Address(super::client_ip(&request, &state)?);
    confirm_in(
        &state,
        DEMO_SCOPE,
        &identity,
        &factor,
        &body.code,
        Some(client),
    )
    .await
}

async fn confirm_in(
    state: &AppState,
    scope: &str,
    identity: &str,
    factor: &str,
    code: &str,
    client: Option<Client>,
) -> Result<HttpResponse, ApiError> {
    let checked = state
        .totp
        .check_code(scope, identity, factor, code, client, true)
        .await?;
    if !checked.passed {
        return Err(TotpError::WrongCode {
            remaining_attempts: checked.factor.remaining_attempts(),
        }
        .into());
    }
    Ok(envelope::ok(factor_data(&checked.factor)))
}

async fn verify(
    request: HttpRequest,
    state: web::Data<AppState>,
    identity: web::Path<String>,
    body: web::Json<TotpVerifyRequest>,
) -> Result<HttpResponse, ApiError> {
    let key = key_of(&request)?;
    let body = body.into_inner();
    let caller = super::otp::caller(
        &request,
        &state,
        Some(&key),
        body.end_user_ip.as_deref(),
        body.end_user_id.as_deref(),
    )?;
    let client = state.otp.client_of(&caller);
    verify_in(&state, &scope(&key), &identity, body, client).await
}

async fn demo_verify(
    request: HttpRequest,
    state: web::Data<AppState>,
    identity: web::Path<String>,
    body: web::Json<TotpVerifyRequest>,
) -> Result<HttpResponse, ApiError> {
    let client = Client::Address(super::client_ip(&request, &state)?);
    verify_in(
        &state,
        DEMO_SCOPE,
        &identity,
        body.into_inner(),
        Some(client),
    )
    .await
}

async fn verify_in(
    state: &AppState,
    scope: &str,
    identity: &str,
    body: TotpVerifyRequest,
    client: Option<Client>,
) -> Result<HttpResponse, ApiError> {
    let purposes = &state.otp.settings().purposes;
    let purpose = match body.purpose.as_deref() {
        Some(raw) => purposes
            .iter()
            .find(|purpose| purpose.as_str() == raw)
            .ok_or(ApiError::InvalidPurpose)?
            .as_str()
            .to_owned(),
        None => "login".to_owned(),
    };
    let audience = body
        .audience
        .as_deref()
        .map(|raw| {
            Audience::parse(raw).ok_or_else(|| {
                ApiError::Malformed(format!("audience: {}", crate::token::CLAIM_TEXT_RULE))
            })
        })
        .transpose()?;
    let token = state
        .totp
        .verify(
            scope,
            identity,
            &body.factor_id,
            &body.code,
            client,
            &purpose,
            audience.as_ref(),
        )
        .await?;
    Ok(envelope::ok(VerifyData {
        verified: true,
        token: Some(token),
    }))
}
