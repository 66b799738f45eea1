//! Redis with Sentinel, of the test's own: a primary, its replicas and the sentinels watching
//! them, on free loopback ports.

use std::collections::HashMap;
use std::time::Duration;

use redis::cmd;
use vcode::store::redis::{RedisSettings, RedisTopology};

use super::redis_cluster::{replica_in_sync, wait_until};
use super::redis_process::{RedisProcess, data_node_args};

/// The name the sentinels monitor the primary under (`VCODE_REDIS_SENTINEL_MASTER`).
pub const MASTER: &str = "vcode";

pub struct RedisSentinel {
    /// The data nodes as started: the first primary, then its replicas.
    nodes: Vec<RedisProcess>,
    sentinels: Vec<RedisProcess>,
}

impl RedisSentinel {
    /// A primary with `replicas` replicas, watched by `sentinels` sentinels (quorum: a
    /// majority) that fail it over once it misses pings for `down_after`.
    pub fn start(replicas: usize, sentinels: usize, down_after: Duration) -> Self {
        let mut nodes = vec![data_node(None)];
        let primary_port = nodes[0].port();
        nodes.extend((0..replicas).map(|_| data_node(Some(primary_port))));
        // Sentinels learn the replicas from the primary when they connect: sync first.
        wait_until("the replicas are in sync", || {
            nodes[1..].iter().all(replica_in_sync)
        });
        let quorum = sentinels / 2 + 1;
        let sentinels: Vec<RedisProcess> = (0..sentinels)
            .map(|_| sentinel(primary_port, quorum, down_after))
            .collect();
        let deployment = Self { nodes, sentinels };
        wait_until("the sentinels know the replicas and each other", || {
            deployment.sentinels.iter().all(|sentinel| {
                let Ok(master) = sentinel
                    .query::<HashMap<String, String>>(cmd("SENTINEL").arg("MASTER").arg(MASTER))
                else {
                    return false;
                };
                master.get("flags").is_some_and(|flags| flags == "master")
                    && master.get("num-slaves") == Some(&replicas.to_string())
                    && master.get("num-other-sentinels")
                        == Some(&(deployment.sentinels.len() - 1).to_string())
            })
        });
        deployment
    }

    pub fn settings(&self, command_timeout: Duration) -> RedisSettings {
        RedisSettings {
            topology: RedisTopology::Sentinel {
                sentinels: self.sentinels.iter().map(RedisProcess::url).collect(),
                master: MASTER.to_owned(),
                master_credentials: None,
            },
            connect_timeout: Duration::from_millis(500),
            command_timeout,
            ca_file: None,
            older_instances: false,
        }
    }

    /// The port of the primary, as the first sentinel that answers says now.
    pub fn primary_port(&self) -> u16 {
        let ask = cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(MASTER)
            .to_owned();
        self.sentinels
            .iter()
            .find_map(|sentinel| sentinel.query::<(String, u16)>(&ask).ok())
            .map(|(_, port)| port)
            .expect("a sentinel that answers")
    }

    /// The data node on `port`.
    pub fn node(&self, port: u16) -> &RedisProcess {
        self.nodes
            .iter()
            .find(|node| node.port() == port)
            .expect("a node of this deployment")
    }

    /// Asks the sentinels for a failover without a failure: the old primary is demoted to a
    /// replica, and still answers PING.
    pub fn failover(&self) {
        self.sentinels[0].must::<()>(cmd("SENTINEL").arg("FAILOVER").arg(MASTER));
    }
}

fn data_node(primary: Option<u16>) -> RedisProcess {
    RedisProcess::start(|port, dir| {
        let mut args = data_node_args(port, dir);
        if let Some(primary) = primary {
            args.extend([
                "--replicaof".to_owned(),
                "127.0.0.1".to_owned(),
                primary.to_string(),
            ]);
        }
        args
    })
}

/// A sentinel needs a config file of its own, which it rewrites as it learns.
fn sentinel(primary: u16, quorum: usize, down_after: Duration) -> RedisProcess {
    RedisProcess::start(|port, dir| {
        let config = dir.join("sentinel.conf");
        let text = format!(
            "port {port}\nbind 127.0.0.1\ndir {dir}\n\
             sentinel monitor {MASTER} 127.0.0.1 {primary} {quorum}\n\
             sentinel down-after-milliseconds {MASTER} {down_after}\n\
             sentinel failover-timeout {MASTER} 10000\n",
            dir = dir.display(),
            down_after = down_after.as_millis(),
        );
        std::fs::write(&config, text).expect("a sentinel config file");
        vec![
            config.to_string_lossy().into_owned(),
            "--sentinel".to_owned(),
        ]
    })
}
