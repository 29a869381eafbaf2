//! The split deployment in one test process: the room gateway (`waitroom::demo::gateway`) forwarding over real
//! HTTP to an order service that only has the verify layer and the room's public keys, read from the gateway's
//! `/waitroom/jwks.json`. The finish travels back in the response header and the gateway's room consumes it.
//! With the `redis` feature, two gateways and the order service over one Redis, as the README starts them.

use std::time::Duration;

use serde_json::Value;
use waitroom::demo::gateway::{Upstream, router, spawn_inventory_poll};
use waitroom::demo::{DEFAULT_EVENT, Shop, room_layer, verifier_from_jwks_url};
use waitroom::layer::{
    SESSION_HEADER, SESSION_VALUE_HEADER, STATE_HEADER, TOKEN_HEADER, WaitingRoom,
};
use waitroom::verify::{FINISH_HEADER, VerifyLayer};
use waitroom_testkit::http::browser as client;

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

/// The gateway (the room in front, everything forwarded) and the order service (the room's public keys from the
/// gateway, the verify layer, no room), each on a free port: their URLs, the gateway's room and its inventory poll.
async fn split() -> (String, String, WaitingRoom, tokio::task::JoinHandle<()>) {
    let gw_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let os_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gateway = format!("http://{}", gw_listener.local_addr().unwrap());
    let order_service = format!("http://{}", os_listener.local_addr().unwrap());

    // The gateway: the room in front, everything forwarded.
    let room = WaitingRoom::builder(DEFAULT_EVENT)
        .capacity(1)
        .max_qty(4)
        .poll_interval(Duration::from_secs(1))
        // A and B go through the line, the door moved by hand; going straight in has its own tests.
        .straight_in(false)
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
    let keys = verifier_from_jwks_url(
        &format!("{gateway}/waitroom/jwks.json"),
        DEFAULT_EVENT,
        Duration::from_secs(5),
        Duration::from_secs(300),
    )
    .await
    .unwrap();
    let shop = Shop::builder(4).payment_latency(Duration::ZERO).build();
    let app = shop.router(VerifyLayer::new(keys.verifier().clone()));
    tokio::spawn(async move {
        // The key refresh lives as long as the order service.
        let _keys = keys;
        axum::serve(os_listener, app).await.unwrap()
    });

    (gateway, order_service, room, poll)
}

#[tokio::test]
async fn the_gateway_holds_forwards_and_consumes_the_finish() {
    let (gateway, order_service, room, poll) = split().await;

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

/// An app's request: JSON, its session in the header and its token as a bearer (no cookie jar anywhere).
fn app_request(
    req: reqwest::RequestBuilder,
    session: &str,
    token: Option<&str>,
) -> reqwest::RequestBuilder {
    let req = req
        .header("accept", "application/json")
        .header(SESSION_HEADER, session);
    match token {
        Some(t) => req.bearer_auth(t),
        None => req,
    }
}

#[tokio::test]
async fn an_app_without_cookies_goes_through_the_gateway_to_a_finished_order() {
    let (gateway, order_service, room, poll) = split().await;
    let app = reqwest::Client::new();

    // Two apps join; the first is let in at the tick.
    let mut sessions = Vec::new();
    for _ in 0..2 {
        let res = app
            .post(format!("{gateway}/waitroom/join"))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        let from_header = res.headers()[SESSION_VALUE_HEADER.as_str()]
            .to_str()
            .unwrap()
            .to_owned();
        let json: Value = res.json().await.unwrap();
        assert_eq!(json["session"], from_header.as_str());
        sessions.push(from_header);
    }
    let (mine, theirs) = (sessions[0].clone(), sessions[1].clone());
    room.tick_now().await.unwrap();
    let res = app_request(app.get(format!("{gateway}/waitroom/status")), &mine, None)
        .send()
        .await
        .unwrap();
    assert!(res.headers().get("set-cookie").is_none());
    let json: Value = res.json().await.unwrap();
    assert_eq!(json["state"], "admitted");
    let token = json["token"].as_str().expect("the token").to_owned();

    // Through the gateway to the order service: seats, a hold, nothing else needed.
    let res = app_request(app.get(format!("{gateway}/seats")), &mine, Some(&token))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);

    // Refused at the gateway: another session's token, a forged or unsigned session header, a bearer alone.
    let sid = mine.split('.').next().unwrap();
    let (head, tag) = mine.rsplit_once('.').unwrap();
    let flipped = if tag.starts_with('A') { "B" } else { "A" };
    let forged = format!("{head}.{flipped}{}", &tag[1..]);
    for (what, session) in [
        ("another session's token", Some(theirs.as_str())),
        ("a forged session header", Some(forged.as_str())),
        ("an unsigned session header", Some(sid)),
        ("a bearer without the header", None),
    ] {
        let req = app.get(format!("{gateway}/seats"));
        let req = match session {
            Some(s) => app_request(req, s, Some(&token)),
            None => req.header("accept", "application/json").bearer_auth(&token),
        };
        let res = req.send().await.unwrap();
        assert_eq!(res.status(), 429, "{what}");
        assert!(res.headers().get(TOKEN_HEADER.as_str()).is_none(), "{what}");
    }
    // The order service checks the binding on its own too: a token with another session is refused there.
    let res = app_request(
        app.get(format!("{order_service}/seats")),
        &theirs,
        Some(&token),
    )
    .send()
    .await
    .unwrap();
    assert!(res.status().is_client_error(), "{}", res.status());

    // The order: hold two seats and pay. The gateway's room consumes the finish and tells the app.
    let res = app_request(app.post(format!("{gateway}/holds")), &mine, Some(&token))
        .header("content-type", "application/json")
        .body(r#"{"seats":[0,1]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let res = app_request(app.post(format!("{gateway}/pay")), &mine, Some(&token))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.headers().get(FINISH_HEADER).is_none());
    assert_eq!(res.headers()[STATE_HEADER.as_str()], "finished");
    assert_eq!(room.stats().active, 0, "the finish freed the place");
    assert_eq!(room.stats().counters.seats_bought, 2);

    // The finished token opens nothing at the gateway: the app would join again under a new session.
    let res = app_request(app.get(format!("{gateway}/seats")), &mine, Some(&token))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 429);
    poll.abort();
}

