//! Where Redis is and how to reach it: one server, a Redis Cluster, or a primary under Sentinel. One connection
//! type for all three, used by the finish sink, the listener and the room's `RedisStore`.
//!
//! Each kind is redis-rs's own client for it, so failover handling is the library's, not ours:
//!
//! - **one server**: [`ConnectionManager`] (multiplexed, reconnecting);
//! - **a cluster**: redis-rs's async cluster client ([`ClusterConnection`]): it learns the slot map from the seed
//!   nodes, follows `MOVED` and `ASK`, and refreshes the map when a replica is promoted. Every key of one on-sale
//!   shares the hash tag `{event}`, so each script runs on one shard;
//! - **Sentinel**: redis-rs's [`SentinelClient`] asks the sentinels for the named primary's address and opens a
//!   multiplexed connection to it. redis-rs has no reconnecting Sentinel connection, so this module adds the one
//!   missing piece: when a call fails with a dropped connection, a timeout or `READONLY` (the old primary demoted to
//!   a replica), the connection is dropped and the next call asks the sentinels again. The failed call itself fails
//!   (the room treats it as an outage and carries on from its snapshot); nothing is retried behind the caller's back.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ::redis::aio::{
    ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
use ::redis::cluster::ClusterClientBuilder;
use ::redis::cluster_async::ClusterConnection;
use ::redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use ::redis::sentinel::{SentinelClient, SentinelServerType};
use ::redis::{
    AsyncConnectionConfig, Client, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult,
    ServerErrorKind, Value,
};

/// Where the Redis (or Valkey) holding the line is.
///
/// ```
/// use waitroom_verify::redis::RedisTarget;
///
/// let one = RedisTarget::from("redis://127.0.0.1:6379/");
/// let cluster = RedisTarget::cluster(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"]);
/// let sentinel = RedisTarget::sentinel(["redis://10.0.0.1:26379", "redis://10.0.0.2:26379"], "waitroom");
/// # let _ = (one, cluster, sentinel);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub enum RedisTarget {
    /// One server: `redis://[:password@]host:port/[db]`.
    Server(String),
    /// A Redis Cluster, found from one or more of its nodes (seed URLs; the rest is learnt from the cluster).
    Cluster(Vec<String>),
    /// A primary with replicas under Sentinel: the sentinels' URLs and the primary's name in their configuration
    /// (`sentinel monitor <name> …`).
    Sentinel {
        /// The sentinels (`redis://host:26379`), asked in order.
        sentinels: Vec<String>,
        /// The name of the primary the sentinels monitor.
        master: String,
    },
}

impl RedisTarget {
    /// A Redis Cluster reached through `seeds` (any of its nodes).
    pub fn cluster<S: Into<String>>(seeds: impl IntoIterator<Item = S>) -> Self {
        Self::Cluster(seeds.into_iter().map(Into::into).collect())
    }

    /// The primary named `master` under the sentinels at `sentinels`.
    pub fn sentinel<S: Into<String>>(
        sentinels: impl IntoIterator<Item = S>,
        master: impl Into<String>,
    ) -> Self {
        Self::Sentinel {
            sentinels: sentinels.into_iter().map(Into::into).collect(),
            master: master.into(),
        }
    }

    /// Which kind of deployment this is, in a word (`server`, `cluster` or `sentinel`), for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Server(_) => "server",
            Self::Cluster(_) => "cluster",
            Self::Sentinel { .. } => "sentinel",
        }
    }

    /// The URLs: the server's, the seed nodes', or the sentinels'.
    pub fn urls(&self) -> &[String] {
        match self {
            Self::Server(url) => std::slice::from_ref(url),
            Self::Cluster(seeds) => seeds,
            Self::Sentinel { sentinels, .. } => sentinels,
        }
    }

    /// Checks the URLs without connecting. The error never repeats a URL (it may carry a password).
    ///
    /// # Errors
    /// A sentence naming what is wrong: a malformed URL, no seed node, no sentinel, an empty primary name.
    pub fn check(&self) -> Result<(), String> {
        let urls: &[String] = match self {
            Self::Server(url) => std::slice::from_ref(url),
            Self::Cluster(seeds) => seeds,
            Self::Sentinel { sentinels, master } => {
                if master.trim().is_empty() {
                    return Err("the Sentinel primary's name is empty".into());
                }
                sentinels
            }
        };
        if urls.is_empty() {
            return Err(format!("a Redis {} needs at least one URL", self.kind()));
        }
        for (i, url) in urls.iter().enumerate() {
            Client::open(url.as_str()).map_err(|e| {
                format!(
                    "invalid Redis URL (number {} of the {}): {e}",
                    i + 1,
                    self.kind()
                )
            })?;
        }
        Ok(())
    }
}

