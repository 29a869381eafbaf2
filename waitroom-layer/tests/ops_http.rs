//! Operating a live on-sale over real HTTP: the metrics endpoint scraped during a small sale (finishes, expiries,
//! missed turns, the measured head rate) and checked against the room's own figures, and the admin API with a
//! wrong, missing and right token (on a room that has not opened yet, so that a refused "open now" would show).
//!
//! Rooms use a manual clock and no background task; the door moves with `room.tick_now()`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::routing::get;
use serde_json::{Value, json};
use waitroom_layer::{
    FINISH_HEADER, Inventory, METRICS_CONTENT_TYPE, ManualClock, STATE_HEADER, WaitingRoom,
    WaitingRoomLayer,
};
use waitroom_testkit::http::{browser, serve};

const ADMIN: &str = "test-admin-secret-0123456789";

struct Site {
    url: String,
    room: WaitingRoom,
}

impl Site {
    fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }
}

/// A storefront whose `/checkout/...` is behind a room of `capacity`; `/checkout/buy` finishes the session with
/// two seats (the header the verify crate's `Admission::finish_with_seats(2)` adds).
async fn site(
    capacity: u64,
    configure: impl FnOnce(
        waitroom_layer::WaitingRoomLayerBuilder,
    ) -> waitroom_layer::WaitingRoomLayerBuilder,
) -> Site {
    site_with(capacity, None, ManualClock::starting_now(), configure).await
}

/// [`site`] with the door shut until `opens_at` (when given), on `clock`.
async fn site_with(
    capacity: u64,
    opens_at: Option<SystemTime>,
    clock: ManualClock,
    configure: impl FnOnce(
        waitroom_layer::WaitingRoomLayerBuilder,
    ) -> waitroom_layer::WaitingRoomLayerBuilder,
) -> Site {
    let mut builder = WaitingRoom::builder("tour-2026")
        .capacity(capacity)
        // This test follows sessions through the line; going straight in has its own tests (layer_http).
        .straight_in(false)
        .idle_timeout(Duration::from_secs(60))
        .poll_interval(Duration::from_secs(5))
        // A short grace, so a minute of the sale shows a missed turn (the default is at least 3 minutes).
        .abandon_after(Duration::from_secs(15))
        .clock(Arc::new(clock))
        .background(false)
        .secure_cookies(false);
    if let Some(at) = opens_at {
        builder = builder.opens_at(at);
    }
    let room = builder.build().await.unwrap();
    let layer = configure(WaitingRoomLayer::builder(room.clone()).protect_prefix("/checkout"))
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "home" }))
        .route("/checkout", get(|| async { "seat map" }))
        .route(
            "/checkout/buy",
            get(|| async { ([(FINISH_HEADER, "finish; seats=2")], "bought") }),
        )
        .layer(layer);
    Site {
        url: serve(app).await,
        room,
    }
}

async fn poll(b: &reqwest::Client, s: &Site) -> Value {
    let res = b
        .get(s.at("/waitroom/status"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    res.json().await.unwrap()
}

/// The samples of an OpenMetrics exposition: `name{labels}` → value.
fn samples(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_owned(), v.parse().unwrap())
        })
        .collect()
}

async fn scrape(s: &Site) -> HashMap<String, f64> {
    let res = reqwest::get(s.at("/waitroom/metrics")).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], METRICS_CONTENT_TYPE);
    assert_eq!(res.headers()["cache-control"], "no-store");
    let text = res.text().await.unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    samples(&text)
}

fn sample(m: &HashMap<String, f64>, name: &str) -> f64 {
    let key = format!("waitroom_{name}{{event=\"tour-2026\"}}");
    *m.get(&key)
        .unwrap_or_else(|| panic!("no {key} in {:#?}", m.keys()))
}

