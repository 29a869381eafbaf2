//! Two instances of one on-sale sharing a real redis-server: an operator's change through the admin API of one
//! instance is in force on the other within a second, and both serve the same room figures as metrics.
#![cfg(feature = "redis")]

#[path = "../waitroom-layer/tests/support/redis_server.rs"]
mod redis_server;

use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use redis_server::RedisServer;
use serde_json::{Value, json};
use waitroom::layer::{RedisStore, WaitingRoom, WaitingRoomLayer};

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
async fn an_admin_change_on_one_instance_is_seen_by_the_other_within_a_second() {
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
    let took = seen_within(&client, &b, Duration::from_secs(1), |s| s["capacity"] == 77).await;
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
    seen_within(&client, &a, Duration::from_secs(1), |s| s["paused"] == true).await;
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