impl From<&str> for RedisTarget {
    fn from(url: &str) -> Self {
        Self::Server(url.to_owned())
    }
}

impl From<&String> for RedisTarget {
    fn from(url: &String) -> Self {
        Self::Server(url.clone())
    }
}

impl From<String> for RedisTarget {
    fn from(url: String) -> Self {
        Self::Server(url)
    }
}

impl fmt::Debug for RedisTarget {
    // URLs may carry passwords: only the kind, the count and the primary's name are shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Server(_) => f.write_str("RedisTarget::Server(<redacted>)"),
            Self::Cluster(seeds) => write!(f, "RedisTarget::Cluster({} seeds)", seeds.len()),
            Self::Sentinel { sentinels, master } => write!(
                f,
                "RedisTarget::Sentinel({} sentinels, master {master:?})",
                sentinels.len()
            ),
        }
    }
}

/// A connection to a [`RedisTarget`]: multiplexed (clones share it), following failovers as described in the
/// module docs. It implements redis-rs's [`ConnectionLike`], so commands, pipelines and scripts run on it as on any
/// redis-rs connection.
#[derive(Clone)]
pub struct RedisConnection {
    inner: Inner,
}

#[derive(Clone)]
enum Inner {
    Server(ConnectionManager),
    Cluster(ClusterConnection),
    Sentinel(Arc<SentinelConnection>),
}

impl fmt::Debug for RedisConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.inner {
            Inner::Server(_) => "server",
            Inner::Cluster(_) => "cluster",
            Inner::Sentinel(_) => "sentinel",
        };
        f.debug_struct("RedisConnection")
            .field("kind", &kind)
            .finish_non_exhaustive()
    }
}

/// Connects to `target`. Each attempt to (re)connect is bounded by `connect_timeout`, each answer by
/// `response_timeout`; the first connect as a whole is bounded by twice `connect_timeout`.
///
/// # Errors
/// Redis's error when it cannot be reached (or, for a target that fails [`RedisTarget::check`], an error of kind
/// [`ErrorKind::InvalidClientConfig`]), or an I/O error of kind [`TimedOut`](std::io::ErrorKind::TimedOut) when the
/// first connect outlasts its bound.
pub async fn connect(
    target: &RedisTarget,
    connect_timeout: Duration,
    response_timeout: Duration,
) -> Result<RedisConnection, RedisError> {
    target.check().map_err(|e| {
        RedisError::from((ErrorKind::InvalidClientConfig, "invalid Redis target", e))
    })?;
    let limit = connect_timeout * 2;
    let open = async {
        Ok::<_, RedisError>(match target {
            Target::Server(url) => {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(connect_timeout))
                    .set_response_timeout(Some(response_timeout))
                    .set_number_of_retries(1)
                    .set_min_delay(Duration::from_millis(50))
                    .set_max_delay(Duration::from_millis(500));
                Inner::Server(
                    ConnectionManager::new_with_config(Client::open(url.as_str())?, config).await?,
                )
            }
            Target::Cluster(seeds) => {
                let client = ClusterClientBuilder::new(seeds.iter().map(String::as_str))
                    .connection_timeout(connect_timeout)
                    .response_timeout(response_timeout)
                    // A failed call fails quickly (the room's own timeout bounds it anyway); the client refreshes
                    // its slot map in the background and the next call goes to the new primary.
                    .retries(2)
                    .min_retry_wait(50)
                    .max_retry_wait(500)
                    .build()?;
                Inner::Cluster(client.get_async_connection().await?)
            }
            Target::Sentinel { sentinels, master } => {
                let client = SentinelClient::build(
                    sentinels.iter().map(String::as_str).collect(),
                    master.clone(),
                    None,
                    SentinelServerType::Master,
                )?;
                let conn = SentinelConnection {
                    client: tokio::sync::Mutex::new(client),
                    current: Mutex::new(None),
                    config: AsyncConnectionConfig::new()
                        .set_connection_timeout(Some(connect_timeout))
                        .set_response_timeout(Some(response_timeout)),
                };
                // Resolve the primary now, so a wrong name or dead sentinels fail the connect.
                conn.get().await?;
                Inner::Sentinel(Arc::new(conn))
            }
        })
    };
    match tokio::time::timeout(limit, open).await {
        Ok(r) => r.map(|inner| RedisConnection { inner }),
        Err(_) => Err(RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("Redis did not accept a connection within {limit:?}"),
        ))),
    }
}