#[tokio::test]
async fn metrics_scraped_during_a_sale_match_the_room() {
    let clock = ManualClock::starting_now();
    let s = site_with(2, None, clock.clone(), |b| {
        b.metrics(true).admin_token(ADMIN)
    })
    .await;
    let people: Vec<reqwest::Client> = (0..5).map(|_| browser()).collect();
    let mut session_cookies = Vec::new();
    for b in &people {
        let res = b.get(s.at("/checkout")).send().await.unwrap();
        assert_eq!(res.headers()[STATE_HEADER], "waiting");
        let set = res.headers()["set-cookie"].to_str().unwrap();
        session_cookies.push(set.split(';').next().unwrap().to_owned());
    }
    s.room.refresh().await.unwrap(); // what the background task does a few times a second
    let m = scrape(&s).await;
    assert_eq!(sample(&m, "waiting"), 5.0);
    assert_eq!(sample(&m, "join_requests_total"), 5.0);
    assert_eq!(sample(&m, "polls_total"), 0.0);

    // Two are let in; everyone polls once; the first two get their pass, the first buys.
    s.room.tick_now().await.unwrap();
    for (i, b) in people.iter().enumerate() {
        let st = poll(b, &s).await;
        assert_eq!(st["state"], if i < 2 { "admitted" } else { "waiting" });
    }
    let res = people[0].get(s.at("/checkout/buy")).send().await.unwrap();
    assert_eq!(res.text().await.unwrap(), "bought");

    // A forged token with a real session cookie is refused (and counted by reason).
    let res = reqwest::Client::new()
        .get(s.at("/checkout"))
        .header(
            "cookie",
            format!("{}; waitroom_token=not-a-jwt", session_cookies[2]),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.headers()[STATE_HEADER], "waiting");

    // The app reports its seats; the door moves again.
    let res = reqwest::Client::new()
        .post(s.at("/waitroom/admin/inventory"))
        .bearer_auth(ADMIN)
        .json(&json!({"total": 100, "sold": 10, "held": 4}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    s.room.tick_now().await.unwrap();

    let m = scrape(&s).await;
    let st = s.room.stats();
    assert_eq!(st.active, 2, "{st:?}");
    // Not measured yet: no series.
    assert_eq!(st.head_rate_per_minute, None);
    assert!(!m.keys().any(|k| k.contains("head_rate_per_minute")));
    assert_eq!(sample(&m, "waiting"), st.waiting as f64);
    assert_eq!(sample(&m, "prequeue"), st.prequeue as f64);
    assert_eq!(sample(&m, "active"), st.active as f64);
    assert_eq!(sample(&m, "capacity"), 2.0);
    assert_eq!(sample(&m, "served_total"), st.served as f64);
    assert_eq!(sample(&m, "joined_total"), 5.0);
    assert_eq!(sample(&m, "admitted_total"), st.counters.admitted as f64);
    assert_eq!(sample(&m, "admitted_total"), 3.0);
    assert_eq!(sample(&m, "finished_total"), 1.0);
    assert_eq!(sample(&m, "seats_bought_total"), 2.0);
    assert_eq!(sample(&m, "expired_total"), 0.0);
    assert_eq!(sample(&m, "abandoned_total"), 0.0);
    assert_eq!(sample(&m, "missed_total"), 0.0);
    assert_eq!(sample(&m, "seats_on_sale"), 100.0);
    assert_eq!(sample(&m, "seats_sold"), 10.0);
    assert_eq!(sample(&m, "seats_held"), 4.0);
    assert_eq!(sample(&m, "seats_available"), 86.0);
    assert_eq!(
        sample(&m, "tail_eta_seconds"),
        st.tail_eta_seconds.unwrap() as f64
    );
    assert_eq!(sample(&m, "served_per_minute"), st.served_per_minute);
    assert_eq!(sample(&m, "paused"), 0.0);
    assert_eq!(sample(&m, "sold_out"), 0.0);
    assert_eq!(sample(&m, "store_up"), 1.0);
    assert_eq!(sample(&m, "polls_total"), 5.0);
    assert_eq!(sample(&m, "join_requests_total"), 5.0);
    assert_eq!(sample(&m, "tokens_issued_total"), 2.0);
    assert_eq!(sample(&m, "store_errors_total"), 0.0);
    assert_eq!(
        m["waitroom_token_refusals_total{event=\"tour-2026\",reason=\"malformed\"}"],
        1.0
    );
    assert_eq!(
        m["waitroom_token_refusals_total{event=\"tour-2026\",reason=\"expired\"}"],
        0.0
    );
    assert!(!m.keys().any(|k| k.contains("admit_per_minute")));

    // A minute passes. Number 2 keeps using its pass and number 5 keeps polling; number 3, let in at the last
    // tick, never comes for its pass (after the one-minute arrival window its place frees and it keeps its turn for
    // the return window, missed as one away is), and number 4 stops polling
    // (when its turn comes it has been unseen for longer than the 15 s grace: its turn passes while it is away; it
    // keeps it for the 10-minute return window, so it is not abandoned yet).
    for _ in 0..14 {
        clock.advance(Duration::from_secs(5));
        let res = people[1].get(s.at("/checkout")).send().await.unwrap();
        assert_eq!(res.text().await.unwrap(), "seat map");
        poll(&people[4], &s).await;
        s.room.tick_now().await.unwrap();
    }
    let st = s.room.stats();
    assert_eq!(
        (
            st.counters.expired,
            st.counters.missed,
            st.counters.abandoned,
            st.away,
            st.active
        ),
        (0, 2, 0, 2, 2),
        "{st:?}"
    );
    assert_eq!(poll(&people[4], &s).await["state"], "admitted");
    let rate = st
        .head_rate_per_minute
        .expect("a minute of finishes, expiries and missed turns measures the head");
    let m = scrape(&s).await;
    assert_eq!(sample(&m, "expired_total"), 0.0);
    assert_eq!(sample(&m, "missed_total"), 2.0);
    assert_eq!(sample(&m, "away"), 2.0);
    assert_eq!(sample(&m, "returned_total"), 0.0);
    assert_eq!(sample(&m, "returned_late_total"), 0.0);
    assert_eq!(sample(&m, "abandoned_total"), 0.0);
    assert_eq!(sample(&m, "admitted_total"), st.counters.admitted as f64);
    assert_eq!(sample(&m, "served_total"), st.served as f64);
    assert_eq!(sample(&m, "active"), 2.0);
    assert_eq!(sample(&m, "waiting"), 0.0);
    assert_eq!(sample(&m, "head_rate_per_minute"), rate);
    assert_eq!(sample(&m, "served_per_minute"), st.served_per_minute);
}

#[tokio::test]
async fn metrics_and_admin_are_off_unless_enabled() {
    let s = site(2, |b| b).await;
    let res = reqwest::get(s.at("/waitroom/metrics")).await.unwrap();
    assert_eq!(res.status(), 404);
    let res = reqwest::Client::new()
        .get(s.at("/waitroom/admin/stats"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);

    // A path outside the base, chosen by the app.
    let s = site(2, |b| b.metrics_path("/internal/metrics")).await;
    let res = reqwest::get(s.at("/internal/metrics")).await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(
        res.text()
            .await
            .unwrap()
            .contains("waitroom_capacity{event=\"tour-2026\"} 2")
    );
    assert_eq!(
        reqwest::get(s.at("/waitroom/metrics"))
            .await
            .unwrap()
            .status(),
        404
    );
}

#[tokio::test]
async fn a_metrics_token_guards_the_metrics() {
    const METRICS: &str = "scrape-secret-0123456789";
    let s = site(2, |b| b.metrics_token(METRICS)).await;
    let c = reqwest::Client::new();
    let url = s.at("/waitroom/metrics");
    let res = c.get(&url).send().await.unwrap();
    assert_eq!(res.status(), 401);
    assert_eq!(
        res.headers()["www-authenticate"],
        "Bearer realm=\"waitroom-metrics\""
    );
    assert!(!res.text().await.unwrap().contains("waitroom_capacity"));
    for wrong in [
        ADMIN,
        "scrape-secret-012345678",
        "scrape-secret-0123456789x",
    ] {
        let res = c.get(&url).bearer_auth(wrong).send().await.unwrap();
        assert_eq!(res.status(), 401, "{wrong}");
    }
    let res = c.get(&url).bearer_auth(METRICS).send().await.unwrap();
    assert_eq!(res.status(), 200);
    // Read-only, even for the holder of the token.
    for method in [
        reqwest::Method::POST,
        reqwest::Method::PUT,
        reqwest::Method::DELETE,
    ] {
        let res = c
            .request(method.clone(), &url)
            .bearer_auth(METRICS)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 405, "{method}");
        assert!(!res.text().await.unwrap().contains("waitroom_capacity"));
    }
    let res = c.get(&url).bearer_auth(METRICS).send().await.unwrap();
    assert!(
        res.text()
            .await
            .unwrap()
            .contains("waitroom_capacity{event=\"tour-2026\"} 2")
    );
    // A short secret is a configuration error, not a weak guard.
    let room = s.room.clone();
    let err = waitroom_layer::WaitingRoomLayer::builder(room)
        .metrics_token("short")
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("metrics_token"), "{err}");
}

#[tokio::test]
async fn admin_calls_without_the_right_token_are_refused_and_change_nothing() {
    // The door opens in an hour: a refused "open now" would show in the stats.
    let clock = ManualClock::starting_now();
    let opens_at = SystemTime::now() + Duration::from_secs(3600);
    let s = site_with(2, Some(opens_at), clock, |b| b.admin_token(ADMIN)).await;
    let client = reqwest::Client::new();
    let before = s.room.stats();
    assert!(before.opens_at.is_some(), "{before:?}");
    assert!(!before.paused && !before.closed && before.inventory.is_none());
    let calls: [(&str, Value); 8] = [
        ("capacity", json!({"capacity": 900})),
        ("admit-per-minute", json!({"per_minute": 5})),
        ("pause", json!({})),
        ("resume", json!({})),
        ("open-now", json!({})),
        ("close", json!({})),
        ("inventory", json!({"total": 10, "sold": 10, "held": 0})),
        ("stats", Value::Null),
    ];
    let wrong = [
        None,
        Some(format!("Bearer {ADMIN}x")),
        Some(format!("Bearer {}", &ADMIN[..ADMIN.len() - 1])),
        Some(format!("Basic {ADMIN}")),
        Some("Bearer ".to_owned()),
    ];
    for (call, body) in &calls {
        for auth in &wrong {
            let url = s.at(&format!("/waitroom/admin/{call}"));
            let mut req = if *call == "stats" {
                client.get(url)
            } else {
                client.post(url).json(body)
            };
            if let Some(a) = auth {
                req = req.header("authorization", a);
            }
            let res = req.send().await.unwrap();
            assert_eq!(res.status(), 401, "{call} with {auth:?}");
            assert_eq!(res.headers()["content-type"], "application/problem+json");
            assert!(res.headers().contains_key("www-authenticate"));
            let problem: Value = res.json().await.unwrap();
            assert_eq!(problem["status"], 401);
            assert!(!problem.to_string().contains("capacity\":"));
        }
    }
    s.room.refresh().await.unwrap();
    assert_eq!(s.room.stats(), before, "nothing changed");
    // A newcomer still waits for the opening (its holding page polls: its ticket takes its place).
    let newcomer = browser();
    let res = newcomer.get(s.at("/checkout")).send().await.unwrap();
    assert_eq!(res.headers()[STATE_HEADER], "waiting");
    let res = newcomer
        .get(s.at("/waitroom/status"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.json::<Value>().await.unwrap()["state"], "waiting");
    let res = client
        .get(s.at("/waitroom/admin/stats"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.json::<Value>().await.unwrap()["opens_at"],
        json!(before.opens_at)
    );

    // The right token opens the door at once, and the newcomer is let in at the next tick.
    let res = client
        .post(s.at("/waitroom/admin/open-now"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.json::<Value>().await.unwrap()["opens_at"], Value::Null);
    assert_eq!(s.room.stats().opens_at, None);
    assert_eq!(s.room.tick_now().await.unwrap().admitted.len(), 1);
}

#[tokio::test]
async fn admin_calls_with_the_right_token_turn_the_knobs() {
    let s = site(2, |b| b.admin_token(ADMIN)).await;
    let client = reqwest::Client::new();
    let call = |op: &str, body: Option<Value>| {
        let url = s.at(&format!("/waitroom/admin/{op}"));
        let req = match body {
            Some(b) => client.post(url).json(&b),
            None if op == "stats" => client.get(url),
            None => client.post(url),
        };
        req.bearer_auth(ADMIN).send()
    };

    let res = call("stats", None).await.unwrap();
    assert_eq!(res.status(), 200);
    let stats: Value = res.json().await.unwrap();
    assert_eq!(stats["capacity"], 2);
    assert_eq!(stats["event"], "tour-2026");

    let res = call("capacity", Some(json!({"capacity": 900})))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.json::<Value>().await.unwrap()["capacity"], 900);
    assert_eq!(s.room.stats().capacity, 900);

    call("admit-per-minute", Some(json!({"per_minute": 120})))
        .await
        .unwrap();
    assert_eq!(s.room.stats().admit_per_minute, Some(120));
    call("admit-per-minute", Some(json!({"per_minute": null})))
        .await
        .unwrap();
    assert_eq!(s.room.stats().admit_per_minute, None);

    assert_eq!(call("pause", None).await.unwrap().status(), 200);
    assert!(s.room.stats().paused);
    assert_eq!(call("resume", None).await.unwrap().status(), 200);
    assert!(!s.room.stats().paused);
    assert_eq!(call("open-now", None).await.unwrap().status(), 200);

    let res = call(
        "inventory",
        Some(json!({"total": 100, "sold": 40, "held": 5})),
    )
    .await
    .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        s.room.stats().inventory,
        Some(Inventory {
            total: 100,
            sold: 40,
            held: 5
        })
    );

    // Bad input is refused with a reason and changes nothing.
    for (op, body) in [
        ("capacity", json!({"capacity": 0})),
        ("capacity", json!({"capacity": "lots"})),
        ("capacity", json!({"capcity": 5})),
        ("admit-per-minute", json!({"per_minute": 0})),
        ("inventory", json!({"total": 10, "sold": 8, "held": 3})),
    ] {
        let res = call(op, Some(body.clone())).await.unwrap();
        assert_eq!(res.status(), 400, "{op} {body}");
    }
    let res = client
        .post(s.at("/waitroom/admin/capacity"))
        .bearer_auth(ADMIN)
        .body(vec![b' '; 8 * 1024])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 413);
    assert_eq!(s.room.stats().capacity, 900);
    let res = client
        .get(s.at("/waitroom/admin/capacity"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 405);
    assert_eq!(res.headers()["allow"], "POST");
    let res = call("nope", None).await.unwrap();
    assert_eq!(res.status(), 404);

    assert_eq!(call("close", None).await.unwrap().status(), 200);
    assert!(s.room.stats().closed);
    // A closed on-sale tells newcomers so.
    let res = browser().get(s.at("/checkout")).send().await.unwrap();
    assert_eq!(res.headers()[STATE_HEADER], "closed");
}
