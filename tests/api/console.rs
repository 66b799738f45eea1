//! The operator console: its page and files are open on the operator listener while every data
//! route stays behind the admin token, and the SMS price table is served as configured. Then
//! the whole console in headless Chromium (`tests/browser/console_flow.py`) against the real
//! fraud guard: real traffic through the public API in dev mode, a prefix pumped until the
//! guard's levels refuse it, the token asked for once, the charts and tables showing that
//! traffic and the suspended prefix (its reason and evidence), a number safe-listed and
//! removed again (a bad entry refused, the configured entry read-only), its lift in one click
//! (the prefix served again), and the console without a token configured; a screenshot of each
//! step under `target/console-screenshots/`.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use vcode::fraud::FraudSettings;
use vcode::settings::AbuseSettings;
use vcode::sms::SmsPrices;
use vcode::sms::receipts::ReceiptSettings;
use vcode_wire::{SmsPricesData, paths};

use crate::browser::missing_browser;
use crate::support::sms_gateway::signed_webhook;
use crate::support::{Backend, SmsGateway, TestApp, spawn_app_with};

const TOKEN: &str = "console-admin-token-0123";
const TIME_LIMIT: Duration = Duration::from_secs(120);
/// SMS per client address an hour: the browser flow sends this many, then two more.
const BUDGET: u32 = 12;
/// Unexplained unverified sends a range without history may have (`VCODE_FRAUD_EVIDENCE`):
/// the browser flow's pumped prefix is refused at the next one, and blocked for the first
/// strike's cool-off (15 minutes), which the flow lifts rather than waits for.
const EVIDENCE: u64 = 3;
/// The traffic report judges a send's conversion only past the grace period: longer than the
/// flow (a loaded machine included), whose top prefixes show no conversion yet (`—`).
const GRACE: Duration = Duration::from_secs(300);

fn prices() -> SmsPrices {
    let table = SmsPrices::parse_pairs("CN=0.045,GB=0.040,*=0.050").expect("a price table");
    SmsPrices::new("USD", table).expect("a price table")
}

/// The gateway's signing secret: it signs its delivery receipts with it too.
const RECEIPT_SECRET: &str = "whsec-console-0123456789abcdef0123456789";

/// The console's app; with `gateway`, its SMS go there and that gateway's receipts are taken.
async fn console_app(token: Option<&str>, gateway: Option<&SmsGateway>) -> TestApp {
    spawn_app_with(Backend::Memory, |s| {
        s.admin_token = token.map(Into::into);
        if let Some(gateway) = gateway {
            s.sms = signed_webhook(gateway.url(), RECEIPT_SECRET);
            s.sms.receipts = ReceiptSettings {
                public_url: Some("https://vcode.example".to_owned()),
                token: None,
            };
        }
        s.sms.prices = prices();
        s.abuse = AbuseSettings {
            sends_per_ip_hour: BUDGET,
            allowed_regions: vcode::settings::Regions::parse("CN,GB").expect("regions"),
            ..AbuseSettings::unlimited()
        };
        s.fraud = FraudSettings {
            evidence: EVIDENCE,
            grace: GRACE,
            // The flow's CONFIGURED_SAFE: listed read-only.
            safe_list: vec!["4420".to_owned()],
            ..FraudSettings::default()
        };
    })
    .await
}

async fn get(app: &TestApp, path: &str, token: Option<&str>) -> reqwest::Response {
    let mut request = app.client.get(app.admin_url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.expect("the operator listener answers")
}

#[tokio::test]
async fn the_page_is_open_and_the_data_behind_the_token() {
    let app = console_app(Some(TOKEN), None).await;
    let page = get(&app, paths::CONSOLE, None).await;
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe"),
        "{csp}"
    );
    assert!(page.text().await.unwrap().contains("console.js"));
    for file in [
        "console.js",
        "console.css",
        "uPlot.iife.min.js",
        "uPlot.min.css",
    ] {
        let answer = get(&app, &paths::console_asset(file), None).await;
        assert_eq!(answer.status(), 200, "{file}");
    }
    // Every data route, and any other path under the page's, asks for the token.
    for gated in [
        paths::SMS_PRICES,
        paths::STATS,
        paths::METRICS,
        "/console/",
        "/console/other.js",
        "/console/%2e%2e/metrics",
    ] {
        let answer = get(&app, gated, None).await;
        assert_eq!(answer.status(), 401, "{gated}");
        let wrong = get(&app, gated, Some("console-admin-token-0124")).await;
        assert_eq!(wrong.status(), 401, "{gated}");
    }
    let prices = get(&app, paths::SMS_PRICES, Some(TOKEN)).await;
    assert_eq!(prices.status(), 200);
    let body: serde_json::Value = prices.json().await.unwrap();
    assert_eq!(
        body,
        json!({"code": 200, "message": "ok",
               "data": {"currency": "USD", "prices": {"*": 0.05, "CN": 0.045, "GB": 0.04}}})
    );
    let data: SmsPricesData = serde_json::from_value(body["data"].clone()).unwrap();
    assert_eq!(data.prices["CN"], 0.045);
    // The page is the operator listener's only: the public one knows no console.
    let public = app
        .client
        .get(app.url(paths::CONSOLE))
        .send()
        .await
        .unwrap();
    assert_eq!(public.status(), 404);
}

