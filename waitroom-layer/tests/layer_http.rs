//! The room layer over a real axum server on an ephemeral port, driven by real HTTP clients with cookie stores.
//!
//! Every test builds a room with a manual clock and no background task, and moves the door by hand with
//! `room.tick_now()`, so nothing sleeps.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::Extension;
use axum::routing::{get, post};
use http::StatusCode;
use serde_json::Value;
use waitroom_layer::store::{
    Join, Placement, Reclaim, Redeem, Restore, Return, Settings, SettingsChange, Snapshot, Store,
    Tick, TickReport, Ticket, Touches,
};
use waitroom_layer::{
    Fairness, Inventory, ManualClock, PageTemplate, SESSION_HEADER, SESSION_VALUE_HEADER,
    STATE_HEADER, TOKEN_HEADER, WaitingRoom, WaitingRoomLayer,
};
use waitroom_layer::{MemoryStore, StoreError};
use waitroom_testkit::http::{browser, serve};
use waitroom_verify::{Admission, Clock, FINISH_HEADER, KeySet, Verifier, VerifyLayer};

const IDLE: Duration = Duration::from_secs(60);

struct Site {
    url: String,
    room: WaitingRoom,
    clock: ManualClock,
}

impl Site {
    fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }
}

async fn room_with(clock: &ManualClock, capacity: u64, fairness: Fairness) -> WaitingRoom {
    WaitingRoom::builder("tour-2026")
        .display_name("The 2026 Tour")
        .capacity(capacity)
        .idle_timeout(IDLE)
        .poll_interval(Duration::from_secs(5))
        .fairness(fairness)
        // These tests follow a session through the holding page; going straight in has its own tests.
        .straight_in(false)
        .clock(Arc::new(clock.clone()))
        .background(false)
        .secure_cookies(false)
        .build()
        .await
        .unwrap()
}

async fn buy(Extension(admission): Extension<Admission>) -> String {
    admission.finish_with_seats(2);
    format!("bought for {}", admission.session_id())
}

/// The storefront: `/` and `/health` are open; `/checkout/...` is behind the room; `/checkout/buy` is the order
/// service, which checks the token offline with a verifier built from the room's JWKS and finishes the session.
async fn site_with(capacity: u64, fairness: Fairness) -> Site {
    let clock = ManualClock::starting_now();
    let room = room_with(&clock, capacity, fairness).await;
    site_on(room, clock).await
}

/// [`site_with`] around a room of one's own.
async fn site_on(room: WaitingRoom, clock: ManualClock) -> Site {
    let jwks = String::from_utf8(room.jwks_json().to_vec()).unwrap();
    let order_verifier = Verifier::builder()
        .keys(KeySet::from_jwks_json(&jwks).unwrap())
        .issuer("waitroom")
        .audience("tour-2026")
        .leeway(Duration::ZERO)
        .clock(Arc::new(clock.clone()))
        .build()
        .unwrap();
    let layer = WaitingRoomLayer::builder(room.clone())
        .protect_prefix("/checkout")
        .bypass(|parts| parts.uri.path() == "/health" || parts.uri.path() == "/checkout/health")
        .join_guard(|parts: &http::request::Parts| {
            let bot = parts.headers.contains_key("x-bot");
            async move {
                if bot {
                    Err(http::Response::builder()
                        .status(StatusCode::FORBIDDEN)
                        .body(bytes_of("no bots"))
                        .unwrap())
                } else {
                    Ok(())
                }
            }
        })
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "home" }))
        .route(
            "/health",
            get(|| async { ([(FINISH_HEADER, "finish")], "ok") }),
        )
        .route("/checkout/health", get(|| async { "ok" }))
        .route("/checkout", get(|| async { "seat map" }))
        .route(
            "/checkout/mine",
            get(|Extension(a): Extension<Admission>| async move { a.session_id().to_owned() })
                .layer(VerifyLayer::new(room.verifier().clone())),
        )
        .route(
            "/checkout/cached",
            get(|| async {
                (
                    [("cache-control", "public, max-age=60")],
                    "a cacheable seat map",
                )
            }),
        )
        .route("/checkout/seats/{id}", get(|| async { "a seat" }))
        .route("/checkout/echo", get(echo))
        .route(
            "/checkout/buy",
            post(buy).layer(VerifyLayer::new(order_verifier).join_url("/waitroom/join")),
        )
        .layer(layer);
    Site {
        url: serve(app).await,
        room,
        clock,
    }
}

/// What a request brought inward: its `Authorization`, its cookies (every `Cookie` line) and its session header.
async fn echo(headers: http::HeaderMap) -> axum::Json<Value> {
    let all = |name: &str| {
        let v: Vec<&str> = headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        (!v.is_empty()).then(|| v.join("; "))
    };
    axum::Json(serde_json::json!({
        "authorization": all("authorization"),
        "cookie": all("cookie"),
        "session": all(SESSION_HEADER),
    }))
}

fn bytes_of(s: &'static str) -> bytes::Bytes {
    bytes::Bytes::from_static(s.as_bytes())
}

async fn site(capacity: u64) -> Site {
    site_with(capacity, Fairness::Fifo).await
}

/// `GET url` as a JSON client (`Accept: application/json`).
async fn get_json(c: &reqwest::Client, url: String) -> reqwest::Response {
    c.get(url)
        .header("accept", "application/json")
        .send()
        .await
        .unwrap()
}

fn state(res: &reqwest::Response) -> String {
    res.headers()
        .get(STATE_HEADER)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

async fn poll(b: &reqwest::Client, s: &Site) -> Value {
    let res = get_json(b, s.at("/waitroom/status?return_to=%2Fcheckout")).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["cache-control"], "no-store");
    let st = state(&res);
    let json: Value = res.json().await.unwrap();
    assert_eq!(json["state"], st.as_str(), "header and body agree");
    json
}

/// Whether `path` reached the storefront's handler.
async fn passes(b: &reqwest::Client, s: &Site, path: &str) -> bool {
    let res = b.get(s.at(path)).send().await.unwrap();
    assert!(res.status().as_u16() < 500);
    let from_room = res.headers().contains_key(STATE_HEADER);
    let body = res.text().await.unwrap();
    let reached = body == "seat map" || body == "a seat";
    assert_eq!(
        reached, !from_room,
        "a response comes from the room or from the handler: {body}"
    );
    reached
}

fn cookie_value(set_cookies: &[String], name: &str) -> Option<String> {
    set_cookies.iter().find_map(|c| {
        c.split(';')
            .next()
            .and_then(|p| p.strip_prefix(&format!("{name}=")))
            .map(str::to_owned)
    })
}

fn cache_control(res: &reqwest::Response) -> Option<&str> {
    res.headers()
        .get("cache-control")
        .map(|v| v.to_str().unwrap())
}

