//! Three room instances over one real redis-server, driven through real HTTP: real axum servers on ephemeral
//! ports, real `reqwest` clients with cookie stores, one `RedisStore` per instance, one on-sale, one signing key
//! (from a PEM, as every instance would load it from a key file) and one cookie secret.
//!
//! - `a_finish_through_the_redis_sink_frees_the_place_at_once`: the verify crate's `RedisFinishSink`
//!   reaches a room over `RedisStore`.
//! - `an_instance_started_mid_sale_refuses_the_tokens_of_sessions_finished_before`: a room instance built after
//!   finishes (the room's own and a `RedisFinishSink`'s) refuses those sessions' tokens from its first request.
//! - `three_instances_one_line_thousands_of_sessions`: 2,000 sessions join, poll, get in, use their token and
//!   buy, on the three instances at random; the active count never exceeds the capacity; a line number is the
//!   same whichever instance tells it; no 5xx.
//! - `redis_down_mid_run_holds_the_line_and_it_resumes_in_order`: redis-server stops and starts again.
#![cfg(feature = "redis")]

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::Extension;
use axum::routing::post;
use serde_json::Value;
use tokio::sync::Semaphore;

use waitroom_layer::store::{
    Join, Placement, Reclaim, Redeem, Restore, Return, Settings, SettingsChange, Snapshot, Store,
    Tick, TickReport, Ticket, Touches,
};
use waitroom_layer::{ManualClock, RedisStore, SessionState, StoreError, WaitingRoom};
use waitroom_testkit::redis::RedisServer;
use waitroom_verify::redis::RedisFinishSink;
use waitroom_verify::{Admission, Clock, Finish, Refusal, SystemClock, Verifier, VerifyLayer};

mod support;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finish_through_the_redis_sink_frees_the_place_at_once() {
    let server = RedisServer::from_env_or_start();
    let ev = event("sink");
    let clock = ManualClock::starting_now();
    let keys = Keys::new();
    let room = WaitingRoom::builder(&ev)
        .capacity(1)
        .signing_key(keys.signing_key())
        .clock(Arc::new(clock.clone()))
        .background(false)
        .store(RedisStore::connect(server.url()).await.unwrap())
        .build()
        .await
        .unwrap();
    let (a, b) = (WaitingRoom::new_session_id(), WaitingRoom::new_session_id());
    room.join(&a, None).await.unwrap();
    assert_eq!(room.tick_now().await.unwrap().admitted, vec![a.clone()]);
    assert_eq!(
        room.claim(&a).await.unwrap().unwrap().state,
        SessionState::Active
    );
    room.refresh().await.unwrap();
    assert_eq!(room.stats().active, 1);
    let token = room.issue_token(&a).unwrap();

