//! The Twilio Verify v2-compatible paths (`/v2/Services…`): HTTP Basic as Twilio's, form
//! bodies in, Twilio's JSON out (the shapes of Twilio's OpenAPI description, vendored in
//! tests/twilio/spec), Twilio's error body. HTTP only: every decision is `TwilioCompat`'s.

use std::collections::HashMap;

use actix_web::http::StatusCode;
use actix_web::http::header::{AUTHORIZATION, RETRY_AFTER, WWW_AUTHENTICATE};
use actix_web::{HttpRequest, HttpResponse, ResponseError, web};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;
use serde_json::{Value, json};
use tracing::Instrument;

use super::AppState;
use crate::sms::signing::utc_timestamp;
use crate::twilio_compat::{
    CheckTarget, Service, ServiceChanges, StartCommand, TwilioError, Verification,
};

pub fn config(cfg: &mut web::ServiceConfig) {
    // The router tries resources in this order, each `{…}` path a regex match: the hot two
    // (a check, a start) first, so that they cost one match and two, not four and two.
    cfg.service(
        super::resource("/v2/Services/{sid}/VerificationCheck", "POST")
            .route(web::post().to(check_verification)),
    )
    .service(
        super::resource("/v2/Services/{sid}/Verifications", "POST")
            .route(web::post().to(start_verification)),
    )
    .service(
        super::resource("/v2/Services", "GET, POST")
            .route(web::get().to(list_services))
            .route(web::post().to(create_service)),
    )
    .service(
        super::resource("/v2/Services/{sid}", "GET, POST, DELETE")
            .route(web::get().to(fetch_service))
            .route(web::post().to(update_service))
            .route(web::delete().to(delete_service)),
    )
    .service(
        super::resource(
            "/v2/Services/{sid}/Verifications/{verification}",
            "GET, POST",
        )
        .route(web::get().to(fetch_verification))
        .route(web::post().to(update_verification)),
    );
}

/// A Twilio error as Twilio answers it: `{code, message, more_info, status}`.
#[derive(Debug)]
pub struct TwilioReply(TwilioError);

impl From<TwilioError> for TwilioReply {
    fn from(error: TwilioError) -> Self {
        Self(error)
    }
}

impl std::fmt::Display for TwilioReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl ResponseError for TwilioReply {
    fn status_code(&self) -> StatusCode {
        match &self.0 {
            TwilioError::Unauthenticated => StatusCode::UNAUTHORIZED,
            TwilioError::NotFound(_) => StatusCode::NOT_FOUND,
            TwilioError::InvalidParameter(_)
            | TwilioError::Landline
            | TwilioError::EmailNotConfigured
            | TwilioError::ChannelDisabled(_) => StatusCode::BAD_REQUEST,
            TwilioError::Blocked { .. } | TwilioError::DestinationRefused => StatusCode::FORBIDDEN,
            TwilioError::MaxCheckAttempts
            | TwilioError::MaxSendAttempts
            | TwilioError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            TwilioError::Delivery(_) => StatusCode::BAD_GATEWAY,
            TwilioError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            TwilioError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        let code = self.0.code();
        if let TwilioError::Unavailable(cause) | TwilioError::Internal(cause) = &self.0 {
            tracing::error!(code, %cause, "Twilio-compatible request failed");
        }
        let mut response = HttpResponse::build(status);
        match &self.0 {
            TwilioError::Unauthenticated => {
                response.insert_header((WWW_AUTHENTICATE, "Basic realm=\"Twilio API\""));
            }
            TwilioError::Blocked { retry_after } | TwilioError::TooManyRequests { retry_after } => {
                response.insert_header((RETRY_AFTER, retry_after.as_secs().max(1)));
            }
            _ => {}
        }
        response.json(ErrorBody {
            code,
            message: self.0.to_string(),
            more_info: format!("https://www.twilio.com/docs/errors/{code}"),
            status: status.as_u16(),
        })
    }
}

/// Twilio's error body.
#[derive(Serialize)]
struct ErrorBody {
    code: u32,
    message: String,
    more_info: String,
    status: u16,
}

type Reply = Result<HttpResponse, TwilioReply>;

/// The account HTTP Basic's credentials act for.
fn account<'a>(request: &HttpRequest, state: &'a AppState) -> Result<&'a str, TwilioReply> {
    let credentials = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))
        .and_then(|(_, encoded)| STANDARD.decode(encoded.trim()).ok())
        .and_then(|decoded| String::from_utf8(decoded).ok())
        .ok_or(TwilioError::Unauthenticated)?;
    let (user, secret) = credentials
        .split_once(':')
        .ok_or(TwilioError::Unauthenticated)?;
    Ok(state.twilio.authenticate(user, secret)?)
}

