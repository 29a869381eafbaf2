//! A whole small on-sale through the demo's real HTTP surface: capacity 3, 12 seats, 10 buyers with their own
//! cookie jars. The storefront is the one `examples/onsale.rs` serves (`waitroom::demo`), on an ephemeral port;
//! the room runs on a manual clock with no background task, and the test moves the door with `tick_now`. The sale
//! runs twice: with the room around the whole router (`serve_behind_room`, what the example does) and with
//! `Router::layer` (the room around each route).

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::redirect::Policy;
use serde_json::{Value, json};
use waitroom::demo::{Shop, room_layer, serve_behind_room};
use waitroom::layer::{ManualClock, STATE_HEADER, WaitingRoom};
use waitroom::verify::VerifyLayer;

struct Sale {
    url: String,
    room: WaitingRoom,
    shop: Shop,
    clock: ManualClock,
}

/// How the room is put in front of the shop.
#[derive(Clone, Copy)]
enum Mount {
    /// Around the whole router, before axum's routing.
    AroundRouter,
    /// `Router::layer`: around each route.
    PerRoute,
}

async fn sale(mount: Mount) -> Sale {
    let clock = ManualClock::starting_now();
    let room = WaitingRoom::builder("tour-2026-stadium")
        .display_name("The 2026 Stadium Tour")
        .capacity(3)
        .max_qty(4)
        .idle_timeout(Duration::from_secs(20 * 60))
        .poll_interval(Duration::from_secs(5))
        .clock(Arc::new(clock.clone()))
        .background(false)
        .secure_cookies(false)
        .build()
        .await
        .unwrap();
    let shop = Shop::builder(12)
        .max_per_order(4)
        .hold_for(Duration::from_secs(300))
        .payment_latency(Duration::from_millis(20))
        .clock(Arc::new(clock.clone()))
        .room(room.clone())
        .build();
    shop.report_inventory().await;
    let app = shop.router(VerifyLayer::new(room.verifier().clone()));
    let layer = room_layer(room.clone()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    match mount {
        Mount::AroundRouter => {
            tokio::spawn(async move { serve_behind_room(listener, layer, app).await.unwrap() });
        }
        Mount::PerRoute => {
            tokio::spawn(async move { axum::serve(listener, app.layer(layer)).await.unwrap() });
        }
    }
    Sale {
        url,
        room,
        shop,
        clock,
    }
}

fn buyer() -> reqwest::Client {
    reqwest::Client::builder()
        .cookie_store(true)
        .redirect(Policy::none())
        .build()
        .unwrap()
}

struct Reply {
    status: StatusCode,
    state: String,
    json: Value,
}

async fn send(req: reqwest::RequestBuilder) -> Reply {
    let res = req
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    let status = res.status();
    let state = res
        .headers()
        .get(STATE_HEADER)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let json = res.json().await.unwrap_or(Value::Null);
    Reply {
        status,
        state,
        json,
    }
}

impl Sale {
    async fn get(&self, b: &reqwest::Client, path: &str) -> Reply {
        send(b.get(format!("{}{path}", self.url))).await
    }

    async fn post(&self, b: &reqwest::Client, path: &str, form: &str) -> Reply {
        send(
            b.post(format!("{}{path}", self.url))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(form.to_owned()),
        )
        .await
    }

    async fn poll(&self, b: &reqwest::Client) -> Value {
        let r = self.get(b, "/waitroom/status?return_to=%2Fseats").await;
        assert_eq!(r.status, 200);
        r.json
    }

    async fn tick(&self) {
        self.room.tick_now().await.unwrap();
    }

    /// Moves the clock on by `secs`, with everyone in `waiting` still polling (so nobody is skipped as gone).
    async fn later(&self, secs: u64, waiting: &[reqwest::Client]) {
        self.clock.advance(Duration::from_secs(secs));
        for b in waiting {
            self.poll(b).await;
        }
    }

    fn counts(&self) -> (u64, u64, u64) {
        let c = self.shop.inventory().counts();
        (c.sold, c.held, c.available())
    }
}

#[tokio::test]
async fn a_small_sale_from_the_line_to_sold_out() {
    small_sale(Mount::AroundRouter).await;
}

#[tokio::test]
async fn the_same_sale_with_the_room_around_each_route() {
    small_sale(Mount::PerRoute).await;
}

async fn small_sale(mount: Mount) {
    let s = sale(mount).await;

    // The public page is the same for everyone and cacheable; the bare health route never sees the room.
    let res = reqwest::get(format!("{}/", s.url)).await.unwrap();
    assert_eq!(res.headers()["cache-control"], "public, max-age=60");
    assert!(res.headers().get(STATE_HEADER).is_none());
    assert!(res.text().await.unwrap().contains("12 seats"));
    let res = reqwest::get(format!("{}/healthz", s.url)).await.unwrap();
    assert_eq!(
        (res.status().as_u16(), res.text().await.unwrap()),
        (200, "ok".into())
    );

    // Ten buyers ask for the seat map before the door has let anyone in: each gets a place in line.
    let buyers: Vec<reqwest::Client> = (0..10).map(|_| buyer()).collect();
    for (i, b) in buyers.iter().enumerate() {
        let r = s.get(b, "/seats").await;
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "buyer {i}");
        assert_eq!(r.state, "waiting");
        assert_eq!(r.json["position"], i as u64 + 1);
    }

    // The door lets three in; the rest move up to positions 1..7 and cannot reach the seat map.
    s.tick().await;
    for b in &buyers[..3] {
        let st = s.poll(b).await;
        assert_eq!(
            (st["state"].as_str(), st["next"].as_str()),
            (Some("admitted"), Some("/seats"))
        );
    }
    for (i, b) in buyers[3..].iter().enumerate() {
        assert_eq!(s.poll(b).await["position"], i as u64 + 1);
    }
    assert_eq!(s.get(&buyers[3], "/seats").await.status, 429);
    assert_eq!(s.room.stats().active, 3);

    // The three admitted see live availability and hold seats; the inventory decides a conflict on seat 2.
    let map = s.get(&buyers[0], "/seats").await;
    assert_eq!(map.status, 200);
    assert_eq!(
        (map.json["available"].as_u64(), map.json["limit"].as_u64()),
        (Some(12), Some(4))
    );
    assert_eq!(map.json["seats"].as_array().unwrap().len(), 12);
    let r = s.post(&buyers[0], "/holds", "seat=0&seat=1&seat=2").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json["hold"]["seats"], json!([0, 1, 2]));
    let r = s.post(&buyers[1], "/holds", "seat=2&seat=3").await;
    assert_eq!(r.status, StatusCode::CONFLICT, "seat 2 is held by buyer 0");
    assert_eq!(
        (r.json["error"].as_str(), &r.json["seats"]),
        (Some("taken"), &json!([2]))
    );
    assert_eq!(s.counts(), (0, 3, 9), "a refused hold writes nothing");
    let r = s.post(&buyers[1], "/holds", "seat=3&seat=4").await;
    assert_eq!(r.status, 200);
    let r = s
        .post(&buyers[2], "/holds", "seat=5&seat=6&seat=7&seat=8&seat=9")
        .await;
    assert_eq!(
        r.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "over the limit of 4"
    );
    assert_eq!(
        s.post(&buyers[2], "/holds", "seat=5&seat=6&seat=7&seat=8")
            .await
            .status,
        200
    );
    assert_eq!(s.counts(), (0, 9, 3));
    let seen = s.get(&buyers[1], "/seats").await.json;
    assert_eq!(seen["seats"][2]["state"], "held");
    assert_eq!(seen["seats"][3]["state"], "mine");
    assert_eq!(
        s.room.stats().inventory.unwrap().held,
        9,
        "the room hears of every hold"
    );

    // Each payment finishes its session: the place frees and the next in line is let in. (The door also never
    // lets more people in within a minute than there are seats to pick from: with 3 seats left and 3 let in this
    // minute, the first freed place waits for the next minute.)
    for (payer, next) in [(0, 3), (1, 4), (2, 5)] {
        let r = s.post(&buyers[payer], "/pay", "").await;
        assert_eq!(r.status, 200, "buyer {payer} pays");
        let url = r.json["url"].as_str().unwrap().to_owned();
        assert_eq!(s.room.stats().active, 2, "the finish freed a place");
        if payer == 0 {
            s.tick().await;
            assert_eq!(s.poll(&buyers[next]).await["state"], "waiting", "seat cap");
            s.later(61, &buyers[next..]).await;
        }
        s.tick().await;
        assert_eq!(
            s.poll(&buyers[next]).await["state"],
            "admitted",
            "buyer {next}"
        );
        // The confirmation is public (its id is the secret); the finished session is back in line if it returns.
        let order = s.get(&buyer(), &url).await;
        assert_eq!(order.status, 200);
        assert_eq!(
            order.json["order"]["id"],
            url.trim_start_matches("/orders/")
        );
        let again = s.get(&buyers[payer], "/seats").await;
        assert_eq!(again.status, 429, "a finished session does not get back in");
    }
    assert_eq!(s.counts(), (9, 0, 3));
    assert_eq!(s.poll(&buyers[6]).await["position"], 1);

    // Buyer 3 holds the last three seats: nothing is left to choose, so the door stops even with a place free.
    assert_eq!(
        s.post(&buyers[3], "/holds", "seat=9&seat=10&seat=11")
            .await
            .status,
        200
    );
    assert_eq!(s.counts(), (9, 3, 0));
    let r = s.post(&buyers[4], "/leave", "").await;
    assert_eq!(r.status, 200);
    s.tick().await;
    assert_eq!(s.room.stats().active, 2);
    let st = s.poll(&buyers[6]).await;
    assert_eq!(
        (st["state"].as_str(), st["position"].as_u64()),
        (Some("paused"), Some(1))
    );

    // Buyer 3's hold lapses: the seats come back, the door reopens, and its late payment is refused.
    s.later(301, &buyers[6..]).await;
    assert_eq!(s.shop.expire_holds().await, 3);
    assert_eq!(s.counts(), (9, 0, 3));
    s.tick().await;
    assert_eq!(s.poll(&buyers[6]).await["state"], "admitted");
    let r = s.post(&buyers[3], "/pay", "").await;
    assert_eq!(
        (r.status, r.json["error"].as_str()),
        (StatusCode::CONFLICT, Some("no_hold"))
    );

    // Buyer 6 buys the last seats: sold out, and everyone still in line is told so.
    assert_eq!(
        s.post(&buyers[6], "/holds", "seat=9&seat=10&seat=11")
            .await
            .status,
        200
    );
    assert_eq!(s.post(&buyers[6], "/pay", "").await.status, 200);
    assert_eq!(s.counts(), (12, 0, 0));
    s.tick().await;
    for b in &buyers[7..] {
        assert_eq!(s.poll(b).await["state"], "sold_out");
    }
    let newcomer = s.get(&buyer(), "/seats").await;
    assert_eq!(
        (newcomer.status, newcomer.state.as_str()),
        (StatusCode::GONE, "sold_out")
    );
    // Those still inside see a seat map with nothing left, and can leave.
    let map = s.get(&buyers[3], "/seats").await;
    assert_eq!(
        (map.json["available"].as_u64(), map.json["sold"].as_u64()),
        (Some(0), Some(12))
    );
    assert_eq!(s.post(&buyers[3], "/leave", "").await.status, 200);
    let stats = s.room.stats();
    assert_eq!(stats.active, 1, "buyer 5 is still inside");
    assert!(stats.sold_out);
    assert_eq!(stats.counters.seats_bought, 12);
}
