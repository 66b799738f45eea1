//! The Twilio Verify v2-compatible paths (`/v2/Services…`): HTTP Basic as Twilio's, form
//! bodies in, Twilio's JSON out (the shapes of Twilio's OpenAPI description, vendored in
//! tests/twilio/spec), Twilio's error body. HTTP only: every decision is `TwilioCompat`'s.

use std::borrow::Cow;

use actix_web::http::header::{
    AUTHORIZATION, CONTENT_TYPE, FORWARDED, HOST, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE,
    X_FORWARDED_HOST, X_FORWARDED_PROTO,
};
use actix_web::http::{Method, StatusCode};
use actix_web::{FromRequest, HttpRequest, HttpResponse, HttpResponseBuilder, ResponseError, web};
use serde::Serialize;
use serde_json::{Value, json};
use tracing::Instrument;
use url::form_urlencoded;

use super::AppState;
use crate::sms::signing::utc_timestamp;
use crate::twilio_compat::{
    CheckTarget, Service, ServiceChanges, StartCommand, TwilioError, Verification, push_json_str,
};

/// Where the Twilio-compatible paths live; everything under it is [`dispatch`]'s.
const SERVICES: &str = "/v2/Services";

pub fn config(cfg: &mut web::ServiceConfig) {
    // One static prefix, split by hand: as five `{sid}` resources, every request paid the
    // router's regex captures (two for a start), and the request span's pattern lookup as many
    // again, more than the route's own work.
    cfg.service(web::scope(SERVICES).default_service(web::to(dispatch)));
}

mod rate_limits;

/// A path under `/v2/Services`, with its SIDs percent-decoded as actix's `Path` would.
enum TwilioRoute<'a> {
    Services,
    Service(Cow<'a, str>),
    Verifications(Cow<'a, str>),
    Check(Cow<'a, str>),
    Verification(Cow<'a, str>, Cow<'a, str>),
    RateLimits(Cow<'a, str>),
    RateLimit(Cow<'a, str>, Cow<'a, str>),
    Buckets(Cow<'a, str>, Cow<'a, str>),
    Bucket(Cow<'a, str>, Cow<'a, str>, Cow<'a, str>),
}

impl<'a> TwilioRoute<'a> {
    /// The route of `path` (as routed: percent-encoded `/` kept), if any. A `{sid}` is one
    /// non-empty segment, and no trailing `/` is allowed, as the resources' patterns were.
    fn of(path: &'a str) -> Option<Self> {
        let tail = path.strip_prefix(SERVICES)?;
        if tail.is_empty() {
            return Some(Self::Services);
        }
        let mut segments = tail.strip_prefix('/')?.split('/');
        let sid = segments.next().filter(|sid| !sid.is_empty())?;
        let rest: Vec<&str> = segments.collect();
        if rest.iter().skip(1).step_by(2).any(|sid| sid.is_empty()) {
            return None;
        }
        let route = match rest.as_slice() {
            [] => Self::Service(decoded(sid)),
            ["Verifications"] => Self::Verifications(decoded(sid)),
            ["VerificationCheck"] => Self::Check(decoded(sid)),
            ["Verifications", verification] => {
                Self::Verification(decoded(sid), decoded(verification))
            }
            ["RateLimits"] => Self::RateLimits(decoded(sid)),
            ["RateLimits", limit] => Self::RateLimit(decoded(sid), decoded(limit)),
            ["RateLimits", limit, "Buckets"] => Self::Buckets(decoded(sid), decoded(limit)),
            ["RateLimits", limit, "Buckets", bucket] => {
                Self::Bucket(decoded(sid), decoded(limit), decoded(bucket))
            }
            _ => return None,
        };
        Some(route)
    }

    /// The pattern metrics and the request span name the route by.
    fn pattern(&self) -> &'static str {
        match self {
            Self::Services => "/v2/Services",
            Self::Service(_) => "/v2/Services/{sid}",
            Self::Verifications(_) => "/v2/Services/{sid}/Verifications",
            Self::Check(_) => "/v2/Services/{sid}/VerificationCheck",
            Self::Verification(..) => "/v2/Services/{sid}/Verifications/{verification}",
            Self::RateLimits(_) => "/v2/Services/{sid}/RateLimits",
            Self::RateLimit(..) => "/v2/Services/{sid}/RateLimits/{rate_limit}",
            Self::Buckets(..) => "/v2/Services/{sid}/RateLimits/{rate_limit}/Buckets",
            Self::Bucket(..) => "/v2/Services/{sid}/RateLimits/{rate_limit}/Buckets/{bucket}",
        }
    }

    /// What `Allow` says of the route.
    fn allow(&self) -> &'static str {
        match self {
            Self::Services => "GET, POST",
            Self::Service(_) => "GET, POST, DELETE",
            Self::Verifications(_) | Self::Check(_) => "POST",
            Self::Verification(..) => "GET, POST",
            Self::RateLimits(_) | Self::Buckets(..) => "GET, POST",
            Self::RateLimit(..) | Self::Bucket(..) => "GET, POST, DELETE",
        }
    }
}

/// The route pattern of a Twilio-compatible path (`None`: not one), for metrics and logs:
/// the router knows only the `/v2/Services` scope.
pub fn route_pattern(path: &str) -> Option<&'static str> {
    TwilioRoute::of(path).map(|route| route.pattern())
}

/// A path segment fully percent-decoded (lossy), as actix's `Path<String>` decodes one.
fn decoded(segment: &str) -> Cow<'_, str> {
    if segment.contains('%') {
        percent_encoding::percent_decode_str(segment).decode_utf8_lossy()
    } else {
        Cow::Borrowed(segment)
    }
}

