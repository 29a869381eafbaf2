//! Wiring shared by the examples: the room from flags, the room layer over the order routes, the order service's
//! verifier from the gateway's published keys.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use waitroom_layer::store::Store;
use waitroom_layer::{BuildError, Fairness, RoomBody, WaitingRoom, WaitingRoomLayer};
use waitroom_verify::jwks::{JwksHandle, JwksSource};
use waitroom_verify::{SigningKey, Verifier};

/// The demo's on-sale id (the token audience, the store key).
pub const DEFAULT_EVENT: &str = "tour-2026-stadium";

/// The room's token issuer (the room's default); the order service's verifier accepts it.
pub const ISSUER: &str = "waitroom";

/// The routes the room guards: the seat map reads live availability, the rest write to the inventory.
pub const PROTECTED_PATHS: &[&str] =
    &["/seats", "/holds", "/pay", "/leave", "/api/me", "/api/ping"];

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The room over the demo's order routes: [`PROTECTED_PATHS`] guarded, `/healthz` never sees the room, everything
/// else (the event page, confirmations, `/api/inventory`) passes untouched.
///
/// # Errors
/// Never with these paths; the signature follows [`WaitingRoomLayer::builder`].
pub fn room_layer(room: WaitingRoom) -> Result<WaitingRoomLayer, BuildError> {
    room_layer_with(room, &crate::demo::OpsOptions::default())
}

/// [`room_layer`] with the operator's kit: the admin tokens (the admin API and the status page at
/// `/waitroom/admin/`) and the metrics of `ops`.
///
/// # Errors
/// An admin or metrics token shorter than 16 bytes, or an invalid token name.
pub fn room_layer_with(
    room: WaitingRoom,
    ops: &crate::demo::OpsOptions,
) -> Result<WaitingRoomLayer, BuildError> {
    let mut b = WaitingRoomLayer::builder(room);
    for p in PROTECTED_PATHS {
        b = b.protect_prefix(*p);
    }
    ops.apply(b)
        .bypass(|parts| parts.uri.path() == "/healthz")
        .build()
}

/// Serves `app` on `listener` with the room around the whole router: the room sees every request before axum
/// routes it (its own endpoints, the status poll first of all, never reach the router, and no per-route copy of
/// the room's service is made per request). What `app.layer(room)` does, for less work per request. Connections
/// are served as [`serve`] does, with [`ServerLimits::default`].
///
/// # Errors
/// As [`serve`].
pub async fn serve_behind_room(
    listener: tokio::net::TcpListener,
    room: WaitingRoomLayer,
    app: axum::Router,
) -> std::io::Result<()> {
    use axum::body::Body;
    let app = tower::ServiceBuilder::new()
        // axum serves a service whose body is its own.
        .map_response(|res: http::Response<RoomBody<Body>>| res.map(Body::new))
        .layer(room)
        .service(app);
    serve(listener, app, ServerLimits::default()).await
}

/// What the demo's servers (the all-in-one demo, the gateway, the order service) allow a connection. A server
/// reachable from the internet should still sit behind a proxy that sets its own (README, "Deployment").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// How long a client has to send a request's whole head (request line and headers), from when the server
    /// starts waiting for it: on a new connection, and between requests on a kept-alive one, so it is also how
    /// long an idle keep-alive connection stays open. A connection sending a byte a second, or nothing, is closed
    /// after this. Default 10 s.
    pub header_read_timeout: Duration,
    /// Most connections served at once; further ones wait in the listen backlog until one closes. Default 4,096
    /// (the demo's processes have thousands of file descriptors to spare; one connection is one descriptor).
    pub max_connections: usize,
    /// The longest a kept-alive connection is served: then it is closed after the request in progress (clients
    /// reconnect), so no connection is held for ever. Default 5 minutes.
    pub max_connection_age: Duration,
    /// How long a request in progress may still take once a connection is being closed (its age reached).
    /// Default 30 s.
    pub close_grace: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            max_connections: 4_096,
            max_connection_age: Duration::from_secs(300),
            close_grace: Duration::from_secs(30),
        }
    }
}

