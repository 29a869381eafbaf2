//! Operating rooms over a real redis-server.
//!
//! - `an_admin_change_on_one_instance_is_seen_by_the_other`: two instances of one on-sale; an operator's change
//!   through the admin API of one is in force on the other at its next refresh (printed: a fraction of a second;
//!   bounded by `PATIENCE` for a loaded machine, failing with a message), and both serve the
//!   same room figures as metrics.
//! - `redis_down_fail_closed_holds_newcomers_and_fail_open_lets_them_through`: redis-server stops mid-run under a
//!   room that fails closed (the default) and one that fails open (`StoreOutage::FailOpen`), then starts again.
#![cfg(feature = "redis")]

use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use serde_json::{Value, json};
use waitroom_layer::{RedisStore, StoreOutage, WaitingRoom, WaitingRoomLayer};
use waitroom_testkit::redis::RedisServer;

const ADMIN: &str = "ops-redis-admin-secret-0123";

async fn instance(url: &str, event: &str) -> (String, WaitingRoom) {
    let store = RedisStore::connect(url).await.unwrap();
    let room = WaitingRoom::builder(event)
        .capacity(10)
        .store(store)
        .secure_cookies(false)
        .build()
        .await
        .unwrap();
    let layer = WaitingRoomLayer::builder(room.clone())
        .protect_prefix("/checkout")
        .metrics(true)
        .admin_token(ADMIN)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/checkout", get(|| async { "seat map" }))
        .layer(layer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), room)
}

