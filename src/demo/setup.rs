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
    let mut b = WaitingRoomLayer::builder(room);
    for p in PROTECTED_PATHS {
        b = b.protect_prefix(*p);
    }
    b.bypass(|parts| parts.uri.path() == "/healthz").build()
}

/// Serves `app` on `listener` with the room around the whole router: the room sees every request before axum
/// routes it (its own endpoints, the status poll first of all, never reach the router, and no per-route copy of
/// the room's service is made per request). What `app.layer(room)` does, for less work per request.
///
/// # Errors
/// As [`axum::serve()`].
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
    axum::serve(
        listener,
        axum::ServiceExt::<axum::extract::Request>::into_make_service(app),
    )
    .await
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
    /// A Redis URL for the shared store (needs the `redis` feature); `None` for the embedded store.
    pub redis: Option<String>,
    /// The room's data directory ([`RoomBuilder::data_dir`](waitroom_layer::RoomBuilder::data_dir)): the signing
    /// key and cookie secret, and on the embedded store the line (durable: a restart resumes the sale). `None`
    /// keeps nothing (fresh keys and an empty line at every start).
    pub data_dir: Option<PathBuf>,
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
            redis: None,
            data_dir: None,
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

/// The shared store for `redis` (a URL), or `None` for the embedded one.
///
/// # Errors
/// When Redis cannot be reached, or a URL is given to a build without the `redis` feature.
pub async fn store_for(redis: Option<&str>) -> Result<Option<Arc<dyn Store>>, BoxError> {
    let Some(url) = redis else { return Ok(None) };
    #[cfg(feature = "redis")]
    {
        let store = waitroom_layer::RedisStore::connect(url).await?;
        Ok(Some(Arc::new(store)))
    }
    #[cfg(not(feature = "redis"))]
    {
        Err(format!(
            "--redis {url}: this build has no Redis store; build with the `redis` feature \
             (cargo run --release --features redis --example ...)"
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
        .secure_cookies(false);
    b = match (o.random_draw, opens_at) {
        (true, Some(at)) => b.fairness(Fairness::RandomAtOpen { opens_at: at }),
        (_, Some(at)) => b.opens_at(at),
        (_, None) => b,
    };
    if let Some(store) = store_for(o.redis.as_deref()).await? {
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
