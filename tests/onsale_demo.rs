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
    sale_with(mount, 12, Duration::from_millis(20)).await
}

async fn sale_with(mount: Mount, seats: u32, payment_latency: Duration) -> Sale {
    let clock = ManualClock::starting_now();
    let room = WaitingRoom::builder("tour-2026-stadium")
        .display_name("The 2026 Stadium Tour")
        .capacity(3)
        .max_qty(4)
        .idle_timeout(Duration::from_secs(20 * 60))
        .poll_interval(Duration::from_secs(5))
        // The sale follows buyers through the line, the door moved by hand; going straight in has its own tests.
        .straight_in(false)
        .clock(Arc::new(clock.clone()))
        .background(false)
        .secure_cookies(false)
        .build()
        .await
        .unwrap();
    let shop = Shop::builder(seats)
        .max_per_order(4)
        .hold_for(Duration::from_secs(300))
        .payment_latency(payment_latency)
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

/// Issue 21, finding 3: hold seat 5, start paying, re-hold seats 100 to 103 while the payment provider takes its
/// time. The payment was for seat 5: the order must not buy 100 to 103 (it is refused, `409 hold_changed`), the
/// counts stay whole, and paying again buys exactly the new hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payment_buys_the_hold_it_checked_not_one_made_while_it_was_going_through() {
    let s = sale_with(Mount::AroundRouter, 200, Duration::from_millis(300)).await;
    let b = buyer();
    assert_eq!(s.get(&b, "/seats").await.status, 429);
    s.tick().await;
    assert_eq!(s.poll(&b).await["state"], "admitted");
    assert_eq!(s.post(&b, "/holds", "seat=5").await.status, 200);

    let mut payments = s.shop.payments_in_progress();
    let pay = {
        let (b, url) = (b.clone(), format!("{}/pay", s.url));
        tokio::spawn(async move { send(b.post(url)).await })
    };
    tokio::time::timeout(Duration::from_secs(10), payments.wait_for(|n| *n > 0))
        .await
        .expect("the payment did not start within 10 s")
        .unwrap();
    let r = s
        .post(&b, "/holds", "seat=100&seat=101&seat=102&seat=103")
        .await;
    assert_eq!(r.status, 200, "a new hold during the payment");
    let paid = tokio::time::timeout(Duration::from_secs(10), pay)
        .await
        .expect("the payment did not end within 10 s")
        .unwrap();
    assert_eq!(paid.status, StatusCode::CONFLICT, "{}", paid.json);
    assert_eq!(paid.json["error"], "hold_changed");
    assert_eq!(s.counts(), (0, 4, 196), "nothing sold; the new hold stands");
    let held = Some(waitroom::layer::Inventory {
        total: 200,
        sold: 0,
        held: 4,
    });
    assert_eq!(s.room.stats().inventory, held, "the room sees the same");

    // Paying for the hold as it is now buys exactly it.
    let r = s.post(&b, "/pay", "").await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.json["order"]["seats"], json!([100, 101, 102, 103]));
    assert_eq!(s.counts(), (4, 0, 196));
    let sold = Some(waitroom::layer::Inventory {
        total: 200,
        sold: 4,
        held: 0,
    });
    assert_eq!(s.room.stats().inventory, sold);
}

mod interleavings {
    //! Random interleavings of hold, pay (start and end apart), leave, lapse and the finish reaching the room, over
    //! the demo's `SeatInventory` and a real room: the counts always add up, nothing is sold but what a payment
    //! checked, and the room's view of the seats is the shop's.

    use std::sync::Arc;
    use std::time::Duration;

    use proptest::prelude::*;
    use waitroom::demo::{Hold, PurchaseError, Sale, SeatInventory, SeatState};
    use waitroom::layer::{Inventory, ManualClock, WaitingRoom};

    const SEATS: u32 = 12;
    const PEOPLE: usize = 4;
    const HOLD_MS: u64 = 10_000;

    #[derive(Debug, Clone)]
    enum Op {
        Hold(usize, Vec<u32>),
        PayStart(usize),
        PayEnd(usize),
        Leave(usize),
        Lapse(u64),
        /// The oldest sale's finish reaches the room.
        Finish,
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        let op = prop_oneof![
            4 => ((0..PEOPLE), proptest::collection::vec(0..SEATS, 1..4)).prop_map(|(i, s)| Op::Hold(i, s)),
            3 => (0..PEOPLE).prop_map(Op::PayStart),
            3 => (0..PEOPLE).prop_map(Op::PayEnd),
            1 => (0..PEOPLE).prop_map(Op::Leave),
            2 => (1u64..8_000).prop_map(Op::Lapse),
            2 => Just(Op::Finish),
        ];
        proptest::collection::vec(op, 1..60)
    }

