//! The pages for people: the API description (`/api/v1/openapi.json`), its docs page (`/docs`,
//! Swagger UI) and the demo page (`/demo`, demo or dev mode). Their files are vendored under
//! `assets/` and embedded in the binary: nothing is fetched from elsewhere at run time, and the
//! pages' CSP allows scripts from this origin only.

use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use actix_web::{HttpResponse, web};
use serde_json::json;
use vcode_wire::{ErrorCode, paths};

use super::ApiError;
use super::openapi::Api;

/// One embedded file: its name in the URL, its content type, its bytes.
pub(super) type Asset = (&'static str, &'static str, &'static [u8]);

pub(super) const JS: &str = "text/javascript; charset=utf-8";
pub(super) const CSS: &str = "text/css; charset=utf-8";
const HTML: &str = "text/html; charset=utf-8";

const DOCS_PAGE: &str = include_str!("../../assets/docs/index.html");
const DOCS_ASSETS: [Asset; 3] = [
    (
        "swagger-ui-bundle.js",
        JS,
        include_bytes!("../../assets/docs/swagger-ui-bundle.js"),
    ),
    (
        "swagger-ui.css",
        CSS,
        include_bytes!("../../assets/docs/swagger-ui.css"),
    ),
    ("docs.js", JS, include_bytes!("../../assets/docs/docs.js")),
];

const DEMO_PAGE: &str = include_str!("../../assets/demo/index.html");
const DEMO_ASSETS: [Asset; 3] = [
    ("demo.js", JS, include_bytes!("../../assets/demo/demo.js")),
    (
        "demo.css",
        CSS,
        include_bytes!("../../assets/demo/demo.css"),
    ),
    (
        "altcha.min.js",
        JS,
        include_bytes!("../../assets/demo/altcha.min.js"),
    ),
];

/// Scripts and styles from this origin only; Swagger UI and the ALTCHA widget set inline
/// styles, the widget runs its workers from `blob:`/`data:` URLs.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
     img-src 'self' data:; connect-src 'self'; worker-src 'self' blob: data:; font-src 'self' data:; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// What the demo page needs to know of the service's configuration.
#[derive(Clone, Copy, Debug)]
pub struct DemoSettings {
    pub captcha_gate: bool,
    pub pow_gate: bool,
    pub dev_mode: bool,
}

pub fn config(cfg: &mut web::ServiceConfig, openapi: web::Bytes, demo: Option<DemoSettings>) {
    cfg.service(
        super::get_resource(paths::OPENAPI).route(super::get().to(move || {
            let openapi = openapi.clone();
            async move {
                HttpResponse::Ok()
                    .insert_header((CONTENT_TYPE, "application/json"))
                    .insert_header((CACHE_CONTROL, "no-cache"))
                    .body(openapi)
            }
        })),
    )
    .service(
        super::get_resource(paths::DOCS)
            .route(super::get().to(|| async { page(DOCS_PAGE.to_owned()) })),
    )
    .service(super::get_resource(paths::DOCS_ASSET).route(
        super::get().to(|file: web::Path<String>| async move { asset(&DOCS_ASSETS, &file) }),
    ));
    if let Some(demo) = demo {
        let html = DEMO_PAGE
            .replace("{{captcha}}", &demo.captcha_gate.to_string())
            .replace("{{pow}}", &demo.pow_gate.to_string())
            .replace("{{dev}}", &demo.dev_mode.to_string());
        cfg.service(
            super::get_resource(paths::DEMO).route(super::get().to(move || {
                let html = html.clone();
                async move { page(html) }
            })),
        )
        .service(super::get_resource(paths::DEMO_ASSET).route(
            super::get().to(|file: web::Path<String>| async move { asset(&DEMO_ASSETS, &file) }),
        ));
    }
}

/// What `config` serves, for the OpenAPI description.
pub fn describe(api: &mut Api, demo: bool) {
    api.get(paths::OPENAPI, "meta", "This description (OpenAPI 3.1)")
        .ok_content(
            "application/json",
            json!({"type": "object"}),
            "the description",
        );
    api.get(
        paths::DOCS,
        "meta",
        "The API documentation page (Swagger UI)",
    )
    .ok_content(HTML, json!({"type": "string"}), "the page");
    describe_assets(
        api,
        paths::DOCS_ASSET,
        "The docs page's scripts and styles",
        &DOCS_ASSETS,
    );
    if demo {
        api.get(
            paths::DEMO,
            "meta",
            "The demo page (VCODE_DEMO or dev mode)",
        )
        .ok_content(HTML, json!({"type": "string"}), "the page");
        describe_assets(
            api,
            paths::DEMO_ASSET,
            "The demo page's scripts and styles",
            &DEMO_ASSETS,
        );
    }
}

fn describe_assets(api: &mut Api, path: &'static str, summary: &'static str, assets: &[Asset]) {
    let names: Vec<&str> = assets.iter().map(|(name, _, _)| *name).collect();
    let mut content = serde_json::Map::new();
    for (_, content_type, _) in assets {
        content.insert(
            (*content_type).to_owned(),
            json!({"schema": {"type": "string"}}),
        );
    }
    let operation = api
        .get(path, "meta", summary)
        .parameter(
            "path",
            "file",
            true,
            json!({"type": "string", "enum": names}),
            "the file",
        )
        .errors(&[ErrorCode::NotFound]);
    operation.ok_response(json!({"description": "the file", "content": content}));
}

fn page(html: String) -> HttpResponse {
    page_with_csp(html, CSP)
}

/// A page under its own content security policy, never framed, sending no referrer.
pub(super) fn page_with_csp(html: String, csp: &'static str) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, HTML))
        .insert_header(("content-security-policy", csp))
        .insert_header(("referrer-policy", "no-referrer"))
        .insert_header(("x-frame-options", "DENY"))
        .body(html)
}

pub(super) fn asset(assets: &[Asset], name: &str) -> Result<HttpResponse, ApiError> {
    let (_, content_type, bytes) = assets
        .iter()
        .find(|(known, _, _)| *known == name)
        .ok_or(ApiError::NotFound)?;
    Ok(HttpResponse::Ok()
        .insert_header((CONTENT_TYPE, *content_type))
        // The files change only with the binary.
        .insert_header((CACHE_CONTROL, "public, max-age=3600"))
        .body(*bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_tells_every_error_code_as_a_sentence() {
        let script = std::str::from_utf8(DEMO_ASSETS[0].2).expect("demo.js is UTF-8");
        for code in ErrorCode::ALL {
            assert!(
                script.contains(&format!("  {code}: '")),
                "demo.js lacks {code} ({code:?})"
            );
        }
    }

    #[test]
    fn the_demo_page_has_no_inline_script() {
        assert!(!DEMO_PAGE.contains("<script>"));
        assert!(!DOCS_PAGE.contains("<script>"));
        // No inline event handler (` onclick=` and the like).
        let handlers = DEMO_PAGE.split(" on").skip(1).filter(|rest| {
            let name_end = rest
                .find(|c: char| !c.is_ascii_lowercase())
                .unwrap_or(rest.len());
            name_end > 0 && rest[name_end..].starts_with('=')
        });
        assert_eq!(handlers.count(), 0, "an inline event handler");
    }
}
