//! The official SDKs' answers, from Python scripts in tests/sdk: the script reads JSON on stdin
//! and prints JSON, or exits 3 when its SDK is missing. A missing SDK skips loudly, or fails
//! with `TEST_REQUIRE_SDK=1` (CI).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

/// What `script` (relative to the crate) answers `input`, or why it cannot run.
pub fn run(script: &str, input: &Value) -> Result<Value, String> {
    let python = std::env::var("TEST_SDK_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(script);
    let mut child = Command::new(&python)
        .arg(&path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{python} cannot be run: {e}"))?;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    match output.status.code() {
        Some(0) => Ok(serde_json::from_slice(&output.stdout).expect("the script prints JSON")),
        Some(3) => Err(stderr.trim().to_owned()),
        _ => panic!("{script} failed: {stderr}"),
    }
}

/// Says loudly that `what` was skipped for `why`; panics instead under `TEST_REQUIRE_SDK`.
pub fn skip_unless_required(what: &str, why: &str) {
    if std::env::var_os("TEST_REQUIRE_SDK").is_some() {
        panic!("TEST_REQUIRE_SDK is set but the SDKs cannot run: {why}");
    }
    eprintln!(
        "\n*** SKIPPED {what}: {why}\n*** install the SDKs: python3 -m pip install -r \
         tests/sdk/requirements.txt\n"
    );
}
