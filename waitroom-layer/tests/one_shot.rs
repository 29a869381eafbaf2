//! One-shot visitors over real HTTP, on both stores: requests without a session (bots, crawlers, uptime checks,
//! link previews) get a ticket and write no session; a person who comes back takes their place and is told their
//! live rank, not the number of one-shot requests ahead; a flood does not slow the door for the people present; a
//! ticket that comes back too late gets a clear answer and a new place, never a 5xx.
//!
//! Rooms use a manual clock and no background task; the door moves with `room.tick_now()`. Nothing sleeps.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use serde_json::Value;
use waitroom_layer::store::{SessionState, Store};
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
    site_drawn(store, event, capacity, clock, max_scan, false).await
}

/// [`site`], with a random draw an hour ahead when `draw` (first contacts join the pre-queue).
async fn site_drawn(
    store: Arc<dyn Store>,
    event: &str,
    capacity: u64,
    clock: &ManualClock,
    max_scan: u64,
    draw: bool,
) -> Site {
    let mut builder = WaitingRoom::builder(event);
    if draw {
        builder = builder.fairness(waitroom_layer::Fairness::RandomAtOpen {
            opens_at: std::time::UNIX_EPOCH + Duration::from_millis(clock.now_ms() + 3_600_000),
        });
    }
    let room = builder
        .capacity(capacity)
        .poll_interval(POLL)
        .abandon_after(GRACE)
        .arrival_window(Duration::from_secs(30))
        .idle_timeout(Duration::from_secs(300))
        .max_scan_per_tick(max_scan)
        // Everyone waits for the door's tick, the first one included: these tests follow the line, not the
        // straight-in path (issue #23), whose tests are in `layer_http.rs`.
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
/// is told their live rank and the wait for that rank.
async fn flood_then_a_person(s: &Site, event: &str) {
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
    flood_then_a_person(&s, "flood-memory").await;
}

/// A store on a Redis server of its own (started for the test, or `WAITROOM_TEST_REDIS`'s) and a fresh event id.
#[cfg(feature = "redis")]
async fn redis_store(
    what: &str,
    clock: &ManualClock,
) -> (waitroom_testkit::redis::RedisServer, Arc<dyn Store>, String) {
    let server = waitroom_testkit::redis::RedisServer::from_env_or_start();
    let event = format!("{what}-redis-{}-{}", std::process::id(), clock.now_ms());
    let store: Arc<dyn Store> = Arc::new(
        waitroom_layer::RedisStore::connect(server.url())
            .await
            .unwrap(),
    );
    (server, store, event)
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn on_redis_after_a_flood_a_person_who_polls_sees_their_live_rank() {
    let clock = ManualClock::starting_now();
    let (_server, store, event) = redis_store("flood", &clock).await;
    let s = site(store, &event, 1, &clock, 20_000).await;
    flood_then_a_person(&s, &event).await;
}

/// The door's pace does not depend on the flood: with a scan budget of 4 a tick, floods of unredeemed tickets
/// between three people present do not hold anyone back; all three go in at the tick after places free, as without
/// the floods.
async fn a_flood_during_an_open_door(s: &Site, clock: &ManualClock) {
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

#[tokio::test]
async fn on_the_embedded_store_a_flood_during_an_open_door_does_not_slow_admissions_of_people_present()
 {
    let clock = ManualClock::starting_now();
    let store: Arc<dyn Store> = Arc::new(waitroom_layer::MemoryStore::new());
    let s = site(store, "pace-memory", 3, &clock, 4).await;
    a_flood_during_an_open_door(&s, &clock).await;
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn on_redis_a_flood_during_an_open_door_does_not_slow_admissions_of_people_present() {
    let clock = ManualClock::starting_now();
    let (_server, store, event) = redis_store("pace", &clock).await;
    let s = site(store, &event, 3, &clock, 4).await;
    a_flood_during_an_open_door(&s, &clock).await;
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

/// Ended sessions are forgotten a return window after they end: one that comes back after that is a session the
/// store does not know, and gets a clear answer over HTTP: a new place at the back of the line, behind those who
/// waited, never a 5xx.
async fn a_forgotten_session(s: &Site, event: &str, clock: &ManualClock) {
    let (done, holder, waiting) = (browser(), browser(), browser());
    // In when the place is free (at once, or at the next tick).
    let go_in = |c: reqwest::Client| async move {
        if s.visit(&c).await != "passed" {
            s.room.tick_now().await.unwrap();
            assert_eq!(s.visit(&c).await, "passed");
        }
    };
    go_in(done.clone()).await;
    let ids = s.store.find_sessions(event, &|_| true, 2).await.unwrap();
    let [id] = ids.as_slice() else {
        panic!("one session so far: {ids:?}")
    };
    let state = || async { s.store.lookup(event, id).await.unwrap().map(|p| p.state) };
    let res = done
        .get(format!("{}/checkout/done", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    s.room.refresh().await.unwrap();
    assert_eq!(s.room.stats().counters.finished, 1);
    // Someone else goes in and stays (they keep making requests), someone waits behind them (they poll).
    go_in(holder.clone()).await;
    assert_eq!(s.visit(&waiting).await, "waiting");
    assert_eq!(s.poll(&waiting).await["state"], "waiting");
    assert_eq!(
        state().await,
        Some(SessionState::Finished),
        "the finished session is still known"
    );
    assert_eq!(s.sessions(event).await, 3, "and listed for an operator");
    // A return window (the default, 10 minutes) and a tick later, in steps of a poll, the others active.
    let window = waitroom_layer::DEFAULT_RETURN_WINDOW;
    let mut passed = Duration::ZERO;
    while passed <= window {
        clock.advance(Duration::from_secs(60));
        passed += Duration::from_secs(60);
        assert_eq!(s.visit(&holder).await, "passed");
        assert_eq!(s.poll(&waiting).await["state"], "waiting");
        s.room.tick_now().await.unwrap();
    }
    assert_eq!(state().await, None, "the finished session is forgotten");
    assert_eq!(s.sessions(event).await, 2, "and no longer listed");
    let number_waiting = s.poll(&waiting).await["number"].as_u64().unwrap();
    // The forgotten one comes back: a new place at the back, behind the one who waited.
    let back = s.visit(&done).await;
    assert_eq!(back, "waiting");
    let told = s.poll(&done).await;
    assert_eq!(told["state"], "waiting", "{told}");
    assert!(told["number"].as_u64().unwrap() > number_waiting, "{told}");
    assert_eq!(told["position"], 2, "{told}");
}

#[tokio::test]
async fn on_the_embedded_store_a_forgotten_session_gets_a_new_place_at_the_back() {
    let clock = ManualClock::starting_now();
    let store: Arc<dyn Store> = Arc::new(waitroom_layer::MemoryStore::new());
    let event = "forgotten-memory";
    let s = site(store, event, 1, &clock, 20_000).await;
    a_forgotten_session(&s, event, &clock).await;
}

/// On Redis the ended record is read from its slot's hash for the return window, then it is gone.
#[cfg(feature = "redis")]
#[tokio::test]
async fn on_redis_a_forgotten_session_gets_a_new_place_at_the_back() {
    let clock = ManualClock::starting_now();
    let (_server, store, event) = redis_store("forgotten", &clock).await;
    let s = site(store, &event, 1, &clock, 20_000).await;
    a_forgotten_session(&s, &event, &clock).await;
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn on_redis_a_ticket_back_after_the_grace_is_told_and_gets_a_new_place() {
    let clock = ManualClock::starting_now();
    let (_server, store, event) = redis_store("late", &clock).await;
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
    use waitroom_layer::store::Join;
    const N: u64 = 1_000_000;
    let settings = open_settings();
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

/// `n` calls of `what(store, event, i)` from 16 tasks at once (task `t` makes calls `t`, `t + 16`, ...), and what
/// they answered.
#[cfg(feature = "redis")]
async fn spread<F, Fut, T>(
    store: &waitroom_layer::RedisStore,
    event: &str,
    n: u64,
    what: F,
) -> Vec<T>
where
    F: Fn(waitroom_layer::RedisStore, String, u64) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = T> + Send,
    T: Send + 'static,
{
    const TASKS: u64 = 16;
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let (store, event, what) = (store.clone(), event.to_owned(), what.clone());
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            let mut i = t;
            while i < n {
                out.push(what(store.clone(), event.clone(), i).await);
                i += TASKS;
            }
            out
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}

/// The server's `SLOWLOG` (at most `most` entries, newest first): each command's time in µs and its arguments (the
/// commands a script runs are logged too, by their own names).
#[cfg(feature = "redis")]
async fn slowlog(url: &str, most: usize) -> Vec<(i64, Vec<::redis::Value>)> {
    let client = ::redis::Client::open(url).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let entries: Vec<::redis::Value> = ::redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(most)
        .query_async(&mut con)
        .await
        .unwrap();
    // Each entry: [id, time, µs, [args], ...].
    entries
        .into_iter()
        .filter_map(|e| match e {
            ::redis::Value::Array(mut e) if e.len() > 3 => match (e.swap_remove(3), &e[2]) {
                (::redis::Value::Array(args), ::redis::Value::Int(us)) => Some((*us, args)),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// Figures for BENCHMARKS.md, not a check, on a Redis server of its own: `used_memory` per waiting person (a ticket
/// redeemed at once) against a join in the same run; per one-shot request (a ticket never redeemed), before and
/// after a person redeems the next ticket behind them; and the longest Redis command (`SLOWLOG`, every command
/// logged) while the door crosses `WAITROOM_FLOOD` (default 900,000) unredeemed tickets, against the same steps
/// with no flood. `cargo test -p waitroom-layer --release --all-features --test one_shot measure_on_redis --
/// --ignored --nocapture`
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement for BENCHMARKS.md"]
async fn measure_on_redis_memory_per_person_and_the_door_across_a_flood() {
    use waitroom_layer::RedisStore;
    use waitroom_layer::store::{Join, Redeem, Tick};
    let flood: u64 = std::env::var("WAITROOM_FLOOD")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(900_000);
    const PEOPLE: u64 = 100_000;
    let server = waitroom_testkit::redis::RedisServer::from_env_or_start();
    let store = RedisStore::connect(server.url()).await.unwrap();
    let used = || -> i64 {
        let info = server.command(&["INFO", "memory"]);
        info.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("used_memory in INFO memory")
    };
    let settings = open_settings();
    let t0 = 1_800_000_000_000u64;
    let tag = std::process::id();
    let redeem = |session: String, n: u64| Redeem {
        session,
        number: Some(n),
        issued_ms: t0,
        now_ms: t0,
        grace_ms: 60_000,
        draw_key: 0,
    };
    let ticket_number = |t: waitroom_layer::store::Ticket| match t {
        waitroom_layer::store::Ticket::Number(n) => n,
        other => panic!("{other:?}"),
    };

    // Memory per waiting person: a ticket, redeemed at once, 22-character ids; the baseline: as many joins.
    let persons = format!("persons-{tag}");
    store.init(&persons, &settings).await.unwrap();
    let m0 = used();
    spread(&store, &persons, PEOPLE, move |store, ev, i| async move {
        let n = ticket_number(store.ticket(&ev, t0).await.unwrap());
        let r = Redeem {
            session: format!("p{i:021}"),
            number: Some(n),
            issued_ms: t0,
            now_ms: t0,
            grace_ms: 60_000,
            draw_key: 0,
        };
        store.redeem(&ev, &r).await.unwrap().expect("a place");
    })
    .await;
    let per_person = (used() - m0) as f64 / PEOPLE as f64;
    let joins = format!("joins-{tag}");
    store.init(&joins, &settings).await.unwrap();
    let m0 = used();
    spread(&store, &joins, PEOPLE, move |store, ev, i| async move {
        let j = Join {
            session: format!("j{i:021}"),
            account: None,
            now_ms: t0,
            draw_key: 0,
        };
        store.join(&ev, &j).await.unwrap();
    })
    .await;
    let per_join = (used() - m0) as f64 / PEOPLE as f64;
    let mut held = String::new();
    for part in ["sessions", "line:0", "line:held", "line:blk"] {
        let bytes = server.command(&[
            "MEMORY",
            "USAGE",
            &store.key(&persons, part),
            "SAMPLES",
            "0",
        ]);
        held.push_str(&format!(" {part}={bytes}"));
    }
    println!(
        "memory per waiting person (ticket + redeem), {PEOPLE}: {per_person:.1} B; per join (baseline, same run): \
         {per_join:.1} B; ratio {:.3}; MEMORY USAGE:{held}",
        per_person / per_join
    );

    // The door: one person inside (capacity 1), one waiting, then `flood` tickets nobody redeems, then a person
    // who redeems the next one. The door lets the waiting one in, then crosses the flood to the last person.
    let mut longest = Vec::new();
    for (what, n) in [("no flood", 0u64), ("flood", flood)] {
        let ev = format!("door-{what}-{tag}").replace(' ', "-");
        store.init(&ev, &settings).await.unwrap();
        let join = |s: &str| Join {
            session: s.to_owned(),
            account: None,
            now_ms: t0,
            draw_key: 0,
        };
        let tick = |now_ms| Tick {
            now_ms,
            arrival_window_ms: 30_000,
            abandon_after_ms: 60_000,
            return_window_ms: 60_000,
            max_scan: 20_000,
        };
        store
            .join(&ev, &join("inside-aaaaaaaaaaaaaaaa"))
            .await
            .unwrap();
        let r = store.tick(&ev, &tick(t0)).await.unwrap();
        assert_eq!(r.admitted.len(), 1);
        store
            .join(&ev, &join("before-aaaaaaaaaaaaaaaa"))
            .await
            .unwrap();
        let m0 = used();
        spread(&store, &ev, n, move |store, ev, _| async move {
            ticket_number(store.ticket(&ev, t0).await.unwrap());
        })
        .await;
        let m1 = used();
        server.command(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
        server.command(&["CONFIG", "SET", "slowlog-max-len", "10000"]);
        server.command(&["SLOWLOG", "RESET"]);
        let last = ticket_number(store.ticket(&ev, t0).await.unwrap());
        let p = store
            .redeem(&ev, &redeem("after-aaaaaaaaaaaaaaaaa".into(), last))
            .await
            .unwrap()
            .expect("a place");
        let m2 = used();
        let snap = store.snapshot(&ev).await.unwrap();
        let position = snap.position_of(p.number.unwrap());
        assert!(
            store
                .finish(&ev, "inside-aaaaaaaaaaaaaaaa", 0, t0 + 1)
                .await
                .unwrap()
        );
        let r = store.tick(&ev, &tick(t0 + 2)).await.unwrap();
        assert_eq!(r.admitted, ["before-aaaaaaaaaaaaaaaa"]);
        assert!(
            store
                .finish(&ev, "before-aaaaaaaaaaaaaaaa", 0, t0 + 3)
                .await
                .unwrap()
        );
        let r = store.tick(&ev, &tick(t0 + 4)).await.unwrap();
        assert_eq!(
            r.admitted,
            ["after-aaaaaaaaaaaaaaaaa"],
            "across {n} tickets in one tick"
        );
        store.snapshot(&ev).await.unwrap();
        // Every command since the reset: [id, time, µs, [args], ...]; the longest, and what it was.
        let log = server.command(&["SLOWLOG", "LEN"]);
        let mut worst = (0i64, String::new());
        let mut tick_us = 0i64;
        for (us, args) in &slowlog(server.url(), 10_000).await {
            // The tick's arguments: now, arrival window, abandon after, max scan, the seen slot (10 s), ...
            if matches!(args.get(25), Some(::redis::Value::BulkString(b)) if b == b"10000") {
                tick_us = tick_us.max(*us);
            }
            if *us > worst.0 {
                let words: Vec<String> = args
                    .iter()
                    .skip(21)
                    .take(3)
                    .map(|a| match a {
                        ::redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                        other => format!("{other:?}"),
                    })
                    .collect();
                worst = (*us, words.join(" "));
            }
        }
        server.command(&["CONFIG", "SET", "slowlog-log-slower-than", "10000"]);
        println!(
            "door, {what} ({n} unredeemed tickets): used_memory per one-shot request {:.2} B, with the redemption \
             after them {:.2} B; position of the person after them {position}; {log} commands logged, the longest \
             {} µs (ARGV {}); the longest tick {tick_us} µs",
            (m1 - m0) as f64 / n.max(1) as f64,
            (m2 - m0) as f64 / n.max(1) as f64,
            worst.0,
            worst.1
        );
        longest.push(worst.0);
    }
    println!(
        "longest command with the flood / without: {} / {} µs = {:.2}",
        longest[1],
        longest[0],
        longest[1] as f64 / longest[0].max(1) as f64
    );
}

fn open_settings() -> waitroom_layer::store::Settings {
    waitroom_layer::store::Settings {
        capacity: 1,
        admit_per_minute: None,
        paused: false,
        closed: false,
        opens_at_ms: None,
        random_draw: false,
        inventory: None,
        prequeue_opens_at_ms: None,
        closes_at_ms: None,
    }
}

/// The calling thread's CPU time, in ms: what a join costs, without the time a loaded machine took the thread off
/// its core.
fn thread_cpu_ms() -> f64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}

/// Figures for BENCHMARKS.md, not a check: join latency on the embedded store while 2.49 million people join, in
/// 19 rounds of 131,072, with the room's own 22-character random session ids. Each join's time in the store is
/// measured twice: as CPU time of the thread (the work the join does under the store's lock: a rehash is in it, a
/// shared machine's preemptions are not) and as wall time. The latency is that of joins arriving at a steady 13,107.2 a second (so a round is 10 seconds, as the
/// issue's rounds of `wrk` were) and queued on the store's lock: a join waits for the joins before it (Lindley's
/// recursion over the measured times, the backlog carried from round to round). A stall of `s` seconds delays every
/// join that arrives during it, `s / 10` of the round: one of 100 ms makes the round's p99 about 100 ms. Per round:
/// that p99 and the worst, and the worst single join's own time, from the CPU times; then the same p99 from the wall
/// times (noisy on a shared machine).
/// `cargo test -p waitroom-layer --release --test one_shot measure_join -- --ignored --nocapture`
#[tokio::test]
#[ignore = "a measurement for BENCHMARKS.md"]
async fn measure_join_latency_while_the_line_grows_on_the_embedded_store() {
    use std::time::Instant;
    use waitroom_layer::store::Join;
    const ROUNDS: usize = 19;
    const PER_ROUND: usize = 131_072;
    const ROUND_S: f64 = 10.0;
    let gap_ms = ROUND_S * 1e3 / PER_ROUND as f64;
    let store = waitroom_layer::MemoryStore::new();
    store.init("grow", &open_settings()).await.unwrap();
    let (mut worst_p99, mut worst_join) = (0.0f64, 0.0f64);
    // When the last join left the lock, on the arrivals' clock (ms).
    let mut free_at = 0.0f64;
    let mut wall_free_at = 0.0f64;
    for round in 0..ROUNDS {
        let joins: Vec<Join> = (0..PER_ROUND)
            .map(|_| Join {
                session: WaitingRoom::new_session_id(),
                account: None,
                now_ms: 1,
                draw_key: 0,
            })
            .collect();
        let mut took = Vec::with_capacity(PER_ROUND);
        let mut wall = Vec::with_capacity(PER_ROUND);
        for join in &joins {
            let t = Instant::now();
            let cpu = thread_cpu_ms();
            store.join("grow", join).await.unwrap();
            took.push(thread_cpu_ms() - cpu);
            wall.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let queue = |times: &[f64], free_at: &mut f64| {
            let mut latency: Vec<f64> = times
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let arrives = (round * PER_ROUND + i) as f64 * gap_ms;
                    *free_at = free_at.max(arrives) + s;
                    *free_at - arrives
                })
                .collect();
            latency.sort_by(f64::total_cmp);
            latency
        };
        let latency = queue(&took, &mut free_at);
        let wall_latency = queue(&wall, &mut wall_free_at);
        let wall_p99 = wall_latency[wall_latency.len() * 99 / 100];
        let own_worst = took.iter().copied().fold(0.0, f64::max);
        let p99 = latency[latency.len() * 99 / 100];
        println!(
            "round {:>2} ({:>9} sessions at its end): join p99 {p99:.3} ms, worst {:.3} ms; longest single join {own_worst:.3} ms; wall time: p99 {wall_p99:.3} ms",
            round + 1,
            (round + 1) * PER_ROUND,
            latency[latency.len() - 1],
        );
        worst_p99 = worst_p99.max(p99);
        worst_join = worst_join.max(own_worst);
    }
    println!("worst round's join p99 {worst_p99:.3} ms; longest single join {worst_join:.3} ms");
}

/// Figures for BENCHMARKS.md, not a check: resident memory per waiting person who polls on the embedded store: a
/// first contact's ticket redeemed at the first poll (the session record and the line entry), with the room's own
/// 22-character random session ids (a poll's liveness mark updates the record in place: no memory of its own).
/// `cargo test -p waitroom-layer --release --test one_shot measure_memory_per_waiting -- --ignored --nocapture`
#[tokio::test]
#[ignore = "a measurement for BENCHMARKS.md"]
async fn measure_memory_per_waiting_person_who_polls_on_the_embedded_store() {
    use waitroom_layer::store::{Redeem, Ticket};
    const N: u64 = 1_000_000;
    let store = waitroom_layer::MemoryStore::new();
    store.init("people", &open_settings()).await.unwrap();
    let before = rss_bytes();
    for _ in 0..N {
        let Ticket::Number(n) = store.ticket("people", 1).await.unwrap() else {
            panic!("an open room gives numbers");
        };
        let redeem = Redeem {
            session: WaitingRoom::new_session_id(),
            number: Some(n),
            issued_ms: 1,
            now_ms: 2,
            grace_ms: 10_000,
            draw_key: 0,
        };
        store.redeem("people", &redeem).await.unwrap().unwrap();
    }
    let grew = rss_bytes().saturating_sub(before);
    let snap = store.snapshot("people").await.unwrap();
    println!(
        "{N} people who came back: {:.1} B of resident memory each (in line {})",
        grew as f64 / N as f64,
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

/// Three room instances over one Redis, built on one Tokio runtime, with their stores (one connection each).
#[cfg(feature = "redis")]
async fn three_instances(
    server: &waitroom_testkit::redis::RedisServer,
    event: &str,
    clock: &ManualClock,
) -> (Vec<waitroom_layer::RedisStore>, Vec<WaitingRoom>) {
    let (mut stores, mut rooms) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let store = waitroom_layer::RedisStore::connect(server.url())
            .await
            .unwrap();
        let shared: Arc<dyn Store> = Arc::new(store.clone());
        rooms.push(paused_room(shared, event, clock, None).await);
        stores.push(store);
    }
    (stores, rooms)
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
    let (_, rooms) = three_instances(&server, &event, &clock).await;
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

/// Once an instance's snapshot shows the line numbered and open, its batches of first contacts take their numbers
/// with one Redis command each (`line_tickets`: an `HINCRBY`, no script reading the settings), still in arrival
/// order per instance, distinct and gap-free across three instances; the store counts them when each instance
/// next flushes.
#[cfg(feature = "redis")]
#[tokio::test]
async fn on_redis_first_contacts_in_an_open_line_take_one_command_a_batch_and_are_counted_at_the_next_flush()
 {
    use waitroom_testkit::redis::RedisServer;
    let server = RedisServer::from_env_or_start();
    let clock = ManualClock::starting_now();
    let event = format!("open-line-{}-{}", std::process::id(), clock.now_ms());
    let (stores, rooms) = three_instances(&server, &event, &clock).await;
    // The first round: no instance has seen a number given out yet, so each asks with the `TICKET` script.
    let mut all = Vec::new();
    for (i, room) in rooms.iter().enumerate() {
        all.extend(numbers(arrivals(room, &format!("first{i}"), AT_ONCE).await));
    }
    for room in &rooms {
        room.tick_now().await.unwrap();
        assert!(room.snapshot().last_number >= AT_ONCE as u64);
    }
    const ROUNDS: u64 = 3;
    for round in 0..ROUNDS {
        let tags = [
            format!("a{round}"),
            format!("b{round}"),
            format!("c{round}"),
        ];
        let sent: Vec<u64> = stores.iter().map(|s| s.commands_sent()).collect();
        let (a, b, c) = tokio::join!(
            arrivals(&rooms[0], &tags[0], AT_ONCE),
            arrivals(&rooms[1], &tags[1], AT_ONCE),
            arrivals(&rooms[2], &tags[2], AT_ONCE),
        );
        for (k, got) in [a, b, c].into_iter().enumerate() {
            let ns = numbers(got);
            assert!(consecutive(&ns), "one instance, one round: {ns:?}");
            assert_eq!(
                stores[k].commands_sent() - sent[k],
                1,
                "instance {k}: 30 first contacts, one Redis command"
            );
            all.extend(ns);
        }
    }
    all.sort_unstable();
    let total = (3 + 3 * ROUNDS) * AT_ONCE as u64;
    assert_eq!(all, (1..=total).collect::<Vec<_>>(), "distinct, gap-free");
    let counted = rooms[0]
        .store()
        .snapshot(&event)
        .await
        .unwrap()
        .counters
        .tickets;
    assert_eq!(
        counted,
        3 * AT_ONCE as u64,
        "only the scripts' tickets so far"
    );
    for room in &rooms {
        room.tick_now().await.unwrap();
    }
    let snap = rooms[0].store().snapshot(&event).await.unwrap();
    assert_eq!((snap.last_number, snap.counters.tickets), (total, total));
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
    let (_, rooms) = three_instances(&server, &event, &clock).await;
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
    // The numbers alone (`line_tickets`) are counted with each instance's next flush.
    for room in &rooms {
        room.tick_now().await.unwrap();
    }
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

/// A client that keeps only its first cookie (the ticket) and polls with it again and again, in the pre-queue and
/// in a FIFO line: the ticket is redeemed once, and its later polls are answered as the session stands, from the
/// room's memory (`waitroom_tickets_redeemed_total` counts the redemptions this instance made).
async fn a_ticket_presented_again(s: &Site, want: &str) {
    if want == "waiting" {
        // The only place taken (a first contact while a place is free joins at once, with no ticket).
        let inside = browser();
        assert_eq!(s.visit(&inside).await, "waiting");
        s.room.tick_now().await.unwrap();
        assert_eq!(s.visit(&inside).await, "passed");
    }
    let first = reqwest::Client::new();
    let res = first
        .get(format!("{}/checkout", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 429, "held");
    let ticket = res.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    for k in 0..5 {
        let res = first
            .get(format!("{}/waitroom/status", s.url))
            .header("accept", "application/json")
            .header("cookie", &ticket)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "poll {k}");
        let v: Value = res.json().await.unwrap();
        assert_eq!(v["state"], want, "poll {k}: {v}");
    }
    let text = s.room.metrics_text();
    let redeemed = text
        .lines()
        .find(|l| l.starts_with("waitroom_tickets_redeemed_total"))
        .map(|l| l.rsplit(' ').next().unwrap().to_owned());
    assert_eq!(
        redeemed.as_deref(),
        Some("1"),
        "one redemption for five polls of one ticket"
    );
    s.room.tick_now().await.unwrap();
    let c = s.room.snapshot().counters;
    assert_eq!((c.tickets, c.redeemed), (1, 1), "one ticket, redeemed once");
}

#[tokio::test]
async fn on_the_embedded_store_a_ticket_presented_again_is_redeemed_once() {
    for (random, want) in [(false, "waiting"), (true, "prequeue")] {
        let clock = ManualClock::starting_now();
        let store: Arc<dyn Store> = Arc::new(waitroom_layer::MemoryStore::new());
        let event = format!("again-memory-{random}");
        let s = site_drawn(store, &event, 1, &clock, 20_000, random).await;
        a_ticket_presented_again(&s, want).await;
    }
}

#[cfg(feature = "redis")]
#[tokio::test]
async fn on_redis_a_ticket_presented_again_is_redeemed_once() {
    for (random, want) in [(false, "waiting"), (true, "prequeue")] {
        let clock = ManualClock::starting_now();
        let (_server, store, event) = redis_store(&format!("again{random}"), &clock).await;
        let s = site_drawn(store, &event, 1, &clock, 20_000, random).await;
        a_ticket_presented_again(&s, want).await;
    }
}

/// Figures for BENCHMARKS.md, not a check: the door crossing people who joined as browsers do (a ticket, redeemed
/// at the page's first poll) and went quiet, on Redis, through the room (its ticks in chunks of `admit_chunk`).
/// One person inside (capacity 1); `WAITROOM_ABSENT` (900,000) people redeem their tickets and never poll again;
/// behind them 1,000 people who poll every 20 s. A minute later the one inside finishes and the door crosses the
/// absent (each skipped as away, its return window kept) to let in the first person present. Meanwhile a task
/// joins new people one after the other (one store call each) and times them. Printed: the longest Redis command
/// from the finish on (`SLOWLOG`, commands over 500 µs, those inside scripts included) and how many took over 5 ms,
/// the joins' p50 / p99 / worst, the ticks the crossing took, and the Redis commands the 1,000 people's polls sent
/// (between ticks: none is expected, they are answered from the room's memory) against the ticks' own. Redis runs
/// at SCHED_FIFO 10 when it can (as the soak does), with nothing persisted; while it does, the kernel's real-time
/// throttling is lifted (`/proc/sys/kernel/sched_rt_runtime_us` set to -1, as root) and put back when the crossing
/// ends or the test panics (a process killed meanwhile leaves it lifted: `echo 950000 >
/// /proc/sys/kernel/sched_rt_runtime_us` puts it back). `WAITROOM_DRAWN=1`: the same people in a random draw's
/// pre-queue, all the absent drawn ahead of the present, nobody inside (the crossing's first tick draws).
/// `cargo test -p waitroom-layer --release --features redis --test one_shot measure_crossing -- --ignored --nocapture`
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement for BENCHMARKS.md"]
async fn measure_crossing_absent_people_on_redis() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;
    use waitroom_layer::RedisStore;
    use waitroom_layer::store::{Redeem, Ticket};
    let absent: u64 = std::env::var("WAITROOM_ABSENT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(900_000);
    const PRESENT: u64 = 1_000;
    // `WAITROOM_DRAWN=1`: the same people join a random draw's pre-queue instead (the absent with draw keys below
    // the present's, so the draw puts every absent person ahead of every person present), and the door crosses the
    // drawn segment.
    let drawn = std::env::var("WAITROOM_DRAWN").is_ok_and(|v| v == "1");
    let clock = ManualClock::new(1_800_000_000_000);
    let opens = clock.now_ms() + 100_250;
    let server = waitroom_testkit::redis::RedisServer::from_env_or_start();
    // Nothing persisted, as `scripts/soak_redis.py` runs it: the test servers keep an append-only file (for the
    // restart tests), whose rewrites fork, and after a fork the writes of a large Redis fault page by page; runs
    // with it had calls of 20 to 100 ms that were the rewrites', not the scripts' (`Redis forks` below says how many
    // ran).
    server.command(&["CONFIG", "SET", "appendonly", "no"]);
    let store = RedisStore::connect(server.url()).await.unwrap();
    let event = format!("crossing-{}", std::process::id());
    let mut builder = WaitingRoom::builder(&event);
    if drawn {
        builder = builder.fairness(waitroom_layer::Fairness::RandomAtOpen {
            opens_at: std::time::UNIX_EPOCH + Duration::from_millis(opens),
        });
    }
    let room = builder
        .capacity(1)
        .poll_interval(Duration::from_secs(20))
        .abandon_after(Duration::from_secs(60))
        .arrival_window(Duration::from_secs(30))
        .idle_timeout(Duration::from_secs(300))
        .straight_in(false)
        .cookie_secret(*b"a-cookie-secret-for-one-shot-tst")
        .clock(Arc::new(clock.clone()))
        .background(false)
        .store(store.clone())
        .build()
        .await
        .unwrap();
    if !drawn {
        room.join("inside-aaaaaaaaaaaaaaaa", None).await.unwrap();
        room.tick_now().await.unwrap();
        room.claim("inside-aaaaaaaaaaaaaaaa").await.unwrap();
    }
    // People who redeem a ticket (numbered in the order they were given out), from TASKS tasks at once.
    // People who redeem a ticket (numbered in the order they were given out), in number order.
    // Drawn: the absent's draw keys in the lower 0.9 of the key space, the present's above it.
    let redeemed = |prefix: &'static str, n: u64| {
        let (store, event, t0) = (store.clone(), event.clone(), clock.now_ms());
        async move {
            let mut all = spread(&store, &event, n, move |store, event, i| async move {
                let (number, draw_key) = if drawn {
                    let split = u64::MAX / 10 * 9;
                    let key = rand::random::<u64>() % split;
                    (
                        0,
                        if prefix == "here" {
                            split + key / 9
                        } else {
                            key
                        },
                    )
                } else {
                    let Ticket::Number(number) = store.ticket(&event, t0).await.unwrap() else {
                        panic!("a numbered ticket");
                    };
                    (number, 0)
                };
                let r = Redeem {
                    session: format!("{prefix}{i:018}"),
                    number: (!drawn).then_some(number),
                    issued_ms: t0,
                    now_ms: t0,
                    grace_ms: 60_000,
                    draw_key,
                };
                store.redeem(&event, &r).await.unwrap().expect("a place");
                (r.session, number)
            })
            .await;
            all.sort_by_key(|p| p.1);
            all
        }
    };
    let started = Instant::now();
    redeemed("away", absent).await;
    let present = redeemed("here", PRESENT).await;
    println!(
        "{absent} absent and {PRESENT} present people in line in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let poll_all = |room: &WaitingRoom| {
        let (room, present) = (room.clone(), present.clone());
        async move {
            for (s, n) in &present {
                room.locate_marked(s, (!drawn).then_some(*n), drawn)
                    .await
                    .unwrap();
            }
        }
    };
    // A minute on: the absent are past their abandon grace; the people present have polled. Drawn: 100 s on, the
    // present polling (marked in the last stretch before the opening); the crossing's first tick draws.
    for _ in 0..if drawn { 5 } else { 3 } {
        clock.advance(Duration::from_secs(20));
        poll_all(&room).await;
        room.tick_now().await.unwrap();
    }
    server.command(&["CONFIG", "SET", "slowlog-log-slower-than", "500"]);
    server.command(&["CONFIG", "SET", "slowlog-max-len", "100000"]);
    // As `scripts/soak_redis.py` does: Redis's main thread at SCHED_FIFO 10 (as root), so that on a 2-core box
    // shared with this process's joins and ticks `SLOWLOG` times the commands rather than their waits for a core.
    let fifo = server.pid().is_some_and(|pid| {
        std::process::Command::new("chrt")
            .args(["-f", "-p", "10", &pid.to_string()])
            .status()
            .is_ok_and(|s| s.success())
    });
    // The kernel lets real-time tasks run 950 ms of each second (`sched_rt_runtime_us`) and then stops them for the
    // rest ("sched: RT throttling activated" in the kernel's log): the crossing keeps Redis busy for seconds, so at
    // SCHED_FIFO it was stopped for some 50 ms at a time, in the middle of whatever command ran, which `SLOWLOG`
    // timed as a command of 40 to 100 ms. Lifted for the crossing (as root) and put back after it.
    struct RtRuntime(Option<String>);
    impl Drop for RtRuntime {
        fn drop(&mut self) {
            if let Some(v) = &self.0 {
                let _ = std::fs::write("/proc/sys/kernel/sched_rt_runtime_us", v);
            }
        }
    }
    const RT: &str = "/proc/sys/kernel/sched_rt_runtime_us";
    let rt = RtRuntime(if fifo {
        std::fs::read_to_string(RT)
            .ok()
            .filter(|_| std::fs::write(RT, "-1").is_ok())
    } else {
        None
    });
    println!(
        "Redis at {}{}",
        if fifo {
            "SCHED_FIFO 10"
        } else {
            "normal priority (chrt failed or an external server)"
        },
        if rt.0.is_some() {
            ", the real-time throttling lifted"
        } else {
            ", the real-time throttling as it was"
        }
    );
    server.command(&["SLOWLOG", "RESET"]);
    let stop = Arc::new(AtomicBool::new(false));
    let joiner = {
        let (room, stop) = (room.clone(), stop.clone());
        tokio::spawn(async move {
            let mut times = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let at = Instant::now();
                room.join(&format!("late{:018}", times.len()), None)
                    .await
                    .unwrap();
                times.push(at.elapsed().as_secs_f64() * 1e3);
            }
            times
        })
    };
    if !drawn {
        assert!(room.finish("inside-aaaaaaaaaaaaaaaa", 0).await.unwrap());
    }
    let first = &present[0].0;
    let steal_before = steal_seconds();
    let (mut ticks, mut poll_commands, mut tick_commands) = (0u64, 0u64, 0u64);
    let crossing = Instant::now();
    // Until the first person present is let in (the door's crossing), then on until every absent person is
    // written missed behind the head (the sweep), the joins going on all along.
    let mut let_in: Option<(u64, f64)> = None;
    let missed_before = room.snapshot().counters.missed;
    loop {
        clock.advance(Duration::from_millis(250));
        let c0 = store.commands_sent();
        let report = room.tick_now().await.unwrap();
        let c1 = store.commands_sent();
        // Nobody but the people present is let in (the joins meanwhile queue behind the line).
        assert!(
            report.admitted.iter().all(|s| s.starts_with("here")),
            "{:?}",
            report.admitted
        );
        ticks += 1;
        if ticks % 80 == 0 {
            poll_all(&room).await;
        }
        poll_commands += store.commands_sent() - c1;
        tick_commands += c1 - c0;
        if let_in.is_none() {
            // Drawn: nobody was inside, so the first let in is the first person present in the draw's order.
            let admitted = if drawn {
                !report.admitted.is_empty()
            } else {
                let p = room.locate(first, Some(present[0].1)).await.unwrap();
                p.is_some_and(|p| p.state == SessionState::Admitted)
            };
            if admitted {
                let_in = Some((ticks, crossing.elapsed().as_secs_f64()));
            }
        }
        let swept = room.snapshot().counters.missed - missed_before >= absent;
        if let_in.is_some() && swept {
            break;
        }
        assert!(
            ticks < 10_000,
            "the first person present was not let in, or the absent never all missed"
        );
    }
    drop(rt);
    let (door_ticks, door_s) = let_in.unwrap();
    // The test's Redis keeps an append-only file: a rewrite of it forks, and a fork of a large Redis stalls its
    // main thread (`latest_fork_usec`), which `SLOWLOG` times as a long command.
    let stats = server.command(&["INFO", "stats"]);
    let forks: Vec<&str> = stats
        .lines()
        .filter(|l| l.starts_with("total_forks") || l.starts_with("latest_fork_usec"))
        .map(str::trim)
        .collect();
    println!("Redis forks: {forks:?}");
    let crossing_s = crossing.elapsed().as_secs_f64();
    // The machine's steal time meanwhile (a virtual machine's cores taken away: a Redis command caught in it is
    // timed long by `SLOWLOG` whatever its priority here).
    println!(
        "steal during the crossing: {:.2} s of the cores' time in {crossing_s:.1} s",
        steal_seconds() - steal_before
    );
    println!(
        "the first person present let in at tick {door_ticks} ({door_s:.2} s); every absent person written missed \
         by tick {ticks} ({crossing_s:.1} s)"
    );
    stop.store(true, Ordering::Relaxed);
    let mut joins = joiner.await.unwrap();
    joins.sort_by(f64::total_cmp);
    let q = |p: f64| joins[((joins.len() as f64 * p) as usize).min(joins.len() - 1)];
    // (µs, the command and its first argument, and a script's first four ARGV after its 18 keys) of each entry.
    let mut logged: Vec<(i64, String)> = slowlog(server.url(), 100_000)
        .await
        .into_iter()
        .map(|(us, args)| {
            let words: Vec<String> = args
                .iter()
                .take(2)
                .chain(args.iter().skip(21).take(4))
                .map(|a| match a {
                    ::redis::Value::BulkString(b) => {
                        String::from_utf8_lossy(&b[..b.len().min(24)]).into_owned()
                    }
                    other => format!("{other:?}"),
                })
                .collect();
            (us, words.join(" "))
        })
        .collect();
    logged.sort_by_key(|b| std::cmp::Reverse(b.0));
    let mut over_5ms: std::collections::BTreeMap<String, usize> = Default::default();
    for (_, what) in logged.iter().filter(|e| e.0 > 5_000) {
        let name = what.split(' ').next().unwrap_or("").to_uppercase();
        *over_5ms.entry(name).or_default() += 1;
    }
    println!(
        "the longest: {:?}; over 5 ms by command: {over_5ms:?}",
        &logged[..logged.len().min(6)]
    );
    let us: Vec<i64> = logged.iter().map(|e| e.0).collect();
    println!(
        "crossing {absent} absent: {ticks} ticks ({crossing_s:.1} s of wall time); longest Redis command {} µs, {} \
         over 500 µs, {} over 5 ms; {} joins meanwhile, p50 {:.2} ms, p99 {:.2} ms, worst {:.2} ms; the polls of \
         {PRESENT} people every 80 ticks sent {poll_commands} Redis commands, the ticks {tick_commands}",
        us.iter().max().copied().unwrap_or(0),
        us.len(),
        us.iter().filter(|&&u| u > 5_000).count(),
        joins.len(),
        q(0.5),
        q(0.99),
        joins.last().copied().unwrap_or(0.0)
    );
}

/// The machine's steal time so far, all cores (`/proc/stat`), in seconds; 0 where it cannot be read.
fn steal_seconds() -> f64 {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            s.lines()
                .next()?
                .split_whitespace()
                .nth(8)?
                .parse::<f64>()
                .ok()
        })
        .map_or(0.0, |ticks| ticks / 100.0)
}

/// A hash growing to the crowd's size on a fresh Redis: 1,100,000 fields of 22-character ids and 12-byte values
/// (the sessions hash's shape), `WAITROOM_FIELDS_PER_HSET` fields an `HSET` (default 1; the pre-queue marks' are
/// `TOUCH_CHUNK`), pipelined 1,000 fields a round trip. Printed: the `SLOWLOG` entries over 500 µs (Redis grows a
/// hash's table all at once and moves a bucket into the new one at each field written, so the `HSET`s after a power
/// of two are the slow ones) and the hash's size at each.
/// `WAITROOM_FIELDS_PER_HSET=64 cargo test -p waitroom-layer --release --features redis --test one_shot measure_one_hash_growing -- --ignored --nocapture`
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement for BENCHMARKS.md"]
async fn measure_one_hash_growing_past_a_million_fields() {
    const FIELDS: usize = 1_100_000;
    let per: usize = std::env::var("WAITROOM_FIELDS_PER_HSET")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| (1..=1_000).contains(&n))
        .unwrap_or(1);
    let server = waitroom_testkit::redis::RedisServer::start();
    server.command(&["CONFIG", "SET", "slowlog-log-slower-than", "500"]);
    server.command(&["CONFIG", "SET", "slowlog-max-len", "10000"]);
    server.command(&["SLOWLOG", "RESET"]);
    let client = ::redis::Client::open(server.url()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    // When each `HSET` ran, by the hash's size: the slow ones are matched to it by their field.
    let mut at = std::collections::HashMap::new();
    for round in 0..FIELDS / 1_000 {
        let mut pipe = ::redis::pipe();
        for first in (0..1_000).step_by(per) {
            let cmd = pipe.cmd("HSET").arg("h");
            for i in first..(first + per).min(1_000) {
                let id = WaitingRoom::new_session_id();
                at.insert(id.clone(), round * 1_000 + i + 1);
                cmd.arg(id).arg("w-twelve-byt");
            }
            cmd.ignore();
        }
        pipe.query_async::<()>(&mut con).await.unwrap();
    }
    let mut slow: Vec<(i64, usize)> = slowlog(server.url(), 10_000)
        .await
        .into_iter()
        .filter_map(|(us, args)| match args.get(2) {
            Some(::redis::Value::BulkString(f)) => {
                Some((us, *at.get(String::from_utf8_lossy(f).as_ref())?))
            }
            _ => None,
        })
        .collect();
    slow.sort_by_key(|s| std::cmp::Reverse(s.0));
    println!(
        "{FIELDS} fields into one hash, {per} an HSET: {} HSETs over 500 µs; the slowest (µs at the field count of \
         its first field): {:?}",
        slow.len(),
        &slow[..slow.len().min(10)]
    );
}
