//! A redis-server process of the test's own, on a free loopback port. Tests may stop, pause
//! and restart it; it is killed when dropped. A Redis the harness did not start is never used.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::free_port;

pub struct RedisServer {
    port: u16,
    child: Option<Child>,
}

pub(super) fn answers_ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let mut reply = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut reply).is_ok()
        && &reply == b"+PONG\r\n"
}

/// Whether the server answering on `port` is process `pid`: two tests can pick one free port
/// at once, and then the loser's server fails to bind and exits while the winner's answers
/// its PING; the loser would run against (and lose) another test's Redis.
pub(super) fn answers_as(port: u16, pid: u32) -> bool {
    let Ok(stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut reader = BufReader::new(&stream);
    let mut header = String::new();
    // INFO's answer is one bulk string: `$<length>\r\n<text>\r\n`.
    let Some(length) = (&stream)
        .write_all(b"INFO server\r\n")
        .ok()
        .and_then(|()| reader.read_line(&mut header).ok())
        .and_then(|_| header.trim_end().strip_prefix('$')?.parse::<usize>().ok())
    else {
        return false;
    };
    let mut text = vec![0; length];
    let ours = format!("process_id:{pid}");
    reader.read_exact(&mut text).is_ok()
        && String::from_utf8_lossy(&text)
            .lines()
            .any(|line| line == ours)
}

impl RedisServer {
    pub fn start() -> Self {
        for _ in 0..5 {
            let mut server = Self {
                port: free_port(),
                child: None,
            };
            if server.launch() {
                return server;
            }
        }
        panic!(
            "redis-server did not start: is it installed? `scripts/test` installs what the tests need (or: apt-get install -y redis-server)"
        );
    }

    /// Starts the process on `self.port` and waits until it answers PING.
    fn launch(&mut self) -> bool {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--protected-mode", "yes", "--daemonize", "no"])
            .args(["--dir", &std::env::temp_dir().to_string_lossy()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server can be run");
        let pid = child.id();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if answers_as(self.port, pid) {
                return true;
            }
            if let Some(Ok(Some(_))) = self.child.as_mut().map(Child::try_wait) {
                break; // exited: most likely the port was taken meanwhile
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.stop();
        false
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the process; the data goes with it (nothing is saved).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// A new, empty process on the same port: no data, no cached scripts.
    pub fn restart(&mut self) {
        self.stop();
        assert!(
            self.launch(),
            "redis-server did not restart on port {}",
            self.port
        );
    }

    /// Freezes the process (SIGSTOP): connections stay open but nothing answers.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        signal_process(self.pid(), signal);
    }

    /// The server's process id (to pause it from a hook that outlives a borrow).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("server is running").id()
    }

    /// A synchronous client for assertions straight on the keys.
    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("valid URL")
    }

    pub async fn connection(&self) -> redis::aio::MultiplexedConnection {
        self.client()
            .get_multiplexed_async_connection()
            .await
            .expect("test Redis answers")
    }
}

/// Sends `signal` (`-STOP`, `-CONT`) to one process the harness started.
pub fn signal_process(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("kill can be run");
    assert!(status.success(), "kill {signal} {pid}");
}

// SIGKILL ends a paused (SIGSTOPped) process too.
impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

#[test]
fn a_server_is_told_from_another_on_its_port_by_its_pid() {
    let server = RedisServer::start();
    assert!(answers_as(server.port, server.pid()));
    assert!(!answers_as(server.port, server.pid() + 1));
}
