//! The split deployment in one test process: the room gateway (`waitroom::demo::gateway`) forwarding over real
//! HTTP to an order service that only has the verify layer and the room's public keys, read from the gateway's
//! `/waitroom/jwks.json`. The finish travels back in the response header and the gateway's room consumes it.

use std::time::Duration;

use serde_json::Value;
use waitroom::demo::gateway::{Upstream, router, spawn_inventory_poll};
use waitroom::demo::{DEFAULT_EVENT, Shop, room_layer, verifier_from_jwks_url};
use waitroom::layer::WaitingRoom;
use waitroom::verify::{FINISH_HEADER, VerifyLayer};

mod common;
use common::browser as client;

async fn status(c: &reqwest::Client, gateway: &str) -> Value {
    c.get(format!("{gateway}/waitroom/status?return_to=%2Fseats"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Polls until `f` holds (the inventory reaches the room on the gateway's next read of it).
async fn eventually(what: &str, mut f: impl AsyncFnMut() -> bool) {
    for _ in 0..100 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never: {what}");
}

#[tokio::test]
async fn the_gateway_holds_forwards_and_consumes_the_finish() {
    let gw_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let os_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gateway = format!("http://{}", gw_listener.local_addr().unwrap());
    let order_service = format!("http://{}", os_listener.local_addr().unwrap());

    // The gateway: the room in front, everything forwarded.
    let room = WaitingRoom::builder(DEFAULT_EVENT)
        .capacity(1)
        .max_qty(4)
        .poll_interval(Duration::from_secs(1))
        .background(false)
        .secure_cookies(false)
        .build()
        .await
        .unwrap();
    let upstream = Upstream::new(order_service.clone()).unwrap();
    let poll = spawn_inventory_poll(&room, upstream.clone(), Duration::from_millis(50));
    let app = router(upstream).layer(room_layer(room.clone()).unwrap());
    tokio::spawn(async move { axum::serve(gw_listener, app).await.unwrap() });

    // The order service: the room's public keys from the gateway, the verify layer, no room.
    let verifier = verifier_from_jwks_url(
        &format!("{gateway}/waitroom/jwks.json"),
        DEFAULT_EVENT,
        Duration::from_secs(5),
        Duration::from_secs(300),
    )
    .await
    .unwrap();
    let shop = Shop::builder(4).payment_latency(Duration::ZERO).build();
    let app = shop.router(VerifyLayer::new(verifier));
    tokio::spawn(async move { axum::serve(os_listener, app).await.unwrap() });

    // The public page and the health route pass (the latter never reaches the order service).
    let res = client().get(format!("{gateway}/")).send().await.unwrap();
    assert_eq!(res.headers()["cache-control"], "public, max-age=60");
    let res = client()
        .get(format!("{gateway}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.text().await.unwrap(), "ok");

    // A gets the place, B waits.
    let (a, b) = (client(), client());
    for c in [&a, &b] {
        let res = c
            .get(format!("{gateway}/seats"))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 429);
    }
    room.tick_now().await.unwrap();
    assert_eq!(status(&a, &gateway).await["state"], "admitted");
    assert_eq!(status(&b, &gateway).await["position"], 1);

    // Through the gateway A reaches the seat map; straight to the order service, a browser without a token is
    // sent to the line.
    let res = a
        .get(format!("{gateway}/seats"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let res = client()
        .get(format!("{order_service}/seats"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    assert_eq!(
        res.headers()["location"],
        "/waitroom/join?return_to=%2Fseats"
    );

    // A holds every seat: the gateway reads the counts and the door stops.
    let res = a
        .post(format!("{gateway}/holds"))
        .header("accept", "application/json")
        .header("content-type", "application/json")
        .body(r#"{"seats":[0,1,2,3]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    eventually("the gateway's room hears of the hold", async || {
        room.stats().inventory.is_some_and(|i| i.held == 4)
    })
    .await;

    // A pays: the order service's finish header is consumed by the gateway's room, never seen by the browser.
    let res = a
        .post(format!("{gateway}/pay"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.headers().get(FINISH_HEADER).is_none());
    assert_eq!(room.stats().active, 0, "the finish freed the place");
    assert_eq!(room.stats().counters.seats_bought, 4);
    eventually("the line is told the seats are gone", async || {
        room.tick_now().await.unwrap();
        status(&b, &gateway).await["state"] == "sold_out"
    })
    .await;
    poll.abort();
}