/// Serves `app` on `listener` over HTTP/1.1 with [`ServerLimits`]: hyper's own connection with its header-read
/// timeout (on hyper-util's Tokio timer), at most `max_connections` at once (a semaphore taken before each
/// accept), each kept alive for at most `max_connection_age`. What `axum::serve` does, plus the limits it lacks.
///
/// # Errors
/// Never in practice: a failed `accept` (out of file descriptors, say) is logged and retried after 100 ms.
pub async fn serve<S, B>(
    listener: tokio::net::TcpListener,
    app: S,
    limits: ServerLimits,
) -> std::io::Result<()>
where
    S: tower::Service<http::Request<axum::body::Body>, Response = http::Response<B>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: hyper::body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    use hyper_util::rt::{TokioIo, TokioTimer};
    use tower::ServiceExt as _;

    let permits = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return Ok(());
        };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed; retrying in 100 ms");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let app = app
            .clone()
            .map_request(|req: http::Request<hyper::body::Incoming>| {
                req.map(axum::body::Body::new)
            });
        let service = hyper_util::service::TowerToHyperService::new(app);
        tokio::spawn(async move {
            let _permit = permit;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read_timeout)
                .keep_alive(true);
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                () = tokio::time::sleep(limits.max_connection_age) => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(limits.close_grace, conn).await;
                }
            }
        });
    }
}

/// The room's settings, as the examples take them from their flags.
#[derive(Debug, Clone)]
pub struct RoomOptions {
    /// The on-sale id.
    pub event: String,
    /// The on-sale's name on the holding page.
    pub display_name: String,
    /// Most sessions active at once.
    pub capacity: u64,
    /// The purchase limit written into every token (`max_qty`).
    pub max_per_order: u32,
    /// A random draw at the opening instead of first come, first served.
    pub random_draw: bool,
    /// How long until the door opens (`None`: open now; with a random draw, 30 s).
    pub opens_in: Option<Duration>,
    /// How long an admitted session may idle before its place frees.
    pub idle_timeout: Duration,
    /// How often the holding page polls.
    pub refresh: Duration,
    /// How often the door ticks.
    pub tick_interval: Duration,
    /// How long a person whose turn came while they were away keeps it ([`RoomBuilder::return_window`]).
    ///
    /// [`RoomBuilder::return_window`]: waitroom_layer::RoomBuilder::return_window
    pub return_window: Duration,
    /// Where the shared store's Redis is (needs the `redis` feature); nothing set for the embedded store.
    pub redis: RedisOptions,
    /// The room's data directory ([`RoomBuilder::data_dir`](waitroom_layer::RoomBuilder::data_dir)): the signing
    /// key and cookie secret, and on the embedded store the line (durable: a restart resumes the sale). `None`
    /// keeps nothing (fresh keys and an empty line at every start).
    pub data_dir: Option<PathBuf>,
    /// A newcomer with a free place and nobody ahead goes straight in (default `true`; see
    /// [`RoomBuilder::straight_in`](waitroom_layer::RoomBuilder::straight_in)).
    pub straight_in: bool,
}

/// Where the shared store's Redis is: one server, a Redis Cluster, or a primary under Sentinel (at most one of
/// the three). Nothing set means the embedded store.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedisOptions {
    /// One server's URL (`--redis`).
    pub url: Option<String>,
    /// A cluster's seed nodes (`--redis-cluster`).
    pub cluster: Vec<String>,
    /// The sentinels (`--redis-sentinel`), with the primary's name (`--redis-sentinel-master`).
    pub sentinel: Vec<String>,
    /// The name the sentinels know the primary by.
    pub sentinel_master: Option<String>,
}

impl RedisOptions {
    /// One server at `url`.
    pub fn server(url: impl Into<String>) -> Self {
        Self {
            url: Some(url.into()),
            ..Self::default()
        }
    }

    /// Whether a Redis is named at all.
    pub fn is_set(&self) -> bool {
        self.url.is_some() || !self.cluster.is_empty() || !self.sentinel.is_empty()
    }

