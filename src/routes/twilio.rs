//! The Twilio Verify v2-compatible paths (`/v2/Services…`): HTTP Basic as Twilio's, form
//! bodies in, Twilio's JSON out (the shapes of Twilio's OpenAPI description, vendored in
//! tests/twilio/spec), Twilio's error body. HTTP only: every decision is `TwilioCompat`'s.
//! This file routes a path to its handler and gives every handler the same start ([`Call`]):
//! the account authenticated, the form read, the service found; the handlers are by resource
//! (`services`, `verifications`, `rate_limits`, and `safe_list`, the account's
//! `/v2/SafeList/Numbers`), the form and Twilio's error body beside them.

use std::borrow::Cow;

use actix_web::http::header::{
    AUTHORIZATION, FORWARDED, HOST, X_FORWARDED_HOST, X_FORWARDED_PROTO,
};
use actix_web::http::{Method, StatusCode};
use actix_web::{FromRequest, HttpRequest, HttpResponse, HttpResponseBuilder, web};
use serde_json::{Value, json};

use self::form::Form;
use self::reply::{Reply, TwilioReply};
use super::AppState;
use crate::sms::signing::utc_timestamp;
use crate::twilio_compat::{Service, TwilioCompat, TwilioError};

/// Where the Twilio-compatible paths live; everything under them is [`dispatch`]'s.
const SERVICES: &str = "/v2/Services";
const SAFE_LIST: &str = "/v2/SafeList/Numbers";

pub fn config(cfg: &mut web::ServiceConfig) {
    // One static prefix, split by hand: as five `{sid}` resources, every request paid the
    // router's regex captures (two for a start), and the request span's pattern lookup as many
    // again, more than the route's own work.
    cfg.service(web::scope(SERVICES).default_service(web::to(dispatch)))
        .service(web::scope(SAFE_LIST).default_service(web::to(dispatch)));
}

