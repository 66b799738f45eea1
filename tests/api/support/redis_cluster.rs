//! A Redis Cluster of the test's own on free loopback ports: primaries with the slots split
//! evenly, optionally one replica each. Building one takes ~2 s (Redis holds a new primary back
//! for 2 s before it serves), so the suites lease clean 3-primary clusters from a pool
//! (`ClusterLease`), and only tests that break a cluster build their own.

use std::ops::Deref;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use redis::{Value, cmd, from_redis_value_ref};
use vcode::store::redis::{RedisSettings, RedisTopology};

use super::redis_process::{RedisProcess, data_node_args};

const SLOTS: usize = 16384;
/// Suites never fail a node over: a long node timeout keeps a busy machine from doing it.
const SUITE_NODE_TIMEOUT: Duration = Duration::from_secs(15);
/// A returned lease rests this long before its next use, so that the finished test's
/// background tasks are gone before the next test's data goes in.
const REUSE_AFTER: Duration = Duration::from_millis(50);

/// Clean clusters waiting for a test; their processes die with the test binary (watchdog).
static POOL: Mutex<Vec<(RedisCluster, Instant)>> = Mutex::new(Vec::new());

pub struct RedisCluster {
    primaries: Vec<RedisProcess>,
    /// `replicas[i]` replicates `primaries[i]` (as started; a failover swaps their roles).
    replicas: Vec<RedisProcess>,
}

impl RedisCluster {
    /// `primaries` primaries, each with one replica if `with_replicas`; a node that misses
    /// pings for `node_timeout` is failed over.
    pub fn start(primaries: usize, with_replicas: bool, node_timeout: Duration) -> Self {
        let replicas = if with_replicas { primaries } else { 0 };
        let cluster = Self {
            primaries: (0..primaries).map(|_| node(node_timeout)).collect(),
            replicas: (0..replicas).map(|_| node(node_timeout)).collect(),
        };
        cluster.assemble();
        cluster
    }

    fn nodes(&self) -> impl Iterator<Item = &RedisProcess> {
        self.primaries.iter().chain(&self.replicas)
    }

    /// What `redis-cli --cluster create` does, without its pauses.
    fn assemble(&self) {
        let nodes: Vec<&RedisProcess> = self.nodes().collect();
        for (epoch, node) in nodes.iter().enumerate() {
            node.must::<()>(cmd("CLUSTER").arg("SET-CONFIG-EPOCH").arg(epoch + 1));
        }
        let count = self.primaries.len();
        for (i, primary) in self.primaries.iter().enumerate() {
            let (first, last) = (i * SLOTS / count, (i + 1) * SLOTS / count - 1);
            primary.must::<()>(cmd("CLUSTER").arg("ADDSLOTSRANGE").arg(first).arg(last));
        }
        for node in &nodes[1..] {
            let meet = cmd("CLUSTER")
                .arg("MEET")
                .arg("127.0.0.1")
                .arg(node.port())
                .to_owned();
            nodes[0].must::<()>(&meet);
        }
        wait_until("every node knows every node", || {
            nodes.iter().all(|node| known_nodes(node) == nodes.len())
        });
        for (replica, primary) in self.replicas.iter().zip(&self.primaries) {
            let id: String = primary.must(cmd("CLUSTER").arg("MYID"));
            replica.must::<()>(cmd("CLUSTER").arg("REPLICATE").arg(id));
        }
        wait_until("every node serves every slot", || {
            nodes.iter().all(|node| serves_all_slots(node))
        });
        wait_until("the replicas are in sync", || {
            self.replicas.iter().all(replica_in_sync)
        });
    }

    /// Seed URLs for vcode: every node as started.
    pub fn seeds(&self) -> Vec<String> {
        self.nodes().map(RedisProcess::url).collect()
    }

    pub fn settings(&self, command_timeout: Duration) -> RedisSettings {
        RedisSettings {
            topology: RedisTopology::Cluster {
                nodes: self.seeds(),
            },
            connect_timeout: Duration::from_millis(500),
            command_timeout,
            ca_file: None,
            older_instances: false,
        }
    }

    pub fn primaries(&self) -> &[RedisProcess] {
        &self.primaries
    }

    pub fn replicas(&self) -> &[RedisProcess] {
        &self.replicas
    }

    /// The node on `port`.
    pub fn node(&self, port: u16) -> &RedisProcess {
        self.nodes()
            .find(|node| node.port() == port)
            .expect("a node of this cluster")
    }

    /// A node that answers, to ask about the cluster.
    fn live_node(&self) -> &RedisProcess {
        self.nodes()
            .find(|node| node.answers())
            .expect("a node that answers")
    }

