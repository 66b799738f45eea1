//! The OpenAPI description against what the app serves: every (method, path) the app answers
//! is described and every described one is answered, for every route of `vcode_wire::paths`
//! (the routes are found by asking the app, not from a list kept here); the docs and demo
//! pages are served with their vendored files and a CSP, the demo only where enabled.

use std::collections::BTreeSet;

use reqwest::Method;
use serde_json::Value;
use vcode_wire::paths;

use crate::support::{Backend, TestApp, spawn_app_with};

/// Methods probed on every path; PATCH is served by no route, so its 405 (against a 404)
/// tells that a path is routed at all.
const METHODS: [Method; 7] = [
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::DELETE,
    Method::PATCH,
    Method::OPTIONS,
];

/// A concrete URL path for a route pattern.
fn concrete(pattern: &str) -> String {
    pattern
        .replace("{id}", "0123456789abcdef0123456789abcdef")
        .replace("{file}", "x")
}

async fn status(app: &TestApp, method: &Method, path: &str) -> u16 {
    app.client
        .request(method.clone(), app.url(&concrete(path)))
        .send()
        .await
        .expect("the app answers")
        .status()
        .as_u16()
}

/// The (method, path) pairs the app answers, found by asking it about every wire path.
async fn served(app: &TestApp) -> BTreeSet<(String, String)> {
    let mut served = BTreeSet::new();
    let every_path = paths::PUBLIC
        .iter()
        .chain(&paths::DEV)
        .chain(&paths::OPERATOR);
    for path in every_path {
        let routed = status(app, &Method::PATCH, path).await == 405;
        for method in &METHODS {
            let answer = status(app, method, path).await;
            let answered = answer != 405 && (routed || answer != 404);
            if answered {
                served.insert((method.as_str().to_lowercase(), (*path).to_owned()));
            }
        }
    }
    served
}

async fn spec(app: &TestApp) -> Value {
    let response = app
        .client
        .get(app.url(paths::OPENAPI))
        .send()
        .await
        .expect("the app answers");
    assert_eq!(response.status(), 200);
    response.json().await.expect("the description is JSON")
}

fn described(spec: &Value) -> BTreeSet<(String, String)> {
    let mut described = BTreeSet::new();
    for (path, item) in spec["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("a path item").keys() {
            described.insert((method.clone(), path.clone()));
        }
    }
    described
}

async fn the_spec_covers_what_the_app_serves(dev_mode: bool, demo: bool) {
    let app = spawn_app_with(Backend::Memory, |settings| {
        settings.dev_mode = dev_mode;
        settings.demo = demo;
    })
    .await;
    let spec = spec(&app).await;
    assert_eq!(spec["openapi"], "3.1.0");
    let served = served(&app).await;
    let described = described(&spec);
    let undescribed: Vec<_> = served.difference(&described).collect();
    assert!(
        undescribed.is_empty(),
        "served, not in the spec: {undescribed:?}"
    );
    let unserved: Vec<_> = described.difference(&served).collect();
    assert!(unserved.is_empty(), "in the spec, not served: {unserved:?}");
    // Sanity: the probe does find routes, and the operator routes are out of the spec's scope.
    assert!(served.contains(&("post".to_owned(), paths::OTP_SEND.to_owned())));
    assert!(served.contains(&("head".to_owned(), paths::HEALTHZ.to_owned())));
    for path in paths::OPERATOR {
        assert!(
            spec["paths"].get(path).is_none(),
            "{path} is the operator listener's"
        );
    }
    let dev_described = spec["paths"].get(paths::DEV_INBOX).is_some();
    assert_eq!(dev_described, dev_mode);
    let demo_described = spec["paths"].get(paths::DEMO).is_some();
    assert_eq!(demo_described, demo || dev_mode);
}

#[tokio::test]
async fn the_spec_covers_what_the_app_serves_in_dev_mode() {
    the_spec_covers_what_the_app_serves(true, false).await;
}

#[tokio::test]
async fn the_spec_covers_what_the_app_serves_in_production() {
    the_spec_covers_what_the_app_serves(false, false).await;
}

#[tokio::test]
async fn the_spec_covers_what_the_app_serves_with_the_demo() {
    the_spec_covers_what_the_app_serves(false, true).await;
}