/// A form body (or a query) as Twilio's SDKs send it; the last of a repeated name counts.
struct Form(HashMap<String, String>);

impl Form {
    fn read(bytes: &[u8]) -> Result<Self, TwilioReply> {
        serde_urlencoded::from_bytes::<Vec<(String, String)>>(bytes)
            .map(|pairs| Self(pairs.into_iter().collect()))
            .map_err(|_| TwilioError::InvalidParameter("the form body").into())
    }

    fn text(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }

    fn flag(&self, name: &'static str) -> Result<Option<bool>, TwilioReply> {
        match self.0.get(name).map(|value| value.to_ascii_lowercase()) {
            None => Ok(None),
            Some(value) if value == "true" => Ok(Some(true)),
            Some(value) if value == "false" => Ok(Some(false)),
            Some(_) => Err(TwilioError::InvalidParameter(name).into()),
        }
    }

    fn number<T: std::str::FromStr>(&self, name: &'static str) -> Result<Option<T>, TwilioReply> {
        self.0
            .get(name)
            .map(|value| {
                value
                    .trim()
                    .parse()
                    .map_err(|_| TwilioError::InvalidParameter(name).into())
            })
            .transpose()
    }

    fn service_changes(&self) -> Result<ServiceChanges, TwilioReply> {
        Ok(ServiceChanges {
            friendly_name: self.text("FriendlyName"),
            code_length: self.number("CodeLength")?,
            lookup_enabled: self.flag("LookupEnabled")?,
            psd2_enabled: self.flag("Psd2Enabled")?,
            skip_sms_to_landlines: self.flag("SkipSmsToLandlines")?,
            dtmf_input_required: self.flag("DtmfInputRequired")?,
            do_not_share_warning_enabled: self.flag("DoNotShareWarningEnabled")?,
            custom_code_enabled: self.flag("CustomCodeEnabled")?,
            code_ttl_secs: self.number("VcodeCodeTtl")?,
            texts: self
                .0
                .get("VcodeTexts")
                .map(|raw| serde_json::from_str(raw))
                .transpose()
                .map_err(|_| TwilioError::InvalidParameter("VcodeTexts"))?,
        })
    }
}

/// Where this server answers, as the request reached it (`url` and `links` are absolute).
fn base_url(request: &HttpRequest) -> String {
    let info = request.connection_info();
    format!("{}://{}/v2", info.scheme(), info.host())
}

fn date(ms: u64) -> String {
    utc_timestamp(ms / 1000)
}

fn service_json(service: &Service, base: &str) -> Value {
    let url = format!("{base}/Services/{}", service.sid);
    json!({
        "sid": service.sid,
        "account_sid": service.account_sid,
        "friendly_name": service.friendly_name,
        "code_length": service.code_length,
        "lookup_enabled": service.lookup_enabled,
        "psd2_enabled": service.psd2_enabled,
        "skip_sms_to_landlines": service.skip_sms_to_landlines,
        "dtmf_input_required": service.dtmf_input_required,
        "tts_name": null,
        "do_not_share_warning_enabled": service.do_not_share_warning_enabled,
        "custom_code_enabled": service.custom_code_enabled,
        "push": {"include_date": false, "apn_credential_sid": null, "fcm_credential_sid": null},
        "totp": {"issuer": null, "time_step": null, "code_length": null, "skew": null},
        "default_template_sid": null,
        "whatsapp": {"msg_service_sid": null, "from": null},
        "passkeys": null,
        "verify_event_subscription_enabled": false,
        // vcode's own, beside Twilio's: the code lifetime (null: the server's) and the texts.
        "vcode_code_ttl": service.code_ttl_secs,
        "vcode_texts": service.texts,
        "date_created": date(service.created_ms),
        "date_updated": date(service.updated_ms),
        "url": url,
        "links": {
            "verification_checks": format!("{url}/VerificationCheck"),
            "verifications": format!("{url}/Verifications"),
            "rate_limits": format!("{url}/RateLimits"),
            "messaging_configurations": format!("{url}/MessagingConfigurations"),
            "entities": format!("{url}/Entities"),
            "webhooks": format!("{url}/Webhooks"),
            "access_tokens": format!("{url}/AccessTokens"),
        },
    })
}