    fn check(inv: &SeatInventory, room: &WaitingRoom, sold_in_orders: u64, now: u64) {
        let c = inv.counts();
        assert!(c.sold + c.held <= c.total, "{c:?}");
        assert_eq!(c.sold + c.held + c.available(), c.total);
        let seen = inv.section(0, "nobody", now);
        let sold = seen.iter().filter(|(_, s)| *s == SeatState::Sold).count() as u64;
        assert_eq!(sold, c.sold, "the counter is the seats");
        assert_eq!(sold, sold_in_orders, "sold seats are the orders' seats");
        let v = inv.room_view();
        assert_eq!(
            (v.total, v.sold + v.held, v.available()),
            (c.total, c.sold + c.held, c.available())
        );
        assert_eq!(
            room.snapshot().settings.inventory,
            Some(v),
            "the room sees the shop's view"
        );
    }

    async fn run(ops: Vec<Op>) {
        let clock = ManualClock::new(1_000_000);
        let room = WaitingRoom::builder("interleavings")
            .capacity(100)
            .idle_timeout(Duration::from_secs(3_600))
            .clock(Arc::new(clock.clone()))
            .background(false)
            .build()
            .await
            .unwrap();
        let inv = SeatInventory::new(SEATS);
        let report = |inv: &SeatInventory| {
            let room = room.clone();
            let v = inv.room_view();
            async move {
                room.set_inventory(v).await.unwrap();
            }
        };
        report(&inv).await;
        let people: Vec<String> = (0..PEOPLE).map(|_| WaitingRoom::new_session_id()).collect();
        for p in &people {
            room.join(p, None).await.unwrap();
        }
        assert_eq!(room.tick_now().await.unwrap().admitted.len(), PEOPLE);
        let mut now = 1_000_000u64;
        let mut checked: Vec<Option<Hold>> = vec![None; PEOPLE];
        let mut done = [false; PEOPLE];
        let mut sales: Vec<(usize, Sale)> = Vec::new();
        let mut sold_in_orders = 0u64;
        for op in ops {
            match op {
                Op::Hold(i, seats)
                    if !done[i] && inv.hold(&people[i], &seats, 4, now, HOLD_MS).is_ok() =>
                {
                    report(&inv).await;
                }
                Op::PayStart(i) if !done[i] => checked[i] = inv.hold_of(&people[i], now),
                Op::PayEnd(i) if !done[i] => {
                    let Some(h) = checked[i].take() else { continue };
                    match inv.purchase(&people[i], &h, now) {
                        Ok(sale) => {
                            assert_eq!(
                                sale.seats(),
                                &h.seats[..],
                                "exactly the seats the payment checked"
                            );
                            sold_in_orders += sale.seats().len() as u64;
                            done[i] = true;
                            sales.push((i, sale));
                        }
                        Err(PurchaseError::Changed) => {
                            assert_ne!(inv.hold_of(&people[i], now).as_ref(), Some(&h));
                            report(&inv).await;
                        }
                        Err(_) => report(&inv).await,
                    }
                }
                Op::Leave(i) if !done[i] => {
                    inv.release(&people[i]);
                    room.finish(&people[i], 0).await.unwrap();
                    done[i] = true;
                    report(&inv).await;
                }
                Op::Lapse(ms) => {
                    now += ms;
                    clock.advance(Duration::from_millis(ms));
                    if inv.expire(now) > 0 {
                        report(&inv).await;
                    }
                }
                Op::Finish if !sales.is_empty() => {
                    let (i, sale) = sales.remove(0);
                    let n = sale.seats().len() as u32;
                    assert!(room.finish(&people[i], n).await.unwrap());
                    inv.confirm(sale);
                    report(&inv).await;
                }
                _ => {}
            }
            check(&inv, &room, sold_in_orders, now);
        }
        // Every finish reaches the room: the room's counts are the inventory's own.
        for (i, sale) in sales.drain(..) {
            room.finish(&people[i], sale.seats().len() as u32)
                .await
                .unwrap();
            inv.confirm(sale);
            report(&inv).await;
        }
        check(&inv, &room, sold_in_orders, now);
        let c = inv.counts();
        assert_eq!(
            room.snapshot().settings.inventory,
            Some(Inventory {
                total: c.total,
                sold: c.sold,
                held: c.held
            })
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
        #[test]
        fn hold_pay_leave_and_lapse_keep_the_counts_whole(ops in ops()) {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(run(ops));
        }
    }
}
