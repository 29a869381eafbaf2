//! Real Redis for tests.
//!
//! - [`RedisServer::start`] always starts a private server (tests that stop and restart it need their own).
//! - [`RedisServer::from_env_or_start`] uses `REDIS_URL` when it is set, else starts one.
//! - [`RedisCluster::start`]: six nodes, three primaries with a replica each (`redis-cli --cluster create`).
//! - [`RedisSentinel::start`]: one primary, two replicas and three sentinels watching them.
//!
//! The pieces below the single server are kept apart so that other topologies (a cluster of nodes, sentinels) can
//! be started with the same parts: `process` runs and stops one `redis-server` (with the install hint), `resp`
//! sends one command over a plain TCP connection and reads the reply.

mod cluster;
mod process;
mod resp;
mod sentinel;
mod server;

pub use cluster::{CLI_HINT, RedisCluster};
pub use sentinel::{MASTER_NAME, RedisSentinel};
pub use server::RedisServer;

/// A fresh directory under the system's temporary directory for one server's files.
fn scratch_dir(kind: &str, port: u16) -> std::path::PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!(
        "waitroom-{kind}-{}-{port}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("create a directory for redis-server");
    dir
}

/// What a test says when `redis-server` cannot be found and `REDIS_URL` is unset.
pub const INSTALL_HINT: &str = "redis-server is not on the PATH and REDIS_URL is not set: \
     install it (`apt-get install redis-server`) or point REDIS_URL at a Redis you can flush";

/// Polls `ok` every 50 ms until it holds; panics naming `what` after `limit`.
fn wait_until<T>(it: &T, limit: std::time::Duration, what: &str, mut ok: impl FnMut(&T) -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !ok(it) {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within {limit:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