    /// The flag that named it, for messages.
    fn flag(&self) -> &'static str {
        if !self.cluster.is_empty() {
            "--redis-cluster"
        } else if !self.sentinel.is_empty() {
            "--redis-sentinel"
        } else {
            "--redis"
        }
    }

    /// The connection target.
    ///
    /// # Errors
    /// When more than one kind is named, or Sentinel without the primary's name.
    #[cfg(feature = "redis")]
    pub fn target(&self) -> Result<Option<waitroom_verify::redis::RedisTarget>, BoxError> {
        use waitroom_verify::redis::RedisTarget;
        let named = [
            self.url.is_some(),
            !self.cluster.is_empty(),
            !self.sentinel.is_empty(),
        ];
        if named.iter().filter(|n| **n).count() > 1 {
            return Err(
                "name one Redis: --redis, --redis-cluster or --redis-sentinel, not several".into(),
            );
        }
        if let Some(url) = &self.url {
            return Ok(Some(RedisTarget::Server(url.clone())));
        }
        if !self.cluster.is_empty() {
            return Ok(Some(RedisTarget::cluster(self.cluster.clone())));
        }
        if !self.sentinel.is_empty() {
            let Some(master) = &self.sentinel_master else {
                return Err("--redis-sentinel needs --redis-sentinel-master NAME (the primary's name in the \
                            sentinels' configuration)"
                    .into());
            };
            return Ok(Some(RedisTarget::sentinel(
                self.sentinel.clone(),
                master.clone(),
            )));
        }
        Ok(None)
    }
}

impl Default for RoomOptions {
    /// The demo's defaults: capacity 1 (a second browser window sees the line), 4 seats per order, FIFO, open
    /// now, 10 idle minutes, a 5 s poll, the embedded store kept in memory only (no data directory).
    fn default() -> Self {
        RoomOptions {
            event: DEFAULT_EVENT.into(),
            display_name: "The 2026 Stadium Tour".into(),
            capacity: 1,
            max_per_order: 4,
            random_draw: false,
            opens_in: None,
            idle_timeout: Duration::from_secs(600),
            refresh: Duration::from_secs(5),
            tick_interval: Duration::from_millis(250),
            return_window: waitroom_layer::DEFAULT_RETURN_WINDOW,
            redis: RedisOptions::default(),
            data_dir: None,
            straight_in: true,
        }
    }
}

impl RoomOptions {
    /// When the door opens, if not at once.
    pub fn opens_at(&self) -> Option<SystemTime> {
        match (self.opens_in, self.random_draw) {
            (Some(d), _) => Some(SystemTime::now() + d),
            (None, true) => Some(SystemTime::now() + Duration::from_secs(30)),
            (None, false) => None,
        }
    }
}

/// The shared store at `redis`, or `None` for the embedded one.
///
/// # Errors
/// When Redis cannot be reached, the options name several kinds, or a Redis is named to a build without the
/// `redis` feature.
pub async fn store_for(redis: &RedisOptions) -> Result<Option<Arc<dyn Store>>, BoxError> {
    if !redis.is_set() {
        return Ok(None);
    }
    #[cfg(feature = "redis")]
    {
        let Some(target) = redis.target()? else {
            return Ok(None);
        };
        let kind = target.kind();
        let store = waitroom_layer::RedisStore::builder(target)
            .connect()
            .await
            .map_err(|e| format!("{}: {e}", redis.flag()))?;
        tracing::info!(redis = kind, "the line lives in Redis");
        Ok(Some(Arc::new(store)))
    }
    #[cfg(not(feature = "redis"))]
    {
        Err(format!(
            "{}: this build has no Redis store; build with the `redis` feature \
             (cargo run --release --features redis --example ...)",
            redis.flag()
        )
        .into())
    }
}

