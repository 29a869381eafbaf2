//! Real Redis for tests.
//!
//! - [`RedisServer::start`] always starts a private server (tests that stop and restart it need their own).
//! - [`RedisServer::from_env_or_start`] uses `REDIS_URL` when it is set, else starts one.
//!
//! The pieces below the single server are kept apart so that other topologies (a cluster of nodes, sentinels) can
//! be started with the same parts: `process` runs and stops one `redis-server` (with the install hint), `resp`
//! sends one command over a plain TCP connection and reads the reply.

mod process;
mod resp;
mod server;

pub use server::RedisServer;

/// What a test says when `redis-server` cannot be found and `REDIS_URL` is unset.
pub const INSTALL_HINT: &str = "redis-server is not on the PATH and REDIS_URL is not set: \
     install it (`apt-get install redis-server`) or point REDIS_URL at a Redis you can flush";
