//! The mail server the email tests start (`smtp_server.py`, aiosmtpd, beside this file) and
//! the check that its tools are there: shared by the mailer's tests (tests/email) and the API's
//! (tests/api/email.rs, tests/api/twilio.rs), which include this file by path.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

pub const SCRIPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/email");

/// Whether python3 has the mail libraries (aiosmtpd, dkimpy, pynacl) and openssl runs; a loud
/// skip when not, a panic under `TEST_REQUIRE_SDK` (CI).
pub fn tools_present(test: &str) -> bool {
    let python = Command::new("python3")
        .args(["-c", "import aiosmtpd, dkim, nacl"])
        .status()
        .is_ok_and(|status| status.success());
    let openssl = Command::new("openssl")
        .arg("version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if python && openssl {
        return true;
    }
    let why = format!("python3 with aiosmtpd, dkimpy, pynacl: {python}; openssl: {openssl}");
    if std::env::var_os("TEST_REQUIRE_SDK").is_some() {
        panic!("TEST_REQUIRE_SDK is set but the mail tools are missing ({why})");
    }
    eprintln!(
        "\n*** SKIPPED {test}: {why}\n*** install: python3 -m pip install -r tests/email/requirements.txt\n"
    );
    false
}

/// An aiosmtpd server in `mode` (`plain`, `auth`, `starttls`, `smtps`, `refuse`,
/// `refuse_data`, `hang`) and the messages it reports, one JSON line each.
pub struct MailServer {
    child: Child,
    pub port: u16,
    received: mpsc::Receiver<Value>,
}

impl MailServer {
    pub fn start(mode: &str, extra: &[&str]) -> Self {
        let mut child = Command::new("python3")
            .arg(format!("{SCRIPTS}/smtp_server.py"))
            .args(["--mode", mode])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().expect("the server starts").unwrap();
        let port = first
            .strip_prefix("PORT ")
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("the server said {first:?}"));
        let (sender, received) = mpsc::channel();
        std::thread::spawn(move || forward(lines, sender));
        Self {
            child,
            port,
            received,
        }
    }

    /// The next message the server received, within a few seconds.
    pub fn next(&self) -> Value {
        self.received
            .recv_timeout(Duration::from_secs(10))
            .expect("a message reached the server")
    }

    pub fn nothing_received(&self) -> bool {
        self.received
            .recv_timeout(Duration::from_millis(300))
            .is_err()
    }
}

fn forward(lines: std::io::Lines<BufReader<ChildStdout>>, sender: mpsc::Sender<Value>) {
    for line in lines.map_while(Result::ok) {
        let _ = sender.send(serde_json::from_str(&line).expect("a JSON line"));
    }
}

impl Drop for MailServer {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What Python's email package and dkimpy find in a received message (`check_mail.py`), with
/// `record` as the DKIM key's DNS answer.
pub fn check(data: &str, record: Option<&str>) -> Value {
    let mut child = Command::new("python3")
        .arg(format!("{SCRIPTS}/check_mail.py"))
        .args(record)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(data.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    serde_json::from_slice(&output.stdout).unwrap()
}
