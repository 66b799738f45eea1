//! The Twilio-compatible API against clients no one here wrote: the unmodified official SDKs,
//! PyPI `twilio` (tests/twilio/flow.py) and npm `twilio` (tests/twilio/flow.mjs), run the whole
//! Verify flow against a live vcode on the embedded store and on Redis, through Stoplight Prism
//! validating every request and response against Twilio's own OpenAPI description
//! (tests/twilio/spec, vendored with its licence). Prism may report only the error answers the
//! flows provoke on purpose whose HTTP status that description lists for no operation (it
//! lists none but a start's 429): the flows count them, and the counts must match exactly.
//! `scripts/provision` installs the SDKs and Prism; a missing one is skipped loudly, or fails
//! with `TEST_REQUIRE_SDK=1` (CI).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};
use vcode::twilio_compat::{TwilioAccounts, accounts, sid};

use crate::support::{Backend, TestApp, free_port, spawn_app_with};

/// Codes live this long here, so that the flows' expired verification takes seconds.
const CODE_TTL_SECS: u64 = 4;

pub(crate) fn twilio_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/twilio")
}

/// Credentials of one account: its SID and Auth Token, and an API key of it with its secret.
struct Credentials {
    account: String,
    token: String,
    key: String,
    secret: String,
}

impl Credentials {
    fn new() -> (Self, TwilioAccounts) {
        let (account, token, entry) = accounts::generate();
        let key = sid::generate(sid::API_KEY);
        let secret = hex::encode(rand::random::<[u8; 16]>());
        let key_entry = format!("{account}/{key}:{}", hex::encode(Sha256::digest(&secret)));
        let configured = TwilioAccounts::parse(&format!("{entry}\n{key_entry}")).unwrap();
        let credentials = Self {
            account,
            token,
            key,
            secret,
        };
        (credentials, configured)
    }
}

/// A vcode for the flows: dev mode (its outbox shows the codes "sent"), short codes, no
/// cooldown or client budget (the flows send ten SMS a minute from one address).
async fn app_for_flows(backend: Backend) -> (TestApp, Credentials) {
    let (credentials, configured) = Credentials::new();
    let app = spawn_app_with(backend, |settings| {
        settings.twilio_accounts = Some(configured);
        settings.otp.code_ttl = Duration::from_secs(CODE_TTL_SECS);
        settings.otp.resend_cooldown = Duration::ZERO;
        settings.abuse.sends_per_ip_hour = 0;
    })
    .await;
    (app, credentials)
}

/// Why the SDKs or Prism cannot run here, if they cannot.
pub(crate) fn missing_tools() -> Option<String> {
    let python = std::process::Command::new("python3")
        .args(["-c", "import twilio"])
        .output();
    if !python.is_ok_and(|output| output.status.success()) {
        return Some("python3 cannot import twilio (PyPI twilio)".to_owned());
    }
    let modules = twilio_dir().join("node_modules");
    for needed in ["twilio/package.json", ".bin/prism"] {
        if !modules.join(needed).exists() {
            return Some(format!(
                "tests/twilio/node_modules/{needed} is missing (npm ci in tests/twilio)"
            ));
        }
    }
    None
}

/// Prism as a validating proxy in front of `target`, its output in `log`.
pub(crate) struct Prism {
    child: Child,
    pub(crate) port: u16,
    log: PathBuf,
}

