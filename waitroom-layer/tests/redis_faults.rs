//! Faults of a real redis-server under the room layer over real HTTP (issue 21): a finish made while Redis is
//! down is kept and retried, not lost. The room's clock is manual and the door moves by hand; nothing sleeps.
#![cfg(feature = "redis")]

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use waitroom_layer::{ManualClock, RedisStore, STATE_HEADER, WaitingRoom, WaitingRoomLayer};
use waitroom_testkit::http::{browser, serve};
use waitroom_testkit::redis::RedisServer;
use waitroom_verify::FINISH_HEADER;

fn event(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{tag}-{}-{nanos}", std::process::id())
}

async fn state_of(b: &reqwest::Client, url: &str) -> String {
    let res = b
        .get(format!("{url}/waitroom/status"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert!(res.status().as_u16() < 500, "{}", res.status());
    res.headers()[STATE_HEADER].to_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finish_made_while_redis_is_down_is_kept_and_frees_the_place_once_redis_is_back() {
    let mut server = RedisServer::start();
    let store = RedisStore::connect(server.url()).await.unwrap();
    let clock = ManualClock::starting_now();
    let room = WaitingRoom::builder(event("finish-outage"))
        .capacity(1)
        .idle_timeout(Duration::from_secs(600))
        .clock(Arc::new(clock.clone()))
        .background(false)
        .secure_cookies(false)
        .store(store)
        .build()
        .await
        .unwrap();
    let layer = WaitingRoomLayer::builder(room.clone())
        .protect_prefix("/checkout")
        .build()
        .unwrap();
    let app = Router::new()
        .route("/checkout", get(|| async { "seat map" }))
        .route(
            "/checkout/buy",
            post(|| async { ([(FINISH_HEADER, "finish")], "bought") }),
        )
        .layer(layer);
    let url = serve(app).await;

    let a = browser();
    let b = browser();
    a.get(format!("{url}/checkout")).send().await.unwrap();
    room.tick_now().await.unwrap();
    assert_eq!(state_of(&a, &url).await, "admitted");
    assert_eq!(
        a.get(format!("{url}/checkout"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "seat map"
    );
    b.get(format!("{url}/checkout")).send().await.unwrap();
    assert_eq!(state_of(&b, &url).await, "waiting");

    // Redis goes away; A pays and finishes meanwhile.
    server.stop();
    let res = a.post(format!("{url}/checkout/buy")).send().await.unwrap();
    assert_eq!(res.text().await.unwrap(), "bought");
    assert_eq!(room.finishes_pending(), 1, "the finish is kept");
    assert!(
        room.metrics_text()
            .contains("waitroom_finishes_pending{event=")
    );
    // The local deny list refuses A's token meanwhile.
    let res = a.get(format!("{url}/checkout")).send().await.unwrap();
    assert!(
        res.headers().contains_key(STATE_HEADER),
        "A's token no longer opens the door"
    );
    assert!(room.tick_now().await.is_err(), "the store is still down");
    assert_eq!(room.finishes_pending(), 1);

    // Redis is back (its append-only file kept the line): the finish reaches it and B goes in.
    server.restart();
    for _ in 0..10 {
        clock.advance(Duration::from_secs(5));
        // B keeps polling (its liveness), as its page does.
        let _ = state_of(&b, &url).await;
        if room.tick_now().await.is_ok() && state_of(&b, &url).await == "admitted" {
            break;
        }
    }
    assert_eq!(room.finishes_pending(), 0);
    assert_eq!(
        state_of(&b, &url).await,
        "admitted",
        "the place A left is B's"
    );
    assert!(
        room.metrics_text()
            .contains("waitroom_finishes_pending{event=\"")
    );
}