fn set_cookies(res: &reqwest::Response) -> Vec<String> {
    res.headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

/// Admits `b` (which must be at the head with room to spare) and returns its session cookie and token.
async fn admit(b: &reqwest::Client, s: &Site) -> (String, String) {
    let res = b.get(s.at("/checkout")).send().await.unwrap();
    let mut cookies = set_cookies(&res);
    s.room.tick_now().await.unwrap();
    let res = get_json(b, s.at("/waitroom/status?return_to=%2Fcheckout")).await;
    assert_eq!(state(&res), "admitted");
    cookies.extend(set_cookies(&res));
    (
        cookie_value(&cookies, "waitroom_session").expect("a session cookie"),
        cookie_value(&cookies, "waitroom_token").expect("a token cookie"),
    )
}

#[tokio::test]
async fn first_visit_holds_then_the_line_moves_and_the_token_opens_the_door() {
    let s = site(1).await;
    let a = browser();
    let b = browser();

    // First visit: a session cookie and the holding page with a position.
    let res = a.get(s.at("/checkout/seats/7")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(state(&res), "waiting");
    assert_eq!(res.headers()["cache-control"], "no-store");
    // A strict policy, directive by directive: nothing loads unless named; no inline script runs on the holding
    // page (its script comes from the room); the script may poll the room's status on this origin (without
    // `connect-src 'self'` the page never learns it was let in); the inline styles of the default template; no
    // framing, no base URL, forms only to this origin.
    let csp = res.headers()["content-security-policy"].to_str().unwrap();
    let mut directives: Vec<&str> = csp.split(';').map(str::trim).collect();
    directives.sort_unstable();
    assert_eq!(
        directives,
        [
            "base-uri 'none'",
            "connect-src 'self'",
            "default-src 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
            "img-src 'self' data:",
            "script-src 'self'",
            "style-src 'unsafe-inline'",
        ],
        "{csp}"
    );
    let cookies = set_cookies(&res);
    let session = cookies
        .iter()
        .find(|c| c.starts_with("waitroom_session="))
        .unwrap();
    for attr in ["HttpOnly", "SameSite=Lax", "Path=/"] {
        assert!(session.contains(attr), "{session}");
    }
    let html = res.text().await.unwrap();
    assert!(html.contains("The 2026 Tour"));
    assert!(
        html.contains(r#"id="wr-position">1<"#),
        "position 1 on the page"
    );
    assert!(html.contains("/waitroom/status?return_to=%2Fcheckout%2Fseats%2F7"));
    assert!(html.contains(r#"http-equiv="refresh""#));
    // Every <script> on the page is either the room's script file or inert JSON.
    for tag in html
        .match_indices("<script")
        .map(|(i, _)| &html[i..i + html[i..].find('>').unwrap()])
    {
        assert!(
            tag.contains(r#"src="/waitroom/holding.js""#)
                || tag.contains(r#"type="application/json""#),
            "inline script: {tag}"
        );
    }
    let js = a.get(s.at("/waitroom/holding.js")).send().await.unwrap();
    assert_eq!(js.status(), 200);
    assert!(
        js.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
    assert!(js.text().await.unwrap().contains("wr-data"));

    // Same browser polling keeps its place; a second browser is behind it.
    assert_eq!(poll(&a, &s).await["position"], 1);
    let res = b.get(s.at("/checkout")).send().await.unwrap();
    assert!(res.text().await.unwrap().contains(r#"id="wr-position">2<"#));
    assert_eq!(poll(&b, &s).await["position"], 2);
    let again = a.get(s.at("/checkout")).send().await.unwrap();
    assert!(
        again
            .text()
            .await
            .unwrap()
            .contains(r#"id="wr-position">1<"#)
    );
    assert_eq!(poll(&a, &s).await["position"], 1);

    // Not yet let in: nothing passes.
    assert!(!passes(&a, &s, "/checkout").await);

    // The door lets one in: A's next poll admits it and sets the token, with where to go next.
    s.room.tick_now().await.unwrap();
    let st = poll(&a, &s).await;
    assert_eq!(st["state"], "admitted");
    assert_eq!(st["next"], "/checkout");
    assert!(passes(&a, &s, "/checkout").await);
    assert!(passes(&a, &s, "/checkout/seats/9").await);
    // B is now first but the room is full.
    assert_eq!(poll(&b, &s).await["position"], 1);
    assert!(!passes(&b, &s, "/checkout").await);

    // A finishes through the order service: its place frees, and B's next poll gets in.
    let res = a.post(s.at("/checkout/buy")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(
        res.headers().get(FINISH_HEADER).is_none(),
        "the finish command never reaches the browser"
    );
    assert_eq!(s.room.stats().active, 0);
    assert_eq!(s.room.stats().counters.seats_bought, 2);
    s.room.tick_now().await.unwrap();
    assert_eq!(poll(&b, &s).await["state"], "admitted");
    assert!(passes(&b, &s, "/checkout").await);
}

#[tokio::test]
async fn the_join_endpoint_holds_then_redirects_to_the_asked_page() {
    let s = site(1).await;
    let a = browser();
    let res = a
        .get(s.at("/waitroom/join?return_to=%2Fcheckout%2Fseats%2F3"))
        .send()
        .await
        .unwrap();
    assert_eq!(state(&res), "waiting");
    assert!(res.text().await.unwrap().contains("You are next."));
    s.room.tick_now().await.unwrap();
    let res = a
        .get(s.at("/waitroom/join?return_to=%2Fcheckout%2Fseats%2F3"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(res.headers()["location"], "/checkout/seats/3");
    assert!(passes(&a, &s, "/checkout/seats/3").await);
    // An off-site return_to is never followed.
    let res = browser()
        .get(s.at("/waitroom/join?return_to=https%3A%2F%2Fevil.example%2F"))
        .send()
        .await
        .unwrap();
    assert!(!res.text().await.unwrap().contains("evil.example"));
}

#[tokio::test]
async fn only_a_valid_token_for_its_own_session_passes() {
    let s = site(2).await;
    let a = browser();
    let b = browser();
    let (a_session, a_token) = admit(&a, &s).await;
    let (b_session, _b_token) = admit(&b, &s).await;
    let plain = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let with = |cookie: String| {
        let plain = plain.clone();
        let url = s.at("/checkout");
        async move {
            let res = plain
                .get(url)
                .header("cookie", cookie)
                .send()
                .await
                .unwrap();
            let from_room = res.headers().contains_key(STATE_HEADER);
            let body = res.text().await.unwrap();
            assert_eq!(body == "seat map", !from_room);
            body == "seat map"
        }
    };
    // The genuine pair passes.
    assert!(
        with(format!(
            "waitroom_session={a_session}; waitroom_token={a_token}"
        ))
        .await
    );
    // No cookie at all.
    assert!(!with(String::new()).await);
    // The token alone, with no session.
    assert!(!with(format!("waitroom_token={a_token}")).await);
    // A forged session cookie (A's id, a made-up tag) with A's token.
    let sid = a_session.split('.').next().unwrap();
    let forged = format!("{sid}.1.{}", "A".repeat(43));
    assert!(
        !with(format!(
            "waitroom_session={forged}; waitroom_token={a_token}"
        ))
        .await
    );
    // The forged cookie first and the genuine one after it (a stale cookie at another path comes first): the
    // genuine one is found and the pair passes.
    assert!(
        with(format!(
            "waitroom_session={forged}; waitroom_session={a_session}; waitroom_token={a_token}"
        ))
        .await
    );
    // A raw session id (what the verify crate alone would accept) is not the room's signed cookie.
    assert!(!with(format!("waitroom_session={sid}; waitroom_token={a_token}")).await);
    // Another session's token: B's session with A's token does not pass as A (and B's response is B's own: the
    // room re-issues B's token, it never accepts A's).
    let res = plain
        .get(s.at("/checkout"))
        .header(
            "cookie",
            format!("waitroom_session={b_session}; waitroom_token={a_token}"),
        )
        .send()
        .await
        .unwrap();
    let reissued = cookie_value(&set_cookies(&res), "waitroom_token");
    let reissued = reissued.expect("B gets its own token back");
    assert_eq!(
        s.room.verifier().verify(&reissued).unwrap().sub,
        b_session.split('.').next().unwrap()
    );
    // A bearer token from an unadmitted session (C) with A's token.
    let c = browser();
    let res = c.get(s.at("/checkout")).send().await.unwrap();
    let c_session = cookie_value(&set_cookies(&res), "waitroom_session").unwrap();
    assert!(
        !with(format!(
            "waitroom_session={c_session}; waitroom_token={a_token}"
        ))
        .await
    );
    let res = plain
        .get(s.at("/checkout"))
        .header("cookie", format!("waitroom_session={c_session}"))
        .header("authorization", format!("Bearer {a_token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(state(&res), "waiting");

    // An expired token: past its lifetime (and the verifier's leeway) it is refused, and the room, which saw
    // no activity, has let the place go. (The tick first flushes the touches made so far at today's time, as the
    // background task does every second.)
    s.room.tick_now().await.unwrap();
    s.clock.advance(IDLE + Duration::from_secs(10));
    s.room.tick_now().await.unwrap();
    assert!(matches!(
        s.room.verifier().verify(&a_token),
        Err(waitroom_verify::Refusal::Expired)
    ));
    assert!(
        !with(format!(
            "waitroom_session={a_session}; waitroom_token={a_token}"
        ))
        .await
    );
}

#[tokio::test]
async fn renewal_keeps_an_active_session_alive_and_an_idle_one_lapses() {
    let s = site(2).await;
    let active = browser();
    let idle = browser();
    let (_, first_token) = admit(&active, &s).await;
    let (_, _) = admit(&idle, &s).await;
    let first_exp = s.room.verifier().verify(&first_token).unwrap().exp;
    // Twenty seconds between requests for more than three token lifetimes.
    for _ in 0..10 {
        s.clock.advance(Duration::from_secs(20));
        assert!(
            passes(&active, &s, "/checkout").await,
            "active at {}",
            s.clock.now_secs()
        );
        s.room.tick_now().await.unwrap();
    }
    assert!(
        s.clock.now_secs() > first_exp + IDLE.as_secs(),
        "well past the first token's life"
    );
    assert!(passes(&active, &s, "/checkout").await);
    // The idle one lapsed: its token expired, its place went, and it is back in line.
    assert!(!passes(&idle, &s, "/checkout").await);
    let st = poll(&idle, &s).await;
    assert_eq!(st["state"], "waiting");
    assert_eq!(s.room.stats().counters.expired, 1);
    // And the active one lapses too once it stops.
    s.room.tick_now().await.unwrap();
    s.clock.advance(IDLE + Duration::from_secs(10));
    s.room.tick_now().await.unwrap();
    assert!(!passes(&active, &s, "/checkout").await);
}

/// Renewal: once more than half of a pass's life is gone, the next protected request renews it (a fresh pass for
/// the idle timeout, on that response), so an active visitor always holds a pass with at least half its life left.
/// That is what an order service reached directly sees (it checks passes offline, with no leeway, and renews
/// nothing): requests every 20 s for three lifetimes, and after each one the pass the browser holds is still valid
/// half a lifetime later at the order service's verifier. Before half its life nothing is renewed (the pass and
/// the app's caching stand); the renewing response and the finishing one are never cacheable, whatever the app said.
#[tokio::test]
async fn a_pass_past_half_its_life_is_renewed_on_the_next_request_and_never_cached() {
    let s = site(1).await;
    let b = browser();
    let (_, first) = admit(&b, &s).await;
    // The order service's view: the room's public keys, no leeway.
    let jwks = String::from_utf8(s.room.jwks_json().to_vec()).unwrap();
    let strict = Verifier::builder()
        .keys(KeySet::from_jwks_json(&jwks).unwrap())
        .issuer("waitroom")
        .audience("tour-2026")
        .leeway(Duration::ZERO)
        .clock(Arc::new(s.clock.clone()))
        .build()
        .unwrap();
    let issued = strict.verify(&first).unwrap();
    assert_eq!(issued.exp - issued.iat, IDLE.as_secs());
    let renewed_by = |res: &reqwest::Response| cookie_value(&set_cookies(res), "waitroom_token");

    // Half its life less a second: the same pass, and the app's caching stands.
    s.clock.advance(IDLE / 2 - Duration::from_secs(1));
    let res = b.get(s.at("/checkout/cached")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(renewed_by(&res), None, "not renewed before half its life");
    assert_eq!(cache_control(&res), Some("public, max-age=60"));

    // Half its life and a second: renewed on this very response, which no shared cache may keep.
    s.clock.advance(Duration::from_secs(2));
    let res = b.get(s.at("/checkout/cached")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let mut held = renewed_by(&res).expect("renewed once half its life was gone");
    assert_eq!(
        cache_control(&res),
        Some("no-store"),
        "a response carrying a pass"
    );
    assert_eq!(res.text().await.unwrap(), "a cacheable seat map");
    let renewed = strict.verify(&held).unwrap();
    assert_eq!(renewed.sub, issued.sub);
    assert_eq!(
        (renewed.iat, renewed.exp),
        (s.clock.now_secs(), s.clock.now_secs() + IDLE.as_secs())
    );

    // Three lifetimes of requests every 20 s: after each, the pass held outlives the next half lifetime.
    for _ in 0..9 {
        s.clock.advance(Duration::from_secs(20));
        let res = b.get(s.at("/checkout")).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        if let Some(t) = renewed_by(&res) {
            assert_eq!(
                cache_control(&res),
                Some("no-store"),
                "a response carrying a pass"
            );
            held = t;
        }
        assert_eq!(res.text().await.unwrap(), "seat map");
        let at = s.clock.now_secs();
        let claims = strict.verify(&held).unwrap_or_else(|r| {
            panic!("the pass held at {at} is refused by the order service: {r:?}")
        });
        assert!(
            claims.exp >= at + IDLE.as_secs() / 2,
            "the pass held at {at} lapses at {}, within half a lifetime",
            claims.exp
        );
        s.room.tick_now().await.unwrap();
    }
    // The finish: the response that clears the pass is not cacheable either.
    let res = b.post(s.at("/checkout/buy")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        cache_control(&res),
        Some("no-store"),
        "a response carrying a pass"
    );
    assert!(
        set_cookies(&res)
            .iter()
            .any(|c| c.starts_with("waitroom_token=;") && c.contains("Max-Age=0"))
    );
    assert_eq!(
        res.text().await.unwrap(),
        format!("bought for {}", issued.sub)
    );
}

/// A session still inside whose browser no longer has its pass (a cleared cookie, a pass that lapsed while the
/// session stayed active) is given a new pass on its next protected request and goes through: it never queues
/// again for a place it holds.
#[tokio::test]
async fn an_active_session_without_its_pass_gets_a_new_one_on_its_next_request() {
    let s = site(1).await;
    let b = browser();
    let (session, _) = admit(&b, &s).await;
    assert!(passes(&b, &s, "/checkout").await);
    assert_eq!(s.room.stats().active, 1);
    // The session cookie alone, no pass.
    let without_pass = reqwest::Client::new();
    let res = without_pass
        .get(s.at("/checkout"))
        .header("cookie", format!("waitroom_session={session}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let token = cookie_value(&set_cookies(&res), "waitroom_token").expect("a new pass");
    assert_eq!(res.text().await.unwrap(), "seat map");
    let claims = s.room.verifier().verify(&token).unwrap();
    assert_eq!(Some(claims.sub.as_str()), session.split('.').next());
    assert_eq!(s.room.stats().active, 1, "the same place");
}

/// The embedded store, which once armed finishes the session it is asked to claim just before the claim: a finish
/// made elsewhere (another instance's order service, on the shared store) landing between the room's look at an
/// admitted session and its claim.
#[derive(Debug, Default)]
struct FinishBeforeClaim {
    inner: MemoryStore,
    armed: AtomicBool,
}

#[async_trait::async_trait]
impl Store for FinishBeforeClaim {
    async fn init(&self, e: &str, d: &Settings) -> Result<Settings, StoreError> {
        self.inner.init(e, d).await
    }
    async fn join(&self, e: &str, j: &Join) -> Result<Placement, StoreError> {
        self.inner.join(e, j).await
    }
    async fn ticket(&self, e: &str, now_ms: u64) -> Result<Ticket, StoreError> {
        self.inner.ticket(e, now_ms).await
    }
    async fn tickets(&self, e: &str, n: usize, now_ms: u64) -> Result<Vec<Ticket>, StoreError> {
        self.inner.tickets(e, n, now_ms).await
    }
    async fn redeem(&self, e: &str, r: &Redeem) -> Result<Option<Placement>, StoreError> {
        self.inner.redeem(e, r).await
    }
    async fn lookup(&self, e: &str, s: &str) -> Result<Option<Placement>, StoreError> {
        self.inner.lookup(e, s).await
    }
    async fn come_back(
        &self,
        e: &str,
        s: &str,
        now_ms: u64,
        window_ms: u64,
    ) -> Result<(Option<Placement>, Option<Return>), StoreError> {
        self.inner.come_back(e, s, now_ms, window_ms).await
    }
    async fn claim(
        &self,
        e: &str,
        s: &str,
        now_ms: u64,
        idle_ms: u64,
    ) -> Result<Option<Placement>, StoreError> {
        if self.armed.swap(false, Ordering::SeqCst) {
            self.inner.finish(e, s, 0, now_ms).await?;
        }
        self.inner.claim(e, s, now_ms, idle_ms).await
    }
    async fn touch(&self, e: &str, t: &Touches) -> Result<(), StoreError> {
        self.inner.touch(e, t).await
    }
    async fn tick(&self, e: &str, t: &Tick) -> Result<TickReport, StoreError> {
        self.inner.tick(e, t).await
    }
    async fn finish(&self, e: &str, s: &str, seats: u32, now_ms: u64) -> Result<bool, StoreError> {
        self.inner.finish(e, s, seats, now_ms).await
    }
    async fn snapshot(&self, e: &str) -> Result<Snapshot, StoreError> {
        self.inner.snapshot(e).await
    }
    async fn update(&self, e: &str, c: &SettingsChange) -> Result<Settings, StoreError> {
        self.inner.update(e, c).await
    }
    async fn restore(&self, e: &str, r: &Restore) -> Result<Settings, StoreError> {
        self.inner.restore(e, r).await
    }
    async fn reclaim(&self, e: &str, r: &Reclaim) -> Result<Option<Placement>, StoreError> {
        self.inner.reclaim(e, r).await
    }
}

/// The claim's answer decides whether a pass is issued: a session admitted when the room looked, that finished
/// before its claim (elsewhere, on the shared store), gets no pass and does not pass.
#[tokio::test]
async fn a_session_that_finished_before_its_claim_gets_no_pass() {
    let clock = ManualClock::starting_now();
    let store = Arc::new(FinishBeforeClaim::default());
    let room = WaitingRoom::builder("tour-2026")
        .capacity(1)
        .idle_timeout(IDLE)
        .straight_in(false)
        .clock(Arc::new(clock.clone()))
        .background(false)
        .secure_cookies(false)
        .shared_store(store.clone())
        .build()
        .await
        .unwrap();
    let s = site_on(room, clock).await;
    let b = browser();
    let _ = b.get(s.at("/checkout")).send().await.unwrap();
    assert_eq!(poll(&b, &s).await["position"], 1);
    s.room.tick_now().await.unwrap();
    store.armed.store(true, Ordering::SeqCst);
    let res = b.get(s.at("/checkout")).send().await.unwrap();
    assert!(
        !store.armed.load(Ordering::SeqCst),
        "the room claimed the admitted session"
    );
    assert_eq!(
        cookie_value(&set_cookies(&res), "waitroom_token"),
        None,
        "no pass for a finished session"
    );
    assert!(
        res.headers().contains_key(STATE_HEADER),
        "the room answered"
    );
    assert_ne!(res.text().await.unwrap(), "seat map");
}

#[tokio::test]
async fn the_finish_header_frees_the_place_and_the_token_stops_working() {
    let s = site(1).await;
    let a = browser();
    let (session, token) = admit(&a, &s).await;
    assert_eq!(s.room.stats().active, 1);
    let res = a.post(s.at("/checkout/buy")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.headers().get(FINISH_HEADER).is_none());
    let cleared = set_cookies(&res);
    assert!(
        cleared
            .iter()
            .any(|c| c.starts_with("waitroom_token=;") && c.contains("Max-Age=0"))
    );
    assert_eq!(s.room.stats().active, 0);
    assert_eq!(s.room.stats().counters.finished, 1);
    // The old token, replayed with the old session cookie, no longer passes (the order service refuses it too).
    let plain = reqwest::Client::new();
    for path in ["/checkout", "/checkout/buy"] {
        let req = if path.ends_with("buy") {
            plain.post(s.at(path))
        } else {
            plain.get(s.at(path))
        };
        let res = req
            .header(
                "cookie",
                format!("waitroom_session={session}; waitroom_token={token}"),
            )
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        // Not let through: the finished session is a newcomer again, held in line (a JSON client's 429).
        assert_eq!(
            (res.status().as_u16(), state(&res).as_str()),
            (429, "waiting"),
            "{path}"
        );
    }
    // Coming back, the browser joins again at the back, under a new session id.
    let other = browser();
    let _ = other.get(s.at("/checkout")).send().await.unwrap();
    let res = a.get(s.at("/checkout")).send().await.unwrap();
    let new_session = cookie_value(&set_cookies(&res), "waitroom_session").unwrap();
    assert_ne!(new_session.split('.').next(), session.split('.').next());
    let mine = poll(&a, &s).await["position"].as_u64().unwrap();
    let theirs = poll(&other, &s).await["position"].as_u64().unwrap();
    assert!(mine > theirs, "back of the line: {mine} behind {theirs}");
    s.room.refresh().await.unwrap();
    assert_eq!(mine, s.room.stats().waiting, "last in line");
}

#[tokio::test]
async fn bypassed_paths_never_see_the_room_and_json_clients_get_json() {
    let s = site(1).await;
    let b = browser();
    for path in ["/health", "/checkout/health"] {
        let res = b.get(s.at(path)).send().await.unwrap();
        assert_eq!(res.status(), 200);
        assert!(res.headers().get(STATE_HEADER).is_none());
        assert!(res.headers().get("set-cookie").is_none());
        if path == "/health" {
            assert_eq!(
                res.headers()[FINISH_HEADER],
                "finish",
                "not even the finish header is touched"
            );
        }
    }
    // Unprotected paths pass without a cookie.
    let res = b.get(s.at("/")).send().await.unwrap();
    assert!(res.headers().get("set-cookie").is_none());
    assert_eq!(res.text().await.unwrap(), "home");
    assert_eq!(s.room.stats().counters.joined, 0);

    // JSON clients get the JSON status on a protected path.
    let res = get_json(&b, s.at("/checkout")).await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(res.headers()["content-type"], "application/json");
    assert_eq!(res.headers()["retry-after"], "5");
    assert_eq!(state(&res), "waiting");
    let json: Value = res.json().await.unwrap();
    for field in [
        "event",
        "state",
        "position",
        "eta_seconds",
        "refresh_seconds",
        "opens_at",
    ] {
        assert!(json.get(field).is_some(), "{field} in {json}");
    }
    assert_eq!(json["event"], "tour-2026");
    assert_eq!(json["position"], 1);
    assert_eq!(json["refresh_seconds"], 5);
    assert!(
        json["next"].is_null(),
        "where to go next is told once admitted, not while held: {json}"
    );
    // The JWKS is there for the order service.
    let jwks: Value = b
        .get(s.at("/waitroom/jwks.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(jwks["keys"][0]["alg"], "EdDSA");
    // The join guard refuses a bot with its own response, stamped by the room.
    let res = browser()
        .get(s.at("/checkout"))
        .header("x-bot", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert_eq!(res.headers()["cache-control"], "no-store");
    assert_eq!(res.text().await.unwrap(), "no bots");
}

#[tokio::test]
async fn without_javascript_the_refresh_lets_the_admitted_in_and_a_pass_is_never_cacheable() {
    let s = site(1).await;
    let b = browser();
    // The holding page's own refresh (the `<noscript>` meta refresh) reloads the protected URL itself.
    let res = b.get(s.at("/checkout/cached")).send().await.unwrap();
    assert_eq!(state(&res), "waiting");
    let html = res.text().await.unwrap();
    assert!(
        html.contains(r#"<meta http-equiv="refresh" content="5">"#),
        "{html}"
    );
    s.room.tick_now().await.unwrap();
    // The reload after the door let this person in: the page itself, with the pass set on the app's response,
    // which the room makes `no-store` whatever the app said (a shared cache must not hand a pass to anyone).
    let res = b.get(s.at("/checkout/cached")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(
        res.headers()
            .get_all("set-cookie")
            .iter()
            .any(|v| v.to_str().unwrap().starts_with("waitroom_token=")),
        "the pass is set"
    );
    assert_eq!(res.headers()["cache-control"], "no-store");
    assert_eq!(res.text().await.unwrap(), "a cacheable seat map");
    // Later requests with the pass set no cookie: the app's caching stands.
    let res = b.get(s.at("/checkout/cached")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.headers().get("set-cookie").is_none());
    assert_eq!(res.headers()["cache-control"], "public, max-age=60");
}

/// The request on which a person is let in goes on with the new pass: a verify layer further in, on the room's
/// verifier or on one built from the room's JWKS (an order service), lets it through on that first request, before
/// the browser has sent the pass back even once.
#[tokio::test]
async fn the_request_that_lets_a_person_in_carries_the_new_pass_inward() {
    let s = site(3).await;
    let (a, b, c) = (browser(), browser(), browser());
    for c in [&a, &b, &c] {
        let res = c.get(s.at("/checkout")).send().await.unwrap();
        assert_eq!(state(&res), "waiting");
    }
    s.room.tick_now().await.unwrap();
    // A: straight to a route behind a VerifyLayer on the room's own verifier.
    let res = get_json(&a, s.at("/checkout/mine")).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert!(!res.text().await.unwrap().is_empty());
    // B: straight to the order service's route (a verifier built from the JWKS, another key set object).
    let res = b
        .post(s.at("/checkout/buy"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.text().await.unwrap().starts_with("bought for "));
    // C: as its next requests will, the pass goes in as a cookie, beside the app's own cookies; the app's own
    // `Authorization` (a login of its own) is left as it was, and no session header is added.
    let res = c
        .get(s.at("/checkout/echo"))
        .header("authorization", "Basic YXBwOmxvZ2lu")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let token = cookie_value(&set_cookies(&res), "waitroom_token").expect("the pass is set");
    let seen: Value = res.json().await.unwrap();
    assert_eq!(seen["authorization"], "Basic YXBwOmxvZ2lu", "{seen}");
    assert!(
        seen["cookie"]
            .as_str()
            .unwrap()
            .contains(&format!("waitroom_token={token}")),
        "{seen}"
    );
    assert!(seen["session"].is_null(), "{seen}");
}

#[tokio::test]
async fn paused_and_closed_are_told() {
    let s = site(1).await;
    let a = browser();
    let _ = a.get(s.at("/checkout")).send().await.unwrap();
    s.room.pause().await.unwrap();
    let res = a.get(s.at("/checkout")).send().await.unwrap();
    assert_eq!(state(&res), "paused");
    assert!(res.text().await.unwrap().contains("paused"));
    s.room.close().await.unwrap();
    let res = get_json(&a, s.at("/checkout")).await;
    assert_eq!(res.status(), StatusCode::GONE);
    assert_eq!(state(&res), "closed");
}

#[tokio::test]
async fn sold_out_reaches_the_line_and_the_pre_queue_and_newcomers_do_not_join() {
    let clock_start = ManualClock::starting_now();
    let opens_ms = clock_start.now_ms() + 60_000;
    let opens_at = UNIX_EPOCH + Duration::from_millis(opens_ms);
    let s = site_with(1, Fairness::RandomAtOpen { opens_at }).await;
    // Close enough to the opening that nobody in the pre-queue counts as gone when the door opens.
    s.clock.set_ms(opens_ms - 5_000);
    s.room
        .set_inventory(Inventory {
            total: 10,
            sold: 0,
            held: 0,
        })
        .await
        .unwrap();
    // Two in the pre-queue; then the door opens and two more join behind the draw.
    let early: Vec<_> = (0..2).map(|_| browser()).collect();
    for b in &early {
        let _ = b.get(s.at("/checkout")).send().await.unwrap();
        assert_eq!(poll(b, &s).await["state"], "prequeue");
    }
    let prequeued = browser();
    let _ = prequeued.get(s.at("/checkout")).send().await.unwrap();
    s.clock.set_ms(opens_ms + 1);
    s.room.tick_now().await.unwrap();
    let late: Vec<_> = (0..2).map(|_| browser()).collect();
    for b in &late {
        let _ = b.get(s.at("/checkout")).send().await.unwrap();
        // The holding page's first poll: the ticket takes its place.
        assert_eq!(poll(b, &s).await["state"], "waiting");
    }
    s.room.tick_now().await.unwrap();
    let joined = s.room.stats().counters.joined;
    assert_eq!(joined, 5);
    // The one place went to the draw's first; the other four wait.
    let mut waiting = Vec::new();
    for b in early.iter().chain(&late).chain([&prequeued]) {
        match poll(b, &s).await["state"].as_str().unwrap() {
            "admitted" => {}
            other => {
                assert_eq!(other, "waiting");
                waiting.push(b);
            }
        }
    }
    assert_eq!(waiting.len(), 4);

    s.room
        .set_inventory(Inventory {
            total: 10,
            sold: 10,
            held: 0,
        })
        .await
        .unwrap();
    s.room.tick_now().await.unwrap();
    // Everyone in line hears it on the next poll, in JSON and on the page, with no place or wait to show.
    for b in waiting {
        let st = poll(b, &s).await;
        assert_eq!(st["state"], "sold_out", "{st}");
        assert!(st["eta_seconds"].is_null(), "{st}");
        let res = b.get(s.at("/checkout")).send().await.unwrap();
        assert_eq!(state(&res), "sold_out");
        assert!(
            res.text()
                .await
                .unwrap()
                .contains("Every ticket has been sold")
        );
    }
    // A newcomer sees the sold-out answer without taking a place.
    let newcomer = browser();
    let res = get_json(&newcomer, s.at("/checkout")).await;
    assert_eq!(res.status(), StatusCode::GONE);
    assert_eq!(state(&res), "sold_out");
    let res = newcomer.get(s.at("/checkout")).send().await.unwrap();
    assert!(
        res.text()
            .await
            .unwrap()
            .contains("Every ticket has been sold")
    );
    s.room.tick_now().await.unwrap();
    let after = s.room.stats();
    assert_eq!(after.counters.joined, joined, "no join after the sell-out");
    assert_eq!(
        after.counters.admitted, 1,
        "the one let in before it, and nobody since"
    );
}

/// Let in just before the sell-out but not yet come for the pass: not let in any more, told sold out on every
/// path (the poll and the protected page), no pass issued.
#[tokio::test]
async fn an_admission_not_yet_claimed_at_the_sell_out_is_not_let_in() {
    let s = site(1).await;
    s.room
        .set_inventory(Inventory {
            total: 4,
            sold: 0,
            held: 0,
        })
        .await
        .unwrap();
    let a = browser();
    let _ = a.get(s.at("/checkout")).send().await.unwrap();
    s.room.tick_now().await.unwrap();
    assert_eq!(s.room.stats().counters.admitted, 1);
    s.room
        .set_inventory(Inventory {
            total: 4,
            sold: 4,
            held: 0,
        })
        .await
        .unwrap();
    s.room.tick_now().await.unwrap();
    assert_eq!(poll(&a, &s).await["state"], "sold_out");
    let res = get_json(&a, s.at("/checkout")).await;
    assert_eq!(res.status(), StatusCode::GONE);
    assert_eq!(state(&res), "sold_out");
    assert!(
        !res.headers()
            .get_all("set-cookie")
            .iter()
            .any(|v| v.to_str().unwrap().starts_with("waitroom_token=")),
        "no pass"
    );
}

#[tokio::test]
async fn pre_queue_then_the_draw_orders_the_line() {
    let clock_start = ManualClock::starting_now();
    let opens_ms = clock_start.now_ms() + 60_000;
    let opens_at = UNIX_EPOCH + Duration::from_millis(opens_ms);
    let s = site_with(1, Fairness::RandomAtOpen { opens_at }).await;
    // The site's clock started a moment later than ours: put it just before the opening.
    s.clock.set_ms(opens_ms - 30_000);
    let browsers: Vec<_> = (0..12).map(|_| browser()).collect();
    let mut prequeue_values = Vec::new();
    for b in &browsers {
        let res = b.get(s.at("/checkout")).send().await.unwrap();
        assert_eq!(state(&res), "prequeue");
        let mut value = cookie_value(&set_cookies(&res), "waitroom_session").unwrap();
        // The signed cookie says "pre-queue": its polls before the draw are answered from memory.
        let cookie = res
            .headers()
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().unwrap())
            .find(|v| v.starts_with("waitroom_session="))
            .expect("a session cookie")
            .to_owned();
        assert!(cookie.contains(".p."), "{cookie}");
        let html = res.text().await.unwrap();
        assert!(html.contains("The draw happens at"), "{html}");
        assert!(html.contains("arriving earlier or later before then makes no difference"));
        let res = get_json(b, s.at("/waitroom/status?return_to=%2Fcheckout")).await;
        // The ticket is redeemed: the value the browser holds from now on.
        value = cookie_value(&set_cookies(&res), "waitroom_session").unwrap_or(value);
        prequeue_values.push(value);
        let st: Value = res.json().await.unwrap();
        assert_eq!(st["state"], "prequeue");
        assert!(st["position"].is_null());
        assert!(st["opens_at"].is_string());
    }
    let _ = SystemTime::now();
    // The door opens; the draw runs at the next tick (no one is let in by that tick: nobody has a number yet when
    // it starts, so the check below sees everyone in line).
    s.clock.set_ms(opens_ms + 1);
    s.room.pause().await.unwrap();
    s.room.tick_now().await.unwrap();
    let mut positions = Vec::new();
    for b in &browsers {
        let res = get_json(b, s.at("/waitroom/status?return_to=%2Fcheckout")).await;
        // The first poll after the draw seals the drawn number into the session cookie (later polls are answered
        // from it, with no store call).
        let cookie = cookie_value(&set_cookies(&res), "waitroom_session")
            .expect("the cookie is sealed again with the drawn number");
        let st: Value = res.json().await.unwrap();
        assert_eq!(st["state"], "paused");
        assert!(
            cookie.contains(&format!(".{}.", st["number"])),
            "{cookie} {st}"
        );
        positions.push(st["position"].as_u64().unwrap());
    }
    // Later polls, their cookie saying the number, are answered from memory and seal nothing again.
    for b in &browsers {
        let res = get_json(b, s.at("/waitroom/status?return_to=%2Fcheckout")).await;
        assert_eq!(state(&res), "paused");
        assert_eq!(set_cookies(&res), Vec::<String>::new(), "nothing to seal");
    }
    // A client that lost that answer and sends its pre-queue value again (the room knows the number now, from
    // memory) is told the number again, every time: sealed into the cookie for a browser, handed over in the
    // answer for a client that names its session by the header.
    let old = &prequeue_values[0];
    let number = poll(&browsers[0], &s).await["number"].as_u64().unwrap();
    let jarless = reqwest::Client::new();
    for _ in 0..2 {
        let res = jarless
            .get(s.at("/waitroom/status"))
            .header("accept", "application/json")
            .header("cookie", format!("waitroom_session={old}"))
            .send()
            .await
            .unwrap();
        assert_eq!(state(&res), "paused");
        let cookie = cookie_value(&set_cookies(&res), "waitroom_session")
            .expect("the cookie is sealed again with the drawn number");
        assert!(cookie.contains(&format!(".{number}.")), "{cookie}");
        let res = jarless
            .get(s.at("/waitroom/status"))
            .header("accept", "application/json")
            .header(SESSION_HEADER, old.as_str())
            .send()
            .await
            .unwrap();
        assert_eq!(state(&res), "paused");
        assert_eq!(set_cookies(&res), Vec::<String>::new(), "no cookies");
        let handed = res.headers()[SESSION_VALUE_HEADER.as_str()]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(handed.contains(&format!(".{number}.")), "{handed}");
        let st: Value = res.json().await.unwrap();
        assert_eq!(st["session"], handed.as_str());
    }
    let mut sorted = positions.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        (1..=12).collect::<Vec<u64>>(),
        "every pre-queued browser has one place"
    );
    assert_ne!(
        positions, sorted,
        "the draw, not the arrival order, decides (fails with odds 1 in 12!)"
    );
    // A later arrival queues behind the draw.
    let late = browser();
    let _ = late.get(s.at("/checkout")).send().await.unwrap();
    assert_eq!(poll(&late, &s).await["position"], 13);
    // The door lets the draw's first in first.
    s.room.resume().await.unwrap();
    s.room.tick_now().await.unwrap();
    for (b, p) in browsers.iter().zip(&positions) {
        let st = poll(b, &s).await;
        if *p == 1 {
            assert_eq!(st["state"], "admitted");
        } else {
            assert_eq!(st["position"], *p - 1);
        }
    }
}

#[tokio::test]
async fn route_layer_on_a_protected_sub_router() {
    let clock = ManualClock::starting_now();
    let room = room_with(&clock, 1, Fairness::Fifo).await;
    let layer = WaitingRoomLayer::new(room.clone());
    let protected = Router::new()
        .route("/seats", get(|| async { "seat map" }))
        .route_layer(layer.clone());
    let app = Router::new()
        .route("/", get(|| async { "home" }))
        .merge(protected)
        .route_service("/waitroom/{*rest}", layer.endpoints());
    let s = Site {
        url: serve(app).await,
        room,
        clock,
    };
    let b = browser();
    assert_eq!(
        b.get(s.at("/")).send().await.unwrap().text().await.unwrap(),
        "home"
    );
    let res = b.get(s.at("/seats")).send().await.unwrap();
    assert_eq!(state(&res), "waiting");
    assert_eq!(poll(&b, &s).await["position"], 1);
    // A path the sub-router does not know is the router's 404, not the room's.
    let res = b.get(s.at("/nope")).send().await.unwrap();
    assert_eq!(res.status(), 404);
    assert!(res.headers().get(STATE_HEADER).is_none());
    s.room.tick_now().await.unwrap();
    assert_eq!(poll(&b, &s).await["state"], "admitted");
    assert!(passes(&b, &s, "/seats").await);
}

#[tokio::test]
async fn a_custom_template_is_served_with_the_policy_it_was_given_and_none_otherwise() {
    let template =
        "<h1>{{name}}</h1><p id=\"pos\">{{position}}</p><script src=\"{{script_url}}\"></script>";
    let policy =
        "default-src 'none'; script-src 'self'; connect-src 'self'; style-src https://cdn.example";
    for with_policy in [false, true] {
        let clock = ManualClock::starting_now();
        let room = room_with(&clock, 1, Fairness::Fifo).await;
        let mut page = PageTemplate::from_template(template).unwrap();
        if with_policy {
            page = page.with_content_security_policy(policy).unwrap();
        }
        let layer = WaitingRoomLayer::builder(room.clone())
            .protect_prefix("/checkout")
            .page(page)
            .build()
            .unwrap();
        let app = Router::new()
            .route("/checkout", get(|| async { "seat map" }))
            .route(
                "/checkout/cached",
                get(|| async {
                    (
                        [("cache-control", "public, max-age=60")],
                        "a cacheable seat map",
                    )
                }),
            )
            .layer(layer);
        let s = Site {
            url: serve(app).await,
            room,
            clock,
        };
        let res = browser().get(s.at("/checkout")).send().await.unwrap();
        assert_eq!(state(&res), "waiting");
        let csp = res.headers().get("content-security-policy").cloned();
        let html = res.text().await.unwrap();
        assert!(html.contains(r#"<p id="pos">1</p>"#), "{html}");
        assert!(html.contains(r#"src="/waitroom/holding.js""#), "{html}");
        match with_policy {
            true => assert_eq!(csp.unwrap(), policy),
            false => assert!(
                csp.is_none(),
                "a custom template gets no policy unless given one"
            ),
        }
    }
    // A policy that cannot be a header is refused when the template is built, not when a page is sent.
    let err = PageTemplate::from_template(template)
        .unwrap()
        .with_content_security_policy("default-src 'none';\nscript-src 'self'")
        .unwrap_err();
    assert!(err.to_string().contains("content_security_policy"), "{err}");
    assert!(
        PageTemplate::default()
            .with_content_security_policy("  ")
            .is_err()
    );
}

/// Reach on the surface (issue 6): with an inventory, a session far back in line is told, in the status JSON
/// (`beyond_reach`) and in the sentence on the holding page, that the seats left are likely to run out before its
/// turn; a session near the front is not. (The page's script rewrites the same sentence from each poll's JSON; a
/// page without script re-renders it at its meta refresh, which is this GET.)
#[tokio::test]
async fn far_back_in_a_sale_hears_the_seats_may_run_out_first_and_the_front_does_not() {
    let s = site(10).await;
    let sentence = "The tickets left may run out before your turn.";
    s.room
        .set_inventory(Inventory {
            total: 200,
            sold: 0,
            held: 0,
        })
        .await
        .unwrap();
    // Thirty people have been through and bought four seats each: the room has measured what an admission buys.
    let mut sold = 0;
    for round in 0..3 {
        let ids: Vec<String> = (0..10)
            .map(|i| format!("reach-{round}-{i:02}-aaaaaaaaaaaaaaaa"))
            .collect();
        for id in &ids {
            s.room.join(id, None).await.unwrap();
        }
        let admitted = s.room.tick_now().await.unwrap().admitted;
        assert_eq!(admitted.len(), 10);
        for id in &admitted {
            s.room.claim(id).await.unwrap();
            assert!(s.room.finish(id, 4).await.unwrap());
            sold += 4;
        }
    }
    // Ten more are inside (forty seats' worth) and 80 seats are left: about ten more admissions' worth.
    for i in 0..10 {
        s.room
            .join(&format!("reach-inside-{i:02}-aaaaaaaaaaaaaaaa"), None)
            .await
            .unwrap();
    }
    for id in s.room.tick_now().await.unwrap().admitted {
        s.room.claim(&id).await.unwrap();
    }
    s.room
        .set_inventory(Inventory {
            total: 200,
            sold,
            held: 0,
        })
        .await
        .unwrap();
    // One person joins at the front of the line, then thirty others, then one far back.
    let near = browser();
    let far = browser();
    assert_eq!(
        state(&near.get(s.at("/checkout")).send().await.unwrap()),
        "waiting"
    );
    // Its holding page's first poll: its ticket takes its place.
    assert_eq!(poll(&near, &s).await["state"], "waiting");
    for i in 0..30 {
        s.room
            .join(&format!("reach-line-{i:02}-aaaaaaaaaaaaaaaa"), None)
            .await
            .unwrap();
    }
    assert_eq!(
        state(&far.get(s.at("/checkout")).send().await.unwrap()),
        "waiting"
    );
    s.room.tick_now().await.unwrap();

    let (jn, jf) = (poll(&near, &s).await, poll(&far, &s).await);
    println!("near: {jn}\nfar: {jf}");
    assert_eq!(
        (jn["state"].as_str(), jf["state"].as_str()),
        (Some("waiting"), Some("waiting"))
    );
    assert_eq!(
        (jn["position"].as_u64(), jf["position"].as_u64()),
        (Some(1), Some(32))
    );
    let reach = jf["reach_position"]
        .as_u64()
        .expect("a reach once purchases are measured");
    assert!((1..32).contains(&reach), "reach position {reach}");
    assert_eq!(jn["beyond_reach"], false);
    assert_eq!(jf["beyond_reach"], true);

    let page = |c: reqwest::Client| {
        let url = s.at("/checkout");
        async move {
            c.get(url)
                .header("accept", "text/html")
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        }
    };
    let (near_page, far_page) = (page(near.clone()).await, page(far.clone()).await);
    assert!(near_page.contains("You are next."), "{near_page}");
    // (The page's words travel in its JSON island for its script: the sentence is looked for in the message.)
    assert!(
        near_page.contains("id=\"wr-message\">You are next.</p>"),
        "{near_page}"
    );
    assert!(
        far_page.contains(&format!("There are 31 people ahead of you. {sentence}")),
        "{far_page}"
    );
    // The page's script shows or hides the sentence from each poll's `beyond_reach`, in the same words.
    let script = far
        .get(s.at("/waitroom/holding.js"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(script.contains("j.beyond_reach") && script.contains("T.reach"));
    assert!(far_page.contains(&format!("\"reach\":\"{sentence}\"")));
}

/// A room of `capacity` with the defaults the tests above turn off: a newcomer with a free place and nobody ahead
/// goes straight in. `configure` sets the rest.
async fn straight_site(
    capacity: u64,
    configure: impl FnOnce(waitroom_layer::RoomBuilder) -> waitroom_layer::RoomBuilder,
) -> Site {
    let clock = ManualClock::starting_now();
    let builder = WaitingRoom::builder("tour-2026")
        .display_name("The 2026 Tour")
        .capacity(capacity)
        .idle_timeout(IDLE)
        .poll_interval(Duration::from_secs(5))
        .clock(Arc::new(clock.clone()))
        .background(false)
        .secure_cookies(false);
    let room = configure(builder).build().await.unwrap();
    site_on(room, clock).await
}

#[tokio::test]
async fn a_lone_visitor_in_an_empty_room_goes_straight_in() {
    let s = straight_site(2, |b| b).await;
    // The first request is the protected page itself, with its pass: no holding page, no tick by hand.
    let a = browser();
    let res = a.get(s.at("/checkout")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let cookies = set_cookies(&res);
    assert!(
        cookie_value(&cookies, "waitroom_token").is_some(),
        "{cookies:?}"
    );
    assert_eq!(res.text().await.unwrap(), "seat map");
    // The pass works on the next request as well, checked by the verifier further in.
    let res = a.get(s.at("/checkout/mine")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    // The second of two places: straight in too, through the join endpoint (a redirect to the page asked for).
    let b = browser();
    let res = b
        .get(s.at("/waitroom/join?return_to=%2Fcheckout%2Fseats%2F7"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(res.headers()["location"], "/checkout/seats/7");
    let res = b.get(s.at("/checkout/seats/7")).send().await.unwrap();
    assert_eq!(res.text().await.unwrap(), "a seat");
    assert_eq!(s.room.stats().active, 2);
    // The room is full: the third waits, at place 1, and goes in when a place frees.
    let c = browser();
    let res = get_json(&c, s.at("/checkout")).await;
    assert_eq!(state(&res), "waiting");
    let st: Value = res.json().await.unwrap();
    assert_eq!(st["position"], 1);
    assert_eq!(s.room.stats().active, 2, "never more than the capacity");
}

/// A newcomer with no cookie and no session header (an app's first request) that goes straight in: the request
/// goes on with the new pass as `Authorization: Bearer` and the new session value in `X-Waitroom-Session`, as the
/// app's next requests will carry them (a verify layer further in that checks for itself finds both), and no
/// cookie; the answer hands the session value over, and no pass (that goes only to a client that named its
/// session).
#[tokio::test]
async fn a_newcomer_without_cookies_going_straight_in_carries_its_pass_and_session_inward() {
    let s = straight_site(1, |b| b).await;
    let res = get_json(&reqwest::Client::new(), s.at("/checkout/echo")).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.headers().get(TOKEN_HEADER.as_str()).is_none());
    let handed = res.headers()[SESSION_VALUE_HEADER.as_str()]
        .to_str()
        .unwrap()
        .to_owned();
    let seen: Value = res.json().await.unwrap();
    assert_eq!(seen["session"], handed.as_str(), "{seen}");
    assert!(seen["cookie"].is_null(), "{seen}");
    let pass = seen["authorization"]
        .as_str()
        .and_then(|a| a.strip_prefix("Bearer "))
        .unwrap_or_else(|| panic!("a bearer pass inward: {seen}"));
    let claims = s.room.verifier().verify(pass).unwrap();
    assert_eq!(Some(claims.sub.as_str()), handed.split('.').next());
    assert_eq!(s.room.stats().active, 1);
}

#[tokio::test]
async fn a_newcomer_does_not_pass_anyone_ahead_of_it() {
    let s = straight_site(1, |b| b).await;
    let a = browser();
    assert_eq!(
        a.get(s.at("/checkout"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "seat map"
    );
    // B waits behind the full room, and its page polls (a first contact's ticket is redeemed at its first poll:
    // until then B is not counted in the line, issue #30).
    let b = browser();
    assert_eq!(state(&get_json(&b, s.at("/checkout")).await), "waiting");
    assert_eq!(poll(&b, &s).await["position"], 1);
    // A buys and leaves: a place is free, and B is ahead of anyone who comes now.
    let res = a.post(s.at("/checkout/buy")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    s.room.refresh().await.unwrap();
    assert_eq!(s.room.stats().active, 0);
    let c = browser();
    let res = get_json(&c, s.at("/checkout")).await;
    assert_eq!(state(&res), "waiting", "C does not take B's place");
    let st: Value = res.json().await.unwrap();
    assert_eq!(st["position"], 2);
    // The door's next tick lets B in, not C.
    s.clock.advance(Duration::from_millis(250));
    s.room.tick_now().await.unwrap();
    assert_eq!(poll(&b, &s).await["state"], "admitted");
    assert_eq!(poll(&c, &s).await["state"], "waiting");
}

#[tokio::test]
async fn going_straight_in_keeps_every_rule_of_the_door() {
    // Paused by an operator: held, and told so.
    let s = straight_site(5, |b| b).await;
    s.room.pause().await.unwrap();
    assert_eq!(
        state(&get_json(&browser(), s.at("/checkout")).await),
        "paused"
    );
    assert_eq!(s.room.stats().active, 0);

    // A cap of one admission a minute: the first goes in, the second waits although four places are free.
    let s = straight_site(5, |b| b.admit_per_minute(1)).await;
    assert_eq!(
        browser()
            .get(s.at("/checkout"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "seat map"
    );
    assert_eq!(
        state(&get_json(&browser(), s.at("/checkout")).await),
        "waiting"
    );
    assert_eq!(s.room.stats().active, 1);

    // Not open yet: everyone waits for the opening.
    let opens_at = SystemTime::now() + Duration::from_secs(600);
    let s = straight_site(5, |b| b.opens_at(opens_at)).await;
    assert_eq!(
        state(&get_json(&browser(), s.at("/checkout")).await),
        "waiting"
    );
    assert_eq!(s.room.stats().active, 0);

    // Every seat held at checkout: nobody goes in; every seat sold: sold out.
    let s = straight_site(5, |b| b).await;
    let held = Inventory {
        total: 10,
        sold: 0,
        held: 10,
    };
    s.room.set_inventory(held).await.unwrap();
    assert_eq!(
        state(&get_json(&browser(), s.at("/checkout")).await),
        "paused"
    );
    let sold = Inventory {
        total: 10,
        sold: 10,
        held: 0,
    };
    s.room.set_inventory(sold).await.unwrap();
    assert_eq!(
        state(&get_json(&browser(), s.at("/checkout")).await),
        "sold_out"
    );
    assert_eq!(s.room.stats().active, 0);

    // Closed.
    let s = straight_site(5, |b| b).await;
    s.room.close().await.unwrap();
    assert_eq!(
        state(&get_json(&browser(), s.at("/checkout")).await),
        "closed"
    );
    assert_eq!(s.room.stats().active, 0);
}

#[tokio::test]
async fn the_holding_page_speaks_the_language_the_browser_asks_for_among_those_registered() {
    let clock = ManualClock::starting_now();
    let room = room_with(&clock, 1, Fairness::Fifo).await;
    let layer = WaitingRoomLayer::builder(room.clone())
        .protect_prefix("/checkout")
        .page_text(waitroom_layer::PageText::german())
        .build()
        .unwrap();
    let app = Router::new()
        .route("/checkout", get(|| async { "seat map" }))
        .layer(layer);
    let url = serve(app).await;
    let page = |lang: &'static str| {
        let url = format!("{url}/checkout");
        async move {
            let mut req = browser().get(url).header("accept", "text/html");
            if !lang.is_empty() {
                req = req.header("accept-language", lang);
            }
            req.send().await.unwrap().text().await.unwrap()
        }
    };
    let de = page("de-AT,de;q=0.9,en;q=0.5").await;
    assert!(de.contains("<html lang=\"de\">"), "{de}");
    assert!(de.contains("Sie sind in der Warteschlange"), "{de}");
    let en = page("fr-FR,en;q=0.5,de;q=0.1").await;
    assert!(
        en.contains("<html lang=\"en\">") && en.contains("You are in line"),
        "{en}"
    );
    let none = page("").await;
    assert!(
        none.contains("<html lang=\"en\">"),
        "the first set without a header"
    );
}

/// A status poll is a question, never a join: without a session it is told `not_in_line`, gets no cookie and
/// takes no number (the next person to join is number 1).
#[tokio::test]
async fn a_status_poll_without_a_session_joins_nobody() {
    let s = site(1).await;
    let nobody = browser();
    let res = get_json(&nobody, s.at("/waitroom/status?return_to=%2Fcheckout")).await;
    assert_eq!(state(&res), "not_in_line");
    assert!(
        cookie_value(&set_cookies(&res), "waitroom_session").is_none(),
        "a poll gives no session"
    );
    let again = get_json(&nobody, s.at("/waitroom/status?return_to=%2Fcheckout")).await;
    assert_eq!(state(&again), "not_in_line");
    // The first to join has the first number: the polls took none.
    let a = browser();
    let _ = a.get(s.at("/checkout")).send().await.unwrap();
    assert_eq!(poll(&a, &s).await["number"], 1);
}

/// A session turned away (the on-sale closed while it waited, in line or in the pre-queue) keeps its cookie as it
/// was: the answer sets no new session cookie, so its later polls are answered from the signed mark.
#[tokio::test]
async fn a_session_turned_away_keeps_its_cookie_as_it_was() {
    let s = site(1).await;
    let (a, b) = (browser(), browser());
    let _ = a.get(s.at("/checkout")).send().await.unwrap();
    assert_eq!(poll(&a, &s).await["position"], 1);
    let _ = b.get(s.at("/checkout")).send().await.unwrap();
    assert_eq!(poll(&b, &s).await["position"], 2);
    // One in the pre-queue of another on-sale, whose draw is a minute away.
    let opens_at =
        UNIX_EPOCH + Duration::from_millis(ManualClock::starting_now().now_ms() + 60_000);
    let p = site_with(1, Fairness::RandomAtOpen { opens_at }).await;
    let c = browser();
    let res = c.get(p.at("/checkout")).send().await.unwrap();
    assert_eq!(state(&res), "prequeue");
    for site in [&s, &p] {
        site.room.close().await.unwrap();
        site.room.tick_now().await.unwrap();
    }
    for (who, site) in [(&b, &s), (&c, &p)] {
        for path in ["/waitroom/status?return_to=%2Fcheckout", "/checkout"] {
            let res = get_json(who, site.at(path)).await;
            assert_eq!(state(&res), "closed", "{path}");
            assert_eq!(
                cookie_value(&set_cookies(&res), "waitroom_session"),
                None,
                "{path}: the session cookie stays as it was"
            );
        }
    }
}

/// Before the line opens (the pre-queue's opening time) nobody takes a place: a newcomer is told when it opens and
/// takes no number, up to the last millisecond; from the very millisecond it opens, a newcomer joins.
#[tokio::test]
async fn before_the_line_opens_a_newcomer_takes_no_place_and_at_the_opening_it_does() {
    let s = site(1).await;
    let opens = s.clock.now_ms() + 10_000;
    s.room.set_schedule(None, Some(opens), None).await.unwrap();
    s.room.refresh().await.unwrap();
    let a = browser();
    for at in [opens - 10_000, opens - 1] {
        s.clock.set_ms(at);
        let res = get_json(&a, s.at("/checkout")).await;
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE, "at {at}");
        assert_eq!(state(&res), "not_in_line");
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["code"], "not_open_yet", "{body}");
    }
    s.clock.set_ms(opens);
    let res = get_json(&a, s.at("/checkout")).await;
    assert_eq!(state(&res), "waiting", "the line is open");
    assert_eq!(
        poll(&a, &s).await["number"],
        1,
        "the first number: nobody took one before"
    );
}

/// The room's own read-only endpoints answer `GET` (and `HEAD`) only: any other method is `405` with `Allow`, and
/// the status poll is not answered to a `POST` (which could join or change nothing either).
#[tokio::test]
async fn the_rooms_read_only_endpoints_refuse_other_methods_with_405() {
    let s = site(1).await;
    let c = reqwest::Client::new();
    for path in [
        "/waitroom/jwks.json",
        "/waitroom/holding.js",
        "/waitroom/status",
    ] {
        assert_eq!(
            c.get(s.at(path)).send().await.unwrap().status(),
            200,
            "GET {path}"
        );
        for method in [http::Method::POST, http::Method::PUT, http::Method::DELETE] {
            let res = c.request(method.clone(), s.at(path)).send().await.unwrap();
            assert_eq!(
                res.status(),
                StatusCode::METHOD_NOT_ALLOWED,
                "{method} {path}"
            );
            assert_eq!(res.headers()["allow"], "GET, HEAD", "{method} {path}");
        }
    }
    // The join takes `GET` and `POST`; any other method is refused and joins nobody.
    for method in [http::Method::PUT, http::Method::DELETE, http::Method::PATCH] {
        let res = c
            .request(method.clone(), s.at("/waitroom/join"))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        assert_eq!(
            res.status(),
            StatusCode::METHOD_NOT_ALLOWED,
            "{method} join"
        );
        // `Allow` names the methods the join does take (a form's POST among them).
        assert_eq!(res.headers()["allow"], "GET, HEAD, POST", "{method} join");
    }
    assert_eq!(s.room.stats().counters.joined, 0, "nobody joined");
    // The same for a session waiting in line, whose `GET` poll is answered from memory: another method is not.
    let a = browser();
    let _ = a.get(s.at("/checkout")).send().await.unwrap();
    assert_eq!(poll(&a, &s).await["position"], 1);
    for method in [http::Method::POST, http::Method::PUT, http::Method::DELETE] {
        let res = a
            .request(method.clone(), s.at("/waitroom/status"))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        assert_eq!(
            res.status(),
            StatusCode::METHOD_NOT_ALLOWED,
            "{method} by a waiting session"
        );
    }
}
