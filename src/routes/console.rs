//! The operator console on the operator listener: the page (`/console`), its files (the vendored
//! uPlot, its own script and styles) and its one data route of its own, the SMS price table
//! (`/api/v1/admin/sms-prices`). The charts' data are the stats route and the fraud guard's
//! routes.
//!
//! A browser cannot put a bearer token on a page load, so the page and its files are static,
//! hold nothing of the service's and are served without the admin token
//! ([`is_open_file`], which `require_admin_token` lets through); every route the page fetches
//! data from stays behind the token. The page asks for the token once per browser tab (kept in
//! `sessionStorage`, sent as `Authorization: Bearer`), never in a URL, so it is in no log or
//! history; without a token configured (loopback only) it asks for none.

use actix_web::{HttpResponse, web};
use vcode_wire::{SmsPricesData, paths};

use super::AppState;
use super::envelope;
use super::pages::{Asset, CSS, JS, asset, page_with_csp};

const CONSOLE_PAGE: &str = include_str!("../../assets/console/index.html");
const CONSOLE_ASSETS: [Asset; 4] = [
    (
        "console.js",
        JS,
        include_bytes!("../../assets/console/console.js"),
    ),
    (
        "console.css",
        CSS,
        include_bytes!("../../assets/console/console.css"),
    ),
    (
        "uPlot.iife.min.js",
        JS,
        include_bytes!("../../assets/console/uPlot.iife.min.js"),
    ),
    (
        "uPlot.min.css",
        CSS,
        include_bytes!("../../assets/console/uPlot.min.css"),
    ),
];

/// Scripts and styles from this origin only, no inline ones (uPlot styles its elements through
/// the DOM, which the policy allows); data fetched from this origin only.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(
        super::get_resource(paths::CONSOLE)
            .route(super::get().to(|| async { page_with_csp(CONSOLE_PAGE.to_owned(), CSP) })),
    )
    .service(super::get_resource(paths::CONSOLE_ASSET).route(
        super::get().to(|file: web::Path<String>| async move { asset(&CONSOLE_ASSETS, &file) }),
    ))
    .service(super::get_resource(paths::SMS_PRICES).route(super::get().to(sms_prices)));
}

/// Whether `path` is the console page or one of its files: static, served without the token.
pub fn is_open_file(path: &str) -> bool {
    path == paths::CONSOLE
        || CONSOLE_ASSETS
            .iter()
            .any(|(name, _, _)| path == paths::console_asset(name))
}

async fn sms_prices(state: web::Data<AppState>) -> HttpResponse {
    let prices = &state.sms_prices;
    envelope::ok(SmsPricesData {
        currency: prices.currency().to_owned(),
        prices: prices.table().clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_page_and_its_files_are_open() {
        assert!(is_open_file("/console"));
        assert!(is_open_file("/console/console.js"));
        assert!(is_open_file("/console/uPlot.iife.min.js"));
        for gated in [
            "/console/",
            "/console/other.js",
            "/console/../metrics",
            "/consolex",
            paths::SMS_PRICES,
            paths::STATS,
            paths::METRICS,
        ] {
            assert!(!is_open_file(gated), "{gated}");
        }
    }

    #[test]
    fn the_console_has_no_inline_script_or_style() {
        assert!(!CONSOLE_PAGE.contains("<script>"));
        assert!(!CONSOLE_PAGE.contains("<style"));
        assert!(!CONSOLE_PAGE.contains(" style="));
        let handlers = CONSOLE_PAGE.split(" on").skip(1).filter(|rest| {
            let name_end = rest
                .find(|c: char| !c.is_ascii_lowercase())
                .unwrap_or(rest.len());
            name_end > 0 && rest[name_end..].starts_with('=')
        });
        assert_eq!(handlers.count(), 0, "an inline event handler");
    }
}
