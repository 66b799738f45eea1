//! The log as an operator reads it: the built binary's stdout (JSON lines) while a client sends
//! what it likes. A client must not be able to write ERROR lines at will.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::Value;

/// A `vcode` serving on a free loopback port, its stdout read line by line.
struct Server {
    child: Child,
    lines: Receiver<Value>,
    port: u16,
    /// What it logged before it listened.
    start_up: Vec<Value>,
}

impl Server {
    /// Starts `vcode` with the embedded store and `rust_log`, once it listens.
    fn start(rust_log: &str) -> Self {
        Self::start_with(rust_log, &[])
    }

    /// The same with more variables.
    fn start_with(rust_log: &str, vars: &[(&str, &str)]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_vcode"))
            .env_clear()
            .envs([
                ("VCODE_BIND", "127.0.0.1:0"),
                ("VCODE_ADMIN_BIND", "127.0.0.1:0"),
                ("VCODE_LOG_FORMAT", "json"),
                ("RUST_LOG", rust_log),
            ])
            .envs(vars.iter().copied())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the vcode binary runs");
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value = serde_json::from_str(&line).unwrap_or(Value::String(line));
                if sender.send(value).is_err() {
                    break;
                }
            }
        });
        let mut start_up = Vec::new();
        let port = loop {
            let line = lines
                .recv_timeout(Duration::from_secs(30))
                .expect("vcode says where it listens");
            if line["fields"]["message"] == "vcode listening" {
                break line["fields"]["port"].as_u64().expect("a port") as u16;
            }
            start_up.push(line);
        };
        Self {
            child,
            lines,
            port,
            start_up,
        }
    }

    /// Sends `bytes` on a connection of its own and reads the answer to the end: the server
    /// has finished with the connection (and logged what it logs about it).
    fn exchange(&self, bytes: &[u8]) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connects");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream.write_all(bytes).expect("sends");
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).expect("the server closes");
        String::from_utf8_lossy(&answer).into_owned()
    }

    /// The lines logged so far at `level`, after a moment for the reader to catch up.
    fn lines_at(&self, level: &str) -> Vec<Value> {
        std::thread::sleep(Duration::from_millis(200));
        self.lines
            .try_iter()
            .filter(|line| line["level"] == level)
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Requests no HTTP parser accepts: each is answered 400 or 431 and closed.
fn malformed_requests() -> Vec<Vec<u8>> {
    vec![
        b"GARBAGE\r\n\r\n".to_vec(),
        b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n".to_vec(),
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n".to_vec(),
        [
            b"GET / HTTP/1.1\r\nX-Big: ".as_slice(),
            &[b'a'; 64 * 1024],
            b"\r\n\r\n",
        ]
        .concat(),
    ]
}

#[test]
fn malformed_requests_write_no_error_lines() {
    let server = Server::start("info");
    for request in malformed_requests() {
        let answer = server.exchange(&request);
        assert!(
            answer.starts_with("HTTP/1.1 400") || answer.starts_with("HTTP/1.1 431"),
            "{answer}"
        );
    }
    let errors = server.lines_at("ERROR");
    assert!(errors.is_empty(), "{errors:#?}");
}

/// The check above would see them: actix-http logs each at ERROR, shown when asked for by name.
#[test]
fn malformed_requests_are_logged_when_actix_http_is_asked_for() {
    let server = Server::start("info,actix_http=error");
    for request in malformed_requests() {
        server.exchange(&request);
    }
    let errors = server.lines_at("ERROR");
    assert_eq!(errors.len(), malformed_requests().len(), "{errors:#?}");
    assert!(
        errors
            .iter()
            .all(|line| line["target"] == "actix_http::h1::dispatcher"),
        "{errors:#?}"
    );
}

/// Start-up says which numbers get an SMS; a send to a monitored country is a line of its own
/// (the number masked), a refused one a warning.
#[test]
fn sms_destinations_are_logged_at_start_up_and_monitored_sends_on_their_own_line() {
    let server = Server::start_with("info", &[("VCODE_MONITORED_REGIONS", "US")]);
    let served = server
        .start_up
        .iter()
        .find_map(|line| line["fields"]["served"].as_str())
        .expect("a start-up line names the SMS destinations");
    assert_eq!(
        served,
        "SMS to mobile,fixed_line_or_mobile numbers, not to non-geographic codes; allow CN; monitor US; block every other country"
    );
    let send = |phone: &str| {
        let body = format!(r#"{{"phone": "{phone}"}}"#);
        server.exchange(
            format!(
                "POST /api/v1/otp/send HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
    };
    assert!(send("+12025550143").starts_with("HTTP/1.1 200"));
    assert!(send("+979123456789").starts_with("HTTP/1.1 400"));
    std::thread::sleep(Duration::from_millis(200));
    let lines: Vec<Value> = server.lines.try_iter().collect();
    let monitored = lines
        .iter()
        .find(|line| line["fields"]["message"] == "SMS to a monitored country")
        .unwrap_or_else(|| panic!("{lines:#?}"));
    assert_eq!(monitored["fields"]["region"], "US");
    assert_eq!(monitored["level"], "INFO");
    let refused = lines
        .iter()
        .find(|line| line["fields"]["message"] == "send refused: no SMS to this number")
        .unwrap_or_else(|| panic!("{lines:#?}"));
    assert_eq!(refused["level"], "WARN");
    assert_eq!(refused["fields"]["number_type"], "premium_rate");
    for line in [monitored, refused] {
        assert!(!line.to_string().contains("2025550143"), "{line}");
        assert!(!line.to_string().contains("123456789"), "{line}");
    }
}
