//! Redis over TLS, of the test's own: a private CA and server certificates made with rcgen,
//! and redis-server processes that listen on TLS only (`--port 0 --tls-port`) on free loopback
//! ports, as one node, a Cluster (`tls-cluster`) or a primary watched by a sentinel
//! (`tls-replication`). Each process has a directory of its own (its certificate files, a
//! sentinel's config) and is killed when dropped. The default user always has a password, so
//! vcode gets in only with one; `VCODE_ACL_RULE` is the minimal rule docs/redis-tls.md gives.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};
use redis::{Cmd, FromRedisValue, TlsCertificates, cmd};

use super::free_port;
use super::redis_cluster::wait_until;

/// The password of each server's `default` user (the harness's own login).
pub const ADMIN_PASSWORD: &str = "adm1n-s3cret";
/// The sentinel's own password (`requirepass` on the sentinel).
pub const SENTINEL_PASSWORD: &str = "sent1nel-s3cret";
/// The name the sentinel monitors the primary under.
pub const MASTER: &str = "vcode-tls";
/// vcode's ACL user.
pub const VCODE_USER: &str = "vcode";
pub const VCODE_PASSWORD: &str = "vc0de-s3cret";

/// The rule docs/redis-tls.md gives for vcode's user, after `ACL SETUSER vcode on >password`:
/// its keys only, and only the commands it sends or its scripts run (`+cluster|slots` for a
/// Cluster, `+role` behind Sentinel).
pub const VCODE_ACL_RULE: &[&str] = &[
    "resetkeys",
    "~verify_code:*",
    "resetchannels",
    "-@all",
    "+ping",
    "+evalsha",
    "+script|load",
    "+time",
    "+get",
    "+set",
    "+getdel",
    "+del",
    "+hget",
    "+hmget",
    "+hset",
    "+hincrby",
    "+hgetall",
    "+expire",
    "+pexpire",
    "+pexpireat",
    "+pttl",
    "+zadd",
    "+zcount",
    "+zrange",
    "+zrangebyscore",
    "+zrem",
    "+zremrangebyscore",
    "+rpush",
    "+ltrim",
    "+lrange",
    "+multi",
    "+exec",
    "+cluster|slots",
    "+role",
];