use RedisTarget as Target;

impl RedisConnection {
    /// Runs `cmd` where the keys hashing like `key` live: on a cluster, the primary that owns `key`'s slot (for
    /// commands the cluster client cannot route by themselves, such as `SCAN`); elsewhere, the one primary.
    ///
    /// # Errors
    /// Redis's error.
    pub async fn run_on_slot_of(&mut self, key: &str, cmd: &Cmd) -> RedisResult<Value> {
        match &mut self.inner {
            Inner::Cluster(c) => {
                let route = Route::with_key(key, SlotAddr::Master);
                c.route_command(
                    cmd.clone(),
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                )
                .await
            }
            _ => cmd.query_async(self).await,
        }
    }
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match &mut self.inner {
            Inner::Server(c) => c.req_packed_command(cmd),
            Inner::Cluster(c) => c.req_packed_command(cmd),
            Inner::Sentinel(s) => {
                let s = s.clone();
                Box::pin(async move {
                    let mut c = s.get().await?;
                    let r = c.req_packed_command(cmd).await;
                    s.after(&r);
                    r
                })
            }
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match &mut self.inner {
            Inner::Server(c) => c.req_packed_commands(pipeline, offset, count),
            Inner::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
            Inner::Sentinel(s) => {
                let s = s.clone();
                Box::pin(async move {
                    let mut c = s.get().await?;
                    let r = c.req_packed_commands(pipeline, offset, count).await;
                    s.after(&r);
                    r
                })
            }
        }
    }

    fn get_db(&self) -> i64 {
        match &self.inner {
            Inner::Server(c) => c.get_db(),
            Inner::Cluster(c) => c.get_db(),
            Inner::Sentinel(_) => 0,
        }
    }
}

/// The primary under Sentinel: the connection to the address the sentinels gave last, dropped when it fails so
/// the next call asks them again.
struct SentinelConnection {
    client: tokio::sync::Mutex<SentinelClient>,
    current: Mutex<Option<MultiplexedConnection>>,
    config: AsyncConnectionConfig,
}

impl SentinelConnection {
    /// The current primary's connection, asking the sentinels first when there is none.
    async fn get(&self) -> RedisResult<MultiplexedConnection> {
        if let Some(c) = self
            .current
            .lock()
            .expect("sentinel connection lock")
            .clone()
        {
            return Ok(c);
        }
        // One caller asks the sentinels; the others wait for it and take its connection.
        let mut client = self.client.lock().await;
        if let Some(c) = self
            .current
            .lock()
            .expect("sentinel connection lock")
            .clone()
        {
            return Ok(c);
        }
        let c = client
            .get_async_connection_with_config(&self.config)
            .await?;
        *self.current.lock().expect("sentinel connection lock") = Some(c.clone());
        Ok(c)
    }

    /// After a call: a dropped connection, a timeout or a write refused by a replica means the primary may have
    /// moved; forget the connection so the next call asks the sentinels.
    fn after<T>(&self, r: &RedisResult<T>) {
        if let Err(e) = r
            && (e.is_io_error()
                || e.is_connection_dropped()
                || e.is_connection_refusal()
                || e.is_timeout()
                || e.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
                || e.code() == Some("READONLY"))
        {
            *self.current.lock().expect("sentinel connection lock") = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RedisTarget;

    #[test]
    fn a_target_checks_every_url_and_never_repeats_one() {
        assert!(RedisTarget::from("redis://127.0.0.1:6379/").check().is_ok());
        let bad = RedisTarget::cluster(["redis://127.0.0.1:7000", "http://:secret@x"]);
        let e = bad.check().unwrap_err();
        assert!(e.contains("number 2 of the cluster"), "{e}");
        assert!(!e.contains("secret"), "{e}");
        assert!(RedisTarget::cluster(Vec::<String>::new()).check().is_err());
        assert!(
            RedisTarget::sentinel(["redis://127.0.0.1:26379"], " ")
                .check()
                .is_err()
        );
    }

    #[test]
    fn debug_shows_the_kind_but_no_url() {
        let t = RedisTarget::from("redis://:hunter2@10.0.0.1:6379/");
        assert_eq!(format!("{t:?}"), "RedisTarget::Server(<redacted>)");
        let s = RedisTarget::sentinel(["redis://:hunter2@a:26379"], "waitroom");
        let shown = format!("{s:?}");
        assert!(
            !shown.contains("hunter2") && shown.contains("waitroom"),
            "{shown}"
        );
    }
}
