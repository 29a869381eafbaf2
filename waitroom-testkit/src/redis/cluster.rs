//! A Redis Cluster of six nodes (three primaries, three replicas) on loopback ports, made with
//! `redis-cli --cluster create … --cluster-replicas 1`, for failover tests: kill the primary that owns a key's slot
//! and wait for its replica to take over.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{process, resp, scratch_dir, wait_until};
use crate::port::free_port;

/// What a test says when `redis-cli` (needed to create the cluster) is missing.
pub const CLI_HINT: &str = "redis-cli is not on the PATH: install it (`apt-get install redis-tools`, or \
     `apt-get install redis-server`, which brings it)";

/// One node of a [`RedisCluster`].
#[derive(Debug)]
struct Node {
    port: u16,
    bus: u16,
    dir: PathBuf,
    child: Option<Child>,
}

/// Six `redis-server` nodes in cluster mode, three primaries with a replica each, killed on drop.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<Node>,
    node_timeout: Duration,
}

impl RedisCluster {
    /// Starts six nodes with `cluster-node-timeout` `node_timeout` (a primary unreachable that long is failed over
    /// to its replica), creates the cluster and waits until every node reports `cluster_state:ok` and every
    /// primary has a replica attached.
    ///
    /// # Panics
    /// When `redis-server` or `redis-cli` is missing (with an install hint), or the cluster is not ready within
    /// 30 s.
    pub fn start(node_timeout: Duration) -> Self {
        let mut nodes = Vec::new();
        for _ in 0..6 {
            let port = free_port();
            let bus = free_port();
            let dir = scratch_dir("cluster", port);
            nodes.push(Node {
                port,
                bus,
                dir,
                child: None,
            });
        }
        let mut cluster = Self {
            nodes,
            node_timeout,
        };
        for i in 0..6 {
            // A port found free may be taken by another test's server before this node binds it (the node then
            // exits at once): try other ports, a few times.
            let mut tries = 0;
            while !cluster.try_spawn(i) {
                tries += 1;
                assert!(
                    tries < 5,
                    "no cluster node would start on 5 pairs of free ports"
                );
                cluster.nodes[i].port = free_port();
                cluster.nodes[i].bus = free_port();
                cluster.nodes[i].dir = scratch_dir("cluster", cluster.nodes[i].port);
            }
        }
        let mut create = Command::new("redis-cli");
        create.args(["--cluster", "create"]);
        for n in &cluster.nodes {
            create.arg(format!("127.0.0.1:{}", n.port));
        }
        create
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let out = match create.output() {
            Ok(o) => o,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!("{CLI_HINT}"),
            Err(e) => panic!("could not run redis-cli: {e}"),
        };
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Six nodes agreeing takes longer than a failover's wait on a loaded 2-core box (two clusters and a
        // Sentinel set starting at once in `redis_failover`: over 31 s once in .ci/run): a longer bound here.
        wait_until(
            &cluster,
            cluster.node_timeout + Duration::from_secs(90),
            "cluster: every node reports cluster_state:ok with three replicas",
            |c| {
                c.nodes.iter().all(|n| {
                    resp::on(n.port, &["CLUSTER", "INFO"])
                        .is_some_and(|i| i.contains("cluster_state:ok"))
                }) && c.replica_count() == 3
            },
        );
        cluster
    }

    /// Starts node `i` and waits for its `PING`; `false` when it exited at once (its port taken).
    fn try_spawn(&mut self, i: usize) -> bool {
        let timeout = self.node_timeout.as_millis().to_string();
        let n = &mut self.nodes[i];
        let bus = n.bus.to_string();
        n.child = Some(process::spawn(
            n.port,
            &n.dir,
            &[
                "--cluster-enabled",
                "yes",
                "--cluster-port",
                &bus,
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                &timeout,
                // A replica may take over however far behind it is (the lost-writes test relies on it).
                "--cluster-replica-validity-factor",
                "0",
            ],
        ));
        let port = n.port;
        process::answers_ping(port, n.child.as_mut().expect("just started"))
    }