mod entities;
mod form;
mod rate_limits;
mod reply;
mod safe_list;
mod services;
mod verifications;

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
    SafeListNumbers,
    SafeListNumber(Cow<'a, str>),
    Entities(Cow<'a, str>),
    Entity(Cow<'a, str>, Cow<'a, str>),
    Factors(Cow<'a, str>, Cow<'a, str>),
    Factor(Cow<'a, str>, Cow<'a, str>, Cow<'a, str>),
    Challenges(Cow<'a, str>, Cow<'a, str>),
    Challenge(Cow<'a, str>, Cow<'a, str>, Cow<'a, str>),
}

impl<'a> TwilioRoute<'a> {
    /// The route of `path` (as routed: percent-encoded `/` kept), if any. A `{sid}` is one
    /// non-empty segment, and no trailing `/` is allowed, as the resources' patterns were.
    fn of(path: &'a str) -> Option<Self> {
        if let Some(tail) = path.strip_prefix(SAFE_LIST) {
            return match tail.strip_prefix('/') {
                None if tail.is_empty() => Some(Self::SafeListNumbers),
                Some(number) if !number.is_empty() && !number.contains('/') => {
                    Some(Self::SafeListNumber(decoded(number)))
                }
                _ => None,
            };
        }
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
            ["Entities"] => Self::Entities(decoded(sid)),
            ["Entities", identity] => Self::Entity(decoded(sid), decoded(identity)),
            ["Entities", identity, "Factors"] => Self::Factors(decoded(sid), decoded(identity)),
            ["Entities", identity, "Factors", factor] => {
                Self::Factor(decoded(sid), decoded(identity), decoded(factor))
            }
            ["Entities", identity, "Challenges"] => {
                Self::Challenges(decoded(sid), decoded(identity))
            }
            ["Entities", identity, "Challenges", challenge] => {
                Self::Challenge(decoded(sid), decoded(identity), decoded(challenge))
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
            Self::SafeListNumbers => "/v2/SafeList/Numbers",
            Self::SafeListNumber(_) => "/v2/SafeList/Numbers/{phone_number}",
            Self::Entities(_) => "/v2/Services/{sid}/Entities",
            Self::Entity(..) => "/v2/Services/{sid}/Entities/{identity}",
            Self::Factors(..) => "/v2/Services/{sid}/Entities/{identity}/Factors",
            Self::Factor(..) => "/v2/Services/{sid}/Entities/{identity}/Factors/{factor}",
            Self::Challenges(..) => "/v2/Services/{sid}/Entities/{identity}/Challenges",
            Self::Challenge(..) => "/v2/Services/{sid}/Entities/{identity}/Challenges/{challenge}",
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
            Self::SafeListNumbers => "POST",
            Self::SafeListNumber(_) => "GET, DELETE",
            Self::Entities(_) | Self::Factors(..) | Self::Challenges(..) => "GET, POST",
            Self::Entity(..) => "GET, DELETE",
            Self::Factor(..) => "GET, POST, DELETE",
            Self::Challenge(..) => "GET",
        }
    }

    /// Whether the route answers `method` (as [`Self::allow`] says).
    fn allows(&self, method: &Method) -> bool {
        self.allow()
            .split(", ")
            .any(|allowed| allowed == method.as_str())
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

/// Every path under `/v2/Services` and `/v2/SafeList/Numbers`: the route, then its method (405 with `Allow` otherwise),
/// then the body of a POST (its limit and errors those of the `Bytes` extractor), then the
/// credentials ([`Call::new`]); then the route's handler.
async fn dispatch(
    request: HttpRequest,
    state: web::Data<AppState>,
    payload: web::Payload,
) -> Result<HttpResponse, actix_web::Error> {
    let Some(route) = TwilioRoute::of(request.match_info().as_str()) else {
        return Err(super::ApiError::NotFound.into());
    };
    let method = request.method().clone();
    if !route.allows(&method) {
        return Ok(super::method_not_allowed(route.allow()));
    }
    let body = if method == Method::POST {
        web::Bytes::from_request(&request, &mut payload.into_inner()).await?
    } else {
        web::Bytes::new()
    };
    let call = &Call::new(&request, &state, &body)?;
    let reply = match (&route, method) {
        (TwilioRoute::Check(sid), Method::POST) => verifications::check(call, sid).await,
        (TwilioRoute::Verifications(sid), Method::POST) => verifications::start(call, sid).await,
        (TwilioRoute::Services, Method::GET) => services::list(call).await,
        (TwilioRoute::Services, Method::POST) => services::create(call).await,
        (TwilioRoute::Service(sid), Method::GET) => services::fetch(call, sid).await,
        (TwilioRoute::Service(sid), Method::POST) => services::update(call, sid).await,
        (TwilioRoute::Service(sid), Method::DELETE) => services::delete(call, sid).await,
        (TwilioRoute::Verification(sid, verification), Method::GET) => {
            verifications::fetch(call, sid, verification).await
        }
        (TwilioRoute::Verification(sid, verification), Method::POST) => {
            verifications::update(call, sid, verification).await
        }
        (TwilioRoute::RateLimits(sid), Method::GET) => {
            rate_limits::list_rate_limits(call, sid).await
        }
        (TwilioRoute::RateLimits(sid), Method::POST) => {
            rate_limits::create_rate_limit(call, sid).await
        }
        (TwilioRoute::RateLimit(sid, limit), Method::GET) => {
            rate_limits::fetch_rate_limit(call, sid, limit).await
        }
        (TwilioRoute::RateLimit(sid, limit), Method::POST) => {
            rate_limits::update_rate_limit(call, sid, limit).await
        }
        (TwilioRoute::RateLimit(sid, limit), Method::DELETE) => {
            rate_limits::delete_rate_limit(call, sid, limit).await
        }
        (TwilioRoute::Buckets(sid, limit), Method::GET) => {
            rate_limits::list_buckets(call, sid, limit).await
        }
        (TwilioRoute::Buckets(sid, limit), Method::POST) => {
            rate_limits::create_bucket(call, sid, limit).await
        }
        (TwilioRoute::Bucket(sid, limit, bucket), Method::GET) => {
            rate_limits::fetch_bucket(call, (sid, limit, bucket)).await
        }
        (TwilioRoute::Bucket(sid, limit, bucket), Method::POST) => {
            rate_limits::update_bucket(call, (sid, limit, bucket)).await
        }
        (TwilioRoute::Bucket(sid, limit, bucket), Method::DELETE) => {
            rate_limits::delete_bucket(call, (sid, limit, bucket)).await
        }
        (TwilioRoute::SafeListNumbers, Method::POST) => safe_list::create(call).await,
        (TwilioRoute::SafeListNumber(number), Method::GET) => safe_list::fetch(call, number).await,
        (TwilioRoute::SafeListNumber(number), Method::DELETE) => {
            safe_list::delete(call, number).await
        }
        (TwilioRoute::Entities(sid), Method::POST) => entities::create_entity(call, sid).await,
        (TwilioRoute::Entities(sid), Method::GET) => entities::list_entities(call, sid).await,
        (TwilioRoute::Entity(sid, identity), Method::GET) => {
            entities::fetch_entity(call, sid, identity).await
        }
        (TwilioRoute::Entity(sid, identity), Method::DELETE) => {
            entities::delete_entity(call, sid, identity).await
        }
        (TwilioRoute::Factors(sid, identity), Method::POST) => {
            entities::create_factor(call, sid, identity).await
        }
        (TwilioRoute::Factors(sid, identity), Method::GET) => {
            entities::list_factors(call, sid, identity).await
        }
        (TwilioRoute::Factor(sid, identity, factor), Method::GET) => {
            entities::fetch_factor(call, (sid, identity, factor)).await
        }
        (TwilioRoute::Factor(sid, identity, factor), Method::POST) => {
            entities::update_factor(call, (sid, identity, factor)).await
        }
        (TwilioRoute::Factor(sid, identity, factor), Method::DELETE) => {
            entities::delete_factor(call, (sid, identity, factor)).await
        }
        (TwilioRoute::Challenges(sid, identity), Method::POST) => {
            entities::create_challenge(call, sid, identity).await
        }
        (TwilioRoute::Challenges(sid, identity), Method::GET) => {
            entities::list_challenges(call, sid, identity).await
        }
        (TwilioRoute::Challenge(sid, identity, challenge), Method::GET) => {
            entities::fetch_challenge(call, (sid, identity, challenge)).await
        }
        // Refused above, by `allows`.
        _ => return Ok(super::method_not_allowed(route.allow())),
    };
    reply.map_err(Into::into)
}

/// One request to a Twilio-compatible path as every handler starts it: the account its
/// credentials act for (checked first, before any field is read), and its form body (empty
/// but for a POST).
struct Call<'a> {
    request: &'a HttpRequest,
    state: &'a AppState,
    account: &'a str,
    form: Form<'a>,
}

impl<'a> Call<'a> {
    fn new(
        request: &'a HttpRequest,
        state: &'a AppState,
        body: &'a [u8],
    ) -> Result<Self, TwilioReply> {
        Ok(Self {
            request,
            state,
            account: account(request, state)?,
            form: Form::read(body),
        })
    }

    /// The use cases of the Twilio-compatible API.
    fn twilio(&self) -> &'a TwilioCompat {
        &self.state.twilio
    }

    /// Where this server answers, as the request reached it: see [`base_url`].
    fn base_url(&self) -> String {
        base_url(self.request, self.state)
    }

    /// The answer of a path under service `sid`, once its use case is done: the service as it
    /// now stands rendered by `render` (with [`Self::base_url`]), under `status`.
    async fn in_service(
        &self,
        sid: &str,
        status: StatusCode,
        render: impl FnOnce(&Service, &str) -> Result<Value, TwilioReply>,
    ) -> Reply {
        let service = self.twilio().service(self.account, sid).await?;
        let body = render(&service, &self.base_url())?;
        Ok(HttpResponseBuilder::new(status).json(body))
    }

    /// One page of `items` at `url`, as the request's query asks: see [`listing`].
    fn listing<T>(
        &self,
        items: &[T],
        url: &str,
        key: &'static str,
        render: impl Fn(&T) -> Value,
    ) -> Result<Value, TwilioReply> {
        listing(self.request, items, url, key, render)
    }
}

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

/// The client as the public API groups it (trusted proxies, IPv6 networks); a malformed
/// `X-Forwarded-For` is Twilio's invalid parameter.
fn client_ip(request: &HttpRequest, state: &AppState) -> Result<std::net::IpAddr, TwilioReply> {
    super::client_ip(request, state)
        .map_err(|_| TwilioError::InvalidParameter("X-Forwarded-For").into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::twilio_compat::push_json_str;

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
            ("/v2/SafeList/Numbers", Some("/v2/SafeList/Numbers")),
            (
                "/v2/SafeList/Numbers/+447400123456",
                Some("/v2/SafeList/Numbers/{phone_number}"),
            ),
            ("/v2/SafeList/Numbers/", None),
            ("/v2/SafeList/NumbersX", None),
            ("/v2/SafeList/Numbers/+1/x", None),
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