/// The answers of a start and a check, serialised from structs (a `serde_json::Value` built
/// first cost more than the rest of the route's own work); the shapes of the description's
/// `verify.v2.service.verification` and `…verification_check`.
#[derive(Serialize)]
struct VerificationJson<'a> {
    sid: &'a str,
    service_sid: &'a str,
    account_sid: &'a str,
    to: &'a str,
    channel: &'a str,
    status: &'static str,
    valid: bool,
    lookup: Empty,
    amount: Option<()>,
    payee: Option<()>,
    send_code_attempts: Vec<AttemptJson<'a>>,
    date_created: String,
    date_updated: String,
    sna: Option<()>,
    url: String,
}

#[derive(Serialize)]
struct AttemptJson<'a> {
    time: String,
    channel: &'a str,
    attempt_sid: &'a str,
}

/// `{}`.
#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
struct CheckJson<'a> {
    sid: &'a str,
    service_sid: &'a str,
    account_sid: &'a str,
    to: &'a str,
    channel: &'a str,
    status: &'static str,
    valid: bool,
    amount: Option<()>,
    payee: Option<()>,
    date_created: String,
    date_updated: String,
    sna_attempts_error_codes: [(); 0],
}

fn verification_json<'a>(
    verification: &'a Verification,
    request: &HttpRequest,
) -> VerificationJson<'a> {
    let base = base_url(request);
    VerificationJson {
        sid: &verification.sid,
        service_sid: &verification.service_sid,
        account_sid: &verification.account_sid,
        to: &verification.to,
        channel: &verification.channel,
        status: verification.status.as_str(),
        valid: verification.status == crate::twilio_compat::TwilioStatus::Approved,
        lookup: Empty {},
        amount: None,
        payee: None,
        send_code_attempts: verification
            .send_code_attempts
            .iter()
            .map(|attempt| AttemptJson {
                time: date(attempt.time_ms),
                channel: &attempt.channel,
                attempt_sid: &attempt.attempt_sid,
            })
            .collect(),
        date_created: date(verification.created_ms),
        date_updated: date(verification.updated_ms),
        sna: None,
        url: [
            &base,
            "/Services/",
            &verification.service_sid,
            "/Verifications/",
            &verification.sid,
        ]
        .concat(),
    }
}

async fn list_services(request: HttpRequest, state: web::Data<AppState>) -> Reply {
    let account = account(&request, &state)?;
    let query = Form::read(request.query_string().as_bytes())?;
    let page_size: usize = query.number("PageSize")?.unwrap_or(50).clamp(1, 1000);
    let page: usize = query.number("Page")?.unwrap_or(0);
    let services = state.twilio.services(account).await?;
    let base = base_url(&request);
    let page_url = |page: usize| format!("{base}/Services?PageSize={page_size}&Page={page}");
    let shown: Vec<Value> = services
        .iter()
        .skip(page * page_size)
        .take(page_size)
        .map(|service| service_json(service, &base))
        .collect();
    let more = services.len() > (page + 1) * page_size;
    Ok(HttpResponse::Ok().json(json!({
        "services": shown,
        "meta": {
            "page": page,
            "page_size": page_size,
            "first_page_url": page_url(0),
            "previous_page_url": (page > 0).then(|| page_url(page - 1)),
            "next_page_url": more.then(|| page_url(page + 1)),
            "key": "services",
            "url": page_url(page),
        },
    })))
}

