//! Keep your turn, over real HTTP, on both stores: a person whose turn comes while they are away (their tab
//! asleep) keeps it for the return window. The same walk-through runs on the embedded store (one instance) and on
//! a real redis-server (two instances; the person comes back through the other one).
//!
//! What it shows, step by step: the door admits the next present person in the very tick the absent one is
//! skipped; the one who comes back within the window is told `returning` at once and is let in at the next free
//! place, before people who joined after them, and not before a place is free (the capacity holds at every step);
//! a return to a free place is let in by the next tick; after the window the person is told `missed` (by their
//! poll, or by the page itself when a page load is their first request back), and their next protected request
//! joins at the back. A person let in while present whose phone then sleeps past the arrival window keeps their
//! turn too: the place goes to the next present person, and back within the window they go in at the next free
//! place.
//!
//! Rooms use a manual clock and no background task; the door moves with `room.tick_now()`. Nothing sleeps.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use serde_json::Value;
use waitroom_layer::store::Store;
use waitroom_layer::{
    Clock as _, ManualClock, STATE_HEADER, SigningKey, WaitingRoom, WaitingRoomLayer,
};
use waitroom_testkit::http::{browser, serve};
use waitroom_verify::FINISH_HEADER;

const SECRET: [u8; 32] = *b"a-cookie-secret-for-return-tests";
const POLL: Duration = Duration::from_secs(2);
const GRACE: Duration = Duration::from_secs(10);
/// Long enough away to be counted absent on both stores: the grace plus `RedisStore`'s 10 s liveness slot (it
/// rounds the grace up to whole slots, in the person's favour), plus a poll.
const AWAY: Duration = Duration::from_secs(22);
const WINDOW: Duration = Duration::from_secs(60);
/// How long a person let in has to come for the pass.
const ARRIVAL: Duration = Duration::from_secs(30);
const TICK: Duration = Duration::from_millis(250);
const CAPACITY: u64 = 1;

struct Instance {
    url: String,
    room: WaitingRoom,
}

/// One instance of the shop over `store`: `/checkout` behind the room, `/checkout/done` finishes the session.
async fn instance(event: &str, store: Arc<dyn Store>, clock: &ManualClock, pem: &str) -> Instance {
    let room = WaitingRoom::builder(event)
        .capacity(CAPACITY)
        // This test follows sessions through the line; going straight in has its own tests (layer_http).
        .straight_in(false)
        .idle_timeout(Duration::from_secs(300))
        .poll_interval(POLL)
        .abandon_after(GRACE)
        .return_window(WINDOW)
        .arrival_window(ARRIVAL)
        .tick_interval(TICK)
        .signing_key(SigningKey::from_ed25519_pem("turn", pem).unwrap())
        .cookie_secret(SECRET)
        .secure_cookies(false)
        .clock(Arc::new(clock.clone()))
        .background(false)
        .shared_store(store)
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
            "/checkout/done",
            get(|| async { ([(FINISH_HEADER, "finish")], "thank you") }),
        )
        .layer(layer);
    Instance {
        url: serve(app).await,
        room,
    }
}

/// A person: a browser with its cookie jar.
struct Person {
    name: &'static str,
    client: reqwest::Client,
}