    /// Seed URLs for a cluster client: every node's `redis://127.0.0.1:<port>/`.
    pub fn urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}/", n.port))
            .collect()
    }

    /// The node timeout the cluster was started with.
    pub fn node_timeout(&self) -> Duration {
        self.node_timeout
    }

    /// The port of the live primary that owns `key`'s slot now, as the live nodes see it, waiting (bounded) for
    /// a live node to name one: a node slow to answer under load names none for a moment.
    ///
    /// # Panics
    /// When no live node names one within the wait.
    pub fn primary_for(&self, key: &str) -> u16 {
        let mut owner = None;
        self.wait_until(&format!("a live node owns the slot of {key:?}"), |c| {
            owner = c.try_primary_for(key);
            owner.is_some()
        });
        owner.expect("the wait returns once a live node owns the slot")
    }

    fn try_primary_for(&self, key: &str) -> Option<u16> {
        let slot = self.live_command(&["CLUSTER", "KEYSLOT", key])?;
        let slot: u64 = slot.parse().ok()?;
        let mut owner = None;
        for n in self.nodes.iter().filter(|n| n.child.is_some()) {
            let nodes = resp::on(n.port, &["CLUSTER", "NODES"])?;
            for line in nodes.lines() {
                let f: Vec<&str> = line.split(' ').collect();
                if f.len() < 9 || !f[2].contains("master") || f[2].contains("fail") {
                    continue;
                }
                let owns = f[8..].iter().any(|r| match r.split_once('-') {
                    Some((a, b)) => {
                        a.parse::<u64>().is_ok_and(|a| a <= slot)
                            && b.parse::<u64>().is_ok_and(|b| slot <= b)
                    }
                    None => r.parse::<u64>().is_ok_and(|a| a == slot),
                });
                if owns {
                    let port: u16 = f[1].split(['@', ':']).nth(1)?.parse().ok()?;
                    owner = Some(port);
                }
            }
            if owner.is_some() {
                break;
            }
        }
        owner.filter(|p| self.nodes.iter().any(|n| n.port == *p && n.child.is_some()))
    }

    /// The port of a replica of the primary on `primary`.
    ///
    /// # Panics
    /// When it has none.
    pub fn replica_of(&self, primary: u16) -> u16 {
        let id = resp::on(primary, &["CLUSTER", "MYID"]).expect("CLUSTER MYID");
        let replicas = resp::on(primary, &["CLUSTER", "NODES"]).expect("CLUSTER NODES");
        replicas
            .lines()
            .find(|l| l.split(' ').nth(3) == Some(id.as_str()))
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|a| a.split(['@', ':']).nth(1))
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the primary on port {primary} has no replica"))
    }

    /// Kills the node on `port` with SIGKILL (nothing flushed).
    pub fn kill(&mut self, port: u16) {
        let n = self.node_mut(port);
        if let Some(child) = n.child.take() {
            process::kill(child);
        }
    }

    /// Stops (SIGSTOP) or continues (SIGCONT) the node on `port`: a stopped replica receives no writes.
    pub fn signal(&mut self, port: u16, stop: bool) {
        process::pause(
            self.node_mut(port).child.as_ref().expect("a live node"),
            stop,
        );
    }

    /// Waits (up to `node timeout + 30 s`) until a live node other than `old` owns `key`'s slot and reports
    /// `cluster_state:ok`; returns the new primary's port.
    ///
    /// # Panics
    /// When no replica takes over in time.
    pub fn wait_for_new_primary(&self, key: &str, old: u16) -> u16 {
        let mut found = None;
        self.wait_until("a replica takes over the slot", |c| {
            found = c.try_primary_for(key).filter(|p| *p != old);
            found.is_some_and(|p| {
                resp::on(p, &["CLUSTER", "INFO"]).is_some_and(|i| i.contains("cluster_state:ok"))
            })
        });
        found.expect("a new primary")
    }

    /// Sends one command to the node on `port` and returns its reply as text (see `RedisServer::command`).
    ///
    /// # Panics
    /// When the node does not answer or answers with an error.
    pub fn command(&self, port: u16, args: &[&str]) -> String {
        resp::on(port, args).unwrap_or_else(|| panic!("command {args:?} on port {port} failed"))
    }

    fn live_command(&self, args: &[&str]) -> Option<String> {
        self.nodes
            .iter()
            .filter(|n| n.child.is_some())
            .find_map(|n| resp::on(n.port, args))
    }

    fn replica_count(&self) -> usize {
        self.live_command(&["CLUSTER", "NODES"])
            .map(|n| {
                n.lines()
                    .filter(|l| l.split(' ').nth(2).is_some_and(|f| f.contains("slave")))
                    .count()
            })
            .unwrap_or(0)
    }

    fn node_mut(&mut self, port: u16) -> &mut Node {
        self.nodes
            .iter_mut()
            .find(|n| n.port == port)
            .unwrap_or_else(|| panic!("no cluster node on port {port}"))
    }

    fn wait_until(&self, what: &str, ok: impl FnMut(&Self) -> bool) {
        let limit = self.node_timeout + Duration::from_secs(30);
        wait_until(self, limit, &format!("cluster: {what}"), ok);
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            if let Some(child) = n.child.take() {
                process::kill(child);
            }
            let _ = std::fs::remove_dir_all(&n.dir);
        }
    }
}
