//! The demo page in a real browser: `tests/browser/demo_flow.py` drives headless Chromium
//! (Selenium, Debian's chromium and chromium-driver) through the whole flow — phone, the gate
//! (the image captcha; the ALTCHA widget), a wrong then the right code, the token and its claims
//! — on the embedded store in dev mode, keeping a screenshot of each step under
//! `target/demo-screenshots/`. A failed step fails the test. Missing browser pieces are skipped
//! loudly, or fail with `TEST_REQUIRE_SDK=1` (CI).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::{Backend, spawn_app_with};

const TIME_LIMIT: Duration = Duration::from_secs(90);

fn screenshots() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/demo-screenshots")
}

/// Why the browser cannot run here, if it cannot.
pub fn missing_browser() -> Option<String> {
    for program in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
        if !Path::new(program).exists() {
            return Some(format!(
                "{program} is missing (apt-get install chromium chromium-driver)"
            ));
        }
    }
    let selenium = std::process::Command::new("python3")
        .args(["-c", "import selenium"])
        .stderr(Stdio::null())
        .status();
    if !selenium.is_ok_and(|status| status.success()) {
        return Some("python3 lacks selenium (tests/browser/requirements.txt)".to_owned());
    }
    None
}

async fn the_demo_works_in_a_browser(gate: &str, channel: &str) {
    if let Some(why) = missing_browser() {
        assert!(
            std::env::var_os("TEST_REQUIRE_SDK").is_none(),
            "TEST_REQUIRE_SDK is set but the browser cannot run: {why}"
        );
        eprintln!("\n*** SKIPPED the demo in a browser: {why} (scripts/provision installs it)\n");
        return;
    }
    let app = spawn_app_with(Backend::Memory, |settings| {
        settings.dev_mode = true;
        settings.captcha.send_requires_captcha = gate == "captcha";
        settings.pow.send_requires_pow = gate == "pow";
    })
    .await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/demo_flow.py");
    let started = Instant::now();
    let run = tokio::process::Command::new("python3")
        .arg(script)
        .args(["--url", &app.address, "--gate", gate, "--channel", channel])
        .args(["--prefix", &format!("{gate}-{channel}-")])
        .arg("--screenshots")
        .arg(screenshots())
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
        "demo in Chromium, {gate} gate, {channel}: {:.1} s\n{report}",
        started.elapsed().as_secs_f64()
    );
    assert!(output.status.success(), "a step failed:\n{report}");
    assert!(report.contains("demo flow passed"), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_demo_works_in_chromium_behind_the_captcha() {
    the_demo_works_in_a_browser("captcha", "sms").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_demo_works_in_chromium_behind_the_altcha_widget() {
    the_demo_works_in_a_browser("pow", "sms").await;
}

/// Email instead of SMS: the mail lands in the dev inbox (dev mode's log mailer), the page
/// reads the code from it, and the token names the folded address and the email channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_demo_sends_a_code_by_email_in_chromium() {
    the_demo_works_in_a_browser("pow", "email").await;
}