/// The split deployment over Redis, as the README starts it: two gateways (`build_room` with one signing key and one
/// cookie secret, as both would read them from the same files) and an order service with the verify layer and a
/// handle over the same Redis for its finishes and seat counts. One line across both gateways: a place taken on one
/// is let in and served on the other, the order's finish frees the place for the next person whichever gateway
/// they poll, and the finished token stops passing on both.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_over_redis_are_one_line() {
    use waitroom::demo::{RedisOptions, RoomOptions, build_room, store_for};
    use waitroom::verify::SigningKey;

    let server = waitroom_testkit::redis::RedisServer::from_env_or_start();
    let event = format!("split-{}", WaitingRoom::new_session_id());
    let options = RoomOptions {
        event: event.clone(),
        capacity: 1,
        refresh: Duration::from_secs(1),
        tick_interval: Duration::from_millis(50),
        redis: RedisOptions::server(server.url()),
        // A and B go through the line; going straight in has its own tests.
        straight_in: false,
        ..RoomOptions::default()
    };
    // One key file, read by each gateway.
    let pem = SigningKey::generate_ed25519("split-test")
        .unwrap()
        .to_pem()
        .unwrap();
    let secret = b"one cookie secret for every gateway".to_vec();
    let os_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let order_service = format!("http://{}", os_listener.local_addr().unwrap());
    let mut gateways = Vec::new();
    for _ in 0..2 {
        let room = build_room(
            &options,
            Some(SigningKey::from_ed25519_pem("split-test", &pem).unwrap()),
            Some(secret.clone()),
        )
        .await
        .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        gateways.push(format!("http://{}", listener.local_addr().unwrap()));
        let app = router(Upstream::new(order_service.clone()).unwrap())
            .layer(room_layer(room.clone()).unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    }
    let (g1, g2) = (&gateways[0], &gateways[1]);

    // The order service: keys from a gateway, the verify layer, finishes and seat counts through Redis.
    let keys = verifier_from_jwks_url(
        &format!("{g1}/waitroom/jwks.json"),
        &event,
        Duration::from_secs(5),
        Duration::from_secs(300),
    )
    .await
    .unwrap();
    let handle = WaitingRoom::builder(event.clone())
        .shared_store(store_for(&options.redis).await.unwrap().unwrap())
        .background(false)
        .build()
        .await
        .unwrap();
    let shop = Shop::builder(4)
        .payment_latency(Duration::ZERO)
        .room(handle)
        .build();
    shop.report_inventory().await;
    let app = shop.router(VerifyLayer::new(keys.verifier().clone()));
    tokio::spawn(async move { axum::serve(os_listener, app).await.unwrap() });

    // A takes the place on gateway 1, B joins on gateway 2: one line, A first.
    let (a, b) = (client(), client());
    for (c, g) in [(&a, g1), (&b, g2)] {
        let res = c
            .get(format!("{g}/seats"))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 429);
    }
    eventually("A is let in (asking gateway 2)", async || {
        status(&a, g2).await["state"] == "admitted"
    })
    .await;
    // B's first poll on gateway 1 redeems the ticket gateway 2 gave it; until gateway 1's next refresh (a quarter
    // of a second) its shared numbers may not know B's number was given out, and count it as one more ahead.
    eventually("B is next, on either gateway", async || {
        status(&b, g1).await["position"] == 1 && status(&b, g2).await["position"] == 1
    })
    .await;

    // A's pass, issued by one gateway, opens the seat map on both.
    for g in [g1, g2] {
        let res = a
            .get(format!("{g}/seats"))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "A's pass on {g}");
    }

    // A holds a seat through gateway 1 and pays through gateway 2.
    let res = a
        .post(format!("{g1}/holds"))
        .header("accept", "application/json")
        .header("content-type", "application/json")
        .body(r#"{"seats":[0]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let res = a
        .post(format!("{g2}/pay"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);

    // The place freed: B is let in, whichever gateway it asks; A's finished pass no longer opens gateway 1.
    eventually("B is let in (asking gateway 1)", async || {
        status(&b, g1).await["state"] == "admitted"
    })
    .await;
    eventually(
        "A's finished pass is refused on gateway 1 too",
        async || {
            a.get(format!("{g1}/seats"))
                .header("accept", "application/json")
                .send()
                .await
                .unwrap()
                .status()
                != 200
        },
    )
    .await;
    let res = b
        .get(format!("{g2}/seats"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
}
