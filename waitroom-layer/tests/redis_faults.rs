//! Faults of a real redis-server under the room layer over real HTTP (issue 21): a finish made while Redis is
//! down is kept and retried, not lost; a Redis that comes back empty gets the on-sale back and everyone's place. The room's clock is manual and the door moves by hand; nothing sleeps.
#![cfg(feature = "redis")]

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use waitroom_layer::{Clock, ManualClock, RedisStore, STATE_HEADER, WaitingRoom, WaitingRoomLayer};
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
    let status = status_of(b, url).await;
    status["state"].as_str().expect("a state").to_owned()
}

/// `room` (10-minute idle timeout, manual clock, no background task, plain-HTTP cookies) over `store`, guarding a
/// seat map at `/checkout` and a payment at `/checkout/buy` that finishes the session; served on a free port.
async fn checkout(
    room: waitroom_layer::RoomBuilder,
    store: RedisStore,
    clock: &ManualClock,
) -> (WaitingRoom, String) {
    let room = room
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
    (room, serve(app).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finish_made_while_redis_is_down_is_kept_and_frees_the_place_once_redis_is_back() {
    let mut server = RedisServer::start();
    let store = RedisStore::connect(server.url()).await.unwrap();
    let clock = ManualClock::starting_now();
    let room = WaitingRoom::builder(event("finish-outage")).capacity(1);
    let (room, url) = checkout(room, store, &clock).await;

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

/// A browser comes to the protected page (a join, or its place as it stands): never a 5xx.
async fn arrive(b: &reqwest::Client, url: &str) {
    let res = b.get(format!("{url}/checkout")).send().await.unwrap();
    assert!(res.status().as_u16() < 500, "a 5xx: {}", res.status());
}

/// The status a browser gets: never a 5xx.
async fn status_of(b: &reqwest::Client, url: &str) -> serde_json::Value {
    let res = b
        .get(format!("{url}/waitroom/status"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert!(res.status().as_u16() < 500, "a 5xx: {}", res.status());
    res.json().await.unwrap()
}

fn number_of(status: &serde_json::Value) -> Option<u64> {
    status["number"].as_u64()
}

/// The line numbers Redis holds for waiting sessions (records `w` + the number in 5 bytes + a time in 6, big-endian,
/// in the sessions hash; decoded in Redis, since the records are binary).
fn waiting_numbers(server: &RedisServer, store: &RedisStore, event: &str) -> Vec<u64> {
    let key = store.key(event, "sessions");
    let decode = "local o = {} for _, v in ipairs(redis.call('HVALS', KEYS[1])) do \
                  if string.sub(v, 1, 1) == 'w' then o[#o + 1] = string.format('%d', struct.unpack('>I5', v, 2)) end \
                  end return o";
    let all = server.command(&["EVAL", decode, "1", &key]);
    let mut numbers: Vec<u64> = all.lines().filter_map(|n| n.parse().ok()).collect();
    numbers.sort_unstable();
    numbers
}

/// A room of capacity 1 over a Redis of its own, six people in line through it (each came once and polled once,
/// so each holds a number), and a tick (the first let in, the snapshot showing the numbers): the server, the
/// store, the event, the room, its address, the people, and the numbers their polls answered.
async fn six_in_line(
    tag: &str,
) -> (
    RedisServer,
    RedisStore,
    String,
    WaitingRoom,
    String,
    Vec<reqwest::Client>,
    Vec<Option<u64>>,
) {
    let server = RedisServer::start();
    let store = RedisStore::connect(server.url()).await.unwrap();
    let ev = event(tag);
    let clock = ManualClock::starting_now();
    let room = WaitingRoom::builder(ev.clone())
        .capacity(1)
        .poll_interval(Duration::from_secs(2));
    let (room, url) = checkout(room, store.clone(), &clock).await;
    let people: Vec<reqwest::Client> = (0..6).map(|_| browser()).collect();
    for p in &people {
        arrive(p, &url).await;
    }
    let mut numbers = Vec::new();
    for p in &people {
        numbers.push(number_of(&status_of(p, &url).await));
    }
    room.tick_now().await.unwrap();
    (server, store, ev, room, url, people, numbers)
}

/// Redis comes back empty and the first to find out is a first contact in an open line, whose batch takes its
/// number with a lone `HINCRBY` (no script to answer that the on-sale is unknown): the counter behind the room's
/// numbers tells it, the on-sale is restored with its settings, and the newcomer's number comes after everyone's,
/// not one of theirs (a number the head passed would have put them in front).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_contact_that_finds_redis_empty_gets_a_number_after_everyone_and_the_on_sale_back()
{
    let (server, store, ev, room, url, people, numbers) = six_in_line("forgotten-ticket").await;
    assert_eq!(numbers, (1..=6).map(Some).collect::<Vec<_>>());
    assert_eq!(room.snapshot().last_number, 6);

    // Redis loses everything under the room's open connection (as a restart without persistence does, once the
    // connection is back), so the newcomer's ticket call is the first to meet it.
    assert_eq!(server.command(&["FLUSHALL"]), "OK");
    assert_eq!(server.command(&["DBSIZE"]), "0");
    // The newcomer comes before any round of the room's.
    let newcomer = browser();
    let mut number = None;
    for _ in 0..10 {
        arrive(&newcomer, &url).await;
        number = number_of(&status_of(&newcomer, &url).await);
        if number.is_some() {
            break;
        }
    }
    let number = number.expect("the newcomer has a number within 10 tries");
    assert!(
        number > 6,
        "after everyone in line, not one of their numbers: {number}"
    );
    let meta = store.key(&ev, "meta");
    assert_eq!(
        server.command(&["HGET", &meta, "cap"]),
        "1",
        "the on-sale is back with its settings"
    );
    for (i, p) in people.iter().enumerate().skip(1) {
        let s = status_of(p, &url).await;
        assert_eq!(
            number_of(&s),
            Some(i as u64 + 1),
            "{i} keeps its number: {s}"
        );
    }
    let s = status_of(&newcomer, &url).await;
    assert_eq!(
        s["position"], 6,
        "behind the five waiting and the one let in: {s}"
    );
}

/// Redis loses its latest writes (a failover to a replica that lagged: its counter goes back from 6 to 2) and the
/// first to find out is a first contact in an open line: no number the room saw given out is given again (the
/// room gives Redis the floor back and asks again), and the newcomer goes after everyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_contact_that_finds_redis_behind_gets_a_number_after_everyone() {
    let (server, store, ev, room, url, _, _) = six_in_line("behind-ticket").await;
    assert_eq!(room.snapshot().last_number, 6);
    let meta = store.key(&ev, "meta");
    assert_eq!(server.command(&["HSET", &meta, "last", "2"]), "0");
    let newcomer = browser();
    arrive(&newcomer, &url).await;
    let number = number_of(&status_of(&newcomer, &url).await).expect("a number");
    assert!(number > 6, "after everyone the room saw numbered: {number}");
}

/// Redis is killed mid-sale and comes back empty (no persistence): the room restores the on-sale from its own view,
/// takes everyone back at the number in their cookie as they poll, lets newcomers in behind them, and the line
/// resumes in order after the hold (one poll interval with the page's jitter, plus a second), with no 5xx anywhere
/// and no number given twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_restarts_empty_mid_sale_gives_everyone_their_place_back_and_the_line_resumes_in_order()
 {
    let mut server = RedisServer::start();
    let store = RedisStore::connect(server.url()).await.unwrap();
    let ev = event("forgotten");
    let clock = ManualClock::starting_now();
    let poll = Duration::from_secs(2);
    let room = WaitingRoom::builder(ev.clone())
        .capacity(2)
        .poll_interval(poll);
    let (room, url) = checkout(room, store.clone(), &clock).await;

    // Eight people join in order; two go in and take the seat map.
    let people: Vec<reqwest::Client> = (0..8).map(|_| browser()).collect();
    for p in &people {
        arrive(p, &url).await;
    }
    room.tick_now().await.unwrap();
    for p in &people[..2] {
        let body = p.get(format!("{url}/checkout")).send().await.unwrap();
        assert_eq!(body.text().await.unwrap(), "seat map");
    }
    let mut numbers = Vec::new();
    for p in &people {
        numbers.push(number_of(&status_of(p, &url).await));
    }
    assert_eq!(numbers, (1..=8).map(Some).collect::<Vec<_>>());
    assert_eq!(
        waiting_numbers(&server, &store, &ev),
        vec![3, 4, 5, 6, 7, 8]
    );

    // Redis is killed and comes back with nothing.
    server.restart_empty();
    assert_eq!(server.command(&["DBSIZE"]), "0");

    // The room's next rounds notice and restore the on-sale (the first may meet the dead connection).
    let mut rounds = 0;
    while room.tick_now().await.is_err() {
        rounds += 1;
        assert!(
            rounds < 10,
            "the room did not get the on-sale back within 10 rounds"
        );
    }
    let restored_at = clock.now_ms();
    assert!(
        room.metrics_text()
            .contains("waitroom_store_restores_total{event=")
    );

    // A newcomer joins behind everyone (not a 503), and everyone in line polls and gets their place back.
    // The newcomer is held, not refused.
    let newcomer = browser();
    arrive(&newcomer, &url).await;
    assert_eq!(number_of(&status_of(&newcomer, &url).await), Some(9));
    for (i, p) in people.iter().enumerate().skip(2) {
        let s = status_of(p, &url).await;
        assert_eq!(s["state"], "waiting", "{i}: {s}");
        assert_eq!(number_of(&s), Some(i as u64 + 1), "{i} keeps its number");
        assert_eq!(s["position"], i as u64 - 1, "{i}: {s}");
    }
    assert_eq!(
        waiting_numbers(&server, &store, &ev),
        vec![3, 4, 5, 6, 7, 8, 9],
        "every number held once"
    );

    // Nobody goes in during the hold; then the line resumes in order.
    let hold = poll.as_millis() as u64 * 6 / 5 + 1_000;
    assert!(room.tick_now().await.unwrap().admitted.is_empty());
    let mut order = Vec::new();
    let everyone: Vec<&reqwest::Client> = people.iter().skip(2).chain([&newcomer]).collect();
    let mut resumed_after_ms = None;
    for _ in 0..40 {
        clock.advance(Duration::from_millis(500));
        // Everyone still in line polls, as their pages do (their liveness).
        for p in &everyone {
            status_of(p, &url).await;
        }
        let r = room.tick_now().await.unwrap();
        if !r.admitted.is_empty() && resumed_after_ms.is_none() {
            resumed_after_ms = Some(clock.now_ms() - restored_at);
        }
        for (i, p) in everyone.iter().enumerate() {
            if order.contains(&i) {
                continue;
            }
            if state_of(p, &url).await == "admitted" {
                order.push(i);
                // Takes the seat map and pays: the place goes to the next.
                let body = p.get(format!("{url}/checkout")).send().await.unwrap();
                assert_eq!(body.text().await.unwrap(), "seat map");
                let res = p.post(format!("{url}/checkout/buy")).send().await.unwrap();
                assert_eq!(res.text().await.unwrap(), "bought");
            }
        }
        if order.len() == everyone.len() {
            break;
        }
    }
    let resumed_after_ms = resumed_after_ms.expect("the line resumed");
    eprintln!(
        "restored after {rounds} failed rounds; first admission {resumed_after_ms} ms after the restore (hold {hold} ms)"
    );
    assert!(
        resumed_after_ms >= hold && resumed_after_ms <= hold + 500 + 2_000,
        "the line resumes right after the hold: {resumed_after_ms} ms (hold {hold} ms)"
    );
    assert_eq!(
        order,
        (0..7).collect::<Vec<_>>(),
        "in line order, newcomer last"
    );
}