impl Person {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            client: browser(),
        }
    }

    /// A protected request as a page load: joins when not in line; returns the state the room stamps on it
    /// (`passed` when let through) and the body.
    async fn visit(&self, at: &Instance) -> (String, String) {
        let res = self
            .client
            .get(format!("{}/checkout", at.url))
            .send()
            .await
            .unwrap();
        // A request the room lets through carries the app's answer, without the room's state header.
        let state = res
            .headers()
            .get(STATE_HEADER)
            .map_or("passed", |v| v.to_str().unwrap())
            .to_owned();
        (state, res.text().await.unwrap())
    }

    /// The holding page's poll.
    async fn poll(&self, at: &Instance) -> Value {
        let res = self
            .client
            .get(format!("{}/waitroom/status?return_to=%2Fcheckout", at.url))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "{}'s poll", self.name);
        res.json().await.unwrap()
    }

    async fn state(&self, at: &Instance) -> String {
        self.poll(at).await["state"].as_str().unwrap().to_owned()
    }

    /// Comes for the pass and uses it, then finishes.
    async fn buy(&self, at: &Instance) {
        assert_eq!(self.visit(at).await.1, "seat map", "{} gets in", self.name);
        let res = self
            .client
            .get(format!("{}/checkout/done", at.url))
            .send()
            .await
            .unwrap();
        assert_eq!(
            res.text().await.unwrap(),
            "thank you",
            "{} finishes",
            self.name
        );
    }
}

/// Runs one admission tick on `at`, then the other instance reads the shared numbers as its own background task
/// would within a tick; checks the capacity.
async fn tick(at: &Instance, other: &Instance) {
    at.room.tick_now().await.unwrap();
    other.room.refresh().await.unwrap();
    let active = at.room.snapshot().active;
    assert!(active <= CAPACITY, "active {active} > capacity {CAPACITY}");
}