/// Every path under `/v2/Services`: the route, then its method (405 with `Allow` otherwise),
/// then the body of a POST (its limit and errors those of the `Bytes` extractor).
async fn dispatch(
    request: HttpRequest,
    state: web::Data<AppState>,
    payload: web::Payload,
) -> Result<HttpResponse, actix_web::Error> {
    let Some(route) = TwilioRoute::of(request.match_info().as_str()) else {
        return Err(super::ApiError::NotFound.into());
    };
    let method = request.method().clone();
    let body = if method == Method::POST {
        web::Bytes::from_request(&request, &mut payload.into_inner()).await?
    } else {
        web::Bytes::new()
    };
    let state = &state;
    let request = &request;
    let reply = match (&route, method) {
        (TwilioRoute::Check(sid), Method::POST) => {
            check_verification(request, state, sid, &body).await
        }
        (TwilioRoute::Verifications(sid), Method::POST) => {
            start_verification(request, state, sid, &body).await
        }
        (TwilioRoute::Services, Method::GET) => list_services(request, state).await,
        (TwilioRoute::Services, Method::POST) => create_service(request, state, &body).await,
        (TwilioRoute::Service(sid), Method::GET) => fetch_service(request, state, sid).await,
        (TwilioRoute::Service(sid), Method::POST) => {
            update_service(request, state, sid, &body).await
        }
        (TwilioRoute::Service(sid), Method::DELETE) => delete_service(request, state, sid).await,
        (TwilioRoute::Verification(sid, verification), Method::GET) => {
            fetch_verification(request, state, sid, verification).await
        }
        (TwilioRoute::Verification(sid, verification), Method::POST) => {
            update_verification(request, state, sid, verification, &body).await
        }
        (TwilioRoute::RateLimits(sid), Method::GET) => {
            rate_limits::list_rate_limits(request, state, sid).await
        }
        (TwilioRoute::RateLimits(sid), Method::POST) => {
            rate_limits::create_rate_limit(request, state, sid, &body).await
        }
        (TwilioRoute::RateLimit(sid, limit), Method::GET) => {
            rate_limits::fetch_rate_limit(request, state, sid, limit).await
        }
        (TwilioRoute::RateLimit(sid, limit), Method::POST) => {
            rate_limits::update_rate_limit(request, state, sid, limit, &body).await
        }
        (TwilioRoute::RateLimit(sid, limit), Method::DELETE) => {
            rate_limits::delete_rate_limit(request, state, sid, limit).await
        }
        (TwilioRoute::Buckets(sid, limit), Method::GET) => {
            rate_limits::list_buckets(request, state, sid, limit).await
        }
        (TwilioRoute::Buckets(sid, limit), Method::POST) => {
            rate_limits::create_bucket(request, state, sid, limit, &body).await
        }
        (TwilioRoute::Bucket(sid, limit, bucket), Method::GET) => {
            rate_limits::fetch_bucket(request, state, (sid, limit, bucket)).await
        }
        (TwilioRoute::Bucket(sid, limit, bucket), Method::POST) => {
            rate_limits::update_bucket(request, state, (sid, limit, bucket), &body).await
        }
        (TwilioRoute::Bucket(sid, limit, bucket), Method::DELETE) => {
            rate_limits::delete_bucket(request, state, (sid, limit, bucket)).await
        }
        _ => return Ok(super::method_not_allowed(route.allow())),
    };
    reply.map_err(Into::into)
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
            TwilioError::Blocked { .. }
            | TwilioError::DestinationRefused
            | TwilioError::TooManyResources(..) => StatusCode::FORBIDDEN,
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
        // Twilio's error body, `{code, message, more_info, status}`, written by hand (serde's
        // writer cost as much as the rest of a check that finds nothing).
        let code = itoa::Buffer::new().format(code).to_owned();
        let mut body = String::with_capacity(160);
        body.push_str("{\"code\":");
        body.push_str(&code);
        body.push_str(",\"message\":");
        push_json_str(&mut body, &self.0.to_string());
        body.push_str(",\"more_info\":\"https://www.twilio.com/docs/errors/");
        body.push_str(&code);
        body.push_str("\",\"status\":");
        body.push_str(itoa::Buffer::new().format(status.as_u16()));
        body.push('}');
        json_answer(response, body)
    }
}

