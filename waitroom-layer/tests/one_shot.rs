//! One-shot visitors over real HTTP, on both stores: requests without a session (bots, crawlers, uptime checks,
//! link previews) get a ticket and write no session; a person who comes back takes their place and, on a store that
//! counts the living (the embedded one), is told their live rank, not the number of one-shot requests ahead; a
//! flood does not slow the door for the people present; a ticket that comes back too late gets a clear answer and
//! a new place, never a 5xx.
//!
//! Rooms use a manual clock and no background task; the door moves with `room.tick_now()`. Nothing sleeps.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use serde_json::Value;
use waitroom_layer::store::Store;
use waitroom_layer::{Clock as _, ManualClock, STATE_HEADER, WaitingRoom, WaitingRoomLayer};
use waitroom_testkit::http::{browser, serve};
use waitroom_verify::FINISH_HEADER;

const POLL: Duration = Duration::from_secs(2);
const GRACE: Duration = Duration::from_secs(10);
/// One-shot requests in a flood: enough that counting them as people would be plain (the position a person saw
/// would be this many places too far back), few enough to send over HTTP in a debug build in seconds.
const FLOOD: u64 = 300;

struct Site {
    url: String,
    room: WaitingRoom,
    store: Arc<dyn Store>,
}

async fn site(
    store: Arc<dyn Store>,
    event: &str,
    capacity: u64,
    clock: &ManualClock,
    max_scan: u64,
) -> Site {
    let room = WaitingRoom::builder(event)
        .capacity(capacity)
        .poll_interval(POLL)
        .abandon_after(GRACE)
        .arrival_window(Duration::from_secs(30))
        .idle_timeout(Duration::from_secs(300))
        .max_scan_per_tick(max_scan)
        // These tests follow people through the line: nobody goes straight in on a first request.
        .straight_in(false)
        .cookie_secret(*b"a-cookie-secret-for-one-shot-tst")
        .secure_cookies(false)
        .clock(Arc::new(clock.clone()))
        .background(false)
        .shared_store(store.clone())
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
    Site {
        url: serve(app).await,
        room,
        store,
    }
}

impl Site {
    /// A protected request: the state the room stamps on it (`passed` when let through).
    async fn visit(&self, c: &reqwest::Client) -> String {
        let res = c
            .get(format!("{}/checkout", self.url))
            .send()
            .await
            .unwrap();
        assert!(res.status().as_u16() < 500, "never a 5xx: {}", res.status());
        res.headers()
            .get(STATE_HEADER)
            .map_or("passed", |v| v.to_str().unwrap())
            .to_owned()
    }

    async fn poll(&self, c: &reqwest::Client) -> Value {
        let res = c
            .get(format!("{}/waitroom/status", self.url))
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "a poll is answered");
        res.json().await.unwrap()
    }

    /// `FLOOD` requests without a cookie, each from a client that keeps none (as a bot's `wrk` loop sends them).
    async fn flood(&self) {
        let bot = reqwest::Client::new();
        for _ in 0..FLOOD {
            let res = bot
                .get(format!("{}/checkout", self.url))
                .send()
                .await
                .unwrap();
            // Held: `429` with the line's JSON for a client that does not ask for HTML.
            assert_eq!(res.status(), 429);
        }
    }

    async fn sessions(&self, event: &str) -> usize {
        self.store
            .find_sessions(event, &|_| true, usize::MAX)
            .await
            .unwrap()
            .len()
    }
}

