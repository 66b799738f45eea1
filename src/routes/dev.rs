//! Dev-mode routes (`VCODE_DEV_MODE=1`, loopback only): they let tests and load tests act as a
//! user who reads the SMS or the picture. Outside dev mode they are not registered at all.

use actix_web::{HttpResponse, guard, web};
use vcode_wire::{CaptchaAnswer, DevInboxData, DevInboxQuery, DevMessage, paths};

use super::ApiError;
use super::AppState;
use super::envelope;
use super::openapi::Api;

/// Headers that only a proxy, load balancer or CDN adds: one of them shows that a request came
/// through one. A same-host reverse proxy is a loopback peer, so these headers are all that
/// tells its requests from a direct one; proxies differ in which they add (nginx `X-Real-IP`,
/// Envoy `X-Envoy-External-Address`, Cloudflare `CF-Connecting-IP`, Akamai `True-Client-IP`,
/// Azure Front Door `X-Azure-ClientIP`, …), hence the standard ones (RFC 7239, RFC 9110's
/// `Via`, RFC 8586's `CDN-Loop`), the whole `X-Forwarded-*` family and each vendor's own.
const PROXY_HEADERS: &[&str] = &[
    // Standard.
    "cdn-loop",
    "forwarded",
    "via",
    // The de-facto family.
    "forwarded-for",
    "x-forwarded",
    "x-forwarded-by",
    "x-forwarded-client-cert",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-path",
    "x-forwarded-port",
    "x-forwarded-prefix",
    "x-forwarded-proto",
    "x-forwarded-scheme",
    "x-forwarded-server",
    "x-forwarded-ssl",
    "x-forwarded-uri",
    "x-original-forwarded-for",
    "x-original-host",
    "x-original-uri",
    "x-original-url",
    // A client address, as one proxy or another names it.
    "akamai-origin-hop",
    "cf-connecting-ip",
    "cf-connecting-ipv6",
    "client-ip",
    "cloudfront-viewer-address",
    "fastly-client-ip",
    "fastly-ff",
    "true-client-ip",
    "x-appengine-user-ip",
    "x-azure-clientip",
    "x-azure-socketip",
    "x-bluecoat-via",
    "x-client-ip",
    "x-cluster-client-ip",
    "x-envoy-external-address",
    "x-originating-ip",
    "x-proxyuser-ip",
    "x-real-ip",
    "x-remote-addr",
    "x-remote-ip",
];

/// Whether the request comes straight from this host: a loopback peer carrying none of the
/// [`PROXY_HEADERS`].
pub fn is_direct_local(head: &actix_web::dev::RequestHead) -> bool {
    let loopback = head.peer_addr.is_some_and(|peer| peer.ip().is_loopback());
    let proxied = PROXY_HEADERS
        .iter()
        .any(|name| head.headers().contains_key(*name));
    loopback && !proxied
}

pub fn config(cfg: &mut web::ServiceConfig) {
    let direct_local = || guard::fn_guard(|ctx| is_direct_local(ctx.head()));
    cfg.service(
        super::get_resource(paths::DEV_INBOX)
            .guard(direct_local())
            .route(super::get().to(dev_inbox)),
    )
    .service(
        super::get_resource(paths::DEV_CAPTCHA_ANSWER)
            .guard(direct_local())
            .route(super::get().to(captcha_answer)),
    );
}

/// What `config` serves, for the OpenAPI description (dev mode only).
pub fn describe(api: &mut Api) {
    use vcode_wire::ErrorCode::*;
    let inbox = api.schema::<DevInboxData>();
    api.get(
        paths::DEV_INBOX,
        "dev",
        "The codes sent to a phone or an email address (dev mode, loopback only)",
    )
    .parameter(
        "query",
        "phone",
        false,
        serde_json::json!({"type": "string", "examples": ["+8613800138000"]}),
        "E.164, or national in the default region; not with `email`",
    )
    .parameter(
        "query",
        "email",
        false,
        serde_json::json!({"type": "string", "examples": ["user@example.com"]}),
        "An email address; not with `phone`",
    )
    .ok_envelope(inbox)
    .errors(&[
        Malformed,
        InvalidPhone,
        InvalidEmail,
        Internal,
        StoreUnavailable,
    ]);
    let answer = api.schema::<CaptchaAnswer>();
    api.get(
        paths::DEV_CAPTCHA_ANSWER,
        "dev",
        "A captcha's answer (dev mode, loopback only)",
    )
    .describe("The captcha stays unused.")
    .parameter(
        "path",
        "id",
        true,
        serde_json::json!({"type": "string"}),
        "`captcha_id` of the creation",
    )
    .ok_envelope(answer)
    .errors(&[NotFound, Internal, StoreUnavailable]);
}

async fn dev_inbox(
    state: web::Data<AppState>,
    query: web::Query<DevInboxQuery>,
) -> Result<HttpResponse, ApiError> {
    let messages = state
        .otp
        .dev_messages(query.phone.as_deref(), query.email.as_deref())
        .await?;
    let messages = messages
        .into_iter()
        .map(|message| DevMessage {
            code: message.code,
            phone: message.phone,
            purpose: message.purpose,
            sent_at_ms: message.sent_at_ms,
        })
        .collect();
    Ok(envelope::ok(DevInboxData { messages }))
}

async fn captcha_answer(
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let answer = state.captcha.peek_answer(&id).await?;
    Ok(envelope::ok(CaptchaAnswer { answer }))
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    fn direct_local(peer: &str, header: Option<&str>) -> bool {
        let mut request = TestRequest::default().peer_addr(peer.parse().unwrap());
        if let Some(name) = header {
            request = request.insert_header((name, "198.51.100.1"));
        }
        is_direct_local(request.to_srv_request().head())
    }

    #[test]
    fn only_a_loopback_peer_without_proxy_headers_is_direct() {
        assert!(direct_local("127.0.0.1:5000", None));
        assert!(direct_local("[::1]:5000", None));
        assert!(direct_local("127.0.0.1:5000", Some("x-request-id")));
        assert!(!direct_local("192.0.2.7:5000", None));
    }

    #[test]
    fn any_proxy_header_makes_a_request_proxied() {
        for header in [
            "Via",
            "Forwarded",
            "X-Forwarded-For",
            "X-Forwarded-Host",
            "X-Forwarded-Proto",
            "X-Original-Forwarded-For",
            "X-Real-IP",
            "CF-Connecting-IP",
            "True-Client-IP",
            "X-Client-IP",
            "X-Cluster-Client-IP",
            "Fastly-Client-IP",
            "X-Envoy-External-Address",
            "X-Azure-ClientIP",
            "CDN-Loop",
        ] {
            assert!(!direct_local("127.0.0.1:5000", Some(header)), "{header}");
        }
    }

    #[test]
    fn proxy_headers_are_header_names_listed_once() {
        use actix_web::http::header::HeaderName;
        // A name that is not one would never be found, silently.
        for name in PROXY_HEADERS {
            assert!(
                HeaderName::from_lowercase(name.as_bytes()).is_ok(),
                "{name}"
            );
        }
        let mut names = PROXY_HEADERS.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), PROXY_HEADERS.len());
    }
}