type Reply = Result<HttpResponse, TwilioReply>;

/// The account HTTP Basic's credentials act for (`TwilioCompat` remembers credentials it
/// verified lately, so that a client's every request does not hash its secret again).
/// Credentials are compared only while the client's address is not held for failing too often
/// (20429 with `Retry-After` then); a wrong or missing one counts against the address.
fn account<'a>(request: &HttpRequest, state: &'a AppState) -> Result<&'a str, TwilioReply> {
    let address = client_ip(request, state)?;
    if let Some(wait) = state.credential_failures.held(address) {
        return Err(TwilioError::TooManyRequests {
            retry_after: std::time::Duration::from_secs(wait.as_secs().max(1)),
        }
        .into());
    }
    let authenticated = authenticate(request, state);
    if authenticated.is_err() {
        state.credential_failures.failed(address);
    }
    authenticated
}

fn authenticate<'a>(request: &HttpRequest, state: &'a AppState) -> Result<&'a str, TwilioReply> {
    // UTF-8 is enough (not `to_str`'s byte-by-byte check for visible ASCII): a header with
    // other bytes is no base64, and never a remembered credential's digest.
    let encoded = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|value| std::str::from_utf8(value.as_bytes()).ok())
        .and_then(|value| value.trim().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))
        .map(|(_, encoded)| encoded.trim())
        .ok_or(TwilioError::Unauthenticated)?;
    Ok(state.twilio.authenticate_basic(encoded)?)
}

/// A form body (or a query) as Twilio's SDKs send it, its names and values borrowed from the
/// body unless percent-encoded; the last of a repeated name counts.
struct Form<'a>(Vec<(Cow<'a, str>, Cow<'a, str>)>);

impl<'a> Form<'a> {
    /// Never fails: undecodable bytes are read as U+FFFD, as `serde_urlencoded` read them.
    fn read(bytes: &'a [u8]) -> Self {
        Self(form_urlencoded::parse(bytes).collect())
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_ref())
    }

    fn text(&self, name: &str) -> Option<String> {
        self.get(name).map(str::to_owned)
    }

    fn flag(&self, name: &'static str) -> Result<Option<bool>, TwilioReply> {
        match self.get(name) {
            None => Ok(None),
            Some(value) if value.eq_ignore_ascii_case("true") => Ok(Some(true)),
            Some(value) if value.eq_ignore_ascii_case("false") => Ok(Some(false)),
            Some(_) => Err(TwilioError::InvalidParameter(name).into()),
        }
    }

    fn number<T: std::str::FromStr>(&self, name: &'static str) -> Result<Option<T>, TwilioReply> {
        self.get(name)
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
                .get("VcodeTexts")
                .map(serde_json::from_str)
                .transpose()
                .map_err(|_| TwilioError::InvalidParameter("VcodeTexts"))?,
        })
    }
}

