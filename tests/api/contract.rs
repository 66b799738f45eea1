//! Contract fuzzing: schemathesis (an independent OpenAPI tester, PyPI) generates requests from
//! the served `/api/v1/openapi.json` and checks every answer against it (status codes, content
//! types, headers, schemas, no 5xx, 405 with `Allow` for undescribed methods, schema-invalid
//! requests refused), on the embedded store and on a test-started redis-server, in dev mode so
//! the dev routes are fuzzed too; the Redis run requires an API key on verifies. Settings: `tests/contract/schemathesis.toml`. A missing
//! schemathesis is skipped loudly, or fails with `TEST_REQUIRE_SDK=1` (CI).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use vcode::api_keys::{ApiKeySettings, ApiKeys, Operation};
use vcode_wire::paths;

use crate::support::{Backend, spawn_app_with};

/// The whole run's ceiling; it takes seconds.
const TIME_LIMIT: Duration = Duration::from_secs(120);

/// The key the Redis run requires on verifies (schemathesis sends it, and checks that a
/// request without it is refused: `ignored_auth`).
const API_KEY: &str = "vck_contract-0123456789abcdefghijklmnopqrstu";

async fn schemathesis_finds_nothing(backend: Backend, api_key_on_verify: bool) {
    let available = tokio::process::Command::new("schemathesis")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|status| status.success());
    if !available {
        assert!(
            std::env::var_os("TEST_REQUIRE_SDK").is_none(),
            "TEST_REQUIRE_SDK is set but schemathesis is missing (scripts/provision installs it)"
        );
        eprintln!(
            "\n*** SKIPPED contract fuzzing: schemathesis is not installed (scripts/provision)\n"
        );
        return;
    }
    let app = spawn_app_with(backend, |settings| {
        settings.dev_mode = true;
        // The fuzzer sends thousands of requests from one address: the per-client limits
        // would answer most of them with 429 and leave little else tested.
        settings.abuse = vcode::otp::AbuseSettings::unlimited();
        // The `ignored_auth` check sends every keyed operation (a verify, the authenticator
        // apps' routes) without its key on purpose: not a guesser to hold back.
        settings.abuse.credential_failures_per_client_minute = 0;
        if api_key_on_verify {
            let entry = format!("contract:{}", hex::encode(Sha256::digest(API_KEY)));
            settings.api_key = ApiKeySettings {
                required: vec![Operation::Verify],
            };
            settings.api_keys = Some(ApiKeys::parse(&entry).expect("a key entry"));
        }
    })
    .await;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = root.join("tests/contract/schemathesis.toml");
    // schemathesis keeps its cache in the working directory: under target/, not in the tree.
    let workdir = root.join("target/schemathesis");
    std::fs::create_dir_all(&workdir).expect("target/schemathesis");
    let started = Instant::now();
    let run = tokio::process::Command::new("schemathesis")
        .arg("--config-file")
        .arg(&config)
        .args(["--no-color", "run", "--checks", "all", "--seed", "20261201"])
        // One worker: hypothesis's lambda descriptions parse source with `ast`, which is not
        // thread-safe on Python 3.11 ("AST constructor recursion depth mismatch", seen here).
        .args(["--workers", "1", "--request-timeout", "10"])
        .args(["--header", &format!("Authorization: Bearer {API_KEY}")])
        .arg(app.url(paths::OPENAPI))
        .current_dir(&workdir)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(TIME_LIMIT, run)
        .await
        .expect("schemathesis finishes in time")
        .expect("schemathesis runs");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!(
        "schemathesis on {backend:?}: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        output.status.success(),
        "schemathesis found problems:\n{report}"
    );
    assert!(report.contains(" passed"), "no test case ran:\n{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn schemathesis_finds_nothing_on_the_embedded_store() {
    schemathesis_finds_nothing(Backend::Memory, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn schemathesis_finds_nothing_on_redis_with_an_api_key_on_verifies() {
    schemathesis_finds_nothing(Backend::Redis, true).await;
}