/// A flood of one-shot requests while the room is full writes no session; a person who joins after it and polls
/// is told their live rank (on a store that counts the living) and the wait for that rank.
async fn flood_then_a_person(s: &Site, event: &str, counts_the_living: bool) {
    let (inside, first) = (browser(), browser());
    // One person inside (the room has a free place: a first contact then joins at once), one waiting.
    assert_eq!(s.visit(&inside).await, "waiting");
    s.room.tick_now().await.unwrap();
    assert_eq!(s.visit(&inside).await, "passed");
    assert_eq!(s.visit(&first).await, "waiting");
    assert_eq!(s.poll(&first).await["position"], 1);
    let before = s.sessions(event).await;

    s.flood().await;
    assert_eq!(
        s.sessions(event).await,
        before,
        "one-shot requests write no session"
    );
    s.room.tick_now().await.unwrap();
    let snap = s.room.snapshot();
    assert_eq!(
        snap.counters.tickets,
        FLOOD + 1,
        "a ticket each (and the waiting one's)"
    );
    assert_eq!(snap.counters.redeemed, 1);

    let person = browser();
    assert_eq!(s.visit(&person).await, "waiting");
    let seen = s.poll(&person).await;
    s.room.tick_now().await.unwrap();
    let again = s.poll(&person).await;
    assert_eq!(again["state"], "waiting");
    if counts_the_living {
        // Before the next refresh its own number counted as given out after the snapshot; after it, the rank.
        assert_eq!(seen["position"], 2, "{seen}");
        assert_eq!(
            again["position"], 2,
            "the live rank: one person ahead, {again}"
        );
        assert_eq!(again["in_line"], 2, "{again}");
        // The estimate is the one for rank 2 (one person inside, capacity 1, the configured pace): the same as a
        // line with nobody from the flood in it would give.
        let expected = s
            .room
            .status(Some(&waitroom_layer::Placement {
                session: String::new(),
                state: waitroom_layer::SessionState::Waiting,
                number: Some(snap.served + 2),
            }))
            .eta_seconds;
        assert_eq!(again["eta_seconds"].as_u64(), expected);
    } else {
        assert!(again["position"].as_u64().unwrap() >= 2);
    }
    // The door lets the two people in, in order, one place at a time.
    let done = s.visit(&inside).await;
    assert_eq!(done, "passed");
    inside
        .get(format!("{}/checkout/done", s.url))
        .send()
        .await
        .unwrap();
    for _ in 0..(FLOOD + 2) {
        s.room.tick_now().await.unwrap();
        if s.poll(&first).await["state"] == "admitted" {
            break;
        }
    }
    assert_eq!(s.poll(&first).await["state"], "admitted");
    assert_eq!(s.poll(&person).await["state"], "waiting");
}

