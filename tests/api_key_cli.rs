//! API keys as an operator sets them up: `vcode api-key NAME` prints a key and its
//! `VCODE_API_KEYS` entry; the server started with that entry accepts the key, logs the key's
//! name in the request span and never the key; malformed entries stop start-up naming the
//! variable.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

fn vcode() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_vcode"));
    command.env_clear();
    command
}

/// `vcode api-key NAME`: the key and the entry.
fn generate(name: &str) -> (String, String) {
    let output = vcode()
        .args(["api-key", name])
        .output()
        .expect("vcode runs");
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    let value = |prefix: &str| {
        stdout
            .lines()
            .find_map(|line| {
                line.split_once(prefix)
                    .map(|(_, value)| value.trim().to_owned())
            })
            .unwrap_or_else(|| panic!("no {prefix:?} in {stdout}"))
    };
    (
        value("it is not shown again): "),
        value("VCODE_API_KEYS entry: "),
    )
}

/// A raw HTTP/1.1 POST, answered with its status line.
fn post(port: u16, path: &str, authorization: &str, body: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: {authorization}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    std::io::Write::write_all(&mut stream, request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer.lines().next().unwrap_or_default().to_owned()
}

#[test]
fn a_generated_key_is_accepted_and_only_its_name_is_logged() {
    let (key, entry) = generate("billing");
    assert!(entry.starts_with("billing:") && !entry.contains(&key));
    let mut server = vcode()
        .env("VCODE_BIND", "127.0.0.1:0")
        .env("VCODE_ADMIN_BIND", "127.0.0.1:0")
        .env("VCODE_DEV_MODE", "1")
        .env("VCODE_API_KEYS", &entry)
        .env("VCODE_REQUIRE_API_KEY", "send,verify")
        .env("RUST_LOG", "debug")
        .env("VCODE_LOG_FORMAT", "json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("vcode serves");
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let mut log = Vec::new();
    let port = loop {
        let line = lines.next().expect("the server logs").unwrap();
        log.push(line.clone());
        if line.contains("vcode listening") {
            let event: serde_json::Value = serde_json::from_str(&line).unwrap();
            break event["fields"]["port"].as_u64().unwrap() as u16;
        }
    };
    let body = r#"{"phone":"+8613800138000"}"#;
    assert!(post(port, "/api/v1/otp/send", &format!("Bearer {key}"), body).contains(" 200 "));
    assert!(post(port, "/api/v1/otp/send", &format!("Bearer {key}x"), body).contains(" 401 "));
    server.kill().unwrap();
    server.wait().unwrap();
    log.extend(lines.map_while(Result::ok));
    let mut stderr = String::new();
    server
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let log = format!("{}\n{stderr}", log.join("\n"));
    assert!(
        log.contains(r#""api_key":"billing""#),
        "the name is in the request span:\n{log}"
    );
    assert!(!log.contains(&key[4..]), "the key is never logged:\n{log}");
}

#[test]
fn malformed_keys_or_a_requirement_without_keys_stop_start_up_naming_the_variable() {
    for (vars, expected) in [
        (
            vec![
                ("VCODE_API_KEYS", "billing:abcd"),
                ("VCODE_REQUIRE_API_KEY", "send"),
            ],
            "VCODE_API_KEYS",
        ),
        (
            vec![("VCODE_REQUIRE_API_KEY", "send,login")],
            "VCODE_REQUIRE_API_KEY",
        ),
        (vec![("VCODE_REQUIRE_API_KEY", "verify")], "VCODE_API_KEYS"),
        (
            vec![("VCODE_API_KEYS", &*generate("a").1)],
            "VCODE_REQUIRE_API_KEY",
        ),
    ] {
        let output = vcode()
            .arg("check-config")
            .envs(vars.iter().copied())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{vars:?}");
        assert!(stderr.contains(expected), "{vars:?}: {stderr}");
        assert!(
            !stderr.contains("abcd"),
            "the entry is not echoed: {stderr}"
        );
    }
}