#[tokio::test]
async fn every_error_answer_enumerates_codes_of_its_status() {
    let app = spawn_app_with(Backend::Memory, |_| {}).await;
    let spec = spec(&app).await;
    let send = &spec["paths"][paths::OTP_SEND]["post"]["responses"];
    let codes = |status: &str| -> Vec<u64> {
        send[status]["content"]["application/json"]["schema"]["properties"]["code"]["enum"]
            .as_array()
            .unwrap_or_else(|| panic!("no codes for {status}"))
            .iter()
            .map(|code| code.as_u64().unwrap())
            .collect()
    };
    assert_eq!(codes("429"), [42900, 42902]);
    assert!(codes("400").contains(&40001));
    assert!(send["429"]["headers"]["Retry-After"].is_object());
    let parameters = spec["paths"][paths::OTP_SEND]["post"]["parameters"].to_string();
    assert!(parameters.contains("Idempotency-Key"), "{parameters}");
    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            for (status, response) in operation["responses"].as_object().unwrap() {
                let Some(codes) = response
                    .pointer("/content/application~1json/schema/properties/code/enum")
                    .and_then(Value::as_array)
                else {
                    continue;
                };
                for code in codes {
                    let code = code.as_u64().unwrap();
                    assert_eq!((code / 100).to_string(), *status, "{method} {path}");
                }
            }
        }
    }
}

#[tokio::test]
async fn the_docs_page_is_served_from_vendored_files_under_a_csp() {
    let app = spawn_app_with(Backend::Memory, |settings| settings.dev_mode = false).await;
    let page = app.client.get(app.url(paths::DOCS)).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    let html = page.text().await.unwrap();
    assert!(!html.contains("https://"), "no CDN: {html}");
    for (file, content_type) in [
        ("swagger-ui-bundle.js", "text/javascript"),
        ("swagger-ui.css", "text/css"),
        ("docs.js", "text/javascript"),
    ] {
        assert!(
            html.contains(&paths::docs_asset(file)),
            "{file} in the page"
        );
        let asset = app
            .client
            .get(app.url(&paths::docs_asset(file)))
            .send()
            .await
            .unwrap();
        assert_eq!(asset.status(), 200, "{file}");
        let served_type = asset.headers()["content-type"].to_str().unwrap().to_owned();
        assert!(
            served_type.starts_with(content_type),
            "{file}: {served_type}"
        );
    }
    let missing = app.get(&paths::docs_asset("nothing.js")).await;
    assert_eq!((missing.status, missing.code()), (404, 40400));
    // Outside dev and demo modes there is no demo page.
    let demo = app.get(paths::DEMO).await;
    assert_eq!((demo.status, demo.code()), (404, 40400));
}

#[tokio::test]
async fn the_demo_page_tells_the_gate_and_is_served_with_vcode_demo() {
    let app = spawn_app_with(Backend::Memory, |settings| {
        settings.dev_mode = false;
        settings.demo = true;
        settings.captcha.send_requires_captcha = true;
    })
    .await;
    let page = app.client.get(app.url(paths::DEMO)).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.headers().contains_key("content-security-policy"));
    let html = page.text().await.unwrap();
    assert!(html.contains(r#"data-captcha="true""#), "{html}");
    assert!(html.contains(r#"data-dev="false""#), "{html}");
    assert!(!html.contains("<script>"), "no inline script");
    for file in ["demo.js", "demo.css", "altcha.min.js"] {
        let asset = app
            .client
            .get(app.url(&paths::demo_asset(file)))
            .send()
            .await
            .unwrap();
        assert_eq!(asset.status(), 200, "{file}");
    }
}

#[tokio::test]
async fn operations_that_need_an_api_key_say_so() {
    use vcode::api_keys::{ApiKeySettings, Operation};
    let app = spawn_app_with(Backend::Memory, |settings| {
        settings.api_key = ApiKeySettings {
            required: vec![Operation::Send],
        };
        settings.api_keys =
            Some(vcode::api_keys::ApiKeys::parse(&format!("x:{}", "0".repeat(64))).unwrap());
    })
    .await;
    let spec = spec(&app).await;
    let send = &spec["paths"][paths::OTP_SEND]["post"];
    assert_eq!(send["security"], serde_json::json!([{"apiKey": []}]));
    assert!(send["responses"]["401"]["headers"]["WWW-Authenticate"].is_object());
    let verify = &spec["paths"][paths::OTP_VERIFY]["post"];
    assert!(verify.get("security").is_none());
    assert!(verify["responses"].get("401").is_none());
    assert_eq!(
        spec["components"]["securitySchemes"]["apiKey"]["scheme"],
        "bearer"
    );
}

#[tokio::test]
async fn a_send_answer_says_whether_the_provider_confirmed_the_sms() {
    let app = spawn_app_with(Backend::Memory, |_| {}).await;
    let spec = spec(&app).await;
    let schemas = &spec["components"]["schemas"];
    let send = &schemas["SendData"];
    let required = send["required"].to_string();
    assert!(required.contains("\"delivery\""), "{send}");
    assert_eq!(
        send["properties"]["delivery"]["$ref"],
        "#/components/schemas/Delivery"
    );
    assert_eq!(
        schemas["Delivery"]["enum"],
        serde_json::json!(["sent", "unconfirmed", "delivered", "undelivered"])
    );
    let described = spec["paths"][paths::OTP_SEND]["post"]["description"].to_string();
    assert!(described.contains("unconfirmed"), "{described}");
}