async fn create_service(
    request: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> Reply {
    let account = account(&request, &state)?;
    let changes = Form::read(&body)?.service_changes()?;
    let service = state.twilio.create_service(account, changes).await?;
    Ok(HttpResponse::Created().json(service_json(&service, &base_url(&request))))
}

async fn fetch_service(
    request: HttpRequest,
    state: web::Data<AppState>,
    sid: web::Path<String>,
) -> Reply {
    let account = account(&request, &state)?;
    let service = state.twilio.service(account, &sid).await?;
    Ok(HttpResponse::Ok().json(service_json(&service, &base_url(&request))))
}

async fn update_service(
    request: HttpRequest,
    state: web::Data<AppState>,
    sid: web::Path<String>,
    body: web::Bytes,
) -> Reply {
    let account = account(&request, &state)?;
    let changes = Form::read(&body)?.service_changes()?;
    let service = state.twilio.update_service(account, &sid, changes).await?;
    Ok(HttpResponse::Ok().json(service_json(&service, &base_url(&request))))
}

async fn delete_service(
    request: HttpRequest,
    state: web::Data<AppState>,
    sid: web::Path<String>,
) -> Reply {
    let account = account(&request, &state)?;
    state.twilio.delete_service(account, &sid).await?;
    Ok(HttpResponse::NoContent().finish())
}

async fn start_verification(
    request: HttpRequest,
    state: web::Data<AppState>,
    sid: web::Path<String>,
    body: web::Bytes,
) -> Reply {
    let account = account(&request, &state)?;
    let form = Form::read(&body)?;
    let command = StartCommand {
        to: form.text("To").ok_or(TwilioError::InvalidParameter("To"))?,
        channel: form
            .text("Channel")
            .ok_or(TwilioError::InvalidParameter("Channel"))?,
        locale: form.text("Locale"),
        custom_friendly_name: form.text("CustomFriendlyName"),
        channel_configuration: form.text("ChannelConfiguration"),
        client_ip: client_ip(&request, &state)?,
    };
    let twilio = state.twilio.clone();
    let account = account.to_owned();
    let sid = sid.into_inner();
    // Runs to the end even if the client goes away: a code is never left without its SMS (or
    // mail) or its roll-back, nor a send without its log entry. Boxed, as `/api/v1`'s send: the start's
    // state machine (the send's within it) is kilobytes, copied on every move otherwise.
    let task = Box::pin(async move { twilio.start(&account, &sid, command).await });
    let verification = tokio::spawn(task.instrument(tracing::Span::current()))
        .await
        .map_err(|error| TwilioError::Internal(error.into()))??;
    Ok(HttpResponse::Created().json(verification_json(&verification, &request)))
}

async fn fetch_verification(
    request: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Reply {
    let account = account(&request, &state)?;
    let (sid, verification) = path.into_inner();
    let verification = state
        .twilio
        .verification(account, &sid, &verification)
        .await?;
    Ok(HttpResponse::Ok().json(verification_json(&verification, &request)))
}

async fn update_verification(
    request: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: web::Bytes,
) -> Reply {
    let account = account(&request, &state)?;
    let (sid, verification) = path.into_inner();
    let status = Form::read(&body)?
        .text("Status")
        .ok_or(TwilioError::InvalidParameter("Status"))?;
    let client = client_ip(&request, &state)?;
    let verification = state
        .twilio
        .update_verification(account, &sid, &verification, &status, client)
        .await?;
    Ok(HttpResponse::Ok().json(verification_json(&verification, &request)))
}

async fn check_verification(
    request: HttpRequest,
    state: web::Data<AppState>,
    sid: web::Path<String>,
    body: web::Bytes,
) -> Reply {
    let account = account(&request, &state)?;
    let form = Form::read(&body)?;
    let code = form
        .text("Code")
        .ok_or(TwilioError::InvalidParameter("Code"))?;
    let target = match (form.text("VerificationSid"), form.text("To")) {
        (Some(verification), _) => CheckTarget::Verification(verification),
        (None, Some(to)) => CheckTarget::To(to),
        (None, None) => return Err(TwilioError::InvalidParameter("To or VerificationSid").into()),
    };
    let client = client_ip(&request, &state)?;
    let check = state
        .twilio
        .check(account, &sid, &code, target, client)
        .await?;
    let verification = &check.verification;
    Ok(HttpResponse::Ok().json(CheckJson {
        sid: &verification.sid,
        service_sid: &verification.service_sid,
        account_sid: &verification.account_sid,
        to: &verification.to,
        channel: &verification.channel,
        status: verification.status.as_str(),
        valid: check.valid,
        amount: None,
        payee: None,
        date_created: date(verification.created_ms),
        date_updated: date(verification.updated_ms),
        sna_attempts_error_codes: [],
    }))
}

/// The client as the public API groups it (trusted proxies, IPv6 networks); a malformed
/// `X-Forwarded-For` is Twilio's invalid parameter.
fn client_ip(request: &HttpRequest, state: &AppState) -> Result<std::net::IpAddr, TwilioReply> {
    super::client_ip(request, state)
        .map_err(|_| TwilioError::InvalidParameter("X-Forwarded-For").into())
}