/// A certificate authority of the test's own.
pub struct Authority {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Authority {
    pub fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("a CA key");
        Self {
            issuer: CertifiedIssuer::self_signed(params, key).expect("a CA certificate"),
        }
    }

    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A server certificate for `names` (host names or IP addresses), signed by this CA.
    pub fn identity(&self, names: &[&str]) -> Identity {
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let params = CertificateParams::new(names).expect("server certificate parameters");
        let key = KeyPair::generate().expect("a server key");
        let certificate = params
            .signed_by(&key, &self.issuer)
            .expect("a server certificate");
        Identity {
            ca_pem: self.pem(),
            certificate_pem: certificate.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    /// This CA's certificate in a file of its own, as `VCODE_REDIS_CA_FILE` names one.
    pub fn file(&self) -> CaFile {
        let path = std::env::temp_dir().join(format!(
            "vcode-test-ca-{}-{}.pem",
            std::process::id(),
            free_port()
        ));
        std::fs::write(&path, self.pem()).expect("a CA file");
        CaFile(path)
    }
}

/// A CA certificate file, removed when dropped.
pub struct CaFile(PathBuf);

impl CaFile {
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for CaFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// What a TLS server starts with: its certificate and key, and the CA its peers' (other nodes',
/// sentinels') certificates come from.
pub struct Identity {
    ca_pem: String,
    certificate_pem: String,
    key_pem: String,
}

impl Identity {
    /// The server certificate (PEM), for servers other than Redis (PostgreSQL).
    pub fn certificate_pem(&self) -> &str {
        &self.certificate_pem
    }

    /// The server's private key (PEM).
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }
}

/// One redis-server or sentinel process listening on TLS only.
pub struct TlsRedis {
    port: u16,
    /// The `default` user's password.
    password: String,
    ca_pem: String,
    child: Child,
    dir: PathBuf,
}

impl TlsRedis {
    /// A data node: `identity`'s certificate, `default` with `ADMIN_PASSWORD`, nothing saved,
    /// then `extra(port, dir)` (cluster mode, ...).
    pub fn data_node(identity: &Identity, extra: impl Fn(u16, &Path) -> Vec<String>) -> Self {
        Self::start(identity, ADMIN_PASSWORD, |port, dir| {
            let mut args = [
                "--bind",
                "127.0.0.1",
                "--requirepass",
                ADMIN_PASSWORD,
                "--save",
                "",
                "--appendonly",
                "no",
            ]
            .map(str::to_owned)
            .to_vec();
            args.extend(["--dir".to_owned(), dir.to_string_lossy().into_owned()]);
            args.extend(extra(port, dir));
            args
        })
    }

    /// Starts `redis-server <args(port, dir)> <TLS arguments>` on a free port (below 55536:
    /// a Cluster node's bus takes port + 10000) and waits until it answers PING over TLS.
    fn start(
        identity: &Identity,
        password: &str,
        args: impl Fn(u16, &Path) -> Vec<String>,
    ) -> Self {
        for _ in 0..5 {
            let port = free_port();
            if port > u16::MAX - 10_000 {
                continue;
            }
            let dir = std::env::temp_dir().join(format!(
                "vcode-test-redis-tls-{}-{port}",
                std::process::id()
            ));
            std::fs::create_dir_all(&dir).expect("a temporary directory");
            let file = |name: &str, text: &str| {
                let path = dir.join(name);
                std::fs::write(&path, text).expect("a certificate file");
                path.to_string_lossy().into_owned()
            };
            let tls = [
                "--port".to_owned(),
                "0".to_owned(),
                "--tls-port".to_owned(),
                port.to_string(),
                "--tls-cert-file".to_owned(),
                file("server.pem", &identity.certificate_pem),
                "--tls-key-file".to_owned(),
                file("server.key", &identity.key_pem),
                "--tls-ca-cert-file".to_owned(),
                file("ca.pem", &identity.ca_pem),
                "--tls-auth-clients".to_owned(),
                "no".to_owned(),
            ];
            let child = Command::new("redis-server")
                .args(args(port, &dir))
                .args(tls)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server can be run");
            let mut server = Self {
                port,
                password: password.to_owned(),
                ca_pem: identity.ca_pem.clone(),
                child,
                dir,
            };
            if server.wait_until_ready() {
                return server;
            }
            // Most likely the port was taken meanwhile; dropping it cleans up.
        }
        panic!(
            "redis-server did not start with TLS: it needs TLS support (Debian's redis-server 7 has it)"
        );
    }

    fn wait_until_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self.query::<String>(&cmd("PING")).is_ok() {
                return true;
            }
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `rediss://<login>@127.0.0.1:<port>`, `login` being `user:password` or `:password`.
    pub fn url(&self, login: &str) -> String {
        format!("rediss://{login}@127.0.0.1:{}", self.port)
    }

    /// Runs one command on this process as `default`, over TLS, trusting its own CA.
    pub fn query<T: FromRedisValue>(&self, command: &Cmd) -> redis::RedisResult<T> {
        let certificates = TlsCertificates {
            client_tls: None,
            root_cert: Some(self.ca_pem.clone().into_bytes()),
        };
        let url = self.url(&format!(":{}", self.password));
        let client = redis::Client::build_with_tls(url, certificates)?;
        let mut connection = client.get_connection_with_timeout(Duration::from_secs(2))?;
        connection.set_read_timeout(Some(Duration::from_secs(5)))?;
        command.query(&mut connection)
    }

    /// Like `query`, for set-up steps that must work.
    pub fn must<T: FromRedisValue>(&self, command: &Cmd) -> T {
        self.query(command)
            .unwrap_or_else(|error| panic!("port {}: {command:?}: {error}", self.port))
    }

    /// Creates vcode's user with `VCODE_ACL_RULE` and `password`.
    pub fn add_vcode_user(&self, password: &str) {
        let mut setuser = cmd("ACL");
        setuser
            .arg("SETUSER")
            .arg(VCODE_USER)
            .arg("reset")
            .arg("on")
            .arg(format!(">{password}"))
            .arg(VCODE_ACL_RULE);
        self.must::<()>(&setuser);
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A Cluster of primaries over TLS, the cluster bus included; slots split evenly.
pub struct TlsCluster {
    pub nodes: Vec<TlsRedis>,
}

impl TlsCluster {
    pub fn start(identity: &Identity, primaries: usize) -> Self {
        let nodes: Vec<TlsRedis> = (0..primaries)
            .map(|_| {
                TlsRedis::data_node(identity, |_, dir| {
                    let config = dir.join("nodes.conf").to_string_lossy().into_owned();
                    [
                        "--cluster-enabled",
                        "yes",
                        "--tls-cluster",
                        "yes",
                        "--cluster-config-file",
                        &config,
                        "--cluster-node-timeout",
                        "15000",
                    ]
                    .map(str::to_owned)
                    .to_vec()
                })
            })
            .collect();
        const SLOTS: usize = 16384;
        for (i, node) in nodes.iter().enumerate() {
            node.must::<()>(cmd("CLUSTER").arg("SET-CONFIG-EPOCH").arg(i + 1));
            let (first, last) = (i * SLOTS / primaries, (i + 1) * SLOTS / primaries - 1);
            node.must::<()>(cmd("CLUSTER").arg("ADDSLOTSRANGE").arg(first).arg(last));
        }
        for node in &nodes[1..] {
            let meet = cmd("CLUSTER")
                .arg("MEET")
                .arg("127.0.0.1")
                .arg(node.port())
                .to_owned();
            nodes[0].must::<()>(&meet);
        }
        wait_until("every TLS node serves every slot", || {
            nodes.iter().all(|node| {
                node.query::<String>(cmd("CLUSTER").arg("INFO"))
                    .is_ok_and(|info| {
                        info.contains("cluster_state:ok")
                            && info.contains(&format!("cluster_slots_ok:{SLOTS}"))
                    })
            })
        });
        Self { nodes }
    }

    /// Seed URLs for vcode: every node, logging in with `login`.
    pub fn seeds(&self, login: &str) -> Vec<String> {
        self.nodes.iter().map(|node| node.url(login)).collect()
    }
}

/// A primary watched by one sentinel, both over TLS, with logins of their own: the primary's
/// `default` user has `ADMIN_PASSWORD` (the sentinel logs in with it), the sentinel has
/// `SENTINEL_PASSWORD`.
pub struct TlsSentinel {
    pub primary: TlsRedis,
    pub sentinel: TlsRedis,
}

impl TlsSentinel {
    pub fn start(identity: &Identity) -> Self {
        let primary = TlsRedis::data_node(identity, |_, _| Vec::new());
        let primary_port = primary.port();
        let sentinel = TlsRedis::start(identity, SENTINEL_PASSWORD, |_, dir| {
            let config = dir.join("sentinel.conf");
            let text = format!(
                "bind 127.0.0.1\ndir {dir}\nrequirepass {SENTINEL_PASSWORD}\n\
                 tls-replication yes\n\
                 sentinel monitor {MASTER} 127.0.0.1 {primary_port} 1\n\
                 sentinel auth-pass {MASTER} {ADMIN_PASSWORD}\n",
                dir = dir.display(),
            );
            std::fs::write(&config, text).expect("a sentinel config file");
            vec![
                config.to_string_lossy().into_owned(),
                "--sentinel".to_owned(),
            ]
        });
        let ask = cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(MASTER)
            .to_owned();
        wait_until("the sentinel names the primary", || {
            sentinel
                .query::<(String, u16)>(&ask)
                .is_ok_and(|(_, port)| port == primary_port)
        });
        Self { primary, sentinel }
    }

    /// The sentinel's URL for vcode, with the sentinel's own password.
    pub fn sentinel_url(&self) -> String {
        self.sentinel.url(&format!(":{SENTINEL_PASSWORD}"))
    }
}