/// Where this server answers, as the request reached it (`url` and `links` are absolute):
/// what actix's `ConnectionInfo` says. A request from a trusted proxy, or one that carries
/// `Forwarded`, `X-Forwarded-Proto` or `X-Forwarded-Host`, asks it; any other (a direct
/// client's) reads the same fallbacks it would (the URI, the `Host` header, the server's
/// settings) without building it: it formats the peer's address and parses every
/// forwarding header, which cost more than the rest of the URL.
fn base_url(request: &HttpRequest, state: &AppState) -> String {
    let headers = request.headers();
    let forwarded = headers.contains_key(FORWARDED)
        || headers.contains_key(X_FORWARDED_PROTO)
        || headers.contains_key(X_FORWARDED_HOST);
    let from_proxy = request
        .peer_addr()
        .is_some_and(|peer| state.trusted_proxies.trusts(peer.ip()));
    if forwarded || from_proxy {
        let info = request.connection_info();
        return [info.scheme(), "://", info.host(), "/v2"].concat();
    }
    let config = request.app_config();
    let scheme = request
        .uri()
        .scheme_str()
        .or_else(|| config.secure().then_some("https"))
        .unwrap_or("http");
    let host = headers
        .get(HOST)
        .and_then(|value| value.to_str().ok())
        .or_else(|| {
            request
                .uri()
                .authority()
                .map(|authority| authority.as_str())
        })
        .unwrap_or_else(|| config.host());
    [scheme, "://", host, "/v2"].concat()
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

/// The answer of a check, serialised from a struct (a `serde_json::Value` built first cost
/// more than the rest of the route's own work); the shape of the description's
/// `verify.v2.service.verification_check`.
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

/// The answer of a start (and of a fetch or an update): the description's
/// `verify.v2.service.verification`, written by hand: serde's writer escaped every string
/// character by character and cost more than the route's own work. Every string goes through
/// [`push_json_str`], which escapes what needs it.
fn verification_body(
    verification: &Verification,
    request: &HttpRequest,
    state: &AppState,
) -> String {
    let mut out = String::with_capacity(640);
    out.push_str("{\"sid\":");
    push_plain_str(&mut out, &verification.sid);
    out.push_str(",\"service_sid\":");
    push_plain_str(&mut out, &verification.service_sid);
    out.push_str(",\"account_sid\":");
    push_plain_str(&mut out, &verification.account_sid);
    out.push_str(",\"to\":");
    push_json_str(&mut out, &verification.to);
    out.push_str(",\"channel\":");
    push_plain_str(&mut out, verification.channel);
    out.push_str(",\"status\":");
    push_plain_str(&mut out, verification.status.as_str());
    let valid = verification.status == crate::twilio_compat::TwilioStatus::Approved;
    out.push_str(if valid {
        ",\"valid\":true"
    } else {
        ",\"valid\":false"
    });
    out.push_str(",\"lookup\":{},\"amount\":null,\"payee\":null,\"send_code_attempts\":[");
    // A first start's three dates are one second: written once.
    let created = date(verification.created_ms);
    let date_of = |ms: u64| {
        if ms / 1000 == verification.created_ms / 1000 {
            std::borrow::Cow::Borrowed(created.as_str())
        } else {
            std::borrow::Cow::Owned(date(ms))
        }
    };
    for (index, attempt) in verification.send_code_attempts.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str("{\"time\":");
        push_plain_str(&mut out, &date_of(attempt.time_ms));
        out.push_str(",\"channel\":");
        push_plain_str(&mut out, &attempt.channel);
        out.push_str(",\"attempt_sid\":");
        push_plain_str(&mut out, &attempt.attempt_sid);
        out.push('}');
    }
    out.push_str("],\"date_created\":");
    push_plain_str(&mut out, &created);
    out.push_str(",\"date_updated\":");
    push_plain_str(&mut out, &date_of(verification.updated_ms));
    out.push_str(",\"sna\":null,\"url\":");
    let mut url = base_url(request, state);
    for part in [
        "/Services/",
        &verification.service_sid,
        "/Verifications/",
        &verification.sid,
    ] {
        url.push_str(part);
    }
    push_json_str(&mut out, &url);
    out.push('}');
    out
}

/// `text`, known to need no escaping (SIDs and dates vcode writes, a channel, a status), as a
/// JSON string; checked in debug builds. `to` and the `url` (from a request's `Host`) go
/// through [`push_json_str`].
fn push_plain_str(out: &mut String, text: &str) {
    debug_assert!(
        !text
            .bytes()
            .any(|byte| byte < 0x20 || byte == b'"' || byte == b'\\'),
        "{text:?} needs escaping"
    );
    out.push('"');
    out.push_str(text);
    out.push('"');
}

