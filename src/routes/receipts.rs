//! The SMS providers' delivery receipts on the public listener: Twilio's `StatusCallback`
//! (a signed form), Aliyun's `SmsReport` and Tencent's status callback (JSON arrays with the
//! receipt token in `?token=`), the webhook gateway's signed receipt. The raw request goes to
//! the receipt use case, which checks and applies it; a wrong signature or token is 40100
//! (401) and changes nothing. Bodies up to [`RECEIPT_MAX_BYTES`].

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;
use vcode_wire::{ReceiptsApplied, WebhookReceipt, paths};

use super::envelope;
use super::openapi::Api;
use super::{ApiError, AppState};
use crate::otp::Applied;
use crate::sms::receipts::{aliyun, tencent, twilio};
use crate::sms::webhook::{SIGNATURE_HEADER, TIMESTAMP_HEADER};

/// Where every receipt route starts (the larger body limit applies below it).
pub const PREFIX: &str = "/api/v1/receipts/";

/// The delivery receipts' routes take a provider's batch (Aliyun and Tencent push up to a few
/// hundred reports at once, and push the same batch again when it is refused).
pub const RECEIPT_MAX_BYTES: usize = 256 * 1024;

pub fn config(cfg: &mut web::ServiceConfig) {
    let routes = [
        (paths::RECEIPT_TWILIO, web::post().to(twilio_receipt)),
        (paths::RECEIPT_ALIYUN, web::post().to(aliyun_receipt)),
        (paths::RECEIPT_TENCENT, web::post().to(tencent_receipt)),
        (paths::RECEIPT_WEBHOOK, web::post().to(webhook_receipt)),
    ];
    for (path, route) in routes {
        debug_assert!(path.starts_with(PREFIX));
        cfg.service(
            super::post_resource(path)
                .app_data(web::PayloadConfig::new(RECEIPT_MAX_BYTES))
                .route(route),
        );
    }
}

/// What `config` serves, for the OpenAPI description.
pub fn describe(api: &mut Api) {
    use vcode_wire::ErrorCode::*;
    let applied = api.schema::<ReceiptsApplied>();
    let receipt = api.schema::<WebhookReceipt>();
    let errors = [
        Malformed,
        Unauthorized,
        PayloadTooLarge,
        Internal,
        StoreUnavailable,
    ];
    api.post(
        paths::RECEIPT_TWILIO,
        "receipts",
        "Twilio's delivery receipt",
    )
    .describe(
        "Twilio's `StatusCallback` (form: `MessageSid`, `MessageStatus`, `ErrorCode`), which \
             each send names when VCODE_SMS_RECEIPTS_URL is set. Checked with \
             `X-Twilio-Signature` under VCODE_TWILIO_AUTH_TOKEN over that URL: 40100 otherwise. \
             A receipt moves the verification's `delivery` forward only.",
    )
    .ok_envelope(applied.clone())
    .errors(&errors);
    for (path, description) in [
        (
            paths::RECEIPT_ALIYUN,
            "Aliyun's `SmsReport` (HTTP batch push), its JSON array. Unsigned, so the URL \
             configured at Aliyun carries `?token=` VCODE_SMS_RECEIPTS_TOKEN: 40100 otherwise. \
             Answers `{\"code\": 0, \"msg\": …}`, as Aliyun requires.",
        ),
        (
            paths::RECEIPT_TENCENT,
            "Tencent Cloud SMS's status callback, its JSON array. Unsigned, so the URL \
             configured at Tencent carries `?token=` VCODE_SMS_RECEIPTS_TOKEN: 40100 otherwise. \
             Answers `{\"result\": 0, \"errmsg\": \"OK\"}`, as Tencent requires.",
        ),
    ] {
        api.post(path, "receipts", "A provider's delivery receipts")
            .describe(description)
            .security(serde_json::json!([{"receiptToken": []}]))
            .ok_content(
                "application/json",
                serde_json::json!({"type": "object"}),
                "the provider's expected answer",
            )
            .errors(&errors);
    }
    api.post(
        paths::RECEIPT_WEBHOOK,
        "receipts",
        "The webhook gateway's delivery receipt",
    )
    .describe(
        "Signed as vcode signs its requests to the gateway: `X-Vcode-Timestamp` (within 300 s) \
             and `X-Vcode-Signature: v1=<hex HMAC-SHA-256 of \"<timestamp>.<body>\">` under \
             VCODE_SMS_WEBHOOK_SECRET: 40100 otherwise.",
    )
    .body(receipt)
    .ok_envelope(applied)
    .errors(&errors);
}

fn header<'a>(request: &'a HttpRequest, name: &str) -> Option<&'a str> {
    request.headers().get(name)?.to_str().ok()
}

fn applied_data(applied: Applied) -> ReceiptsApplied {
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    ReceiptsApplied {
        receipts: count(applied.receipts),
        changed: count(applied.changed),
        unknown: count(applied.unknown),
    }
}

async fn twilio_receipt(
    request: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let params: Vec<(String, String)> = serde_urlencoded::from_bytes(&body)
        .map_err(|_| ApiError::Malformed("expected a form body".to_owned()))?;
    let path_and_query = request
        .uri()
        .path_and_query()
        .map_or(paths::RECEIPT_TWILIO, |p| p.as_str());
    let applied = state
        .receipts
        .twilio(
            path_and_query,
            &params,
            header(&request, twilio::SIGNATURE_HEADER),
            header(&request, twilio::SIGNATURE_SETTINGS_HEADER),
        )
        .await?;
    Ok(envelope::ok(applied_data(applied)))
}

#[derive(Deserialize)]
struct TokenQuery {
    token: Option<String>,
}

async fn aliyun_receipt(
    state: web::Data<AppState>,
    query: web::Query<TokenQuery>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    state.receipts.aliyun(query.token.as_deref(), &body).await?;
    Ok(provider_answer(aliyun::ACCEPTED))
}

async fn tencent_receipt(
    state: web::Data<AppState>,
    query: web::Query<TokenQuery>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    state
        .receipts
        .tencent(query.token.as_deref(), &body)
        .await?;
    Ok(provider_answer(tencent::ACCEPTED))
}

/// The fixed answer a provider's platform checks.
fn provider_answer(body: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json; charset=utf-8")
        .body(body)
}

async fn webhook_receipt(
    request: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Result<HttpResponse, ApiError> {
    let applied = state
        .receipts
        .webhook(
            header(&request, TIMESTAMP_HEADER),
            header(&request, SIGNATURE_HEADER),
            &body,
        )
        .await?;
    Ok(envelope::ok(applied_data(applied)))
}