impl Prism {
    /// Prism on a free port. A port found free may be taken before Prism binds it (by another
    /// test's Prism: both then saw "listening" in one shared log and one test's SDK talked to
    /// the other's vcode). So each start has a log of its own, and a Prism that exits before
    /// it listens is started again on another port.
    pub(crate) async fn start(target: &str) -> Self {
        static STARTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        for _ in 0..5 {
            let port = free_port();
            let start = STARTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let log = std::env::temp_dir().join(format!(
                "vcode-prism-{}-{start}-{port}.log",
                std::process::id()
            ));
            let file = std::fs::File::create(&log).unwrap();
            let child = Command::new(twilio_dir().join("node_modules/.bin/prism"))
                .current_dir(twilio_dir())
                .args([
                    "proxy",
                    "spec/twilio_verify_v2.yaml",
                    target,
                    "--host",
                    "127.0.0.1",
                ])
                .args(["--port", &port.to_string(), "--errors=false"])
                .stdout(file.try_clone().unwrap())
                .stderr(file)
                .kill_on_drop(true)
                .spawn()
                .expect("prism starts");
            let mut prism = Self { child, port, log };
            let deadline = std::time::Instant::now() + Duration::from_secs(90);
            loop {
                if prism.output().contains("Prism is listening") {
                    return prism;
                }
                if let Ok(Some(status)) = prism.child.try_wait() {
                    eprintln!(
                        "Prism exited ({status}) before it listened on {port}; trying another port:\n{}",
                        prism.output()
                    );
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "Prism did not start:\n{}",
                    prism.output()
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        panic!("Prism exited before it listened, on five ports in a row");
    }

    fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Every violation Prism reported, one line each.
    pub(crate) fn violations(&self) -> Vec<String> {
        self.output()
            .lines()
            .filter(|line| line.contains("Violation"))
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Prism {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// Runs one SDK's flow against `base_url` and answers the count of deliberate error answers
/// it provoked outside the statuses the description lists.
async fn run_flow(
    program: &str,
    script: &str,
    base_url: &str,
    app: &TestApp,
    who: &Credentials,
) -> usize {
    let mut child = Command::new(program)
        .current_dir(twilio_dir())
        .arg(script)
        .args([
            base_url,
            &app.address,
            &who.account,
            &who.token,
            &who.key,
            &who.secret,
        ])
        .arg(CODE_TTL_SECS.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the flow starts");
    let (mut stdout, mut stderr) = (String::new(), String::new());
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let finished = tokio::time::timeout(Duration::from_secs(180), async {
        let (_, _) = tokio::join!(
            out.read_to_string(&mut stdout),
            err.read_to_string(&mut stderr)
        );
        child.wait().await
    })
    .await
    .unwrap_or_else(|_| panic!("{script} did not finish in 180 s:\n{stdout}"))
    .unwrap();
    assert!(
        finished.success() && stdout.contains("FLOW OK"),
        "{script} failed:\n{stdout}\n{stderr}"
    );
    stdout
        .lines()
        .find_map(|line| line.strip_prefix("UNDOCUMENTED ERRORS "))
        .and_then(|count| count.trim().parse().ok())
        .expect("the flow counts its undocumented error answers")
}

async fn the_official_sdks_pass_the_verify_flow_through_prism(backend: Backend) {
    if let Some(why) = missing_tools() {
        if std::env::var_os("TEST_REQUIRE_SDK").is_some() {
            panic!("TEST_REQUIRE_SDK is set but the Twilio SDKs or Prism cannot run: {why}");
        }
        eprintln!("\n*** SKIPPED the Twilio SDK flows: {why}\n*** run scripts/provision\n");
        return;
    }
    let (app, who) = app_for_flows(backend).await;
    let prism = Prism::start(&app.address).await;
    let through_prism = format!("http://127.0.0.1:{}", prism.port);
    let python = run_flow("python3", "flow.py", &through_prism, &app, &who).await;
    let node = run_flow("node", "flow.mjs", &through_prism, &app, &who).await;
    // Prism logs a response's violation after answering: give its last lines a moment.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let violations = prism.violations();
    let unexpected: Vec<&String> = violations
        .iter()
        .filter(|line| {
            !line.contains("Violation: response Unable to match the returned status code")
        })
        .collect();
    assert!(
        unexpected.is_empty(),
        "Prism found differences from Twilio's description:\n{unexpected:#?}"
    );
    assert_eq!(
        violations.len(),
        python + node,
        "Prism's status-code reports against the error answers the flows provoked:\n{violations:#?}"
    );
    assert!(
        python > 0 && node > 0,
        "the flows provoke errors, so the check above can fail"
    );
}

/// One SDK's TOTP flow (tests/twilio/totp.py or .mjs) through Prism: its deliberate
/// undocumented error answers and Prism's violations.
async fn run_totp_flow(backend: Backend, program: &str, script: &str) -> (usize, Vec<String>) {
    let (account, token, entry) = accounts::generate();
    let app = spawn_app_with(backend, |settings| {
        settings.twilio_accounts = Some(TwilioAccounts::parse(&entry).unwrap());
    })
    .await;
    let prism = Prism::start(&app.address).await;
    let output = Command::new(program)
        .current_dir(twilio_dir())
        .arg(script)
        .args([
            &format!("http://127.0.0.1:{}", prism.port),
            &account,
            &token,
        ])
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), output)
        .await
        .unwrap_or_else(|_| panic!("{script} did not finish in 120 s"))
        .expect("the flow runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("FLOW OK"),
        "{script} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let undocumented = stdout
        .lines()
        .find_map(|line| line.strip_prefix("UNDOCUMENTED ERRORS "))
        .and_then(|count| count.trim().parse().ok())
        .expect("the flow counts its undocumented error answers");
    (undocumented, prism.violations())
}

/// Authenticator apps through the official SDKs, pyotp as the app: a Service's Totp.*, an
/// Entity, a Factor whose binding pyotp reads, its verification by update, Challenges
/// (approved, a replay pending), a lock, deletes; Prism finds nothing but the error answers
/// the flows provoke on purpose.
async fn the_official_sdks_enrol_and_check_totp_factors(backend: Backend) {
    if let Some(why) = missing_tools() {
        if std::env::var_os("TEST_REQUIRE_SDK").is_some() {
            panic!("TEST_REQUIRE_SDK is set but the Twilio SDKs or Prism cannot run: {why}");
        }
        eprintln!("\n*** SKIPPED the Twilio SDK TOTP flows: {why}\n");
        return;
    }
    for (program, script) in [("python3", "totp.py"), ("node", "totp.mjs")] {
        let (undocumented, violations) = run_totp_flow(backend, program, script).await;
        let unexpected: Vec<&String> = violations
            .iter()
            .filter(|line| {
                !line.contains("Violation: response Unable to match the returned status code")
            })
            .collect();
        assert!(unexpected.is_empty(), "{script}: {unexpected:#?}");
        assert_eq!(violations.len(), undocumented, "{script}: {violations:#?}");
        assert!(undocumented > 0, "{script}: the flow provokes errors");
    }
}

/// End users served by one app server, with every default limit on but the resend cooldown
/// (the guesser's victim is sent three codes within seconds).
const END_USERS: usize = 200;

/// One SDK's tenant flow (tests/twilio/tenants.py or .mjs) against a fresh vcode behind Prism:
/// fresh, because the flow's last step holds its address for wrong credentials. Answers the
/// flow's deliberate undocumented error answers and Prism's violations.
async fn run_tenant_flow(backend: Backend, program: &str, script: &str) -> (usize, Vec<String>) {
    let (account, token, entry) = accounts::generate();
    let app = spawn_app_with(backend, |settings| {
        settings.twilio_accounts = Some(TwilioAccounts::parse(&entry).unwrap());
        settings.otp.resend_cooldown = Duration::ZERO;
    })
    .await;
    let prism = Prism::start(&app.address).await;
    let output = Command::new(program)
        .current_dir(twilio_dir())
        .arg(script)
        .args([
            &format!("http://127.0.0.1:{}", prism.port),
            &app.address,
            &account,
            &token,
            &END_USERS.to_string(),
        ])
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(240), output)
        .await
        .unwrap_or_else(|_| panic!("{script} did not finish in 240 s"))
        .expect("the flow runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("FLOW OK"),
        "{script} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let undocumented = stdout
        .lines()
        .find_map(|line| line.strip_prefix("UNDOCUMENTED ERRORS "))
        .and_then(|count| count.trim().parse().ok())
        .expect("the flow counts its undocumented error answers");
    (undocumented, prism.violations())
}

/// An app's backend on the official SDKs, with every default limit on: 200 end users from one
/// server address are all served, a guesser locks no one out, the account's verification is
/// unknown to `/api/v1`, and wrong Auth Tokens from one address are slowed; Prism finds nothing
/// but the error answers the flows provoke on purpose.
async fn an_app_serves_its_users_through_the_official_sdks(backend: Backend) {
    if let Some(why) = missing_tools() {
        if std::env::var_os("TEST_REQUIRE_SDK").is_some() {
            panic!("TEST_REQUIRE_SDK is set but the Twilio SDKs or Prism cannot run: {why}");
        }
        eprintln!("\n*** SKIPPED the Twilio SDK tenant flows: {why}\n");
        return;
    }
    for (program, script) in [("python3", "tenants.py"), ("node", "tenants.mjs")] {
        let (undocumented, violations) = run_tenant_flow(backend, program, script).await;
        let unexpected: Vec<&String> = violations
            .iter()
            .filter(|line| {
                !line.contains("Violation: response Unable to match the returned status code")
            })
            .collect();
        assert!(unexpected.is_empty(), "{script}: {unexpected:#?}");
        assert_eq!(violations.len(), undocumented, "{script}: {violations:#?}");
        assert!(undocumented > 0, "{script}: the flow provokes errors");
    }
}

on_stores!(
    memory => Memory, redis => Redis;
    [
        the_official_sdks_pass_the_verify_flow_through_prism,
        an_app_serves_its_users_through_the_official_sdks,
        the_official_sdks_enrol_and_check_totp_factors,
    ]
);

on_stores!(
    postgres => Postgres;
    [
        an_app_serves_its_users_through_the_official_sdks,
        the_official_sdks_enrol_and_check_totp_factors,
    ]
);

on_stores!(
    cluster => Cluster, sentinel => Sentinel;
    [the_official_sdks_enrol_and_check_totp_factors]
);