/// The walk-through on `one` and `two`, two instances sharing a store (the same instance twice for the embedded
/// store). The person who steps away comes back through `two`.
async fn walk_through(one: &Instance, two: &Instance, clock: &ManualClock) {
    let [a, b, c, d] = ["a", "b", "c", "d"].map(Person::new);
    for p in [&a, &b, &c, &d] {
        assert_eq!(p.visit(one).await.0, "waiting", "{} joins", p.name);
    }
    tick(one, two).await;
    assert_eq!(a.state(one).await, "admitted");
    // B's tab goes to sleep; C and D keep polling, longer than the grace.
    let start = clock.now_ms();
    while clock.now_ms() < start + AWAY.as_millis() as u64 {
        clock.advance(POLL);
        for p in [&c, &d] {
            assert_eq!(p.state(one).await, "waiting");
        }
        tick(one, two).await;
    }
    // A leaves: B's turn comes while B is away. The door does not wait: C goes in in the same tick.
    a.buy(one).await;
    tick(one, two).await;
    assert_eq!(
        c.state(one).await,
        "admitted",
        "the next present person goes in"
    );
    assert_eq!(d.state(one).await, "waiting");
    let stats = one.room.stats();
    assert_eq!((stats.counters.missed, stats.away), (1, 1), "{stats:?}");
    assert_eq!(c.visit(one).await.1, "seat map");

    // B comes back (through the other instance) within the window, while C is still in: told at once.
    clock.advance(Duration::from_secs(30));
    let back = b.poll(two).await;
    assert_eq!(back["state"], "returning", "{back}");
    assert_eq!(back["position"], 1);
    assert!(
        back["refresh_seconds"].as_u64().unwrap() <= TICK.as_secs().max(1),
        "a returning page asks again right after the next tick: {back}"
    );
    // No place is free: B waits, and so does D.
    d.poll(one).await;
    tick(two, one).await;
    assert_eq!(b.state(two).await, "returning", "the capacity holds");
    assert_eq!(d.state(one).await, "waiting");
    // C leaves: the next free place is B's, before D who joined after B.
    c.buy(one).await;
    tick(one, two).await;
    assert_eq!(
        b.state(two).await,
        "admitted",
        "back within the window: first in"
    );
    assert_eq!(d.state(one).await, "waiting");
    b.buy(two).await;
    tick(two, one).await;
    assert_eq!(d.state(one).await, "admitted");

    // E steps away too, F stays; D leaves, E's turn passes and F goes in.
    let [e, f, g] = ["e", "f", "g"].map(Person::new);
    for p in [&e, &f] {
        p.visit(one).await;
        // The holding page's first poll: the ticket the visit got comes back and takes its place.
        assert_eq!(p.poll(one).await["state"], "waiting");
    }
    tick(one, two).await; // their joins' liveness marks reach the store (each instance sends them once a second)
    clock.advance(AWAY);
    f.poll(one).await;
    d.buy(one).await;
    tick(one, two).await;
    assert_eq!(f.state(one).await, "admitted");
    // F leaves at once; E comes back to a free place: its first answer says `returning`, and the next tick (one
    // tick interval later) lets it in, ahead of G who joined meanwhile and polls.
    f.buy(one).await;
    g.visit(one).await;
    assert_eq!(e.state(two).await, "returning");
    clock.advance(TICK);
    g.poll(one).await;
    tick(two, one).await;
    assert_eq!(
        e.state(two).await,
        "admitted",
        "within one tick of its poll"
    );
    assert_eq!(g.state(one).await, "waiting");
    e.buy(two).await;

    // H steps away and comes back after the window: told its turn passed, and its next visit joins at the back.
    let h = Person::new("h");
    let (_, page) = h.visit(one).await;
    assert!(page.contains("You are in line"));
    let h_number = h.poll(one).await["number"].as_u64().unwrap();
    tick(one, two).await;
    clock.advance(AWAY);
    g.poll(one).await;
    tick(one, two).await; // G goes in; H is not reached yet
    g.buy(one).await;
    tick(one, two).await; // H's turn passes
    assert_eq!(one.room.stats().away, 1);
    clock.advance(WINDOW);
    tick(one, two).await;
    let late = h.poll(two).await;
    assert_eq!(late["state"], "missed", "{late}");
    assert_eq!(late["position"], Value::Null);
    let (state, page) = h.visit(two).await;
    assert_eq!(state, "waiting", "the next protected request joins again");
    assert!(page.contains("You are in line"));
    let again = h.poll(two).await;
    assert!(
        again["number"].as_u64().unwrap() > h_number,
        "at the back: {again} after number {h_number}"
    );

    // I steps away too, and comes back after the window by loading the page (a tab the phone discarded): that
    // answer tells it first, the one after joins at the back.
    let i = Person::new("i");
    i.visit(one).await;
    let i_number = i.poll(one).await["number"].as_u64().unwrap();
    tick(one, two).await;
    clock.advance(AWAY);
    h.poll(one).await;
    tick(one, two).await; // H goes in; I is not reached yet
    h.buy(one).await;
    tick(one, two).await; // I's turn passes
    clock.advance(WINDOW);
    tick(one, two).await;
    let (state, page) = i.visit(two).await;
    assert_eq!(
        state, "missed",
        "the first answer after the window tells it"
    );
    assert!(
        page.contains("Your turn passed while you were away"),
        "{page}"
    );
    let (state, _) = i.visit(two).await;
    assert_eq!(state, "waiting", "and the next one joins again");
    assert!(i.poll(two).await["number"].as_u64().unwrap() > i_number);

    one.room.refresh().await.unwrap();
    let c = one.room.stats().counters;
    assert_eq!(
        (c.missed, c.returned, c.returned_late, c.abandoned),
        (4, 2, 2, 2),
        "{c:?}"
    );
}