    /// The slot of `key` (`CLUSTER KEYSLOT`).
    pub fn keyslot(&self, key: &str) -> u16 {
        self.live_node()
            .must(cmd("CLUSTER").arg("KEYSLOT").arg(key))
    }

    /// `(first slot, last slot, port of its primary)` per range, as the cluster says now.
    pub fn slot_owners(&self) -> Vec<(u16, u16, u16)> {
        let ranges: Vec<Vec<Value>> = self.live_node().must(cmd("CLUSTER").arg("SLOTS"));
        ranges
            .iter()
            .map(|range| {
                let primary: Vec<Value> = from_redis_value_ref(&range[2]).expect("a node");
                let number = |value: &Value| from_redis_value_ref::<u16>(value).expect("a number");
                (number(&range[0]), number(&range[1]), number(&primary[1]))
            })
            .collect()
    }

    /// The port of the primary serving `slot` now.
    pub fn owner_of(&self, slot: u16) -> u16 {
        self.slot_owners()
            .into_iter()
            .find(|(first, last, _)| (*first..=*last).contains(&slot))
            .map(|(_, _, port)| port)
            .expect("every slot is served")
    }

    /// Empties every node and forgets the previous test's clients and scripts.
    fn reset(&self) -> bool {
        self.primaries.iter().all(|primary| {
            let kill = cmd("CLIENT")
                .arg("KILL")
                .arg("TYPE")
                .arg("normal")
                .to_owned();
            primary.query::<i64>(&kill).is_ok()
                && primary.query::<()>(&cmd("FLUSHALL")).is_ok()
                && primary.query::<()>(cmd("SCRIPT").arg("FLUSH")).is_ok()
                && serves_all_slots(primary)
        })
    }
}

fn node(node_timeout: Duration) -> RedisProcess {
    // Each node also listens on its cluster bus port, port + 10000.
    RedisProcess::start_below(u16::MAX - 10_000, |port, dir| {
        let config_file = dir.join("nodes.conf").to_string_lossy().into_owned();
        let timeout_ms = node_timeout.as_millis().to_string();
        let mut args = data_node_args(port, dir);
        args.extend(
            [
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                &config_file,
                "--cluster-node-timeout",
                &timeout_ms,
                // The slots of healthy primaries stay served while another one fails over.
                "--cluster-require-full-coverage",
                "no",
            ]
            .map(str::to_owned),
        );
        args
    })
}

fn known_nodes(node: &RedisProcess) -> usize {
    node.query::<String>(cmd("CLUSTER").arg("NODES"))
        .map(|nodes| {
            nodes
                .lines()
                .filter(|line| !line.contains("handshake") && !line.contains("noaddr"))
                .count()
        })
        .unwrap_or(0)
}

fn serves_all_slots(node: &RedisProcess) -> bool {
    node.query::<String>(cmd("CLUSTER").arg("INFO"))
        .is_ok_and(|info| {
            info.contains("cluster_state:ok") && info.contains(&format!("cluster_slots_ok:{SLOTS}"))
        })
}

pub(super) fn replica_in_sync(replica: &RedisProcess) -> bool {
    replica
        .query::<String>(cmd("INFO").arg("replication"))
        .is_ok_and(|info| info.contains("master_link_status:up"))
}

/// Polls `ready` for up to 20 s; a set-up that never gets there fails the test.
pub(super) fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A clean 3-primary cluster for one test, back to the pool when the test is done.
pub struct ClusterLease(Option<RedisCluster>);

impl ClusterLease {
    pub fn take() -> Self {
        // The one returned longest ago: the least likely to need its rest.
        let pooled = {
            let mut pool = POOL.lock().unwrap_or_else(PoisonError::into_inner);
            (!pool.is_empty()).then(|| pool.remove(0))
        };
        let reused = pooled.and_then(|(cluster, returned)| {
            std::thread::sleep(REUSE_AFTER.saturating_sub(returned.elapsed()));
            cluster.reset().then_some(cluster)
        });
        Self(Some(reused.unwrap_or_else(|| {
            RedisCluster::start(3, false, SUITE_NODE_TIMEOUT)
        })))
    }
}

impl Deref for ClusterLease {
    type Target = RedisCluster;

    fn deref(&self) -> &RedisCluster {
        self.0.as_ref().expect("leased until dropped")
    }
}

impl Drop for ClusterLease {
    fn drop(&mut self) {
        // After a failed test the cluster's state is unknown: it is not reused.
        if let Some(cluster) = self.0.take()
            && !std::thread::panicking()
        {
            let mut pool = POOL.lock().unwrap_or_else(PoisonError::into_inner);
            pool.push((cluster, Instant::now()));
        }
    }
}