#[tokio::test]
async fn without_a_token_configured_the_prices_are_open_on_loopback() {
    let app = console_app(None, None).await;
    let prices = get(&app, paths::SMS_PRICES, None).await;
    assert_eq!(prices.status(), 200);
    let body: serde_json::Value = prices.json().await.unwrap();
    assert_eq!(body["data"]["currency"], "USD");
    let unpriced = spawn_app_with(Backend::Memory, |_| {}).await;
    let body: serde_json::Value = get(&unpriced, paths::SMS_PRICES, None)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["data"], json!({"currency": "USD", "prices": {}}));
}

#[tokio::test]
async fn another_sites_page_cannot_use_the_operator_routes_even_without_a_token() {
    let app = console_app(None, None).await;
    let host = app.admin_address.trim_start_matches("http://").to_owned();
    let ask = |headers: &[(&str, String)]| {
        let mut request = app.client.get(app.admin_url(paths::SMS_PRICES));
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        request.send()
    };
    let status = |headers: Vec<(&str, String)>| {
        let answer = ask(&headers);
        async move {
            answer
                .await
                .expect("the listener answers")
                .status()
                .as_u16()
        }
    };
    // Tools and the console itself.
    assert_eq!(status(vec![]).await, 200);
    assert_eq!(
        status(vec![("sec-fetch-site", "same-origin".into())]).await,
        200
    );
    assert_eq!(status(vec![("sec-fetch-site", "none".into())]).await, 200);
    assert_eq!(
        status(vec![("origin", format!("http://{host}"))]).await,
        200
    );
    // A page of another site, or of this host's other port (the public listener).
    assert_eq!(
        status(vec![("sec-fetch-site", "cross-site".into())]).await,
        401
    );
    assert_eq!(
        status(vec![("sec-fetch-site", "same-site".into())]).await,
        401
    );
    assert_eq!(
        status(vec![("origin", "https://evil.example".into())]).await,
        401
    );
    assert_eq!(status(vec![("origin", "null".into())]).await, 401);
    assert_eq!(status(vec![("origin", app.address.clone())]).await, 401);
    // The page itself stays open: it holds nothing, and links to it may come from anywhere.
    let page = app
        .client
        .get(app.admin_url(paths::CONSOLE))
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
}

/// DNS rebinding: a page of `evil.example`, whose name now points at 127.0.0.1, is same-origin
/// to the browser; only the `Host` it sends tells it apart, and that is refused without a token.
#[tokio::test]
async fn without_a_token_only_a_loopback_host_name_reaches_the_operator_routes() {
    let app = console_app(None, None).await;
    let port = app
        .admin_address
        .rsplit(':')
        .next()
        .expect("a port")
        .to_owned();
    let status = |host: String| {
        let answer = app
            .client
            .get(app.admin_url(paths::SMS_PRICES))
            .header("host", host)
            .header("sec-fetch-site", "same-origin")
            .send();
        async move {
            answer
                .await
                .expect("the listener answers")
                .status()
                .as_u16()
        }
    };
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("LOCALHOST.:{port}"),
        format!("console.localhost:{port}"),
        format!("[::1]:{port}"),
        "127.0.0.2".to_owned(),
    ] {
        assert_eq!(status(host.clone()).await, 200, "{host}");
    }
    for host in [
        format!("evil.example:{port}"),
        "evil.example".to_owned(),
        format!("localhost.evil.example:{port}"),
        format!("10.0.0.1:{port}"),
        format!("[::2]:{port}"),
    ] {
        assert_eq!(status(host.clone()).await, 401, "{host}");
    }
    // With a token, the token is what counts (a rebinding page cannot know it).
    let guarded = console_app(Some("a-long-operator-token-for-tests"), None).await;
    let answer = guarded
        .client
        .get(guarded.admin_url(paths::SMS_PRICES))
        .header("host", "ops.example.com")
        .bearer_auth("a-long-operator-token-for-tests")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_console_shows_real_traffic_in_chromium() {
    if let Some(why) = missing_browser() {
        assert!(
            std::env::var_os("TEST_REQUIRE_SDK").is_none(),
            "TEST_REQUIRE_SDK is set but the browser cannot run: {why}"
        );
        eprintln!(
            "\n*** SKIPPED the console in a browser: {why} (scripts/provision installs it)\n"
        );
        return;
    }
    let gateway = SmsGateway::start();
    let app = console_app(Some(TOKEN), Some(&gateway)).await;
    let open = console_app(None, None).await;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let started = Instant::now();
    let run = tokio::process::Command::new("python3")
        .arg(root.join("tests/browser/console_flow.py"))
        .args(["--url", &app.address])
        .args(["--admin-url", &app.admin_address])
        .args(["--token", TOKEN])
        .args(["--open-admin-url", &open.admin_address])
        .args(["--budget", &BUDGET.to_string()])
        .args(["--evidence", &EVIDENCE.to_string()])
        .args(["--gateway-url", gateway.url()])
        .args(["--receipt-secret", RECEIPT_SECRET])
        .arg("--screenshots")
        .arg(root.join("target/console-screenshots"))
        .env("SE_OFFLINE", "true")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(TIME_LIMIT, run)
        .await
        .expect("the browser finishes in time")
        .expect("python3 runs");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!(
        "console in Chromium: {:.1} s\n{report}",
        started.elapsed().as_secs_f64()
    );
    assert!(output.status.success(), "a step failed:\n{report}");
    assert!(report.contains("console flow passed"), "{report}");
}