async fn admin_stats(client: &reqwest::Client, base: &str) -> Value {
    client
        .get(format!("{base}/waitroom/admin/stats"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The longest a change may take to reach the other instance before the test fails (each instance refreshes from
/// the store at its background tick, the default interval; this is for a machine loaded by other builds).
const PATIENCE: Duration = Duration::from_secs(20);

/// Polls `check` against instance `base`'s admin stats until it holds; returns how long that took.
async fn seen_within(
    client: &reqwest::Client,
    base: &str,
    limit: Duration,
    check: impl Fn(&Value) -> bool,
) -> Duration {
    let start = Instant::now();
    loop {
        let stats = admin_stats(client, base).await;
        if check(&stats) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "not seen within {limit:?}: {stats}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_change_on_one_instance_is_seen_by_the_other() {
    let server = RedisServer::from_env_or_start();
    let event = format!(
        "ops-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let (a, room_a) = instance(server.url(), &event).await;
    let (b, room_b) = instance(server.url(), &event).await;
    let client = reqwest::Client::new();
    assert_eq!(admin_stats(&client, &b).await["capacity"], 10);

    let res = client
        .post(format!("{a}/waitroom/admin/capacity"))
        .bearer_auth(ADMIN)
        .json(&json!({"capacity": 77}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let took = seen_within(&client, &b, PATIENCE, |s| s["capacity"] == 77).await;
    println!("capacity change seen by the other instance after {took:?}");
    assert_eq!(room_b.stats().capacity, 77);

    // A wrong token on one instance changes nothing anywhere.
    let res = client
        .post(format!("{a}/waitroom/admin/pause"))
        .bearer_auth("not-the-admin-secret-at-all")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!room_a.stats().paused && !room_b.stats().paused);

    // Pausing on B holds the door on A too; a newcomer on A is told so.
    let res = client
        .post(format!("{b}/waitroom/admin/pause"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    seen_within(&client, &a, PATIENCE, |s| s["paused"] == true).await;
    let res = client
        .get(format!("{a}/checkout"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()["waitroom-state"], "paused");

    // Both instances report the same room figures.
    let text = reqwest::get(format!("{b}/waitroom/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains(&format!("waitroom_capacity{{event=\"{event}\"}} 77")));
    assert!(text.contains(&format!("waitroom_paused{{event=\"{event}\"}} 1")));
}

/// A room over `url` with one place, protecting `/checkout`, failing as `outage` says (`None`: the default).
async fn outage_instance(
    url: &str,
    event: &str,
    outage: Option<StoreOutage>,
) -> (String, WaitingRoom) {
    let store = RedisStore::builder(url)
        .timeout(Duration::from_millis(300))
        .connect()
        .await
        .unwrap();
    let mut builder = WaitingRoom::builder(event)
        .capacity(1)
        .store(store)
        .secure_cookies(false);
    if let Some(outage) = outage {
        builder = builder.store_outage(outage);
    }
    let room = builder.build().await.unwrap();
    let layer = WaitingRoomLayer::builder(room.clone())
        .protect_prefix("/checkout")
        .build()
        .unwrap();
    let app = Router::new()
        .route("/checkout", get(|| async { "seat map" }))
        .layer(layer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), room)
}

/// A browser navigating: a cookie jar, redirects shown, an `Accept` naming `text/html` (so pages, not JSON).
fn a_browser() -> reqwest::Client {
    reqwest::Client::builder()
        .default_headers(reqwest::header::HeaderMap::from_iter([(
            reqwest::header::ACCEPT,
            reqwest::header::HeaderValue::from_static("text/html,application/xhtml+xml,*/*;q=0.8"),
        )]))
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// `GET {base}/checkout` as a browser (HTML): the status, the room's state header (`-` when the handler
/// answered) and the body. Never a 5xx.
async fn checkout(b: &reqwest::Client, base: &str) -> (u16, String, String) {
    let res = b.get(format!("{base}/checkout")).send().await.unwrap();
    let status = res.status().as_u16();
    let state = res
        .headers()
        .get("waitroom-state")
        .map_or("-".to_owned(), |v| v.to_str().unwrap().to_owned());
    let body = res.text().await.unwrap();
    assert!(status < 500, "{status} {state}: {body:.300}");
    (status, state, body)
}

async fn until(what: &str, limit: Duration, check: impl Fn() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("{what} after {:?}", start.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_fail_closed_holds_newcomers_and_fail_open_lets_them_through() {
    let mut server = RedisServer::start(); // private: stopped and restarted below
    let tag = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let (closed, closed_room) = outage_instance(server.url(), &format!("closed-{tag}"), None).await;
    let (open, open_room) = outage_instance(
        server.url(),
        &format!("open-{tag}"),
        Some(StoreOutage::FailOpen),
    )
    .await;
    assert_eq!(closed_room.config().store_outage, StoreOutage::FailClosed);

    // Before the outage both rooms queue alike: the first visitor takes the one place, the second waits.
    let mut in_line = Vec::new();
    for base in [&closed, &open] {
        let first = a_browser();
        checkout(&first, base).await;
        let second = a_browser();
        let (status, state, body) = checkout(&second, base).await;
        assert_eq!((status, state.as_str()), (200, "waiting"), "{body:.300}");
        in_line.push(second);
    }

    // ---- Redis goes away ----
    server.stop();
    // A newcomer's very first request may be the one that finds the store down; or the background tick does.
    for _ in 0..3 {
        let (_, _, body) = checkout(&a_browser(), &open).await;
        assert_eq!(
            body, "seat map",
            "fail open: through, even before the room noticed"
        );
    }
    until(
        "both rooms see the store down",
        Duration::from_secs(5),
        || !closed_room.store_ok() && !open_room.store_ok(),
    )
    .await;
    // Someone not in line who asks how things stand is told that the room cannot say (`store_ok: false`), though
    // the answer needed no store call of its own.
    let res = reqwest::Client::new()
        .get(format!("{closed}/waitroom/status"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let st: Value = res.json().await.unwrap();
    assert_eq!(
        (&st["state"], &st["store_ok"]),
        (&json!("not_in_line"), &json!(false)),
        "{st}"
    );
    for round in 0..5 {
        // Fail closed: a cookie-less newcomer is held on the holding page, which says the status is unknown;
        // the person in line too.
        let (status, state, body) = checkout(&a_browser(), &closed).await;
        assert_eq!(status, 200);
        assert_ne!(state, "-", "round {round}: the handler answered");
        // The page's note, rendered (its words also travel in the page's JSON island, for its script).
        assert!(body.contains(">Status temporarily unknown"), "{body:.300}");
        let (status, state, body) = checkout(&in_line[0], &closed).await;
        assert_eq!((status, state.as_str()), (200, "waiting"));
        // The page's note, rendered (its words also travel in the page's JSON island, for its script).
        assert!(body.contains(">Status temporarily unknown"), "{body:.300}");
        // Fail open: the newcomer and the person in line both reach the handler, with no pass.
        let newcomer = a_browser();
        let res = newcomer
            .get(format!("{open}/checkout"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        assert!(res.headers().get("waitroom-state").is_none());
        assert!(
            res.headers().get_all("set-cookie").iter().next().is_none(),
            "no session, no token while failing open"
        );
        assert_eq!(res.text().await.unwrap(), "seat map");
        let (status, _, body) = checkout(&in_line[1], &open).await;
        assert_eq!((status, body.as_str()), (200, "seat map"));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // ---- Redis comes back (from its append-only file) ----
    server.restart();
    until(
        "both rooms see the store back",
        Duration::from_secs(10),
        || closed_room.store_ok() && open_room.store_ok(),
    )
    .await;
    // Failing open ended by itself: a newcomer queues again (the one place is still taken), on both rooms.
    for base in [&closed, &open] {
        let (status, state, body) = checkout(&a_browser(), base).await;
        assert_eq!(
            (status, state.as_str()),
            (200, "waiting"),
            "{base}: {body:.300}"
        );
        assert!(!body.contains(">Status temporarily unknown"), "{body:.300}");
        let (status, state, _) = checkout(&in_line[1], &open).await;
        assert_eq!((status, state.as_str()), (200, "waiting"));
    }
}