#[tokio::test]
async fn on_the_embedded_store_after_a_flood_a_person_who_polls_sees_their_live_rank() {
    let clock = ManualClock::starting_now();
    let store: Arc<dyn Store> = Arc::new(waitroom_layer::MemoryStore::new());
    let s = site(store, "flood-memory", 1, &clock, 20_000).await;
    flood_then_a_person(&s, "flood-memory", true).await;
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn on_redis_a_flood_of_one_shot_requests_writes_no_session() {
    use waitroom_testkit::redis::RedisServer;
    let server = RedisServer::from_env_or_start();
    let clock = ManualClock::starting_now();
    let event = format!("flood-redis-{}-{}", std::process::id(), clock.now_ms());
    let store: Arc<dyn Store> = Arc::new(
        waitroom_layer::RedisStore::connect(server.url())
            .await
            .unwrap(),
    );
    let s = site(store, &event, 1, &clock, 20_000).await;
    flood_then_a_person(&s, &event, false).await;
}

/// The door's pace does not depend on the flood: with a scan budget of 4 a tick, floods of unredeemed tickets
/// between three people present do not hold anyone back; all three go in at the tick after places free, as without
/// the floods.
#[tokio::test]
async fn on_the_embedded_store_a_flood_during_an_open_door_does_not_slow_admissions_of_people_present()
 {
    let clock = ManualClock::starting_now();
    let store: Arc<dyn Store> = Arc::new(waitroom_layer::MemoryStore::new());
    let s = site(store, "pace-memory", 3, &clock, 4).await;
    let inside: Vec<_> = (0..3).map(|_| browser()).collect();
    for c in &inside {
        assert_eq!(s.visit(c).await, "waiting");
    }
    s.room.tick_now().await.unwrap();
    for c in &inside {
        assert_eq!(s.visit(c).await, "passed");
    }
    let present: Vec<_> = (0..3).map(|_| browser()).collect();
    for (i, c) in present.iter().enumerate() {
        if i > 0 {
            s.flood().await;
        }
        assert_eq!(s.visit(c).await, "waiting");
        assert_eq!(s.poll(c).await["state"], "waiting");
    }
    s.room.tick_now().await.unwrap();
    assert_eq!(
        s.poll(&present[2]).await["position"],
        3,
        "live rank behind the floods"
    );
    for c in &inside {
        c.get(format!("{}/checkout/done", s.url))
            .send()
            .await
            .unwrap();
    }
    clock.advance(Duration::from_millis(250));
    let report = s.room.tick_now().await.unwrap();
    assert_eq!(
        report.admitted.len(),
        3,
        "every present person in one tick: {report:?}"
    );
    for c in &present {
        assert_eq!(s.poll(c).await["state"], "admitted");
    }
}

/// A ticket that comes back after the grace gets a clear answer (not in line) and its next protected request a new
/// place at the back; no 5xx on the way.
async fn a_late_ticket(s: &Site, clock: &ManualClock) {
    let (inside, late, other) = (browser(), browser(), browser());
    assert_eq!(s.visit(&inside).await, "waiting");
    s.room.tick_now().await.unwrap();
    assert_eq!(s.visit(&inside).await, "passed");
    assert_eq!(s.visit(&late).await, "waiting");
    // Its page never polled within the grace (a bot that kept its cookie, a tab closed at once).
    clock.advance(GRACE + POLL + POLL);
    assert_eq!(s.visit(&other).await, "waiting");
    let other_number = s.poll(&other).await["number"].as_u64().unwrap();
    let told = s.poll(&late).await;
    assert_eq!(told["state"], "not_in_line", "{told}");
    assert_eq!(s.visit(&late).await, "waiting", "a new place");
    let again = s.poll(&late).await;
    assert_eq!(again["state"], "waiting");
    assert!(
        again["number"].as_u64().unwrap() > other_number,
        "at the back: {again}"
    );
    s.room.refresh().await.unwrap();
    assert_eq!(s.room.stats().counters.redeemed, 2);
}

#[tokio::test]
async fn on_the_embedded_store_a_ticket_back_after_the_grace_is_told_and_gets_a_new_place() {
    let clock = ManualClock::starting_now();
    let store: Arc<dyn Store> = Arc::new(waitroom_layer::MemoryStore::new());
    let s = site(store, "late-memory", 1, &clock, 20_000).await;
    a_late_ticket(&s, &clock).await;
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn on_redis_a_ticket_back_after_the_grace_is_told_and_gets_a_new_place() {
    use waitroom_testkit::redis::RedisServer;
    let server = RedisServer::from_env_or_start();
    let clock = ManualClock::starting_now();
    let event = format!("late-redis-{}-{}", std::process::id(), clock.now_ms());
    let store: Arc<dyn Store> = Arc::new(
        waitroom_layer::RedisStore::connect(server.url())
            .await
            .unwrap(),
    );
    let s = site(store, &event, 1, &clock, 20_000).await;
    a_late_ticket(&s, &clock).await;
}

/// The process's resident memory, in bytes (Linux).
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Figures for BENCHMARKS.md, not a check: resident memory per one-shot request (a ticket) on the embedded store
/// against a join in the same run, and the position of a person who comes after a million one-shot requests.
/// `cargo test -p waitroom-layer --release --test one_shot -- --ignored --nocapture`
#[tokio::test]
#[ignore = "a measurement for BENCHMARKS.md"]
async fn measure_memory_per_one_shot_request_on_the_embedded_store() {
    use waitroom_layer::store::{Join, Settings};
    const N: u64 = 1_000_000;
    let settings = Settings {
        capacity: 1,
        admit_per_minute: None,
        paused: false,
        closed: false,
        opens_at_ms: None,
        random_draw: false,
        inventory: None,
        prequeue_opens_at_ms: None,
        closes_at_ms: None,
    };
    let store = waitroom_layer::MemoryStore::new();
    store.init("tickets", &settings).await.unwrap();
    store.init("joins", &settings).await.unwrap();
    let before = rss_bytes();
    for _ in 0..N {
        store.ticket("tickets", 1).await.unwrap();
    }
    let tickets = rss_bytes().saturating_sub(before);
    let before = rss_bytes();
    for i in 0..N {
        let join = Join {
            session: format!("{i:022}"),
            account: None,
            now_ms: 1,
            draw_key: 0,
        };
        store.join("joins", &join).await.unwrap();
    }
    let joins = rss_bytes().saturating_sub(before);
    let person = waitroom_layer::store::Redeem {
        session: "person-aaaaaaaaaaaaaaaa".into(),
        number: match store.ticket("tickets", 2).await.unwrap() {
            waitroom_layer::store::Ticket::Number(n) => Some(n),
            other => panic!("{other:?}"),
        },
        issued_ms: 2,
        now_ms: 3,
        grace_ms: 10_000,
        draw_key: 0,
    };
    store.redeem("tickets", &person).await.unwrap();
    let snap = store.snapshot("tickets").await.unwrap();
    println!(
        "{N} one-shot requests: {:.1} B each; {N} joins: {:.1} B each (ratio {:.3}); a person after them: position {}, in line {}",
        tickets as f64 / N as f64,
        joins as f64 / N as f64,
        tickets as f64 / joins.max(1) as f64,
        snap.position_of(person.number.unwrap()),
        snap.waiting()
    );
}

// ---- First contacts in batches (issue 24) ----

/// A room over `store` whose door is paused, so every first contact gets a ticket (none joins at once), numbering
/// up to `batch` first contacts in one store call (`None`: what the store asks for).
async fn paused_room(
    store: Arc<dyn Store>,
    event: &str,
    clock: &ManualClock,
    batch: Option<usize>,
) -> WaitingRoom {
    let mut b = WaitingRoom::builder(event)
        .capacity(1)
        .poll_interval(POLL)
        .abandon_after(GRACE)
        .cookie_secret(*b"a-cookie-secret-for-one-shot-tst")
        .secure_cookies(false)
        .clock(Arc::new(clock.clone()))
        .background(false)
        .shared_store(store);
    if let Some(n) = batch {
        b = b.ticket_batch(n);
    }
    let room = b.build().await.unwrap();
    room.pause().await.unwrap();
    assert!(room.snapshot().settings.paused);
    room
}

/// This instance's store calls for tickets so far (`waitroom_ticket_batches_total`).
fn ticket_batches(room: &WaitingRoom) -> u64 {
    room.metrics_text()
        .lines()
        .find(|l| l.starts_with("waitroom_ticket_batches_total"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .expect("the ticket_batches counter")
}

/// Most first contacts [`arrivals`] sends at once: `join_all` polls up to 30 futures in order in one pass (more
/// go through `FuturesOrdered`, which may yield part way).
const AT_ONCE: usize = 30;

/// `n` (at most [`AT_ONCE`]) first contacts reaching `room` in a known order, on one task: `join_all` polls each
/// once, in order, before it waits for any, so each is queued before the next arrives. Their answers, in arrival
/// order; each is answered within a bound (a store call that fails answers everyone in its batch).
async fn arrivals(
    room: &WaitingRoom,
    tag: &str,
    n: usize,
) -> Vec<Result<(waitroom_layer::Placement, Option<u64>), waitroom_layer::StoreError>> {
    assert!(n <= AT_ONCE);
    let sids: Vec<String> = (0..n).map(|i| format!("{tag}-{i:05}-xxxxxxxx")).collect();
    let all = futures_util::future::join_all(sids.iter().map(|s| room.ticket(s)));
    tokio::time::timeout(Duration::from_secs(10), all)
        .await
        .expect(
            "every first contact is answered within 10 s (the store's timeout is 2 s at most here)",
        )
}

/// Their numbers: every one a ticket with a number.
fn numbers(
    answers: Vec<Result<(waitroom_layer::Placement, Option<u64>), waitroom_layer::StoreError>>,
) -> Vec<u64> {
    answers
        .into_iter()
        .map(|r| {
            let (p, issued) = r.expect("the store answers");
            assert!(issued.is_some(), "a ticket, not a join: {p:?}");
            p.number.expect("a numbered ticket")
        })
        .collect()
}

/// The numbers one instance gave, in arrival order, are consecutive: `first, first + 1, ...`.
fn consecutive(ns: &[u64]) -> bool {
    ns.windows(2).all(|w| w[1] == w[0] + 1)
}

#[tokio::test]
async fn on_the_embedded_store_first_contacts_arriving_together_are_numbered_in_arrival_order() {
    let clock = ManualClock::starting_now();
    // As shipped: each first contact asks the store itself (one add under its lock), no batches.
    let store: Arc<dyn Store> = Arc::new(waitroom_layer::MemoryStore::new());
    let room = paused_room(store, "arrive-memory", &clock, None).await;
    let ns = numbers(arrivals(&room, "lone", AT_ONCE).await);
    assert!(consecutive(&ns), "{ns:?}");
    assert_eq!(ticket_batches(&room), 0, "no batches on the embedded store");
    // The same shape when batches are asked for: the 30 were all queued before the first call, so one call.
    let store: Arc<dyn Store> = Arc::new(waitroom_layer::MemoryStore::new());
    let room = paused_room(store, "arrive-memory-b", &clock, Some(64)).await;
    let ns = numbers(arrivals(&room, "batched", AT_ONCE).await);
    assert_eq!(ns, (1..=AT_ONCE as u64).collect::<Vec<_>>());
    assert_eq!(ticket_batches(&room), 1, "one store call for the 30");
}

/// Three room instances over one Redis, built on one Tokio runtime.
#[cfg(feature = "redis")]
async fn three_instances(
    server: &waitroom_testkit::redis::RedisServer,
    event: &str,
    clock: &ManualClock,
) -> Vec<WaitingRoom> {
    let mut rooms = Vec::new();
    for _ in 0..3 {
        let store: Arc<dyn Store> = Arc::new(
            waitroom_layer::RedisStore::connect(server.url())
                .await
                .unwrap(),
        );
        rooms.push(paused_room(store, event, clock, None).await);
    }
    rooms
}

/// Three room instances over one Redis, first contacts arriving at each in rounds of 30 while the others' batches
/// are under way: each instance numbers its own in arrival order, in one store call a round, and all numbers
/// together are distinct and gap-free. (One thread: every first contact of a round is queued before any
/// instance's batch task runs, so the batches are known.)
#[cfg(feature = "redis")]
#[tokio::test]
async fn on_redis_first_contacts_at_three_instances_are_numbered_in_arrival_order_per_instance() {
    use waitroom_testkit::redis::RedisServer;
    let server = RedisServer::from_env_or_start();
    let clock = ManualClock::starting_now();
    let event = format!("arrive-redis-{}-{}", std::process::id(), clock.now_ms());
    let rooms = three_instances(&server, &event, &clock).await;
    let mut all = Vec::new();
    const ROUNDS: u64 = 4;
    for round in 0..ROUNDS {
        let tags = [
            format!("a{round}"),
            format!("b{round}"),
            format!("c{round}"),
        ];
        let (a, b, c) = tokio::join!(
            arrivals(&rooms[0], &tags[0], AT_ONCE),
            arrivals(&rooms[1], &tags[1], AT_ONCE),
            arrivals(&rooms[2], &tags[2], AT_ONCE),
        );
        for got in [a, b, c] {
            let ns = numbers(got);
            assert!(consecutive(&ns), "one instance, one round: {ns:?}");
            all.extend(ns);
        }
    }
    for r in &rooms {
        assert_eq!(ticket_batches(r), ROUNDS, "one store call a round");
    }
    all.sort_unstable();
    let total = 3 * ROUNDS * AT_ONCE as u64;
    assert_eq!(all, (1..=total).collect::<Vec<_>>(), "distinct, gap-free");
}

/// Many tasks at once on each of three instances over one Redis, on two threads: each task's numbers increase
/// (its next first contact arrives after the last was answered), none is lost or given twice, and the store counts
/// every ticket.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_first_contacts_from_many_tasks_at_three_instances_are_distinct_and_gap_free() {
    use waitroom_testkit::redis::RedisServer;
    let server = RedisServer::from_env_or_start();
    let clock = ManualClock::starting_now();
    let event = format!("tasks-redis-{}-{}", std::process::id(), clock.now_ms());
    let rooms = three_instances(&server, &event, &clock).await;
    const TASKS: u64 = 8;
    const EACH: u64 = 25;
    let mut tasks = Vec::new();
    for (i, room) in rooms.iter().enumerate() {
        for t in 0..TASKS {
            let room = room.clone();
            tasks.push(tokio::spawn(async move {
                let mut ns = Vec::new();
                for k in 0..EACH {
                    let (p, issued) = room
                        .ticket(&format!("task-{i}-{t}-{k:03}-xxxxxxxxx"))
                        .await
                        .unwrap();
                    assert!(issued.is_some());
                    ns.push(p.number.unwrap());
                }
                ns
            }));
        }
    }
    let mut all = Vec::new();
    for t in tasks {
        let ns = t.await.unwrap();
        assert!(ns.windows(2).all(|w| w[0] < w[1]), "{ns:?}");
        all.extend(ns);
    }
    all.sort_unstable();
    let total = 3 * TASKS * EACH;
    assert_eq!(all, (1..=total).collect::<Vec<_>>(), "distinct, gap-free");
    let snap = rooms[0].store().snapshot(&event).await.unwrap();
    assert_eq!((snap.last_number, snap.counters.tickets), (total, total));
    let calls: u64 = rooms.iter().map(ticket_batches).sum();
    println!("{total} tickets in {calls} store calls");
}

/// A store error inside a batch answers everyone in it: in the room, every first contact of the batch gets the
/// error (none waits on, none gets a number); over HTTP, every browser gets the holding page saying the status is
/// unknown, never a 5xx.
#[cfg(feature = "redis")]
#[tokio::test]
async fn on_redis_a_store_error_inside_a_batch_answers_everyone_in_it() {
    use waitroom_testkit::redis::RedisServer;
    let mut server = RedisServer::start();
    let clock = ManualClock::starting_now();
    let event = format!("batch-error-{}-{}", std::process::id(), clock.now_ms());
    let store: Arc<dyn Store> = Arc::new(
        waitroom_layer::RedisStore::builder(server.url())
            .timeout(Duration::from_secs(2))
            .connect()
            .await
            .unwrap(),
    );
    let room = paused_room(store, &event, &clock, None).await;
    assert_eq!(numbers(arrivals(&room, "before", 3).await), vec![1, 2, 3]);
    server.stop();
    let before = ticket_batches(&room);
    let answers = arrivals(&room, "during", AT_ONCE).await;
    assert_eq!(ticket_batches(&room), before + 1, "the 30 were one batch");
    for (i, a) in answers.iter().enumerate() {
        assert!(
            a.is_err(),
            "first contact {i} is told the store failed: {a:?}"
        );
    }
    // Over HTTP: a crowd of browsers at once, each answered.
    let layer = WaitingRoomLayer::builder(room.clone())
        .protect_prefix("/checkout")
        .build()
        .unwrap();
    let url = serve(
        Router::new()
            .route("/checkout", get(|| async { "seat map" }))
            .layer(layer),
    )
    .await;
    let crowd: Vec<reqwest::Client> = (0..20).map(|_| browser()).collect();
    let pages = futures_util::future::join_all(crowd.iter().map(|c| async {
        let res = c
            .get(format!("{url}/checkout"))
            .header("accept", "text/html")
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.text().await.unwrap())
    }))
    .await;
    for (status, html) in pages {
        assert_eq!(status, 200, "the holding page, never a 5xx");
        assert!(html.contains(">Status temporarily unknown"), "{html:.300}");
    }
}

/// The batch never holds back a lone first contact: it goes to the store at once, waiting for no timer (on
/// Tokio's paused clock any wait on a timer would move it).
#[tokio::test(start_paused = true)]
async fn a_lone_first_contact_waits_for_no_batch_window() {
    let clock = ManualClock::starting_now();
    let store: Arc<dyn Store> = Arc::new(waitroom_layer::MemoryStore::new());
    let room = paused_room(store, "lone", &clock, Some(64)).await;
    for k in 1..=3u64 {
        let t0 = tokio::time::Instant::now();
        let (p, issued) = room
            .ticket(&format!("lone-{k}-xxxxxxxxxxxxxxx"))
            .await
            .unwrap();
        assert_eq!(t0.elapsed(), Duration::ZERO, "first contact {k} waited");
        assert_eq!((p.number, issued.is_some()), (Some(k), true));
    }
    assert_eq!(ticket_batches(&room), 3, "each alone in its batch");
}
