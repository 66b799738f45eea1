//! PostgreSQL servers of the tests' own (Debian's `postgresql` package: `initdb` and
//! `postgres` on a free loopback port, as the `postgres` user when the tests run as root, since
//! PostgreSQL refuses root). The suites share one fast server per test binary (no fsync) and
//! take a fresh database per test; durability and outage tests start a server of their own
//! (fsync on) that they may stop, kill -9 and restart on the same data directory. A PostgreSQL
//! the harness did not start is never used.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

use super::free_port;

pub struct PostgresServer {
    port: u16,
    data: PathBuf,
    durable: bool,
    extra: Vec<String>,
    child: Mutex<Option<Child>>,
}

/// The directory of `initdb` and `postgres`: the newest under /usr/lib/postgresql, else PATH.
fn bin(name: &str) -> PathBuf {
    let newest = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("bin"))
        .filter(|dir| dir.join(name).exists())
        .max_by_key(|dir| {
            let version = dir.parent().and_then(Path::file_name);
            version
                .and_then(|v| v.to_str())
                .and_then(|v| v.parse::<u32>().ok())
                .unwrap_or(0)
        });
    newest.map_or_else(|| PathBuf::from(name), |dir| dir.join(name))
}

fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// `program` as the `postgres` user when root, killed when the thread that spawns it ends
/// (`setpriv --pdeathsig`), so that no server outlives the test binary.
fn command(program: &Path) -> Command {
    let mut command = Command::new("setpriv");
    command.args(["--pdeathsig", "KILL"]);
    if running_as_root() {
        command.args([
            "--reuid",
            "postgres",
            "--regid",
            "postgres",
            "--init-groups",
        ]);
    }
    command.arg(program);
    command
}

/// A command to spawn, and where to send the child.
type SpawnRequest = (Command, mpsc::Sender<Child>);

/// Spawns on a thread that lives as long as the test binary: the death signal follows the
/// spawning thread, and a test's thread ends with the test.
fn spawn(mut command: Command) -> Child {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (requests, incoming) = mpsc::channel::<SpawnRequest>();
        std::thread::spawn(move || {
            for (mut command, reply) in incoming {
                let child = command.spawn().expect("postgres can be run");
                let _ = reply.send(child);
            }
            // Keep the thread (and with it every server) alive until the process exits.
            loop {
                std::thread::park();
            }
        });
        Mutex::new(requests)
    });
    let (reply, child) = mpsc::channel();
    command.stdout(Stdio::null()).stderr(Stdio::null());
    spawner
        .lock()
        .unwrap()
        .send((command, reply))
        .expect("the spawner thread runs");
    child.recv().expect("the spawner answers")
}