/// Builds the room from `o` with plain-HTTP cookies (`secure_cookies(false)`: the demo runs on
/// `http://127.0.0.1`; behind HTTPS leave them secure). Several instances over one store must pass the same
/// `signing_key` and `cookie_secret`.
///
/// # Errors
/// Invalid settings, or a store that cannot be reached.
pub async fn build_room(
    o: &RoomOptions,
    signing_key: Option<SigningKey>,
    cookie_secret: Option<Vec<u8>>,
) -> Result<WaitingRoom, BoxError> {
    let opens_at = o.opens_at();
    let mut b = WaitingRoom::builder(o.event.clone())
        .display_name(o.display_name.clone())
        .capacity(o.capacity)
        .max_qty(o.max_per_order)
        .idle_timeout(o.idle_timeout)
        .poll_interval(o.refresh)
        .tick_interval(o.tick_interval)
        .return_window(o.return_window)
        .straight_in(o.straight_in)
        .secure_cookies(false);
    b = match (o.random_draw, opens_at) {
        (true, Some(at)) => b.fairness(Fairness::RandomAtOpen { opens_at: at }),
        (_, Some(at)) => b.opens_at(at),
        (_, None) => b,
    };
    if let Some(store) = store_for(&o.redis).await? {
        b = b.shared_store(store);
    }
    if let Some(dir) = &o.data_dir {
        b = b.data_dir(dir.clone());
    }
    if let Some(key) = signing_key {
        b = b.signing_key(key);
    }
    if let Some(secret) = cookie_secret {
        b = b.cookie_secret(secret);
    }
    Ok(b.build().await?)
}

/// The order service's verifier: the room's public keys from its JWKS document at `jwks_url` (the gateway's
/// `/waitroom/jwks.json`), issuer [`ISSUER`], audience `event`, kept fresh by a [`JwksSource`]. Waits up to `wait`
/// for the gateway to answer (so the two can start in either order), re-reads the keys every `refresh` and when a
/// token names a key it does not know, so a rotated key is picked up. The refreshes stop when the returned handle
/// drops: hold it as long as the order service serves ([`JwksHandle::verifier`] gives the verifier).
///
/// # Errors
/// When no valid key set arrived within `wait`.
pub async fn verifier_from_jwks_url(
    jwks_url: &str,
    event: &str,
    wait: Duration,
    refresh: Duration,
) -> Result<JwksHandle, BoxError> {
    Ok(JwksSource::new(jwks_url)
        .start_timeout(wait)
        .refresh_every(refresh)
        .start(Verifier::builder().issuer(ISSUER).audience(event))
        .await?)
}

#[cfg(all(test, feature = "redis"))]
mod redis_options_tests {
    use super::RedisOptions;
    use waitroom_verify::redis::RedisTarget;

    #[test]
    fn each_flag_names_its_kind_of_deployment() {
        assert_eq!(RedisOptions::default().target().unwrap(), None);
        assert_eq!(
            RedisOptions::server("redis://a:6379/").target().unwrap(),
            Some(RedisTarget::Server("redis://a:6379/".into()))
        );
        let cluster = RedisOptions {
            cluster: vec!["redis://a:7000".into(), "redis://b:7000".into()],
            ..RedisOptions::default()
        };
        assert_eq!(
            cluster.target().unwrap(),
            Some(RedisTarget::cluster(["redis://a:7000", "redis://b:7000"]))
        );
        let sentinel = RedisOptions {
            sentinel: vec!["redis://a:26379".into()],
            sentinel_master: Some("waitroom".into()),
            ..RedisOptions::default()
        };
        assert_eq!(
            sentinel.target().unwrap(),
            Some(RedisTarget::sentinel(["redis://a:26379"], "waitroom"))
        );
    }

    #[test]
    fn sentinel_without_the_primary_name_or_two_kinds_at_once_are_refused() {
        let no_name = RedisOptions {
            sentinel: vec!["redis://a:26379".into()],
            ..RedisOptions::default()
        };
        let e = no_name.target().unwrap_err().to_string();
        assert!(e.contains("--redis-sentinel-master"), "{e}");
        let both = RedisOptions {
            cluster: vec!["redis://a:7000".into()],
            ..RedisOptions::server("redis://b:6379/")
        };
        let e = both.target().unwrap_err().to_string();
        assert!(e.contains("not several"), "{e}");
    }
}