/// A JSON answer from a body written by hand.
fn json_answer(mut response: HttpResponseBuilder, body: String) -> HttpResponse {
    response
        .insert_header((CONTENT_TYPE, HeaderValue::from_static("application/json")))
        .body(body)
}

async fn list_services(request: &HttpRequest, state: &AppState) -> Reply {
    let account = account(request, state)?;
    let services = state.twilio.services(account).await?;
    let base = base_url(request, state);
    let listed = listing(
        request,
        &services,
        &format!("{base}/Services"),
        "services",
        |service| service_json(service, &base),
    )?;
    Ok(HttpResponse::Ok().json(listed))
}

/// One page of `items` as Twilio lists them (`PageSize` 1 to 1000, 50 by default; `Page` from
/// 0): the items under `key` and the page's `meta`. A `Page` past the last (the first page of
/// none aside) is 60200, never an offset that wraps.
fn listing<T>(
    request: &HttpRequest,
    items: &[T],
    url: &str,
    key: &'static str,
    render: impl Fn(&T) -> Value,
) -> Result<Value, TwilioReply> {
    let query = Form::read(request.query_string().as_bytes());
    let page_size: usize = query.number("PageSize")?.unwrap_or(50).clamp(1, 1000);
    let page: usize = query.number("Page")?.unwrap_or(0);
    let skipped = page
        .checked_mul(page_size)
        .filter(|&skipped| page == 0 || skipped < items.len())
        .ok_or(TwilioError::InvalidParameter("Page"))?;
    let page_url = |page: usize| format!("{url}?PageSize={page_size}&Page={page}");
    let shown: Vec<Value> = items
        .iter()
        .skip(skipped)
        .take(page_size)
        .map(render)
        .collect();
    let more = items.len() - skipped.min(items.len()) > page_size;
    Ok(json!({
        key: shown,
        "meta": {
            "page": page,
            "page_size": page_size,
            "first_page_url": page_url(0),
            "previous_page_url": (page > 0).then(|| page_url(page - 1)),
            "next_page_url": more.then(|| page_url(page + 1)),
            "key": key,
            "url": page_url(page),
        },
    }))
}

async fn create_service(request: &HttpRequest, state: &AppState, body: &[u8]) -> Reply {
    let account = account(request, state)?;
    let changes = Form::read(body).service_changes()?;
    let service = state.twilio.create_service(account, changes).await?;
    Ok(HttpResponse::Created().json(service_json(&service, &base_url(request, state))))
}

async fn fetch_service(request: &HttpRequest, state: &AppState, sid: &str) -> Reply {
    let account = account(request, state)?;
    let service = state.twilio.service(account, sid).await?;
    Ok(HttpResponse::Ok().json(service_json(&service, &base_url(request, state))))
}

async fn update_service(request: &HttpRequest, state: &AppState, sid: &str, body: &[u8]) -> Reply {
    let account = account(request, state)?;
    let changes = Form::read(body).service_changes()?;
    let service = state.twilio.update_service(account, sid, changes).await?;
    Ok(HttpResponse::Ok().json(service_json(&service, &base_url(request, state))))
}

async fn delete_service(request: &HttpRequest, state: &AppState, sid: &str) -> Reply {
    let account = account(request, state)?;
    state.twilio.delete_service(account, sid).await?;
    Ok(HttpResponse::NoContent().finish())
}

async fn start_verification(
    request: &HttpRequest,
    state: &AppState,
    sid: &str,
    body: &[u8],
) -> Reply {
    let account = account(request, state)?;
    let form = Form::read(body);
    let command = StartCommand {
        to: form.text("To").ok_or(TwilioError::InvalidParameter("To"))?,
        channel: form
            .text("Channel")
            .ok_or(TwilioError::InvalidParameter("Channel"))?,
        locale: form.text("Locale"),
        custom_friendly_name: form.text("CustomFriendlyName"),
        channel_configuration: form.text("ChannelConfiguration"),
        rate_limits: form.text("RateLimits"),
    };
    let twilio = state.twilio.clone();
    let account = account.to_owned();
    let sid = sid.to_owned();
    // Runs to the end even if the client goes away: a code is never left without its SMS (or
    // mail) or its roll-back, nor a send without its log entry. Boxed, as `/api/v1`'s send: the start's
    // state machine (the send's within it) is kilobytes, copied on every move otherwise.
    let task = Box::pin(async move { twilio.start(&account, &sid, command).await });
    let verification = tokio::spawn(task.instrument(tracing::Span::current()))
        .await
        .map_err(|error| TwilioError::Internal(error.into()))??;
    let body = verification_body(&verification, request, state);
    Ok(json_answer(HttpResponse::Created(), body))
}

