//! One primary, two replicas and three sentinels on loopback ports, for failover tests: kill the primary and wait
//! for the sentinels to promote a replica.

use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

use super::{process, resp, scratch_dir, wait_until};
use crate::port::free_port;

/// The name the sentinels know the primary by.
pub const MASTER_NAME: &str = "waitroom";

#[derive(Debug)]
struct Proc {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

/// A primary, two replicas and three sentinels (quorum 2), killed on drop.
#[derive(Debug)]
pub struct RedisSentinel {
    servers: Vec<Proc>,
    sentinels: Vec<Proc>,
    down_after: Duration,
}

impl RedisSentinel {
    /// Starts the primary, its two replicas and three sentinels with `down-after-milliseconds` `down_after` (a
    /// primary unreachable that long is failed over), and waits until both replicas are in sync and every sentinel
    /// knows both replicas and the other two sentinels.
    ///
    /// # Panics
    /// When `redis-server` is missing (with an install hint) or the set is not ready within 30 s.
    pub fn start(down_after: Duration) -> Self {
        let mut servers = Vec::new();
        for _ in 0..3 {
            let primary = servers.first().map(|p: &Proc| p.port.to_string());
            let mut extra = vec![];
            if let Some(p) = &primary {
                extra = vec!["--replicaof", "127.0.0.1", p.as_str()];
            }
            let (port, dir, child) = process::spawn_on_free_port("sentinel-node", &extra);
            servers.push(Proc {
                port,
                dir,
                child: Some(child),
            });
        }
        let primary = servers[0].port;
        let mut set = Self {
            servers,
            sentinels: Vec::new(),
            down_after,
        };
        set.wait_until("both replicas are in sync", |s| {
            s.command(primary, &["INFO", "replication"])
                .contains("connected_slaves:2")
                && s.servers[1..].iter().all(|r| {
                    resp::on(r.port, &["INFO", "replication"])
                        .is_some_and(|i| i.contains("master_link_status:up"))
                })
        });
        for _ in 0..3 {
            let port = free_port();
            let dir = scratch_dir("sentinel", port);
            let conf = dir.join("sentinel.conf");
            let ms = down_after.as_millis();
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndir {dir}\n\
                     sentinel monitor {MASTER_NAME} 127.0.0.1 {primary} 2\n\
                     sentinel down-after-milliseconds {MASTER_NAME} {ms}\n\
                     sentinel failover-timeout {MASTER_NAME} {failover}\n\
                     sentinel parallel-syncs {MASTER_NAME} 1\n",
                    dir = dir.display(),
                    failover = (ms * 4).max(2_000),
                ),
            )
            .expect("write sentinel.conf");
            let mut child = process::spawn_sentinel(&conf);
            assert!(
                process::answers_ping(port, &mut child),
                "the sentinel on port {port} exited at start (port taken?)"
            );
            set.sentinels.push(Proc {
                port,
                dir,
                child: Some(child),
            });
        }
        set.wait_until(
            "every sentinel knows two replicas and two other sentinels",
            |s| {
                s.sentinels.iter().all(|x| {
                    resp::on(x.port, &["SENTINEL", "MASTER", MASTER_NAME]).is_some_and(|m| {
                        let f: Vec<&str> = m.lines().collect();
                        let get = |k: &str| {
                            f.iter()
                                .position(|l| *l == k)
                                .and_then(|i| f.get(i + 1).copied())
                        };
                        get("num-slaves") == Some("2") && get("num-other-sentinels") == Some("2")
                    })
                })
            },
        );
        set
    }

    /// The sentinels' URLs (`redis://127.0.0.1:<port>/`).
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|s| format!("redis://127.0.0.1:{}/", s.port))
            .collect()
    }

    /// The name the sentinels know the primary by ([`MASTER_NAME`]).
    pub fn master_name(&self) -> &'static str {
        MASTER_NAME
    }

    /// The down-after time the sentinels were started with.
    pub fn down_after(&self) -> Duration {
        self.down_after
    }

    /// The port of the primary as the sentinels name it now.
    ///
    /// # Panics
    /// When no sentinel answers.
    pub fn primary(&self) -> u16 {
        self.try_primary().expect("a sentinel names the primary")
    }

    fn try_primary(&self) -> Option<u16> {
        self.sentinels
            .iter()
            .filter(|s| s.child.is_some())
            .find_map(|s| {
                resp::on(
                    s.port,
                    &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME],
                )
                .and_then(|r| r.lines().nth(1).and_then(|p| p.parse().ok()))
            })
    }

    /// The data nodes' ports other than `port` that are alive.
    pub fn others(&self, port: u16) -> Vec<u16> {
        self.servers
            .iter()
            .filter(|s| s.port != port && s.child.is_some())
            .map(|s| s.port)
            .collect()
    }

    /// Kills the data node on `port` with SIGKILL.
    pub fn kill(&mut self, port: u16) {
        if let Some(child) = self.server_mut(port).child.take() {
            process::kill(child);
        }
    }

    /// Stops (SIGSTOP) or continues (SIGCONT) the data node on `port`: a stopped replica receives no writes.
    pub fn signal(&mut self, port: u16, stop: bool) {
        process::pause(
            self.server_mut(port).child.as_ref().expect("a live node"),
            stop,
        );
    }

    /// Waits (up to `down_after + 30 s`) until the sentinels name a primary other than `old` and that node says it
    /// is a primary; returns its port.
    ///
    /// # Panics
    /// When no replica is promoted in time.
    pub fn wait_for_new_primary(&self, old: u16) -> u16 {
        let mut found = None;
        self.wait_until("the sentinels promote a replica", |s| {
            found = s.try_primary().filter(|p| *p != old);
            found.is_some_and(|p| resp::on(p, &["ROLE"]).is_some_and(|r| r.starts_with("master")))
        });
        found.expect("a new primary")
    }

    /// Sends one command to the data node or sentinel on `port`; the reply as text (see `RedisServer::command`).
    ///
    /// # Panics
    /// When it does not answer or answers with an error.
    pub fn command(&self, port: u16, args: &[&str]) -> String {
        resp::on(port, args).unwrap_or_else(|| panic!("command {args:?} on port {port} failed"))
    }

    fn server_mut(&mut self, port: u16) -> &mut Proc {
        self.servers
            .iter_mut()
            .find(|s| s.port == port)
            .unwrap_or_else(|| panic!("no data node on port {port}"))
    }

    fn wait_until(&self, what: &str, ok: impl FnMut(&Self) -> bool) {
        let limit = self.down_after + Duration::from_secs(30);
        wait_until(self, limit, &format!("sentinel: {what}"), ok);
    }
}

impl Drop for RedisSentinel {
    fn drop(&mut self) {
        for p in self.sentinels.iter_mut().chain(self.servers.iter_mut()) {
            if let Some(child) = p.child.take() {
                process::kill(child);
            }
            let _ = std::fs::remove_dir_all(&p.dir);
        }
    }
}
