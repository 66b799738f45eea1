//! A redis-server (or sentinel) process for the Cluster and Sentinel tests, on a free loopback
//! port, with a directory of its own. A watchdog shell kills it and removes the directory when
//! the test lets go of it or when the test binary exits, however it exits: pooled clusters
//! live in a static, which is never dropped.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use super::free_port;
use super::redis_server::{answers_as, answers_ping};

/// `sh -c WATCHDOG sh <dir> redis-server <args>`: starts the server, prints its pid, then
/// waits for its stdin to close (the test process closed it, or died) to kill the server.
const WATCHDOG: &str = r#"dir=$1; shift
"$@" >/dev/null 2>&1 &
server=$!
echo "$server"
exec >/dev/null
read -r _ || true
kill -9 "$server" 2>/dev/null
wait "$server" 2>/dev/null
rm -rf "$dir""#;

pub struct RedisProcess {
    port: u16,
    pid: u32,
    watchdog: Child,
    /// Closing it makes the watchdog kill the server; the OS closes it if the binary dies.
    lifeline: Option<ChildStdin>,
}

impl RedisProcess {
    /// Starts `redis-server` with the arguments `args(port, dir)` returns (it may write files
    /// into `dir`, such as a sentinel's config) and waits until it answers PING.
    pub fn start(args: impl Fn(u16, &Path) -> Vec<String>) -> Self {
        Self::start_below(u16::MAX, args)
    }

    /// `start` on a port no higher than `max_port` (a Cluster node also takes port + 10000).
    pub fn start_below(max_port: u16, args: impl Fn(u16, &Path) -> Vec<String>) -> Self {
        let mut launches = 0;
        while launches < 5 {
            let port = free_port();
            if port > max_port {
                continue;
            }
            if let Some(process) = Self::launch(port, &args) {
                return process;
            }
            launches += 1;
        }
        panic!(
            "redis-server did not start: is it installed? `scripts/test` installs what the tests need (or: apt-get install -y redis-server)"
        );
    }

    fn launch(port: u16, args: &impl Fn(u16, &Path) -> Vec<String>) -> Option<Self> {
        let dir =
            std::env::temp_dir().join(format!("vcode-test-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let mut watchdog = Command::new("sh")
            .args(["-c", WATCHDOG, "sh"])
            .arg(&dir)
            .arg("redis-server")
            .args(args(port, &dir))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("sh can be run");
        let mut pid = String::new();
        let stdout = watchdog.stdout.take().expect("piped stdout");
        BufReader::new(stdout)
            .read_line(&mut pid)
            .expect("the watchdog prints the server's pid");
        let process = Self {
            port,
            pid: pid.trim().parse().expect("a pid"),
            lifeline: watchdog.stdin.take(),
            watchdog,
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && !process.exited() {
            if answers_as(port, process.pid) {
                return Some(process);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None // most likely the port was taken meanwhile; dropping it cleans up
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// PING within 200 ms: false for a frozen or dead node.
    pub fn answers(&self) -> bool {
        answers_ping(self.port)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Runs one command on this node alone (no Cluster redirection).
    pub fn query<T: redis::FromRedisValue>(&self, command: &redis::Cmd) -> redis::RedisResult<T> {
        let client = redis::Client::open(self.url())?;
        let mut connection = client.get_connection_with_timeout(Duration::from_secs(2))?;
        connection.set_read_timeout(Some(Duration::from_secs(5)))?;
        command.query(&mut connection)
    }

    /// Like `query`, for set-up steps that must work.
    pub fn must<T: redis::FromRedisValue>(&self, command: &redis::Cmd) -> T {
        self.query(command)
            .unwrap_or_else(|error| panic!("port {}: {command:?}: {error}", self.port))
    }

    /// SIGKILL, as a crash: nothing is saved, connections drop. (Its watchdog cleans up when
    /// the process is dropped.)
    pub fn crash(&self) {
        self.signal("-KILL");
    }

    /// SIGSTOP: the process keeps its connections open but answers nothing, as a hung or
    /// cut-off node does. Dropping it still kills it.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Kills the server and waits for its watchdog to clean up.
    pub fn kill(&mut self) {
        if self.lifeline.is_none() {
            return; // killed before: its pid may belong to another process by now
        }
        self.signal("-KILL");
        // The watchdog then finds the server gone, removes the directory and exits.
        self.lifeline = None;
        let _ = self.watchdog.wait();
    }

    fn signal(&self, signal: &str) {
        let _ = Command::new("kill")
            .args([signal, &self.pid.to_string()])
            .stderr(Stdio::null())
            .status();
    }

    /// True once the server is gone (or a zombie its watchdog has not reaped yet). Without
    /// `/proc` (not Linux) it never says so, and the start waits for PING until its deadline.
    fn exited(&self) -> bool {
        match std::fs::read_to_string(format!("/proc/{}/stat", self.pid)) {
            Ok(stat) => stat
                .rsplit_once(") ")
                .is_some_and(|(_, state)| state.starts_with('Z')),
            Err(_) => Path::new("/proc/self").exists(),
        }
    }
}

/// The arguments every Cluster node and Sentinel data node starts with: `port` on loopback,
/// nothing saved, files in `dir`. The caller appends its own (cluster mode, `--replicaof`).
pub(super) fn data_node_args(port: u16, dir: &Path) -> Vec<String> {
    [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        // Replicas sync at once instead of after the default 5 s wait for more of them.
        "--repl-diskless-sync-delay",
        "0",
        "--dir",
        &dir.to_string_lossy(),
    ]
    .map(str::to_owned)
    .to_vec()
}

impl Drop for RedisProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