/// Let in while present, then the phone sleeps past the arrival window: the place goes to the next present person
/// at the end of it, and the person, back (through `two`) within the return window, is told `returning` and goes
/// in at the next free place, before those who joined after them.
async fn asleep_once_let_in(one: &Instance, two: &Instance, clock: &ManualClock) {
    let [a, b, c] = ["a", "b", "c"].map(Person::new);
    for p in [&a, &b, &c] {
        assert_eq!(p.visit(one).await.0, "waiting", "{} joins", p.name);
        assert_eq!(p.poll(one).await["state"], "waiting");
    }
    tick(one, two).await;
    // A is let in, present (it just polled); then its phone sleeps: no poll, no visit. B and C keep polling.
    let start = clock.now_ms();
    while clock.now_ms() < start + (ARRIVAL + POLL).as_millis() as u64 {
        clock.advance(POLL);
        for p in [&b, &c] {
            p.poll(one).await;
        }
        tick(one, two).await;
    }
    assert_eq!(
        b.state(one).await,
        "admitted",
        "A's place goes to the next present person at the end of its arrival window"
    );
    assert_eq!(c.state(one).await, "waiting");
    let stats = one.room.stats();
    assert_eq!(
        (stats.counters.missed, stats.away, stats.counters.expired),
        (1, 1, 0),
        "{stats:?}"
    );
    assert_eq!(b.visit(one).await.1, "seat map");

    // A wakes up within the return window, through the other instance: returning, and the capacity holds while B
    // is inside.
    clock.advance(Duration::from_secs(20));
    let back = a.poll(two).await;
    assert_eq!(back["state"], "returning", "{back}");
    c.poll(one).await;
    tick(two, one).await;
    assert_eq!(a.state(two).await, "returning", "the capacity holds");
    // B leaves: the next free place is A's, before C who joined after A.
    b.buy(one).await;
    tick(one, two).await;
    assert_eq!(
        a.state(two).await,
        "admitted",
        "back within the window: first in"
    );
    assert_eq!(c.state(one).await, "waiting");
    a.buy(two).await;
    tick(two, one).await;
    assert_eq!(c.state(one).await, "admitted");
    one.room.refresh().await.unwrap();
    let counters = one.room.stats().counters;
    assert_eq!(
        (
            counters.missed,
            counters.returned,
            counters.expired,
            counters.admitted
        ),
        (1, 1, 0, 4),
        "{counters:?}"
    );
}

/// A signing key for a test's instances (all of them share it: a pass from one opens the others).
fn pem() -> String {
    SigningKey::generate_ed25519("turn")
        .unwrap()
        .to_pem()
        .unwrap()
}

/// One instance of the shop on an embedded store of its own.
async fn on_memory(event: &str, clock: &ManualClock) -> Instance {
    let store: Arc<dyn Store> = Arc::new(waitroom_layer::MemoryStore::new());
    instance(event, store, clock, &pem()).await
}

/// Two instances of the shop over one real redis-server (kept running by the server handle returned), on an
/// on-sale of their own named from `prefix`.
#[cfg(feature = "redis")]
async fn on_redis(
    prefix: &str,
    clock: &ManualClock,
) -> (waitroom_testkit::redis::RedisServer, Instance, Instance) {
    let server = waitroom_testkit::redis::RedisServer::from_env_or_start();
    let pem = pem();
    let event = format!("{prefix}-{}-{}", std::process::id(), clock.now_ms());
    let connect = async || {
        let store = waitroom_layer::RedisStore::connect(server.url())
            .await
            .unwrap();
        instance(&event, Arc::new(store), clock, &pem).await
    };
    let one = connect().await;
    let two = connect().await;
    (server, one, two)
}

#[tokio::test]
async fn on_the_embedded_store_a_person_asleep_once_let_in_keeps_their_turn() {
    let clock = ManualClock::starting_now();
    let one = on_memory("asleep-memory", &clock).await;
    asleep_once_let_in(&one, &one, &clock).await;
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn on_redis_a_person_asleep_once_let_in_keeps_their_turn_through_another_instance() {
    let clock = ManualClock::starting_now();
    let (_server, one, two) = on_redis("asleep-redis", &clock).await;
    asleep_once_let_in(&one, &two, &clock).await;
}

#[tokio::test]
async fn on_the_embedded_store_a_person_away_at_their_turn_gets_in_on_return() {
    let clock = ManualClock::starting_now();
    let one = on_memory("turn-memory", &clock).await;
    walk_through(&one, &one, &clock).await;
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn on_redis_a_person_away_at_their_turn_gets_in_on_return_through_another_instance() {
    let clock = ManualClock::starting_now();
    let (_server, one, two) = on_redis("turn-redis", &clock).await;
    walk_through(&one, &two, &clock).await;
}