    // The order service: its own process, no room, a Redis finish sink.
    let order_verifier = Verifier::builder()
        .keys(&keys.signing_key())
        .issuer("waitroom")
        .audience(&ev)
        .clock(Arc::new(clock.clone()))
        .build()
        .unwrap();
    let sink = RedisFinishSink::connect(server.url()).await.unwrap();
    let app = Router::new().route(
        "/buy",
        post(|Extension(a): Extension<Admission>| async move {
            a.finish_with_seats(2);
            "bought"
        })
        .layer(VerifyLayer::new(order_verifier).finish_sink(sink.clone())),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let res = reqwest::Client::new()
        .post(format!("http://{addr}/buy"))
        .header(
            "cookie",
            format!("waitroom_session={a}; waitroom_token={token}"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(sink.recorded(), 1);

    // The sink finished the session in the store at once, in one script with its stream entry: the place is free
    // (the active count drops) and the seats count before any tick.
    room.refresh().await.unwrap();
    let stats = room.stats();
    assert_eq!(
        (
            stats.active,
            stats.counters.finished,
            stats.counters.seats_bought
        ),
        (0, 1, 2)
    );
    assert_eq!(
        room.store().lookup(&ev, &a).await.unwrap().unwrap().state,
        SessionState::Finished
    );
    // The room's own deny list learns it from the stream at its next tick; that tick does not apply the finish a
    // second time (the counters stay), and the token is refused by the room too.
    assert!(!room.finished_recently(&a));
    clock.advance(Duration::from_millis(250));
    assert!(room.tick_now().await.unwrap().admitted.is_empty());
    let stats = room.stats();
    assert_eq!(
        (
            stats.active,
            stats.counters.finished,
            stats.counters.seats_bought
        ),
        (0, 1, 2)
    );
    assert!(room.finished_recently(&a));
    assert_eq!(room.verifier().verify(&token), Err(Refusal::Finished));
    assert_eq!(
        room.store().lookup(&ev, &a).await.unwrap().unwrap().state,
        SessionState::Finished
    );
    room.join(&b, None).await.unwrap();
    clock.advance(Duration::from_millis(250));
    assert_eq!(room.tick_now().await.unwrap().admitted, vec![b]);
}

/// An instance started (or restarted) mid-sale refuses the token of a session finished before it started, whether
/// the room finished it or a verifier's Redis finish sink did: it reads the finish stream back over the tokens'
/// life when it is built, before its first request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_started_mid_sale_refuses_the_tokens_of_sessions_finished_before() {
    let server = RedisServer::from_env_or_start();
    let ev = event("late");
    let keys = Keys::new();
    let setup = Setup {
        target: server.url().into(),
        event: &ev,
        keys: &keys,
        capacity: 5,
        background: false,  // the door moves when the test ticks it
        straight_in: false, // it follows sessions through the line
    };
    let first = instance(&setup).await;

    // Three people get in on the first instance; their tokens open the protected page.
    let mut people = Vec::new();
    for _ in 0..3 {
        let b = browser();
        let res = b.get(first.at("/checkout")).send().await.unwrap();
        assert_eq!(state(&res), "waiting");
        let session = session_of(&res).unwrap();
        people.push(Person {
            b,
            session,
            number: 0,
        });
    }
    assert_eq!(first.room.tick_now().await.unwrap().admitted.len(), 3);
    for p in &people {
        let (_, json) = poll_json(p, &first).await;
        assert_eq!(json["state"], "admitted");
        assert!(passes(p, &first).await);
    }

    // The first finishes through the room, the second through the order service's Redis finish sink (a process
    // without a room); the third keeps shopping.
    assert!(first.room.finish(&people[0].session, 1).await.unwrap());
    let sink = RedisFinishSink::connect(server.url()).await.unwrap();
    // Redis forgets the scripts (as after a restart): the sink loads its own again on `NOSCRIPT`.
    server.command(&["SCRIPT", "FLUSH"]);
    sink.record(&Finish {
        session_id: people[1].session.clone(),
        event: ev.clone(),
        seats: 2,
        at_ms: SystemClock.now_ms(),
    })
    .await
    .unwrap();

    assert_eq!((sink.recorded(), sink.failed()), (1, 0));
    first.room.refresh().await.unwrap();
    assert_eq!(
        first.room.stats().active,
        1,
        "the sink's finish counts at once"
    );

    // A new instance over the same Redis (same key, same cookie secret), as after a restart or a scale-up.
    let second = instance(&setup).await;
    for p in &people[..2] {
        assert!(second.room.finished_recently(&p.session));
        assert!(
            !passes(p, &second).await,
            "a finished session's token passed"
        );
    }
    assert!(!second.room.finished_recently(&people[2].session));
    assert!(passes(&people[2], &second).await);
    // The first instance knows them too once it has read the stream (its own finish at once). (No HTTP here: the
    // refused browsers were put back in line under new sessions, which this tick may let in.)
    assert!(first.room.finished_recently(&people[0].session));
    first.room.tick_now().await.unwrap();
    assert!(
        people[..2]
            .iter()
            .all(|p| first.room.finished_recently(&p.session))
    );
    assert!(!first.room.finished_recently(&people[2].session));
}

/// What every poll told, per session.
#[derive(Default)]
struct Seen {
    /// Session -> (its line number, the instances that told it).
    numbers: Mutex<HashMap<String, (u64, u8)>>,
    requests: AtomicU64,
    five_xx: AtomicU64,
    /// Joins answered `not_in_line` (the store timed out) and tried again, as the holding page does.
    join_retries: AtomicU64,
    mismatches: Mutex<Vec<String>>,
}

impl Seen {
    fn status(&self, what: &str, status: u16) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if status >= 500 {
            self.five_xx.fetch_add(1, Ordering::Relaxed);
            self.mismatches
                .lock()
                .unwrap()
                .push(format!("{what}: {status}"));
        }
    }

    fn number(&self, session: &str, number: u64, instance: usize) {
        let mut m = self.numbers.lock().unwrap();
        let e = m.entry(session.to_owned()).or_insert((number, 0));
        if e.0 != number {
            self.mismatches.lock().unwrap().push(format!(
                "{session}: number {number} on instance {instance}, {} before",
                e.0
            ));
        }
        e.1 |= 1 << instance;
    }
}

const SESSIONS: usize = 2_000;
const CAPACITY: u64 = 20;
/// The run stops once this many people went through (the door's capacity filled and freed ten times over), so the
/// test counts work done, not work per second: a loaded machine takes longer, not fewer.
const TARGET_SERVED: u64 = 10 * CAPACITY;
/// How long the crowd runs at most (a bound for a hang, far above what the target takes on an idle 2-core
/// machine); whoever is still in line then stops polling.
const BUDGET: Duration = Duration::from_secs(180);

/// `WR_SESSIONS` overrides the crowd's size (for a quick local run).
fn sessions() -> usize {
    std::env::var("WR_SESSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(SESSIONS)
}

/// What the crowd shares: the instances, a bound on requests in flight, what was seen, and the clock of the run.
struct Crowd {
    sites: Vec<Instance>,
    gate: Semaphore,
    seen: Seen,
    served: AtomicU64,
    stop: AtomicBool,
    t0: Instant,
}

impl Crowd {
    /// Sessions served per second so far (at least 5): how fast the line moves, to pace the polls.
    fn rate(&self) -> f64 {
        let secs = self.t0.elapsed().as_secs_f64().max(1.0);
        (self.served.load(Ordering::Relaxed) as f64 / secs).max(5.0)
    }

    async fn send(
        &self,
        what: &str,
        req: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, String> {
        let _permit = self.gate.acquire().await.map_err(|e| e.to_string())?;
        let res = req.send().await.map_err(|e| format!("{what}: {e}"))?;
        self.seen.status(what, res.status().as_u16());
        Ok(res)
    }
}

/// How a person's run ended.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// Got in, used the token, bought.
    Served,
    /// Still in line when the run stopped.
    Waiting,
}

/// One person: joins on a random instance, polls the JSON status on random instances (paced like a page that
/// follows its ETA: rarely far back, every 100 ms near the head), and once let in uses the token on a random
/// instance and buys on another.
/// How many times a visitor tries to join before the run counts it as a failure.
const JOIN_ATTEMPTS: u32 = 5;

async fn visitor(i: usize, crowd: Arc<Crowd>) -> Result<Outcome, String> {
    let mut rng = Rng::new(i as u64 + 1);
    let sites = &crowd.sites;
    let b = browser();
    let pick = |rng: &mut Rng| rng.below(sites.len() as u64) as usize;
    // Join, with the holding page. A join the store could not take in time (its 1 s timeout, reached on a loaded
    // machine) gets the holding page as `not_in_line`, which tries again by itself: so does this visitor, a few
    // times (the page would go on; a visitor that never gets in line is a failure).
    let mut attempts = 0;
    let session = loop {
        attempts += 1;
        let res = crowd
            .send("join", b.get(sites[pick(&mut rng)].at("/checkout")))
            .await?;
        let session = session_of(&res).ok_or("no session cookie on the join")?;
        let st = state(&res);
        drop(res.text().await);
        match st.as_str() {
            "waiting" | "admitted" => break session,
            "not_in_line" if attempts < JOIN_ATTEMPTS => {
                crowd.seen.join_retries.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            _ => return Err(format!("{session} joined as {st} ({attempts} tries)")),
        }
    };
    // Poll until let in. The first two polls go to two different instances whatever the run's length, so every
    // session's number is told by two of them (the third instance is asked in the loop as it happens).
    let first = pick(&mut rng);
    let mut looks = vec![(first + 1 + rng.below(2) as usize) % sites.len(), first];
    let mut gap = Duration::from_millis(rng.below(1_000));
    loop {
        tokio::time::sleep(gap).await;
        let k = match looks.pop() {
            Some(k) => k,
            None if crowd.stop.load(Ordering::Relaxed) => return Ok(Outcome::Waiting),
            None => pick(&mut rng),
        };
        let res = crowd
            .send(
                "poll",
                b.get(sites[k].at("/waitroom/status?return_to=%2Fcheckout"))
                    .header("accept", "application/json"),
            )
            .await?;
        let json: Value = res.json().await.map_err(|e| e.to_string())?;
        if let Some(n) = json["number"].as_u64() {
            crowd.seen.number(&session, n, k);
        }
        match json["state"].as_str() {
            Some("admitted") if looks.is_empty() => break,
            Some("admitted") => gap = Duration::ZERO,
            Some("waiting") if !looks.is_empty() => gap = Duration::ZERO,
            Some("waiting") => {
                // Come back when about half the places ahead are gone; every 100 ms once near the door.
                let ahead = json["position"]
                    .as_u64()
                    .unwrap_or(1)
                    .saturating_sub(CAPACITY);
                let ms = ((ahead as f64 / crowd.rate()) * 500.0) as u64;
                let ms = ms.clamp(100, 5_000);
                gap = Duration::from_millis(ms * 3 / 4 + rng.below(ms / 2));
            }
            other => return Err(format!("{session} was told {other:?}: {json}")),
        }
    }
    // In: the token opens a protected page on some instance, and the order goes through on another.
    let res = crowd
        .send("protected", b.get(sites[pick(&mut rng)].at("/checkout")))
        .await?;
    let body = res.text().await.map_err(|e| e.to_string())?;
    if body != "seat map" {
        return Err(format!("{session} with a token got {body:.80}"));
    }
    let res = crowd
        .send("buy", b.post(sites[pick(&mut rng)].at("/checkout/buy")))
        .await?;
    if res.headers().contains_key("waitroom-command") {
        return Err("the finish header leaked to the browser".into());
    }
    let body = res.text().await.map_err(|e| e.to_string())?;
    if body != format!("bought for {session}") {
        return Err(format!("{session} could not buy: {body:.80}"));
    }
    crowd.served.fetch_add(1, Ordering::Relaxed);
    Ok(Outcome::Served)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_one_line_thousands_of_sessions() {
    let n = sessions();
    let server = RedisServer::from_env_or_start();
    let ev = event("three");
    let keys = Keys::new();
    let setup = Setup {
        target: server.url().into(),
        event: &ev,
        keys: &keys,
        capacity: CAPACITY,
        background: true,
        straight_in: false, // it follows sessions through the line
    };
    let crowd = Arc::new(Crowd {
        sites: instances(&setup, 3).await,
        gate: Semaphore::new(64),
        seen: Seen::default(),
        served: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        t0: Instant::now(),
    });
    let probe = RedisStore::connect(server.url()).await.unwrap();

    // The sampler: the shared active count straight from Redis, and each instance's view of it.
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (done, crowd, probe, ev) = (done.clone(), crowd.clone(), probe.clone(), ev.clone());
        tokio::spawn(async move {
            let (mut samples, mut max_store, mut max_local) = (0u64, 0u64, 0u64);
            while !done.load(Ordering::Relaxed) {
                if let Ok(s) = probe.snapshot(&ev).await {
                    samples += 1;
                    max_store = max_store.max(s.active);
                }
                for site in &crowd.sites {
                    max_local = max_local.max(site.room.stats().active);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            (samples, max_store, max_local)
        })
    };
    let stopper = {
        let crowd = crowd.clone();
        tokio::spawn(async move {
            while crowd.served.load(Ordering::Relaxed) < TARGET_SERVED
                && crowd.t0.elapsed() < BUDGET
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            crowd.stop.store(true, Ordering::Relaxed);
        })
    };

    let tasks: Vec<_> = (0..n)
        .map(|i| tokio::spawn(visitor(i, crowd.clone())))
        .collect();
    let (mut failures, mut served, mut waiting) = (Vec::new(), 0u64, 0u64);
    for t in tasks {
        match tokio::time::timeout(BUDGET + Duration::from_secs(20), t).await {
            Ok(Ok(Ok(Outcome::Served))) => served += 1,
            Ok(Ok(Ok(Outcome::Waiting))) => waiting += 1,
            Ok(Ok(Err(e))) => failures.push(e),
            Ok(Err(e)) => failures.push(format!("task panicked: {e}")),
            Err(_) => failures.push("a visitor did not stop".into()),
        }
    }
    let elapsed = crowd.t0.elapsed();
    stopper.abort();
    done.store(true, Ordering::Relaxed);
    let (samples, max_store, max_local) = sampler.await.unwrap();

    let seen = &crowd.seen;
    let requests = seen.requests.load(Ordering::Relaxed);
    println!(
        "{n} sessions over 3 instances for {elapsed:.1?}: {served} served, {waiting} still in line at the end; \
         {requests} HTTP requests ({:.0}/s); active count sampled {samples} times: max {max_store} in Redis, \
         max {max_local} in any instance's snapshot (capacity {CAPACITY}); {} joins tried again after a store \
         timeout",
        requests as f64 / elapsed.as_secs_f64(),
        seen.join_retries.load(Ordering::Relaxed)
    );
    assert!(
        failures.is_empty(),
        "{} visitors failed, e.g. {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert_eq!(seen.five_xx.load(Ordering::Relaxed), 0, "no 5xx");
    let mismatches = seen.mismatches.lock().unwrap().clone();
    assert!(mismatches.is_empty(), "{mismatches:?}");
    assert!(samples > 100, "only {samples} samples");
    assert!(
        max_store <= CAPACITY,
        "the active count reached {max_store}"
    );
    assert!(max_local <= CAPACITY, "an instance saw {max_local} active");
    assert_eq!(max_store, CAPACITY, "the door was full at some point");
    assert!(
        served >= TARGET_SERVED,
        "places freed and refilled many times over: only {served} served within {BUDGET:?}"
    );

    // Every number once, each told the same by every instance that was asked. A join the store took but whose
    // answer came too late (the `not_in_line` retries above) leaves its number unused and the retry takes the next:
    // so the numbers are 1..=n exactly when nothing was tried again, and otherwise n distinct numbers at most one
    // unused number per retry above n.
    let numbers = seen.numbers.lock().unwrap().clone();
    let mut all: Vec<u64> = numbers.values().map(|(n, _)| *n).collect();
    all.sort_unstable();
    let retries = seen.join_retries.load(Ordering::Relaxed);
    if retries == 0 {
        assert_eq!(all, (1..=n as u64).collect::<Vec<_>>());
    } else {
        let mut distinct = all.clone();
        distinct.dedup();
        assert_eq!(distinct.len(), n, "two sessions share a number");
        let top = *all.last().unwrap();
        assert!(
            all[0] >= 1 && top <= n as u64 + retries,
            "numbers up to {top} for {n} sessions after {retries} joins tried again"
        );
    }
    let multi = numbers
        .values()
        .filter(|(_, mask)| mask.count_ones() >= 2)
        .count();
    let per_instance: Vec<usize> = (0..3)
        .map(|k| numbers.values().filter(|(_, m)| m & (1 << k) != 0).count())
        .collect();
    println!(
        "{multi} sessions were told their number by two or three instances; sessions told by each: \
         {per_instance:?}"
    );
    assert_eq!(multi, n, "every session asked two instances first");
    // The numbers above came back in signed cookies, which every instance trusts: ask each instance's room with
    // no number at all (its store lookup, or its cache of one), so the answers come from the shared line itself.
    for (sid, (number, _)) in numbers.iter().take(500) {
        for (k, site) in crowd.sites.iter().enumerate() {
            let p = site
                .room
                .locate(sid, None)
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("instance {k} does not know {sid}"));
            assert_eq!(p.number, Some(*number), "instance {k} on {sid}");
        }
    }

    // The store's totals agree with what the crowd saw: everyone joined, whoever bought finished, nobody skipped
    // or expired, and the served numbers are the head of the line.
    let snap = probe.snapshot(&ev).await.unwrap();
    let c = snap.counters;
    assert_eq!(
        (c.joined, c.finished, c.abandoned, c.expired),
        (n as u64, served, 0, 0)
    );
    assert!(c.admitted >= served && c.admitted - served <= CAPACITY);
    assert_eq!(
        (snap.active, snap.served),
        (c.admitted - served, c.admitted)
    );
    assert_eq!(snap.last_number, n as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_mid_run_holds_the_line_and_it_resumes_in_order() {
    let mut server = RedisServer::start(); // private: append-only on, stopped and restarted below
    let ev = event("fault");
    let keys = Keys::new();
    let setup = Setup {
        target: server.url().into(),
        event: &ev,
        keys: &keys,
        capacity: 5,
        background: false,  // the door moves when the test ticks it
        straight_in: false, // it follows sessions through the line
    };
    let sites = instances(&setup, 3).await;
    let mut rng = Rng::new(7);

    // Forty people join, round robin over the instances.
    let mut people = Vec::new();
    for i in 0..40 {
        let b = browser();
        let res = b.get(sites[i % 3].at("/checkout")).send().await.unwrap();
        assert_eq!(state(&res), "waiting");
        let session = session_of(&res).unwrap();
        let p = Person {
            b,
            session,
            number: 0,
        };
        let (_, json) = poll_json(&p, &sites[(i + 1) % 3]).await;
        people.push(Person {
            number: json["number"].as_u64().unwrap(),
            ..p
        });
    }
    let numbers: Vec<u64> = people.iter().map(|p| p.number).collect();
    assert_eq!(numbers, (1..=40).collect::<Vec<_>>(), "FIFO, dense");

    // Five are let in and claim their place; two of them buy, freeing two places (no tick yet).
    assert_eq!(sites[0].room.tick_now().await.unwrap().admitted.len(), 5);
    refresh_all(&sites).await; // what each instance's background task does every tick
    for p in &people[..5] {
        let (_, json) = poll_json(p, &sites[rng.below(3) as usize]).await;
        assert_eq!(json["state"], "admitted");
        assert!(passes(p, &sites[rng.below(3) as usize]).await);
    }
    for p in &people[..2] {
        assert!(buys(p, &sites[rng.below(3) as usize]).await);
    }
    // The next tick fills the two places: numbers 6 and 7 are in; active 5, served 7.
    tick_all(&sites).await;
    let before = sites[0].room.stats();
    assert_eq!((before.active, before.served), (5, 7));
    for p in &people[2..7] {
        let (_, json) = poll_json(p, &sites[rng.below(3) as usize]).await;
        assert_eq!(json["state"], "admitted", "{}", p.number);
    }
    // Number 3 buys: one place is free in the store, and no tick has used it.
    assert!(buys(&people[2], &sites[1]).await);
    let free_at_outage = 1;

    // ---- Redis goes away ----
    server.stop();
    let ticks = tick_all(&sites).await;
    assert_eq!(ticks, vec![false; 3], "every tick fails");
    let t0 = Instant::now();
    let mut polls = 0;
    while t0.elapsed() < Duration::from_millis(1_500) {
        for p in &people[7..] {
            let site = &sites[rng.below(3) as usize];
            let (status, json) = poll_json(p, site).await;
            polls += 1;
            assert_eq!(status, 200);
            assert_eq!(json["store_ok"], false);
            assert_eq!(json["state"], "waiting", "nobody new is let in");
            assert_eq!(json["number"], p.number);
            assert_eq!(json["position"], p.number - 7);
        }
        assert_eq!(tick_all(&sites).await, vec![false; 3]);
    }
    // The holding page says the status is unknown and keeps polling.
    let res = people[20]
        .b
        .get(sites[2].at("/checkout"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        (res.status().as_u16(), state(&res).as_str()),
        (200, "waiting")
    );
    let html = res.text().await.unwrap();
    // The page's note, rendered (its words also travel in the page's JSON island, for its script).
    assert!(html.contains(">Status temporarily unknown"), "{html:.300}");
    // The admitted keep passing on their tokens, on every instance.
    for p in &people[3..7] {
        for site in &sites {
            assert!(passes(p, site).await, "number {} on {}", p.number, site.url);
        }
    }
    // A newcomer cannot join: the page says so (200); a JSON client is told 503 with store_ok false.
    let newcomer = browser();
    let res = newcomer.get(sites[0].at("/checkout")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(
        res.text()
            .await
            .unwrap()
            .contains(">Status temporarily unknown")
    );
    let res = newcomer
        .get(sites[0].at("/checkout"))
        .header("accept", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 503);
    assert_eq!(res.json::<Value>().await.unwrap()["store_ok"], false);
    println!("{polls} polls during the outage, all answered 200 with store_ok false");

    // ---- Redis comes back, from its append-only file ----
    server.restart();
    let t0 = Instant::now();
    while tick_all(&sites).await != vec![true; 3] {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the store never came back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("store back {:?} after the restart", t0.elapsed());
    // Nobody lost: every session is where it was, in the store itself.
    let store = sites[0].room.store();
    for p in &people[7..] {
        let place = store.lookup(&ev, &p.session).await.unwrap().unwrap();
        assert_eq!(
            (place.state, place.number),
            (SessionState::Waiting, Some(p.number))
        );
    }
    // The door stays shut for two flush intervals after an outage (every instance sends the liveness it kept),
    // then lets the next in, in order.
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let report = sites[1].room.tick_now().await.unwrap();
    assert_eq!(report.admitted, vec![people[7].session.clone()]);
    assert_eq!(report.admitted.len(), free_at_outage);
    assert!(report.abandoned.is_empty());
    tick_all(&sites).await;
    for p in &people[8..] {
        let (status, json) = poll_json(p, &sites[rng.below(3) as usize]).await;
        assert_eq!(status, 200);
        assert_eq!(json["store_ok"], true);
        assert_eq!(
            (json["number"].as_u64(), json["position"].as_u64()),
            (Some(p.number), Some(p.number - 8))
        );
    }

    // Admission continues to the end, in number order: everyone buys in turn.
    let mut finished: HashSet<u64> = [1, 2, 3].into();
    let mut order = Vec::new();
    let t0 = Instant::now();
    while finished.len() < people.len() {
        assert!(t0.elapsed() < Duration::from_secs(20), "stuck at {order:?}");
        for p in &people {
            if finished.contains(&p.number) {
                continue;
            }
            let (status, json) = poll_json(p, &sites[rng.below(3) as usize]).await;
            assert_eq!(status, 200);
            if json["state"] == "admitted" {
                assert!(passes(p, &sites[rng.below(3) as usize]).await);
                assert!(buys(p, &sites[rng.below(3) as usize]).await);
                finished.insert(p.number);
                order.push(p.number);
            }
        }
        tick_all(&sites).await;
    }
    assert_eq!(
        order,
        (4..=40).collect::<Vec<_>>(),
        "the line resumed in order"
    );
    let stats = sites[2].room.stats();
    assert_eq!(
        (
            stats.counters.joined,
            stats.counters.finished,
            stats.counters.abandoned,
            stats.active
        ),
        (40, 40, 0, 0)
    );
}

/// Forty newcomers at once on three instances of an empty room of four places: those who find a place go straight
/// in (their first request passes), the admission ticks they set off on each instance run at the same time in one
/// Redis, and the room never lets in more than its four.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newcomers_going_straight_in_on_three_instances_never_exceed_the_capacity() {
    const PLACES: u64 = 4;
    let server = RedisServer::from_env_or_start();
    let ev = event("straight");
    let keys = Keys::new();
    let setup = Setup {
        target: server.url().into(),
        event: &ev,
        keys: &keys,
        capacity: PLACES,
        background: false,
        straight_in: true,
    };
    let sites = Arc::new(instances(&setup, 3).await);
    let tasks: Vec<_> = (0..40)
        .map(|i| {
            let sites = sites.clone();
            tokio::spawn(async move {
                let res = browser()
                    .get(sites[i % 3].at("/checkout"))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(res.status(), 200);
                res.text().await.unwrap() == "seat map"
            })
        })
        .collect();
    let mut passed = 0;
    for t in tasks {
        let went_in = tokio::time::timeout(Duration::from_secs(60), t)
            .await
            .expect("a newcomer was answered within 60 s")
            .unwrap();
        passed += u64::from(went_in);
    }
    let probe = RedisStore::connect(server.url()).await.unwrap();
    let snap = probe.snapshot(&ev).await.unwrap();
    assert!(
        (1..=PLACES).contains(&passed),
        "{passed} went straight in, of {PLACES} places"
    );
    assert!(snap.active <= PLACES, "{} active", snap.active);
    // Everyone else waits in line, and the door lets in no more at its next ticks.
    assert_eq!(snap.last_number, 40);
    for site in sites.iter() {
        site.room.tick_now().await.unwrap();
    }
    assert_eq!(probe.snapshot(&ev).await.unwrap().active, PLACES);
}

/// The Redis store as two room instances share it, recording each tick call: its budget and who it let in.
#[derive(Debug)]
struct Recorded {
    inner: RedisStore,
    calls: Mutex<Vec<(u64, Vec<String>)>>,
}

#[async_trait::async_trait]
impl Store for Recorded {
    async fn init(&self, e: &str, d: &Settings) -> Result<Settings, StoreError> {
        self.inner.init(e, d).await
    }
    async fn join(&self, e: &str, j: &Join) -> Result<Placement, StoreError> {
        self.inner.join(e, j).await
    }
    async fn ticket(&self, e: &str, now_ms: u64) -> Result<Ticket, StoreError> {
        self.inner.ticket(e, now_ms).await
    }
    async fn redeem(&self, e: &str, r: &Redeem) -> Result<Option<Placement>, StoreError> {
        self.inner.redeem(e, r).await
    }
    async fn lookup(&self, e: &str, s: &str) -> Result<Option<Placement>, StoreError> {
        self.inner.lookup(e, s).await
    }
    async fn come_back(
        &self,
        e: &str,
        s: &str,
        n: u64,
        w: u64,
    ) -> Result<(Option<Placement>, Option<Return>), StoreError> {
        self.inner.come_back(e, s, n, w).await
    }
    async fn claim(
        &self,
        e: &str,
        s: &str,
        n: u64,
        i: u64,
    ) -> Result<Option<Placement>, StoreError> {
        self.inner.claim(e, s, n, i).await
    }
    async fn touch(&self, e: &str, t: &Touches) -> Result<(), StoreError> {
        self.inner.touch(e, t).await
    }
    async fn tick(&self, e: &str, t: &Tick) -> Result<TickReport, StoreError> {
        let r = self.inner.tick(e, t).await?;
        self.calls
            .lock()
            .unwrap()
            .push((t.max_scan, r.admitted.clone()));
        Ok(r)
    }
    async fn finish(&self, e: &str, s: &str, seats: u32, n: u64) -> Result<bool, StoreError> {
        self.inner.finish(e, s, seats, n).await
    }
    async fn finished_since(
        &self,
        e: &str,
        cursor: &str,
        now_ms: u64,
        lookback_ms: u64,
    ) -> Result<(Vec<String>, String), StoreError> {
        self.inner
            .finished_since(e, cursor, now_ms, lookback_ms)
            .await
    }
    async fn snapshot(&self, e: &str) -> Result<Snapshot, StoreError> {
        self.inner.snapshot(e).await
    }
    async fn update(&self, e: &str, c: &SettingsChange) -> Result<Settings, StoreError> {
        self.inner.update(e, c).await
    }
    async fn restore(&self, e: &str, r: &Restore) -> Result<Settings, StoreError> {
        self.inner.restore(e, r).await
    }
    async fn reclaim(&self, e: &str, r: &Reclaim) -> Result<Option<Placement>, StoreError> {
        self.inner.reclaim(e, r).await
    }
}

/// The opening of a random draw on two instances ticking at once: the capacity goes in in chunks of the room's
/// `admit_chunk`, one short store call each, never more than the capacity, and in the draw's order. Scaled from
/// the seed's 8,000 places to 2,000 (3,000 in the pre-queue) so it runs in seconds in a debug build; the figures at
/// 8,000 come from `measure_the_opening_of_8000_places_over_a_big_prequeue`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_opening_lets_the_capacity_in_by_chunks_in_draw_order_on_two_instances() {
    use std::time::SystemTime;
    use waitroom_layer::Fairness;
    const CAPACITY: u64 = 2_000;
    const PEOPLE: u64 = 3_000;
    const CHUNK: u64 = 100;
    let server = RedisServer::from_env_or_start();
    let redis = RedisStore::connect(server.url()).await.unwrap();
    let store = Arc::new(Recorded {
        inner: redis.clone(),
        calls: Mutex::new(Vec::new()),
    });
    let ev = event("chunks");
    let keys = Keys::new();
    let t0 = 1_800_000_000_000u64;
    let clock = ManualClock::new(t0);
    let opens_ms = t0 + 60_000;
    let mut rooms = Vec::new();
    for _ in 0..2 {
        rooms.push(
            WaitingRoom::builder(&ev)
                .capacity(CAPACITY)
                .fairness(Fairness::RandomAtOpen {
                    opens_at: SystemTime::UNIX_EPOCH + Duration::from_millis(opens_ms),
                })
                .admit_chunk(CHUNK)
                .signing_key(keys.signing_key())
                .clock(Arc::new(clock.clone()))
                .background(false)
                .shared_store(store.clone())
                .build()
                .await
                .unwrap(),
        );
    }
    // Everyone joins the pre-queue a minute before the opening (within the abandon grace at the opening: present).
    let sid = |i: u64| format!("c{i:021}");
    let mut rng = Rng::new(31);
    let joins: Vec<_> = (0..PEOPLE)
        .map(|i| {
            let j = Join {
                session: sid(i),
                account: None,
                now_ms: t0,
                draw_key: rng.next(),
            };
            let redis = redis.clone();
            let ev = ev.clone();
            async move { redis.join(&ev, &j).await.unwrap() }
        })
        .collect();
    futures_util::future::join_all(joins).await;
    store.calls.lock().unwrap().clear();
    clock.set_ms(opens_ms);
    let (a, b) = tokio::time::timeout(Duration::from_secs(120), async {
        tokio::join!(rooms[0].tick_now(), rooms[1].tick_now())
    })
    .await
    .expect("two ticks within 120 s");
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(
        (a.admitted.len() + b.admitted.len()) as u64,
        CAPACITY,
        "one tick of each instance lets the capacity in"
    );
    // Nobody was admitted twice, and Redis holds exactly the capacity: every call read the capacity afresh.
    assert_eq!(redis.snapshot(&ev).await.unwrap().active, CAPACITY);
    let calls = store.calls.lock().unwrap().clone();
    // In chunks: at least CAPACITY / CHUNK calls, none over its budget.
    assert!(
        calls.len() as u64 >= CAPACITY / CHUNK,
        "{} tick calls for {CAPACITY} places in chunks of {CHUNK}",
        calls.len()
    );
    for (budget, admitted) in &calls {
        assert!(*budget <= CHUNK, "a call with a budget of {budget}");
        assert!(
            admitted.len() as u64 <= *budget,
            "{} let in by one call",
            admitted.len()
        );
    }
    // In the draw's order: the people let in hold the draw's first CAPACITY numbers, and each call let in a run of
    // consecutive numbers (the head moved on by exactly its chunk, whichever instance made the call).
    let mut numbers = Vec::new();
    for (_, admitted) in &calls {
        let mut run = Vec::new();
        for s in admitted {
            let p = redis.lookup(&ev, s).await.unwrap().unwrap();
            assert_eq!(p.state, SessionState::Admitted);
            run.push(p.number.expect("a drawn number"));
        }
        assert!(
            run.windows(2).all(|w| w[1] == w[0] + 1),
            "one call let in numbers out of the draw's order: {run:?}"
        );
        numbers.extend(run);
    }
    numbers.sort_unstable();
    assert_eq!(numbers, (1..=CAPACITY).collect::<Vec<_>>());
    // The others still wait, with the numbers after.
    let waiting = store.snapshot(&ev).await.unwrap();
    assert_eq!(
        (waiting.served, waiting.waiting()),
        (CAPACITY, PEOPLE - CAPACITY)
    );
}

/// Figures for BENCHMARKS.md, not a check, on a Redis server of its own: the longest Redis command (`SLOWLOG`)
/// during a random draw's opening with a capacity of 8,000 and `WAITROOM_OPENING_PEOPLE` (default 200,000) people
/// in the pre-queue, half of whom left before the opening (no liveness mark in the last stretch, so the head
/// crosses them as away): the liveness marks of the other half (one batch, as a room's flush sends them), the
/// draw (set off by one first contact), then two room instances ticking at once until the capacity is let in.
/// Twice in one run, on two on-sales of one server: first with the whole tick in one call (`admit_chunk` as large
/// as `max_scan_per_tick`, the tick as it was before chunks: the baseline), then with the default chunk.
/// `SLOWLOG` logs the commands scripts call as well; the threshold is `WAITROOM_SLOWLOG_US` (default 100 µs).
/// `cargo test -p waitroom-layer --all-features --test redis_instances measure_the_opening -- --ignored
/// --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement for BENCHMARKS.md"]
async fn measure_the_opening_of_8000_places_over_a_big_prequeue() {
    use std::time::SystemTime;
    use waitroom_layer::store::Mark;
    use waitroom_layer::{DEFAULT_ADMIT_CHUNK, Fairness};
    const CAPACITY: u64 = 8_000;
    const TASKS: u64 = 16;
    let people: u64 = std::env::var("WAITROOM_OPENING_PEOPLE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let server = RedisServer::start();
    // On a box shared with builds, the server this test started is given a higher priority (when allowed), so that
    // `SLOWLOG` measures the commands rather than the time Redis waited for a core.
    let pid = server.command(&["INFO", "server"]);
    if let Some(pid) = pid.lines().find_map(|l| l.strip_prefix("process_id:")) {
        let reniced = std::process::Command::new("renice")
            .args(["-n", "-10", "-p", pid.trim()])
            .output()
            .is_ok_and(|o| o.status.success());
        println!("redis-server {} reniced to -10: {reniced}", pid.trim());
    }
    // A long timeout: the baseline's one call holds Redis for longer than the default second.
    let store = RedisStore::builder(server.url())
        .timeout(Duration::from_secs(30))
        .connect()
        .await
        .unwrap();
    // Commands a script calls are logged too, so logging every command (0) slows the long scripts down by their
    // own log: 100 µs keeps every script call that matters and few of their inner commands.
    let slower_than = std::env::var("WAITROOM_SLOWLOG_US").unwrap_or_else(|_| "100".into());
    let keys = Keys::new();
    let sid = |i: u64| format!("o{i:021}");
    let mut longest = Vec::new();
    for (what, chunk) in [("one call a tick", 20_000), ("chunks", DEFAULT_ADMIT_CHUNK)] {
        let ev = event(if chunk == DEFAULT_ADMIT_CHUNK {
            "chunked"
        } else {
            "whole"
        });
        let t0 = 1_800_000_000_000u64;
        let clock = ManualClock::new(t0);
        // The opening: well past the abandon grace (3 minutes by default) after everyone joined.
        let opens_ms = t0 + 600_000;
        let opens_at = SystemTime::UNIX_EPOCH + Duration::from_millis(opens_ms);
        let mut rooms = Vec::new();
        for _ in 0..2 {
            rooms.push(
                WaitingRoom::builder(&ev)
                    .capacity(CAPACITY)
                    .fairness(Fairness::RandomAtOpen { opens_at })
                    .admit_chunk(chunk)
                    .signing_key(keys.signing_key())
                    .clock(Arc::new(clock.clone()))
                    .background(false)
                    .store(store.clone())
                    .build()
                    .await
                    .unwrap(),
            );
        }
        let mut tasks = Vec::new();
        for t in 0..TASKS {
            let (store, ev) = (store.clone(), ev.clone());
            tasks.push(tokio::spawn(async move {
                let mut rng = Rng::new(t + 1);
                let mut i = t;
                while i < people {
                    let j = Join {
                        session: sid(i),
                        account: None,
                        now_ms: t0,
                        draw_key: rng.next(),
                    };
                    store.join(&ev, &j).await.unwrap();
                    i += TASKS;
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        server.command(&["CONFIG", "SET", "slowlog-log-slower-than", &slower_than]);
        server.command(&["CONFIG", "SET", "slowlog-max-len", "100000"]);
        server.command(&["SLOWLOG", "RESET"]);
        // Half of them still poll: their marks, in one flush, ten seconds before the opening.
        clock.set_ms(opens_ms - 10_000);
        let marks = Touches {
            now_ms: opens_ms - 10_000,
            waiting: (0..people)
                .step_by(2)
                .map(|i| Mark {
                    session: sid(i),
                    number: None,
                })
                .collect(),
            active: Vec::new(),
            idle_timeout_ms: 600_000,
            abandon_after_ms: 180_000,
            tickets: 0,
        };
        store.touch(&ev, &marks).await.unwrap();
        clock.set_ms(opens_ms + 1);
        // The draw, set off by a first contact (its ticket's number is the first after the drawn segment).
        store.ticket(&ev, opens_ms + 1).await.unwrap();
        let mut admitted = 0;
        let mut rounds = 0;
        let started = std::time::Instant::now();
        while admitted < CAPACITY {
            rounds += 1;
            assert!(rounds <= 100, "{admitted} let in after 100 rounds of ticks");
            let (a, b) = tokio::join!(rooms[0].tick_now(), rooms[1].tick_now());
            admitted += (a.unwrap().admitted.len() + b.unwrap().admitted.len()) as u64;
        }
        let wall = started.elapsed();
        assert_eq!(admitted, CAPACITY);
        assert_eq!(store.snapshot(&ev).await.unwrap().active, CAPACITY);
        // Every command logged since the reset: [id, time, µs, [args], ...].
        let client = ::redis::Client::open(server.url()).unwrap();
        let config = ::redis::AsyncConnectionConfig::new()
            .set_response_timeout(Some(Duration::from_secs(120)));
        let mut con = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .unwrap();
        let entries: Vec<::redis::Value> = ::redis::cmd("SLOWLOG")
            .arg("GET")
            .arg(100_000)
            .query_async(&mut con)
            .await
            .unwrap();
        server.command(&["CONFIG", "SET", "slowlog-log-slower-than", "10000"]);
        let word = |a: &::redis::Value| match a {
            ::redis::Value::BulkString(b) => String::from_utf8_lossy(b).chars().take(24).collect(),
            other => format!("{other:?}"),
        };
        let mut all: Vec<(i64, String)> = Vec::new();
        for e in &entries {
            let ::redis::Value::Array(e) = e else {
                continue;
            };
            let (Some(::redis::Value::Int(us)), Some(::redis::Value::Array(args))) =
                (e.get(2), e.get(3))
            else {
                continue;
            };
            let name = word(&args[0]).to_uppercase();
            // A script call: its first ARGV after the 18 keys (the tick's: now, arrival window, abandon after, max
            // scan, seen slot; the ticket's: now, count).
            let what = if name == "EVALSHA" {
                let argv: Vec<String> = args.iter().skip(21).take(5).map(word).collect();
                format!("EVALSHA argv {} ({} args)", argv.join(" "), args.len())
            } else {
                format!(
                    "{name} {} ({} args)",
                    args.get(1).map(word).unwrap_or_default(),
                    args.len()
                )
            };
            all.push((*us, what));
        }
        all.sort_by_key(|(us, _)| std::cmp::Reverse(*us));
        let over = |ms: i64| all.iter().filter(|(us, _)| *us > ms * 1_000).count();
        let ticks: Vec<i64> = all
            .iter()
            .filter(|(_, w)| w.contains(" 180000 "))
            .map(|(us, _)| *us)
            .collect();
        let longest_tick = ticks.first().copied().unwrap_or(0);
        let median_tick = ticks.get(ticks.len() / 2).copied().unwrap_or(0);
        // The liveness marks: `HSET pseen` commands of many fields (their first field at args[2]).
        let marks_us = all
            .iter()
            .find(|(_, w)| w.starts_with("HSET") && !w.ends_with("(4 args)"))
            .map_or(0, |(us, _)| *us);
        // The draw: the first contact's ticket (ARGV now, count).
        let draw_us = all
            .iter()
            .find(|(_, w)| w.contains(" 1 (23 args)"))
            .map_or(0, |(us, _)| *us);
        println!(
            "{what} (admit_chunk {chunk}): opening of {CAPACITY} places, {people} in the pre-queue (half away), two \
             instances, {rounds} rounds of ticks in {wall:?}: {} commands over {slower_than} µs, {} over 1 ms, {} over \
             5 ms; {} tick calls logged, the longest {longest_tick} µs, the median {median_tick} µs; the longest liveness \
             `HSET` {marks_us} µs; the draw (a ticket) {draw_us} µs; the longest commands:",
            all.len(),
            over(1),
            over(5),
            ticks.len()
        );
        for (us, what) in all.iter().take(6) {
            println!("  {us} µs  {what}");
        }
        longest.push(longest_tick);
    }
    println!(
        "longest tick call, chunks / one call: {} / {} µs = {:.3}",
        longest[1],
        longest[0],
        longest[1] as f64 / longest[0].max(1) as f64
    );
}
