//! What the Redis tests over real HTTP share: room instances over one Redis (a server, a cluster or a primary
//! under Sentinel) behind real axum servers, browsers with cookie jars, and the calls a person makes.
#![allow(dead_code)] // each test binary uses its own share of these

use std::time::Duration;

use axum::Router;
use axum::extract::Extension;
use axum::routing::{get, post};
use reqwest::redirect::Policy;
use serde_json::Value;
use waitroom_layer::{RedisStore, STATE_HEADER, SigningKey, WaitingRoom, WaitingRoomLayer};
use waitroom_verify::redis::RedisTarget;
use waitroom_verify::{Admission, Clock, SystemClock, Verifier, VerifyLayer};

pub const SECRET: [u8; 32] = *b"a-cookie-secret-shared-by-all-3!";

pub fn event(tag: &str) -> String {
    format!("{tag}-{}-{}", std::process::id(), SystemClock.now_ms())
}

/// What every instance of one on-sale shares: the token key (as the PEM key file each would load) and the cookie
/// secret.
pub struct Keys {
    pub pem: String,
}

impl Keys {
    pub fn new() -> Self {
        let key = SigningKey::generate_ed25519("room-2026-01").unwrap();
        Self {
            pem: key.to_pem().unwrap(),
        }
    }

    pub fn signing_key(&self) -> SigningKey {
        SigningKey::from_ed25519_pem("room-2026-01", &self.pem).unwrap()
    }
}

pub struct Instance {
    pub url: String,
    pub room: WaitingRoom,
}

impl Instance {
    pub fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }
}

pub struct Setup<'a> {
    pub target: RedisTarget,
    pub event: &'a str,
    pub keys: &'a Keys,
    pub capacity: u64,
    pub background: bool,
    /// Newcomers with a free place and nobody ahead go straight in (`RoomBuilder::straight_in`); the tests that
    /// follow sessions through the line turn it off.
    pub straight_in: bool,
}

pub async fn buy(Extension(admission): Extension<Admission>) -> String {
    admission.finish_with_seats(1);
    format!("bought for {}", admission.session_id())
}

/// One instance: a room over its own `RedisStore`, `/checkout/...` behind the room, `/checkout/buy` the order
/// service (a `VerifyLayer` whose handler finishes the session through the finish header).
pub async fn instance(s: &Setup<'_>) -> Instance {
    // Short, so an outage is noticed at once; a cluster or Sentinel connect takes several round trips (the slot
    // map, the sentinels' answer), so it gets longer on a loaded machine.
    let timeout = match s.target {
        RedisTarget::Server(_) => Duration::from_millis(300),
        _ => Duration::from_millis(1_000),
    };
    let store = RedisStore::builder(s.target.clone())
        .timeout(timeout)
        .connect_timeout(timeout * 2)
        .connect()
        .await
        .unwrap();
    let room = WaitingRoom::builder(s.event)
        .capacity(s.capacity)
        .idle_timeout(Duration::from_secs(60))
        .poll_interval(Duration::from_secs(2))
        .abandon_after(Duration::from_secs(300))
        .arrival_window(Duration::from_secs(30))
        .tick_interval(Duration::from_millis(50))
        .signing_key(s.keys.signing_key())
        .cookie_secret(SECRET)
        .secure_cookies(false)
        .background(s.background)
        .straight_in(s.straight_in)
        .store(store)
        .build()
        .await
        .unwrap();
    let order_verifier = Verifier::builder()
        .keys(&s.keys.signing_key())
        .issuer("waitroom")
        .audience(s.event)
        .build()
        .unwrap();
    let layer = WaitingRoomLayer::builder(room.clone())
        .protect_prefix("/checkout")
        .build()
        .unwrap();
    let app = Router::new()
        .route("/checkout", get(|| async { "seat map" }))
        .route(
            "/checkout/buy",
            post(buy).layer(VerifyLayer::new(order_verifier)),
        )
        .layer(layer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Instance {
        url: format!("http://{addr}"),
        room,
    }
}

pub async fn instances(s: &Setup<'_>, n: usize) -> Vec<Instance> {
    let mut v = Vec::new();
    for _ in 0..n {
        v.push(instance(s).await);
    }
    v
}

/// A browser: cookie store on (cookies are per host, not per port, so one jar serves the three instances, as
/// behind one load balancer), redirects off, an `Accept` naming `text/html` (so pages, not JSON).
pub fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .default_headers(reqwest::header::HeaderMap::from_iter([(
            reqwest::header::ACCEPT,
            reqwest::header::HeaderValue::from_static("text/html,application/xhtml+xml,*/*;q=0.8"),
        )]))
        .cookie_store(true)
        .redirect(Policy::none())
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

pub fn state(res: &reqwest::Response) -> String {
    res.headers()
        .get(STATE_HEADER)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

/// The session id from the `Set-Cookie` of a first response (`<session>.<mark>.<mac>`).
pub fn session_of(res: &reqwest::Response) -> Option<String> {
    res.headers().get_all("set-cookie").iter().find_map(|v| {
        let v = v.to_str().ok()?;
        let value = v.split(';').next()?.strip_prefix("waitroom_session=")?;
        Some(value.split('.').next()?.to_owned())
    })
}

/// A small deterministic RNG (xorshift64*), one per task.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One person in the fault test, with what it was told at the start.
pub struct Person {
    pub b: reqwest::Client,
    pub session: String,
    pub number: u64,
}

pub async fn poll_json(p: &Person, site: &Instance) -> (u16, Value) {
    let res =
        p.b.get(site.at("/waitroom/status?return_to=%2Fcheckout"))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap())
}

/// Whether `p`'s token opens the protected page on `site`.
pub async fn passes(p: &Person, site: &Instance) -> bool {
    let res = p.b.get(site.at("/checkout")).send().await.unwrap();
    assert!(res.status().as_u16() < 500);
    res.text().await.unwrap() == "seat map"
}

pub async fn buys(p: &Person, site: &Instance) -> bool {
    let res = p.b.post(site.at("/checkout/buy")).send().await.unwrap();
    assert!(res.status().as_u16() < 500);
    res.text().await.unwrap().starts_with("bought")
}

pub async fn refresh_all(sites: &[Instance]) {
    for s in sites {
        s.room.refresh().await.unwrap();
    }
}

pub async fn tick_all(sites: &[Instance]) -> Vec<bool> {
    let mut ok = Vec::new();
    for s in sites {
        ok.push(s.room.tick_now().await.is_ok());
    }
    ok
}