impl PostgresServer {
    /// The server the suites share in this test binary (started on first use).
    pub fn shared() -> &'static Self {
        static SHARED: OnceLock<PostgresServer> = OnceLock::new();
        SHARED.get_or_init(|| {
            remove_stale_data_directories();
            Self::start_with(false, &[], &[])
        })
    }

    /// A server of the caller's own, with fsync on: what it acknowledged survives a crash.
    pub fn start_durable() -> Self {
        Self::start_with(true, &[], &[])
    }

    /// A server of the caller's own with extra `-c` settings and files in its data directory
    /// (readable by the server only: TLS keys).
    pub fn start_with(durable: bool, extra: &[&str], files: &[(&str, &str)]) -> Self {
        let data = std::env::temp_dir().join(format!(
            "vcode-pg-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&data).expect("a data directory");
        if running_as_root() {
            let status = Command::new("chown")
                .args(["postgres:postgres", &data.to_string_lossy()])
                .status()
                .expect("chown can be run");
            assert!(status.success(), "chown postgres {}", data.display());
        }
        let status = command(&bin("initdb"))
            .args(["-D", &data.to_string_lossy()])
            .args([
                "-U",
                "vcode",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("initdb can be run");
        assert!(
            status.success(),
            "initdb failed: is PostgreSQL installed? `scripts/test` installs what the tests need (or: apt-get install -y postgresql)"
        );
        for (name, contents) in files {
            let path = data.join(name);
            std::fs::write(&path, contents).expect("a file in the data directory");
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .expect("chmod 600");
            if running_as_root() {
                let owned = Command::new("chown")
                    .args(["postgres:postgres", &path.to_string_lossy()])
                    .status()
                    .is_ok_and(|status| status.success());
                assert!(owned, "chown postgres {}", path.display());
            }
        }
        let mut server = Self {
            port: 0,
            data,
            durable,
            extra: extra.iter().map(|s| (*s).to_owned()).collect(),
            child: Mutex::new(None),
        };
        for _ in 0..5 {
            server.port = free_port();
            if server.launch() {
                return server;
            }
        }
        panic!("postgres did not start in {}", server.data.display());
    }

    /// Starts `postgres` on `self.port` and waits until it accepts connections.
    fn launch(&self) -> bool {
        let mut postgres = command(&bin("postgres"));
        postgres
            .args(["-D", &self.data.to_string_lossy()])
            .args(["-p", &self.port.to_string(), "-h", "127.0.0.1", "-k", ""])
            .args(["-c", "max_connections=200", "-c", "shared_buffers=32MB"]);
        if !self.durable {
            postgres.args(["-c", "fsync=off", "-c", "synchronous_commit=off"]);
            postgres.args(["-c", "full_page_writes=off"]);
        }
        for setting in &self.extra {
            postgres.args(["-c", setting]);
        }
        *self.child.lock().unwrap() = Some(spawn(postgres));
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let ready = Command::new(bin("pg_isready"))
                .args([
                    "-q",
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-t",
                    "1",
                ])
                .status()
                .is_ok_and(|status| status.success());
            if ready {
                return true;
            }
            let exited = self
                .child
                .lock()
                .unwrap()
                .as_mut()
                .is_some_and(|child| matches!(child.try_wait(), Ok(Some(_))));
            if exited {
                break; // most likely the port was taken meanwhile
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        false
    }

    /// The URL of `database`.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://vcode@127.0.0.1:{}/{database}", self.port)
    }

    /// A new empty database on this server, for one test.
    pub async fn fresh_database(&self) -> String {
        let name = format!("t{:016x}", rand::random::<u64>());
        let client = self.client("postgres").await;
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("CREATE DATABASE");
        self.url(&name)
    }

    /// A plain connection for assertions straight on the tables.
    pub async fn client(&self, database: &str) -> tokio_postgres::Client {
        let (client, connection) =
            tokio_postgres::connect(&self.url(database), tokio_postgres::NoTls)
                .await
                .expect("the test's PostgreSQL answers");
        tokio::spawn(connection);
        client
    }

    /// SIGKILL to the postmaster and every backend at once, as a crash of its machine: no
    /// shutdown, no checkpoint; the data directory stays. (A postmaster killed alone leaves its
    /// backends running until they notice, and one of them answered, and committed, a send on
    /// a pooled connection right after.)
    pub fn kill(&self) {
        if let Some(mut postmaster) = self.child.lock().unwrap().take() {
            let backends = children_of(postmaster.id());
            let _ = postmaster.kill();
            for pid in backends {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .stderr(Stdio::null())
                    .status();
            }
            let _ = postmaster.wait();
        }
    }

    /// The postmaster and its children (backends, background workers): SIGSTOP to each
    /// freezes the server as a paused Redis is frozen (connections open, nothing answers).
    pub fn processes(&self) -> Vec<u32> {
        let child = self.child.lock().unwrap();
        let postmaster = child.as_ref().expect("postgres is running").id();
        std::iter::once(postmaster)
            .chain(children_of(postmaster))
            .collect()
    }

    /// Starts again on the same port and data directory (after `kill`): crash recovery runs.
    pub fn restart(&self) {
        self.kill();
        // A killed postmaster's backends notice and exit; until they have, the port and the
        // shared memory may still be held.
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if self.launch() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("postgres did not restart on port {}", self.port);
    }
}

/// The processes `pid` started (its main thread's children).
fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|child| child.parse().ok())
        .collect()
}

/// The shared servers' data directories are left behind by their test binaries (a static is
/// never dropped): remove those whose process is gone.
fn remove_stale_data_directories() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("vcode-pg-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.data);
    }
}