async fn fetch_verification(
    request: &HttpRequest,
    state: &AppState,
    sid: &str,
    verification: &str,
) -> Reply {
    let account = account(request, state)?;
    let verification = state
        .twilio
        .verification(account, sid, verification)
        .await?;
    let body = verification_body(&verification, request, state);
    Ok(json_answer(HttpResponse::Ok(), body))
}

async fn update_verification(
    request: &HttpRequest,
    state: &AppState,
    sid: &str,
    verification: &str,
    body: &[u8],
) -> Reply {
    let account = account(request, state)?;
    let form = Form::read(body);
    let status = form
        .get("Status")
        .ok_or(TwilioError::InvalidParameter("Status"))?;
    let verification = state
        .twilio
        .update_verification(account, sid, verification, status)
        .await?;
    let body = verification_body(&verification, request, state);
    Ok(json_answer(HttpResponse::Ok(), body))
}

async fn check_verification(
    request: &HttpRequest,
    state: &AppState,
    sid: &str,
    body: &[u8],
) -> Reply {
    let account = account(request, state)?;
    let form = Form::read(body);
    let code = form
        .get("Code")
        .ok_or(TwilioError::InvalidParameter("Code"))?;
    let target = match (form.text("VerificationSid"), form.text("To")) {
        (Some(verification), _) => CheckTarget::Verification(verification),
        (None, Some(to)) => CheckTarget::To(to),
        (None, None) => return Err(TwilioError::InvalidParameter("To or VerificationSid").into()),
    };
    let check = state.twilio.check(account, sid, code, target).await?;
    let verification = &check.verification;
    Ok(HttpResponse::Ok().json(CheckJson {
        sid: &verification.sid,
        service_sid: &verification.service_sid,
        account_sid: &verification.account_sid,
        to: &verification.to,
        channel: verification.channel,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_are_escaped_only_when_they_need_it() {
        for text in [
            "VE0123",
            "+8613800138000",
            "a\"b",
            "back\\slash",
            "line\nbreak",
            "",
            "é",
        ] {
            let mut out = String::new();
            push_json_str(&mut out, text);
            assert_eq!(out, serde_json::to_string(text).unwrap(), "{text:?}");
        }
    }

    #[test]
    fn twilio_paths_are_routed_by_hand_as_the_patterns_were() {
        let cases = [
            ("/v2/Services", Some("/v2/Services")),
            ("/v2/Services/VA1", Some("/v2/Services/{sid}")),
            (
                "/v2/Services/VA1/Verifications",
                Some("/v2/Services/{sid}/Verifications"),
            ),
            (
                "/v2/Services/VA1/VerificationCheck",
                Some("/v2/Services/{sid}/VerificationCheck"),
            ),
            (
                "/v2/Services/VA1/Verifications/VE1",
                Some("/v2/Services/{sid}/Verifications/{verification}"),
            ),
            ("/v2/Services/", None),
            ("/v2/ServicesX", None),
            ("/v2/Services//Verifications", None),
            ("/v2/Services/VA1/", None),
            ("/v2/Services/VA1/Verifications/", None),
            ("/v2/Services/VA1/Verifications/VE1/x", None),
            ("/v2/Services/VA1/VerificationCheck/x", None),
            ("/api/v1/otp/send", None),
        ];
        for (path, pattern) in cases {
            assert_eq!(route_pattern(path), pattern, "{path}");
        }
        match TwilioRoute::of("/v2/Services/VA%41%2F1/Verifications/VE%22") {
            Some(TwilioRoute::Verification(sid, verification)) => {
                assert_eq!((sid.as_ref(), verification.as_ref()), ("VAA/1", "VE\""));
            }
            _ => panic!("not a verification's path"),
        }
    }
}
