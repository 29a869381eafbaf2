//! The room over a real redis-server: what a poll costs in Redis commands, what happens when Redis goes away and
//! comes back, finishes and an inventory shared by several instances, and (ignored by default) the figures for
//! BENCHMARKS.md.
#![cfg(feature = "redis")]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use waitroom_layer::Clock;
use waitroom_layer::store::{
    DrawCursor, DrawnPage, Join, Reclaim, Redeem, Restore, Return, Settings, SettingsChange,
    Snapshot, Store, Tick, TickReport, Ticket, Touches,
};
use waitroom_layer::{
    Inventory, ManualClock, MemoryStore, Placement, RedisStore, SessionState, StoreError,
    ViewState, WaitingRoom,
};
use waitroom_testkit::redis::RedisServer;

fn event(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{tag}-{}-{nanos}", std::process::id())
}

/// On Redis too, a person whose turn passed is told so from the room's cache: the first look after the ending is
/// one Redis command (the come-back script that finds it), and ten more polls of a finished, an abandoned and a
/// turned-away session (one whose cookie carries no number) send none. No background task: only these calls
/// reach Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polls_of_a_person_whose_turn_passed_send_no_redis_command_after_the_first() {
    let server = RedisServer::from_env_or_start();
    let store = RedisStore::connect(server.url()).await.unwrap();
    let clock = ManualClock::starting_now();
    let room = WaitingRoom::builder(event("passed"))
        .capacity(1)
        .poll_interval(Duration::from_secs(2))
        .abandon_after(Duration::from_secs(10))
        .return_window(Duration::from_secs(20))
        .clock(Arc::new(clock.clone()))
        .store(store.clone())
        .background(false)
        .build()
        .await
        .unwrap();
    // a goes in and finishes; b never polls (missed, then abandoned); d waits, polling, and is turned away.
    let [a, b, c, d] = ["a", "b", "c", "d"].map(|x| format!("passed-{x}-qqqqqqqqqqqqqq"));
    let mut number = HashMap::new();
    for s in [&a, &b, &c, &d] {
        number.insert(s.clone(), room.join(s, None).await.unwrap().number);
    }
    room.tick_now().await.unwrap();
    assert!(room.finish(&a, 1).await.unwrap());
    let polls = |s: String, hint: Option<u64>, told: SessionState| {
        let (room, store) = (room.clone(), store.clone());
        async move {
            let before = store.commands_sent();
            let p = room.locate(&s, hint).await.unwrap().unwrap();
            assert_eq!(p.state, told);
            assert_eq!(
                store.commands_sent(),
                before + 1,
                "{told:?}: the first look asks Redis"
            );
            for _ in 0..10 {
                assert_eq!(room.locate(&s, hint).await.unwrap().unwrap().state, told);
            }
            assert_eq!(
                store.commands_sent(),
                before + 1,
                "{told:?}: later polls from the cache"
            );
        }
    };
    polls(a.clone(), number[&a], SessionState::Finished).await;
    // Past the grace and the 10-second liveness slot its join marked (the slots round in the session's favour).
    clock.advance(Duration::from_secs(21));
    for s in [&c, &d] {
        room.locate(s, number[s]).await.unwrap().unwrap();
    }
    room.tick_now().await.unwrap();
    clock.advance(Duration::from_secs(21));
    room.locate(&d, number[&d]).await.unwrap().unwrap();
    room.tick_now().await.unwrap();
    polls(b.clone(), number[&b], SessionState::Abandoned).await;
    room.close().await.unwrap();
    room.tick_now().await.unwrap();
    polls(d.clone(), None, SessionState::TurnedAway).await;
}

/// Polls of waiting sessions are answered locally: the background tick, refresh and liveness flush are the only
/// Redis traffic, well under 0.05 commands per poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_costs_under_a_twentieth_of_a_redis_command() {
    let server = RedisServer::from_env_or_start();
    let store = RedisStore::connect(server.url()).await.unwrap();
    let room = WaitingRoom::builder(event("polls"))
        .capacity(20)
        .store(store.clone())
        .build()
        .await
        .unwrap();
    let mut line: Vec<(String, u64)> = Vec::new();
    for _ in 0..3_000 {
        let sid = WaitingRoom::new_session_id();
        let p = room.join(&sid, None).await.unwrap();
        line.push((sid, p.number.unwrap()));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    let (polls, commands) = poll_for(&room, &store, &mut line, Duration::from_secs(3)).await;
    let per_poll = commands as f64 / polls as f64;
    println!(
        "redis commands per poll: {commands} / {polls} = {per_poll:.5} (3,000 waiting sessions)"
    );
    assert!(polls > 10_000, "only {polls} polls");
    assert!(commands > 0, "the background task must have ticked");
    assert!(per_poll < 0.05, "{per_poll} commands per poll");
}

/// The same at a real crowd's pace rather than flat out: 1,000 waiting sessions each polling once a second (the
/// seed's 30,000 polls a second spread over 30 instances; a tenth of what one instance of three takes in the
/// seed). The room's own traffic (ticks, refreshes, the liveness flush) is a fixed cost per second, so this is
/// where the per-poll share is largest; it must still stay under a twentieth of a command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_a_real_pace_a_poll_costs_under_a_twentieth_of_a_redis_command() {
    let server = RedisServer::from_env_or_start();
    let store = RedisStore::connect(server.url()).await.unwrap();
    let room = WaitingRoom::builder(event("paced"))
        .capacity(5)
        .store(store.clone())
        .build()
        .await
        .unwrap();
    let mut line: Vec<(String, u64)> = Vec::new();
    for _ in 0..1_000 {
        let sid = WaitingRoom::new_session_id();
        let p = room.join(&sid, None).await.unwrap();
        line.push((sid, p.number.unwrap()));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let c0 = store.commands_sent();
    let t0 = Instant::now();
    let mut polls = 0u64;
    for second in 1..=6u32 {
        for (sid, n) in &line {
            let p = room.locate(sid, Some(*n)).await.unwrap();
            let _ = room.status(p.as_ref());
            polls += 1;
        }
        // The next round starts on the next whole second.
        let next = t0 + Duration::from_secs(second.into());
        tokio::time::sleep(next.saturating_duration_since(Instant::now())).await;
    }
    let secs = t0.elapsed().as_secs_f64();
    let commands = store.commands_sent() - c0;
    let per_poll = commands as f64 / polls as f64;
    println!(
        "redis commands at 1,000 polls/s: {commands} in {secs:.1} s = {:.1}/s; per poll {commands} / {polls} = \
         {per_poll:.4}",
        commands as f64 / secs
    );
    assert_eq!(polls, 6_000);
    assert!(commands > 0, "the background task must have ticked");
    assert!(per_poll < 0.05, "{per_poll} commands per poll");
}

/// Every session in `line` polls (locate with its number, then status) in rounds for `how_long`; sessions let in
/// claim their place once and stop polling. Returns (polls, Redis commands sent meanwhile).
async fn poll_for(
    room: &WaitingRoom,
    store: &RedisStore,
    line: &mut Vec<(String, u64)>,
    how_long: Duration,
) -> (u64, u64) {
    let c0 = store.commands_sent();
    let t0 = Instant::now();
    let mut polls = 0u64;
    while t0.elapsed() < how_long {
        let mut let_in = Vec::new();
        for (i, (sid, n)) in line.iter().enumerate() {
            let p = room.locate(sid, Some(*n)).await.unwrap();
            let status = room.status(p.as_ref());
            polls += 1;
            if status.state == ViewState::Admitted {
                room.claim(sid).await.unwrap();
                let_in.push(i);
            } else {
                assert_eq!(status.number, Some(*n));
            }
        }
        for i in let_in.into_iter().rev() {
            line.swap_remove(i);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (polls, store.commands_sent() - c0)
}

/// Counts the warnings the room logs.
struct WarnCounter(Arc<AtomicUsize>);

impl tracing::Subscriber for WarnCounter {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, e: &tracing::Event<'_>) {
        let m = e.metadata();
        if *m.level() == tracing::Level::WARN && m.target().starts_with("waitroom_layer") {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Stop redis-server in the middle of a run: nobody new is let in, people in line keep their answers (store_ok
/// false), errors are logged once per interval, liveness and touches are kept; start it again (append-only file on
/// the same directory): the line resumes in the same order, nobody lost, nobody skipped because of the outage.
#[tokio::test(flavor = "current_thread")]
async fn redis_outage_keeps_the_line_and_resumes_it() {
    let warns = Arc::new(AtomicUsize::new(0));
    let _guard = tracing::subscriber::set_default(WarnCounter(warns.clone()));
    let mut server = RedisServer::start();
    let store = RedisStore::builder(server.url())
        .timeout(Duration::from_millis(500))
        .connect()
        .await
        .unwrap();
    let clock = ManualClock::new(1_800_000_000_000);
    let ev = event("fault");
    let room = WaitingRoom::builder(&ev)
        .capacity(5)
        .poll_interval(Duration::from_secs(10)) // abandoned after 30 s unseen
        .arrival_window(Duration::from_secs(20))
        .idle_timeout(Duration::from_secs(40))
        .clock(Arc::new(clock.clone()))
        .store(store.clone())
        .background(false)
        .build()
        .await
        .unwrap();

    let mut numbers: HashMap<String, u64> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    for _ in 0..60 {
        let sid = WaitingRoom::new_session_id();
        let p = room.join(&sid, None).await.unwrap();
        numbers.insert(sid.clone(), p.number.unwrap());
        order.push(sid);
    }
    let first = room.tick_now().await.unwrap();
    assert_eq!(first.admitted, order[..5].to_vec());
    // Three of the five come for their pass; two never do.
    let active: Vec<String> = order[..3].to_vec();
    for s in &active {
        assert_eq!(
            room.claim(s).await.unwrap().unwrap().state,
            SessionState::Active
        );
    }
    let poll_all = |room: WaitingRoom, numbers: HashMap<String, u64>, order: Vec<String>| async move {
        for s in &order {
            let n = numbers[s];
            let p = room.locate(s, Some(n)).await;
            if n > room.snapshot().served {
                let p = p.expect("a waiting session with its number is answered locally");
                let st = room.status(p.as_ref());
                assert_eq!(st.number, Some(n));
                assert_eq!(st.position, Some(n - room.snapshot().served));
            }
        }
    };
    poll_all(room.clone(), numbers.clone(), order.clone()).await;
    clock.advance(Duration::from_secs(5));
    room.tick_now().await.unwrap();
    let before = store.snapshot(&ev).await.unwrap();
    assert_eq!((before.served, before.active), (5, 5));
    let placements_before: Vec<Option<Placement>> = {
        let mut v = Vec::new();
        for s in &order {
            v.push(store.lookup(&ev, s).await.unwrap());
        }
        v
    };
    let warns_before = warns.load(Ordering::Relaxed);

    // Redis goes away for a minute (on the room's clock): longer than the abandon grace, the arrival window and the
    // idle timeout.
    server.stop();
    let mut failures = 0;
    for _ in 0..12 {
        clock.advance(Duration::from_secs(5));
        poll_all(room.clone(), numbers.clone(), order.clone()).await;
        for s in &active {
            room.touch_active(s);
        }
        assert!(room.tick_now().await.is_err(), "a tick cannot succeed");
        failures += 1;
        assert!(!room.store_ok());
        assert_eq!(room.snapshot().served, 5, "nobody new is let in");
        assert_eq!(room.snapshot().active, 5);
        let n = numbers[&order[30]];
        let st = room.status(Some(&Placement {
            session: order[30].clone(),
            state: SessionState::Waiting,
            number: Some(n),
        }));
        assert!(
            !st.store_ok,
            "the status says the figures are the last known ones"
        );
        assert_eq!(st.position, Some(n - 5));
        assert!(
            room.join("a-newcomer-during-the-outage", None)
                .await
                .is_err()
        );
    }
    let logged = warns.load(Ordering::Relaxed) - warns_before;
    // 60 s of outage at one warning per 10 s, against dozens of failed calls.
    assert!(
        (1..=7).contains(&logged),
        "{logged} warnings for {failures} failing rounds"
    );

    // Redis comes back with its append-only file.
    server.restart();
    let t0 = Instant::now();
    loop {
        if room.tick_now().await.is_ok() && room.store_ok() {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the room did not reconnect"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Everything as it was: same numbers, same head, same counters.
    let after = store.snapshot(&ev).await.unwrap();
    assert_eq!(after.served, before.served);
    assert_eq!(after.last_number, before.last_number);
    assert_eq!(after.counters.joined, before.counters.joined);
    for (s, p) in order.iter().zip(&placements_before) {
        assert_eq!(&store.lookup(&ev, s).await.unwrap(), p, "{s} changed");
    }
    // The door stays shut for two flush intervals (other instances flush what they kept), then carries on.
    assert!(room.tick_now().await.unwrap().admitted.is_empty());
    clock.advance(Duration::from_secs(3));
    let r = room.tick_now().await.unwrap();
    // The two that never came lose their places (and keep their turns for the return window: missed); the three
    // active ones were touched during the outage and stay; nobody in line is skipped, though the outage lasted
    // twice the abandon grace.
    assert!(r.expired.is_empty(), "expired: {:?}", r.expired);
    let mut missed = r.missed.clone();
    missed.sort();
    let mut no_shows = order[3..5].to_vec();
    no_shows.sort();
    assert_eq!(missed, no_shows);
    assert!(r.abandoned.is_empty(), "skipped: {:?}", r.abandoned);
    assert_eq!(r.admitted, order[5..7].to_vec());

    // Drain the line in order: finish the active ones, tick, repeat. The two who never came poll again with
    // everyone: back within the return window, they go in first, then the line in its order.
    let mut admitted: Vec<String> = order[..7].to_vec();
    let mut inside: Vec<String> = order[..3].iter().chain(&order[5..7]).cloned().collect();
    while admitted.len() < order.len() + 2 {
        for s in inside.drain(..) {
            room.finish(&s, 1).await.unwrap();
        }
        poll_all(room.clone(), numbers.clone(), order.clone()).await;
        clock.advance(Duration::from_secs(1));
        let r = room.tick_now().await.unwrap();
        assert!(r.abandoned.is_empty());
        assert!(!r.admitted.is_empty());
        admitted.extend(r.admitted.iter().cloned());
        inside.extend(r.admitted);
    }
    let mut back = admitted[7..9].to_vec();
    back.sort();
    assert_eq!(
        back, no_shows,
        "the two who never came go in first when back"
    );
    let line: Vec<String> = admitted[..7]
        .iter()
        .chain(&admitted[9..])
        .cloned()
        .collect();
    assert_eq!(line, order, "the line resumed in the same order");
}

/// The figures for BENCHMARKS.md ("Redis store"). Run with
/// `cargo test --release -p waitroom-layer --features redis --test redis_room -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "prints the figures for BENCHMARKS.md; slow"]
async fn redis_figures() {
    let server = RedisServer::from_env_or_start();
    let store = RedisStore::connect(server.url()).await.unwrap();
    let defaults = |random: bool| waitroom_layer::Settings {
        capacity: 8_000,
        admit_per_minute: None,
        paused: false,
        closed: false,
        opens_at_ms: random.then_some(u64::MAX / 2),
        random_draw: random,
        inventory: None,
        prequeue_opens_at_ms: None,
        closes_at_ms: None,
    };
    let used = |s: &RedisServer| -> i64 {
        let info = s.command(&["INFO", "memory"]);
        info.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("used_memory in INFO memory")
    };

    // Joins per second through the store: 32 callers at once, each join one script call.
    for (tag, random, n) in [
        ("fifo", false, 100_000u64),
        ("prequeue", true, 100_000),
        ("prequeue", true, 600_000),
    ] {
        let ev = event(&format!("fig-{tag}-{n}"));
        store.init(&ev, &defaults(random)).await.unwrap();
        let m0 = used(&server);
        let t0 = Instant::now();
        let mut tasks = Vec::new();
        for t in 0..32u64 {
            let store = store.clone();
            let ev = ev.clone();
            tasks.push(tokio::spawn(async move {
                for k in 0..n / 32 {
                    let sid = WaitingRoom::new_session_id();
                    store
                        .join(
                            &ev,
                            &Join {
                                session: sid,
                                account: None,
                                now_ms: 1_800_000_000_000 + k,
                                draw_key: rand::random(),
                            },
                        )
                        .await
                        .unwrap();
                }
                t
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let secs = t0.elapsed().as_secs_f64();
        let joined = (n / 32) * 32;
        let m1 = used(&server);
        let mut per_key = String::new();
        for part in ["sessions", "line:0", "draw:0", "drawidx"] {
            let key = store.key(&ev, part);
            let bytes = server.command(&["MEMORY", "USAGE", &key, "SAMPLES", "0"]);
            per_key.push_str(&format!(" {part}={bytes}"));
        }
        println!(
            "{tag} ({n}): {joined} joins in {secs:.2} s = {:.0} joins/s; used_memory +{} bytes = {:.1} bytes per waiting session; MEMORY USAGE:{per_key}",
            joined as f64 / secs,
            m1 - m0,
            (m1 - m0) as f64 / joined as f64,
        );
        if random {
            // The draw is O(1): time a tick that runs it over the whole pre-queue.
            open_now(&store, &ev, 1).await;
            let t0 = Instant::now();
            let r = store
                .tick(
                    &ev,
                    &waitroom_layer::store::Tick {
                        now_ms: 1_800_000_000_000 + n,
                        arrival_window_ms: 60_000,
                        abandon_after_ms: 600_000,
                        return_window_ms: 600_000,
                        max_scan: 20_000,
                    },
                )
                .await
                .unwrap();
            println!(
                "prequeue: the draw over {joined} sessions plus admitting {} took {:.1} ms (one script call)",
                r.admitted.len(),
                t0.elapsed().as_secs_f64() * 1e3
            );
        }
    }

    // Liveness marks: what a batch costs Redis, numbered (bits in the `seen` slot bitmap) and by session id (the
    // `pseen` hash pre-queued sessions write in the last minute before the opening), 20,000 sessions, five rounds.
    let ev = event("fig-marks");
    store.init(&ev, &defaults(false)).await.unwrap();
    let mut marks = Vec::new();
    for k in 0..20_000u64 {
        let sid = WaitingRoom::new_session_id();
        let j = Join {
            session: sid.clone(),
            account: None,
            now_ms: 1_800_000_000_000 + k,
            draw_key: 0,
        };
        let p = store.join(&ev, &j).await.unwrap();
        marks.push(waitroom_layer::store::Mark {
            session: sid,
            number: p.number,
        });
    }
    for (label, numbered) in [
        ("by number (bitmap)", true),
        ("by session (pseen hash)", false),
    ] {
        let batch: Vec<_> = marks
            .iter()
            .map(|m| waitroom_layer::store::Mark {
                session: m.session.clone(),
                number: if numbered { m.number } else { None },
            })
            .collect();
        server.command(&["CONFIG", "RESETSTAT"]);
        let m0 = used(&server);
        let mut grew = 0;
        let t0 = Instant::now();
        let rounds = 5u64;
        for r in 0..rounds {
            let t = waitroom_layer::store::Touches {
                now_ms: 1_800_000_100_000 + r * 1_000,
                waiting: batch.clone(),
                active: vec![],
                idle_timeout_ms: 600_000,
                abandon_after_ms: 60_000,
                tickets: 0,
            };
            store.touch(&ev, &t).await.unwrap();
            if r == 0 {
                grew = used(&server) - m0;
            }
        }
        let wall = t0.elapsed().as_secs_f64();
        let usec: u64 = ["bitfield", "hset", "pexpire", "evalsha"]
            .iter()
            .map(|c| command_stat(&server, c).1)
            .sum();
        let n = (batch.len() as u64 * rounds) as f64;
        println!(
            "liveness marks {label}: {n:.0} marks; Redis command time {:.3} µs per mark ({:.0} ms per second at 10x's 300,000 marks/s); wall {:.2} µs per mark with the client; memory +{:.1} bytes per session after the first round",
            usec as f64 / n,
            usec as f64 / n * 300_000.0 / 1_000.0,
            wall * 1e6 / n,
            grew as f64 / batch.len() as f64,
        );
    }

    // Commands per poll, and poll throughput against the memory store in the same run.
    let room = WaitingRoom::builder(event("fig-polls"))
        .capacity(20)
        .store(store.clone())
        .build()
        .await
        .unwrap();
    let mut line = Vec::new();
    for _ in 0..10_000 {
        let sid = WaitingRoom::new_session_id();
        let p = room.join(&sid, None).await.unwrap();
        line.push((sid, p.number.unwrap()));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t0 = Instant::now();
    let (polls, commands) = poll_for(&room, &store, &mut line, Duration::from_secs(5)).await;
    let redis_rate = polls as f64 / t0.elapsed().as_secs_f64();
    println!(
        "polls: {polls} polls (10,000 waiting sessions, 5 s), {commands} Redis commands = {:.5} commands per poll; {redis_rate:.0} polls/s on one task",
        commands as f64 / polls as f64
    );
    let mem_room = WaitingRoom::builder(event("fig-polls-mem"))
        .capacity(20)
        .store(MemoryStore::new())
        .build()
        .await
        .unwrap();
    let mut mem_line = Vec::new();
    for _ in 0..10_000 {
        let sid = WaitingRoom::new_session_id();
        let p = mem_room.join(&sid, None).await.unwrap();
        mem_line.push((sid, p.number.unwrap()));
    }
    let t0 = Instant::now();
    let mut mem_polls = 0u64;
    while t0.elapsed() < Duration::from_secs(5) {
        for (sid, n) in &mem_line {
            let p = mem_room.locate(sid, Some(*n)).await.unwrap();
            let _ = mem_room.status(p.as_ref());
            mem_polls += 1;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "polls with the memory store in the same run: {:.0} polls/s on one task",
        mem_polls as f64 / t0.elapsed().as_secs_f64()
    );
}

/// Finishing across processes: a finish recorded on one instance, or written straight to the `finished` stream as a
/// bare entry by a writer without the verify crate (`XADD wr:{ev}:finished MAXLEN ~ 100000 * s <session> n <seats>
/// t <ms>`), reaches every instance at its next tick, and the bare entry's session leaves the active count at the
/// first tick of any instance.
#[tokio::test(flavor = "current_thread")]
async fn a_finish_reaches_every_instance_within_a_tick() {
    let server = RedisServer::from_env_or_start();
    let clock = ManualClock::new(1_800_000_000_000);
    let ev = event("finish");
    let mut rooms = Vec::new();
    let mut stores = Vec::new();
    for _ in 0..3 {
        let store = RedisStore::connect(server.url()).await.unwrap();
        rooms.push(
            WaitingRoom::builder(&ev)
                .capacity(3)
                .clock(Arc::new(clock.clone()))
                .store(store.clone())
                .background(false)
                .build()
                .await
                .unwrap(),
        );
        stores.push(store);
    }
    let sids: Vec<String> = (0..6).map(|_| WaitingRoom::new_session_id()).collect();
    for (i, s) in sids.iter().enumerate() {
        rooms[i % 3].join(s, None).await.unwrap();
    }
    for r in &rooms {
        r.tick_now().await.unwrap();
    }
    assert_eq!(rooms[2].snapshot().active, 3);
    for s in &sids[..3] {
        rooms[1].claim(s).await.unwrap();
    }

    // Finished on instance 0: the others learn it at their next tick.
    assert!(rooms[0].finish(&sids[0], 2).await.unwrap());
    assert!(rooms[0].finished_recently(&sids[0]));
    assert!(!rooms[1].finished_recently(&sids[0]));
    let mut let_in = Vec::new();
    for r in &rooms[1..] {
        let_in.extend(r.tick_now().await.unwrap().admitted);
        assert!(r.finished_recently(&sids[0]));
    }
    assert_eq!(let_in, vec![sids[3].clone()], "the freed place is taken");

    // Finished by a verifier's sink, written straight to the stream.
    let key = stores[0].key(&ev, "finished");
    server.command(&[
        "XADD",
        &key,
        "MAXLEN",
        "~",
        "100000",
        "*",
        "s",
        &sids[1],
        "n",
        "1",
        "t",
        "1800000000000",
    ]);
    let r = rooms[2].tick_now().await.unwrap();
    // The place it held is free at once: the same tick lets the next person in.
    assert_eq!(r.admitted, vec![sids[4].clone()]);
    let snap = stores[0].snapshot(&ev).await.unwrap();
    assert_eq!(snap.counters.finished, 2);
    assert_eq!(snap.counters.seats_bought, 3);
    assert_eq!(
        stores[0]
            .lookup(&ev, &sids[1])
            .await
            .unwrap()
            .unwrap()
            .state,
        SessionState::Finished
    );
    for r in &rooms {
        r.tick_now().await.unwrap();
        assert!(r.finished_recently(&sids[1]));
        assert!(!r.finished_recently(&sids[2]));
    }
    // A finish of a session that was not inside changes nothing and counts nothing.
    assert!(!rooms[0].finish(&sids[5], 1).await.unwrap());
}

/// The seats through the Redis store: one instance reports the inventory, the other's door follows it. No seat
/// available shuts the door; seats coming back open it (no more people let in within a minute than there are seats
/// available); a finish with seats moves them from held to sold, whichever instance (or a verifier's Redis finish
/// sink) records it; sold out reported by one instance lets nobody in on the other.
#[tokio::test(flavor = "current_thread")]
async fn an_inventory_set_on_one_instance_steers_the_door_of_another() {
    let server = RedisServer::from_env_or_start();
    let clock = ManualClock::new(1_800_000_000_000);
    let ev = event("inventory");
    let mut rooms = Vec::new();
    for _ in 0..2 {
        let store = RedisStore::connect(server.url()).await.unwrap();
        rooms.push(
            WaitingRoom::builder(&ev)
                .capacity(10)
                .clock(Arc::new(clock.clone()))
                .store(store)
                .background(false)
                .build()
                .await
                .unwrap(),
        );
    }
    let (reporter, door) = (&rooms[0], &rooms[1]);
    let sids: Vec<String> = (0..8).map(|_| WaitingRoom::new_session_id()).collect();
    for (i, s) in sids.iter().enumerate() {
        rooms[i % 2].join(s, None).await.unwrap();
    }
    let inv = |total, sold, held| Inventory { total, sold, held };

    // Every seat held at checkout: nobody is let in, and the line is told it is paused.
    reporter.set_inventory(inv(10, 0, 10)).await.unwrap();
    clock.advance(Duration::from_secs(1));
    assert!(door.tick_now().await.unwrap().admitted.is_empty());
    assert_eq!(door.snapshot().settings.inventory, Some(inv(10, 0, 10)));
    let waiting = door.locate(&sids[0], None).await.unwrap();
    assert_eq!(door.status(waiting.as_ref()).state, ViewState::Paused);

    // Two seats come back: two people get in, and no more within the minute, whatever the capacity.
    reporter.set_inventory(inv(10, 0, 8)).await.unwrap();
    clock.advance(Duration::from_secs(1));
    assert_eq!(door.tick_now().await.unwrap().admitted, sids[..2].to_vec());
    clock.advance(Duration::from_secs(1));
    assert!(door.tick_now().await.unwrap().admitted.is_empty());
    assert!(reporter.tick_now().await.unwrap().admitted.is_empty());

    // They buy: two seats on the door's instance, one through a verifier's Redis finish sink. The seats move from
    // held to sold, as the reporting instance reads them.
    for s in &sids[..2] {
        door.claim(s).await.unwrap();
    }
    assert!(door.finish(&sids[0], 2).await.unwrap());
    let sink = waitroom_verify::redis::RedisFinishSink::connect(server.url())
        .await
        .unwrap();
    sink.record(&waitroom_verify::Finish {
        session_id: sids[1].clone(),
        event: ev.clone(),
        seats: 1,
        at_ms: waitroom_verify::Clock::now_ms(&clock),
    })
    .await
    .unwrap();
    reporter.refresh().await.unwrap();
    let snap = reporter.snapshot();
    assert_eq!(snap.settings.inventory, Some(inv(10, 3, 5)));
    assert_eq!(
        (
            snap.active,
            snap.counters.finished,
            snap.counters.orders,
            snap.counters.seats_bought
        ),
        (0, 2, 2, 3)
    );
    assert_eq!(reporter.stats().active, 0);

    // A minute later the two available seats let two more in, on either instance.
    clock.advance(Duration::from_secs(61));
    let mut let_in = door.tick_now().await.unwrap().admitted;
    let_in.extend(reporter.tick_now().await.unwrap().admitted);
    assert_eq!(let_in, sids[2..4].to_vec());

    // Sold out, reported by one instance: the other lets nobody in, ever, turns the rest of the line away and
    // tells them so.
    reporter.set_inventory(inv(10, 10, 0)).await.unwrap();
    let mut turned_away = Vec::new();
    for _ in 0..3 {
        clock.advance(Duration::from_secs(61));
        let r = door.tick_now().await.unwrap();
        assert!(r.admitted.is_empty());
        turned_away.extend(r.turned_away);
        let r = reporter.tick_now().await.unwrap();
        assert!(r.admitted.is_empty());
        turned_away.extend(r.turned_away);
    }
    assert_eq!(turned_away, sids[4..].to_vec(), "the rest, in line order");
    assert!(door.snapshot().settings.sold_out());
    let gone = door.locate(&sids[7], None).await.unwrap();
    assert_eq!(gone.as_ref().unwrap().state, SessionState::TurnedAway);
    assert_eq!(door.status(gone.as_ref()).state, ViewState::SoldOut);
    let c = door.snapshot().counters;
    assert_eq!((c.admitted, c.turned_away), (4, 4));
    assert_eq!(door.snapshot().waiting(), 0);
}

/// The figures for BENCHMARKS.md ("First contacts in batches", issue 24): first contacts' tickets a second into one
/// Redis from three room instances in one process (each with its own connection, 64 tasks each asking for tickets
/// in a loop, a new session id each), as shipped (batched) against one store call per ticket
/// (`RoomBuilder::ticket_batch(1)`), interleaved in the same run; Redis commands per ticket
/// (`RedisStore::commands_sent`); the latency of one ticket under that load. Run with
/// `cargo test --release -p waitroom-layer --features redis --test redis_room redis_ticket_figures -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "prints the figures for BENCHMARKS.md"]
async fn redis_ticket_figures() {
    const TASKS: usize = 64;
    const RUN: Duration = Duration::from_secs(3);
    let server = RedisServer::from_env_or_start();
    let clock = ManualClock::starting_now();
    for (label, batch) in [
        ("one store call each", Some(1)),
        ("batched (as shipped)", None),
        ("one store call each", Some(1)),
        ("batched (as shipped)", None),
    ] {
        let ev = event("ticket-fig");
        let mut stores = Vec::new();
        let mut rooms = Vec::new();
        for _ in 0..3 {
            let store = RedisStore::connect(server.url()).await.unwrap();
            let mut b = WaitingRoom::builder(&ev)
                .capacity(1)
                .clock(Arc::new(clock.clone()))
                .background(false)
                .store(store.clone());
            if let Some(n) = batch {
                b = b.ticket_batch(n);
            }
            let room = b.build().await.unwrap();
            // A paused door: every first contact gets a ticket.
            room.pause().await.unwrap();
            stores.push(store);
            rooms.push(room);
        }
        // As in a running sale: each instance's snapshot has seen a number given out (so batches ask for the
        // numbers alone, `Store::line_tickets`).
        for (i, room) in rooms.iter().enumerate() {
            room.ticket(&format!("warm-up-{i}-xxxxxxxxxxxx"))
                .await
                .unwrap();
        }
        for room in &rooms {
            room.tick_now().await.unwrap();
        }
        let sent0: u64 = stores.iter().map(RedisStore::commands_sent).sum();
        let t0 = Instant::now();
        let mut tasks = Vec::new();
        for room in &rooms {
            for _ in 0..TASKS {
                let room = room.clone();
                tasks.push(tokio::spawn(async move {
                    let mut lat = Vec::new();
                    while t0.elapsed() < RUN {
                        let s = WaitingRoom::new_session_id();
                        let t = Instant::now();
                        let (p, issued) = room.ticket(&s).await.unwrap();
                        lat.push(t.elapsed());
                        assert!(issued.is_some() && p.number.is_some());
                    }
                    lat
                }));
            }
        }
        let mut lat = Vec::new();
        for t in tasks {
            lat.extend(t.await.unwrap());
        }
        let secs = t0.elapsed().as_secs_f64();
        let sent = stores.iter().map(RedisStore::commands_sent).sum::<u64>() - sent0;
        let n = lat.len() as u64;
        assert_eq!(
            rooms[0].store().snapshot(&ev).await.unwrap().last_number,
            n + rooms.len() as u64,
            "every ticket a number, none twice"
        );
        lat.sort_unstable();
        let pct = |p: usize| lat[(lat.len() * p / 100).min(lat.len() - 1)];
        println!(
            "{label}: {n} tickets in {secs:.2} s = {:.0} tickets/s from 3 instances; {sent} Redis commands = {:.4} per ticket; latency p50 {:?} p99 {:?}",
            n as f64 / secs,
            sent as f64 / n as f64,
            pct(50),
            pct(99),
        );
    }
}

/// `missed` is kept a second a set (`missed:<second>`); a session a version before wrote into the one `missed` set
/// (an on-sale running through an upgrade) is still read by the tick: past the return window it ends abandoned,
/// as one in a second's set does; and an entry older than its session's record (left in an earlier second) ends
/// nobody.
#[tokio::test]
async fn a_session_missed_in_the_one_set_of_versions_before_still_ends_after_the_window() {
    let server = RedisServer::from_env_or_start();
    let store = RedisStore::connect(server.url()).await.unwrap();
    let ev = event("missedold");
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
    store.init(&ev, &settings).await.unwrap();
    let t0 = 1_800_000_000_000u64;
    let tick = |now_ms| Tick {
        now_ms,
        arrival_window_ms: 60_000,
        abandon_after_ms: 60_000,
        return_window_ms: 120_000,
        max_scan: 1_000,
    };
    for (sid, at) in [
        ("a-one", t0),
        ("b-new", t0 + 1),
        ("c-old", t0 + 2),
        ("d-in", t0 + 3),
    ] {
        let join = Join {
            session: sid.into(),
            account: None,
            now_ms: at,
            draw_key: 0,
        };
        store.join(&ev, &join).await.unwrap();
    }
    assert_eq!(let_in_and_finish(&store, &ev, &tick(t0 + 10)).await, 1);
    // d polls; b and c do not: past the grace both are missed and d goes in.
    let later = t0 + 90_000;
    let touches = Touches {
        now_ms: later,
        waiting: vec![waitroom_layer::store::Mark {
            session: "d-in".into(),
            number: Some(4),
        }],
        active: vec![],
        idle_timeout_ms: 60_000,
        abandon_after_ms: 60_000,
        tickets: 0,
    };
    store.touch(&ev, &touches).await.unwrap();
    let r = store.tick(&ev, &tick(later)).await.unwrap();
    assert_eq!(r.admitted, ["d-in"]);
    assert_eq!(r.missed, ["b-new", "c-old"]);
    // c's entry as a version before kept it: in the one `missed` set, its second's set gone.
    let second = store.key(&ev, &format!("missed:{}", later / 1000));
    let old = store.key(&ev, "missed");
    assert_eq!(server.command(&["ZREM", &second, "c-old"]), "1");
    assert_eq!(
        server.command(&["ZADD", &old, &later.to_string(), "c-old"]),
        "1"
    );
    // And an entry for b left in an earlier second (as a come-back of a version before leaves it: it took the
    // session out of the one set only), older than b's record: it ends nobody when it comes due.
    let earlier = store.key(&ev, &format!("missed:{}", t0 / 1000));
    assert_eq!(
        server.command(&["ZADD", &earlier, &t0.to_string(), "b-new"]),
        "1"
    );
    let meta = store.key(&ev, "meta");
    server.command(&["HSET", &meta, "xlo", &(t0 / 1000).to_string()]);
    // Within the window nobody ends (the stale entry is due, and goes); past it both do.
    let r = store.tick(&ev, &tick(later + 60_000)).await.unwrap();
    assert!(r.abandoned.is_empty(), "{r:?}");
    assert_eq!(
        server.command(&["EXISTS", &earlier]),
        "0",
        "the stale entry went"
    );
    let mut ended = store
        .tick(&ev, &tick(later + 120_001))
        .await
        .unwrap()
        .abandoned;
    ended.sort();
    assert_eq!(ended, ["b-new", "c-old"]);
    for sid in ["b-new", "c-old"] {
        let p = store.lookup(&ev, sid).await.unwrap().expect("known");
        assert_eq!(p.state, SessionState::Abandoned, "{sid}");
    }
    assert_eq!(
        server.command(&["EXISTS", &old, &second]),
        "0",
        "both sets emptied"
    );
}

/// A page of the draw looks at 256 buckets at most, whoever is in them: 100 people drawn into 1,024 buckets come
/// in 4 pages (256 buckets each, most of them empty), not in one call that walks all 1,024, and every one of the
/// 100 is in one of them with the number a lookup gives.
#[tokio::test]
async fn a_page_of_the_draw_looks_at_a_bounded_number_of_buckets() {
    let server = RedisServer::from_env_or_start();
    let (store, ev, sessions, start) = prequeue_on(&server, "drawsparse", 10, true, 100, |_| {
        WaitingRoom::new_session_id()
    })
    .await;
    open_now(&store, &ev, start).await;
    // The draw (paused: nobody goes in).
    store.tick(&ev, &door_tick(start + 1_000)).await.unwrap();
    let pages = drawn_pages(&store, &ev, 500).await;
    assert_eq!(pages.len(), 4, "1,024 buckets, 256 a page");
    let kept: HashMap<String, u64> = pages.into_iter().flat_map(|p| p.numbers).collect();
    assert_eq!(kept.len(), 100, "everyone drawn is in a page");
    for sid in &sessions {
        let p = store.lookup(&ev, sid).await.unwrap().expect("known");
        assert_eq!(p.number, kept.get(sid).copied(), "{sid}");
    }
}

/// The draw's numbers read a page at a time (`Store::drawn_numbers`) are the numbers `lookup` answers, even when
/// the door lets people in between two pages: the pages together hold everyone still waiting in the drawn segment
/// once, with their own number, and nobody let in before the page was read. Small pages (7) cross bucket ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_draws_pages_give_the_numbers_a_lookup_gives_while_the_door_lets_people_in() {
    let server = RedisServer::from_env_or_start();
    // Eight buckets of about 37 each: pages cross bucket ends, and the door takes several from each bucket's front
    // (the default 16,384 buckets would hold one person each here). The store takes any id from a library caller:
    // one with spaces in it is paged like any other.
    let (store, ev, sessions, start) = prequeue_on(&server, "drawpages", 3, false, 300, |k| {
        if k % 50 == 7 {
            format!("an id with spaces {k}")
        } else {
            WaitingRoom::new_session_id()
        }
    })
    .await;
    let cursor = waitroom_layer::store::DrawCursor::default();
    assert_eq!(
        store.drawn_numbers(&ev, &cursor, 7).await.unwrap(),
        None,
        "nothing is drawn before the opening"
    );
    // The draw, and the first 10 go in (and leave).
    draw_and_let_in_ten(&store, &ev, start).await;
    // Two people still waiting moved to the front: their numbers in the drawn segment are nobody's now (an empty
    // member in the page's run, which must not shift the numbers after it).
    let mut waiting_now = Vec::new();
    for sid in &sessions {
        let p = store.lookup(&ev, sid).await.unwrap().expect("known");
        if p.state == SessionState::Waiting {
            waiting_now.push(sid.clone());
        }
    }
    let moved = [waiting_now[50].clone(), waiting_now[151].clone()];
    for sid in &moved {
        let p = store.move_to_front(&ev, sid, start + 1_500).await.unwrap();
        assert!(p.is_some(), "{sid} is moved to the front");
    }
    let mut kept: HashMap<String, u64> = HashMap::new();
    let mut next = Some(cursor);
    let mut pages = 0;
    let mut let_in_between = 0;
    while let Some(from) = next {
        let page = store
            .drawn_numbers(&ev, &from, 7)
            .await
            .unwrap()
            .expect("a page after the draw");
        assert!(page.numbers.len() <= 7, "a page holds at most its size");
        for (sid, n) in page.numbers {
            // Each session's number is the one a lookup gives right now.
            let p = store.lookup(&ev, &sid).await.unwrap().expect("known");
            assert_eq!(p.state, SessionState::Waiting, "{sid}");
            assert_eq!(p.number, Some(n), "{sid}");
            assert!(kept.insert(sid, n).is_none(), "a session in two pages");
        }
        next = page.next;
        pages += 1;
        // Every fifth page, the door lets the next 10 in.
        if pages % 5 == 0 {
            let now = start + 2_000 + pages;
            let_in_between += let_in_and_finish(&store, &ev, &door_tick(now)).await;
        }
        assert!(pages < 1_000, "the pages never end");
    }
    // Everyone still waiting was in a page once with the number a lookup gives; nobody kept is let in yet.
    for sid in &moved {
        assert!(!kept.contains_key(sid), "{sid} was moved out of the draw");
    }
    let mut waiting = 0;
    for sid in sessions.iter().filter(|s| !moved.contains(s)) {
        let p = store.lookup(&ev, sid).await.unwrap().expect("known");
        if p.state == SessionState::Waiting {
            waiting += 1;
            assert_eq!(
                kept.get(sid).copied(),
                p.number,
                "{sid} waits, with its number kept"
            );
        }
    }
    assert_eq!(waiting, kept.len() - kept_let_in(&store, &ev, &kept).await);
    assert!(let_in_between > 0, "the door let people in between pages");
    assert!(pages >= 300 / 7, "{pages} pages");
}

/// A page's run is its members joined by newlines, so a session id holding a newline (the room's never do; a
/// library caller's may) would shift every number after it: the page that holds one is refused (an error, and the
/// room asks the store about those people, as before the pages), never read off by one. The other pages read, of
/// whole buckets (100 a page, buckets of about 37), give the numbers a lookup gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draw_page_holding_a_session_id_with_a_newline_is_refused_not_read_off_by_one() {
    let server = RedisServer::from_env_or_start();
    // The door paused: the draw runs and nobody is let in, so the id with a newline is in a page (let in, it would
    // be in none, one time in 30).
    let (store, ev, _sessions, start) = prequeue_on(&server, "drawnewline", 3, true, 300, |k| {
        if k == 150 {
            format!("an id\nwith a newline {k}")
        } else {
            WaitingRoom::new_session_id()
        }
    })
    .await;
    draw_with_the_door_paused(&store, &ev, start).await;
    let mut next = Some(DrawCursor::default());
    let (mut read, mut refused) = (0, None);
    while let Some(from) = next.take() {
        match store.drawn_numbers(&ev, &from, 100).await {
            Ok(page) => {
                let page = page.expect("a page after the draw");
                for (sid, n) in page.numbers {
                    assert!(!sid.contains('\n'), "{sid:?} was read from a run");
                    let p = store.lookup(&ev, &sid).await.unwrap().expect("known");
                    assert_eq!(p.number, Some(n), "{sid}");
                    read += 1;
                }
                next = page.next;
            }
            Err(e) => refused = Some(e.to_string()),
        }
        assert!(read < 1_000, "the pages never end");
    }
    let refused = refused.expect("the page holding the id with a newline is refused");
    assert!(refused.contains("newline"), "{refused}");
    assert!(
        read < 290,
        "{read} read: the refused page's people are not among them"
    );
}

/// A page of the draw holds whole buckets, and Redis reads each bucket once: the bucket that may not fit in what is
/// left of a page (it held more at the draw) is left for the next page unread, not read in part and dropped. Pages
/// of 100 over 8 buckets of about 37: the pages' `ZRANGE`s are the 8 buckets, and the pages hold everyone at the
/// number a lookup gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_the_draw_reads_no_bucket_it_leaves_for_the_next_page() {
    let server = RedisServer::start(); // its own: the test counts the server's ZRANGEs
    let (store, ev, sessions, start) = prequeue_on(&server, "drawwhole", 3, true, 300, |_| {
        WaitingRoom::new_session_id()
    })
    .await;
    draw_with_the_door_paused(&store, &ev, start).await;
    let zranges = command_stat(&server, "zrange").0;
    let pages = drawn_pages(&store, &ev, 100).await;
    assert!(pages.len() >= 3, "{} pages of 100 for 300", pages.len());
    assert_eq!(
        command_stat(&server, "zrange").0 - zranges,
        8,
        "one ZRANGE a bucket over {} pages",
        pages.len()
    );
    let mut read = 0;
    for (sid, n) in pages.iter().flat_map(|p| &p.numbers) {
        let p = store.lookup(&ev, sid).await.unwrap().expect("known");
        assert_eq!(p.number, Some(*n), "{sid}");
        read += 1;
    }
    assert_eq!(read, sessions.len(), "everyone in a page");
}

/// Every room instance reads the same pages of the draw, so Redis works each out once: a second instance's store
/// gets the pages the first read (the same cursors, the same numbers) with no `ZRANGE` of a bucket, also after the
/// door let people in between the two reads. Those let in since are in the kept pages at numbers at or below the
/// head, as in a page an instance has kept since the draw; everyone still waiting has the number a lookup gives.
/// Once the kept pages are gone (they expire after a minute), the pages are worked out again, without them. Pages
/// kept for one draw are never read for another (the on-sale purged and made again under the same id), and a Redis
/// that refuses writes answers the pages all the same, keeping none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_instance_reads_the_draws_pages_without_redis_working_them_out_again() {
    let server = RedisServer::start(); // its own: the test counts the server's ZRANGEs
    let (store, ev, sessions, start) = prequeue_on(&server, "drawkeep", 3, false, 300, |_| {
        WaitingRoom::new_session_id()
    })
    .await;
    draw_and_let_in_ten(&store, &ev, start).await;
    // Pages of 7 in buckets of about 37: most pages end inside a bucket (a cursor with a score and a member).
    let first = drawn_pages(&store, &ev, 7).await;
    assert!(
        first
            .iter()
            .any(|p| p.next.as_ref().is_some_and(|c| c.after.is_some())),
        "some page ends inside a bucket"
    );
    assert_eq!(
        let_in_and_finish(&store, &ev, &door_tick(start + 2_000)).await,
        10
    );
    let other = RedisStore::builder(server.url())
        .draw_buckets_log2(3)
        .connect()
        .await
        .unwrap();
    let zranges = command_stat(&server, "zrange").0;
    let second = drawn_pages(&other, &ev, 7).await;
    assert_eq!(
        command_stat(&server, "zrange").0,
        zranges,
        "no bucket read again for the second instance"
    );
    assert_eq!(second, first, "the same pages");
    let served = other.snapshot(&ev).await.unwrap().served;
    let mut let_in_since = 0;
    let mut seen = 0;
    for (sid, n) in second.iter().flat_map(|p| &p.numbers) {
        let p = other.lookup(&ev, sid).await.unwrap().expect("known");
        if p.state == SessionState::Waiting {
            assert_eq!(p.number, Some(*n), "{sid} waits with the number kept");
        } else {
            assert!(
                *n <= served,
                "{sid}, let in since, at {n}: at or below the head ({served})"
            );
            let_in_since += 1;
        }
        seen += 1;
    }
    assert_eq!(let_in_since, 10, "the ten let in between the reads");
    assert_eq!(
        seen,
        sessions.len() - 10,
        "everyone waiting at the first read"
    );
    // The kept pages gone: worked out again from the buckets, without the people let in.
    let kept = kept_pages(&server, &ev);
    assert_eq!(kept.len(), first.len(), "a page kept per cursor: {kept:?}");
    for k in &kept {
        server.command(&["DEL", k]);
    }
    let third = drawn_pages(&other, &ev, 7).await;
    assert!(
        command_stat(&server, "zrange").0 > zranges,
        "the buckets read again"
    );
    assert_eq!(
        third.iter().map(|p| p.numbers.len()).sum::<usize>(),
        sessions.len() - 20,
        "only the people still waiting"
    );
    // The on-sale purged and made again under the same id, and drawn again, later, with as many other people (the
    // same drawn segment): the pages kept from the first draw, set aside and put back as if an instance still
    // reading had written them while the purge ran, are not read for the second.
    let kept = kept_pages(&server, &ev);
    assert!(!kept.is_empty(), "the third read kept its pages");
    for (i, k) in kept.iter().enumerate() {
        server.command(&["COPY", k, &format!("aside:{i}")]);
    }
    other.purge(&ev).await.unwrap();
    for (i, k) in kept.iter().enumerate() {
        server.command(&["RENAME", &format!("aside:{i}"), k]);
    }
    assert!(other.snapshot(&ev).await.is_err(), "the on-sale is gone");
    let later = start + 3_600_000;
    other.init(&ev, &far_draw(false)).await.unwrap();
    let newcomers = fill_prequeue(&other, &ev, later, sessions.len() as u64, |_| {
        WaitingRoom::new_session_id()
    })
    .await;
    draw_and_let_in_ten(&other, &ev, later).await;
    let fourth = drawn_pages(&other, &ev, 7).await;
    let drawn: Vec<&String> = fourth
        .iter()
        .flat_map(|p| p.numbers.iter().map(|(s, _)| s))
        .collect();
    assert_eq!(
        drawn.len(),
        newcomers.len() - 10,
        "the second draw's people still waiting"
    );
    assert!(
        drawn.iter().all(|s| newcomers.contains(s)),
        "nobody of the first draw in the second's pages"
    );
    // A Redis that refuses writes (full, under `noeviction`) still answers the pages; it keeps none.
    for k in kept_pages(&server, &ev) {
        server.command(&["DEL", &k]);
    }
    server.command(&["CONFIG", "SET", "maxmemory", "1"]);
    let full = drawn_pages(&other, &ev, 7).await;
    server.command(&["CONFIG", "SET", "maxmemory", "0"]);
    assert_eq!(full, fourth, "the same pages from a full Redis");
    assert!(kept_pages(&server, &ev).is_empty(), "none kept");
}

/// Pre-queued people's liveness marks reach Redis in `HSET`s of at most 64 fields (`TOUCH_CHUNK`), each into the
/// `pseen` hash of its session (`pseen:<k>`, k = `pseen_shard`, the sum of the id's bytes modulo `PSEEN_SHARDS`), so
/// no hash grows to the pre-queue's size. Each field of an `HSET` into a hash that is growing moves a bucket of its
/// table into the new one, twice as large, and Redis makes that table in the command that fills the old one: 256
/// fields a command took 3 to 5 ms while one `pseen` grew in the seed's soak, and 64 fields 6.8 ms as it reached
/// 2^20. 1,025 marks, 130 of them in hash 0 and the rest at random: the hashes hold what the sum says (every mark
/// written, each where the sum puts it), hash 0's in 3 commands (64, 64, 2), one command for each other hash (its
/// marks are well under 64), every hash given its expiry.
#[tokio::test]
async fn pre_queue_marks_reach_redis_in_commands_of_at_most_64_fields_each_in_its_own_hash() {
    use waitroom_layer::store::{PSEEN_SHARDS, pseen_shard};
    // A private server: the test counts its commands.
    let server = RedisServer::start();
    // 130 ids of hash 0 (three commands' worth), then any.
    let mut ids: Vec<String> = std::iter::repeat_with(WaitingRoom::new_session_id)
        .filter(|s| pseen_shard(s) == 0)
        .take(130)
        .collect();
    ids.extend(std::iter::repeat_with(WaitingRoom::new_session_id).take(1_025 - 130));
    let (store, ev, sessions, start) = prequeue_on(&server, "pseenchunks", 10, true, 1_025, |i| {
        ids[i as usize].clone()
    })
    .await;
    let mut by_hash: HashMap<u64, Vec<String>> = HashMap::new();
    for s in &sessions {
        let k = s.bytes().map(u64::from).sum::<u64>() % 64;
        assert_eq!((pseen_shard(s), PSEEN_SHARDS), (k, 64), "the byte sum: {s}");
        by_hash.entry(k).or_default().push(s.clone());
    }
    assert!(by_hash[&0].len() >= 130);
    assert!(
        by_hash.iter().all(|(k, v)| *k == 0 || v.len() <= 64),
        "every other hash under a command's worth"
    );
    let before = command_stat(&server, "hset").0;
    let touches = Touches {
        now_ms: start + 60_000,
        waiting: sessions
            .iter()
            .map(|s| waitroom_layer::store::Mark {
                session: s.clone(),
                number: None,
            })
            .collect(),
        active: vec![],
        idle_timeout_ms: 600_000,
        abandon_after_ms: 180_000,
        tickets: 0,
    };
    store.touch(&ev, &touches).await.unwrap();
    let expect: usize = by_hash.values().map(|v| v.len().div_ceil(64)).sum();
    assert_eq!(
        command_stat(&server, "hset").0 - before,
        expect as u64,
        "1,025 marks in HSETs of at most 64 fields, one hash a command"
    );
    assert!(expect >= by_hash.len() + 2, "hash 0 took three commands");
    let mut written = 0;
    for (k, v) in &by_hash {
        let key = store.key(&ev, &format!("pseen:{k}"));
        for s in v {
            assert_eq!(
                server.command(&["HGET", &key, s]).trim(),
                (start + 60_000).to_string(),
                "{s}'s mark in hash {k}"
            );
        }
        written += server
            .command(&["HLEN", &key])
            .trim()
            .parse::<usize>()
            .unwrap();
        let ttl: i64 = server.command(&["PTTL", &key]).trim().parse().unwrap();
        assert!(ttl > 180_000, "hash {k} kept past the grace: {ttl} ms");
    }
    assert_eq!(written, 1_025, "every mark written, and nothing else");
    assert_eq!(
        server.command(&["EXISTS", &store.key(&ev, "pseen")]).trim(),
        "0",
        "no single hash of everyone"
    );
}

/// How many times Redis ran `cmd` since it started and the µs it took (`INFO commandstats`; commands run by
/// scripts included).
fn command_stat(server: &RedisServer, cmd: &str) -> (u64, u64) {
    let info = server.command(&["INFO", "commandstats"]);
    let line = info
        .lines()
        .find(|l| l.starts_with(&format!("cmdstat_{cmd}:")))
        .unwrap_or("");
    let field = |name: &str| {
        line.split([':', ','])
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("calls"), field("usec"))
}

/// A tick of the door over a draw's tests: a minute's arrival window, ten minutes' grace and return window.
fn door_tick(now_ms: u64) -> waitroom_layer::store::Tick {
    waitroom_layer::store::Tick {
        now_ms,
        arrival_window_ms: 60_000,
        abandon_after_ms: 600_000,
        return_window_ms: 600_000,
        max_scan: 20_000,
    }
}

/// Every page of the draw of `ev`, `most` sessions a page, read from the first.
async fn drawn_pages(store: &RedisStore, ev: &str, most: usize) -> Vec<DrawnPage> {
    let mut out = Vec::new();
    let mut next = Some(DrawCursor::default());
    while let Some(from) = next {
        let page = store
            .drawn_numbers(ev, &from, most)
            .await
            .unwrap()
            .expect("a page after the draw");
        next = page.next.clone();
        out.push(page);
        assert!(out.len() < 1_000, "the pages never end");
    }
    out
}

/// The draw's pages Redis keeps for `ev` (their keys).
fn kept_pages(server: &RedisServer, ev: &str) -> Vec<String> {
    let keys = server.command(&["KEYS", &format!("*{{{ev}}}:draw:page:*")]);
    keys.lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The door opened at `at` on an on-sale of capacity 10 (`far_draw`, not paused): the draw's tick a second later
/// lets the first 10 in, and they take their places and finish.
async fn draw_and_let_in_ten(store: &RedisStore, ev: &str, at: u64) {
    open_now(store, ev, at).await;
    assert_eq!(
        let_in_and_finish(store, ev, &door_tick(at + 1_000)).await,
        10
    );
}

/// The door opened at `at` on an on-sale whose door is paused (`far_draw(true)`): the draw's tick a second later
/// draws and lets nobody in.
async fn draw_with_the_door_paused(store: &RedisStore, ev: &str, at: u64) {
    open_now(store, ev, at).await;
    let r = store.tick(ev, &door_tick(at + 1_000)).await.unwrap();
    assert!(r.admitted.is_empty(), "the door paused: {r:?}");
}

/// The operator opens the door now (`at`): the draw runs at the next tick.
async fn open_now(store: &RedisStore, ev: &str, at: u64) {
    store
        .update(
            ev,
            &waitroom_layer::store::SettingsChange::OpenNow { now_ms: at },
        )
        .await
        .unwrap();
}

/// A Redis store with 2^`log2` draw buckets and an on-sale of capacity 10 (paused or not) whose random draw is
/// far off, and `people` who joined its pre-queue one a millisecond from the returned start, their ids from `id`:
/// the store, the on-sale, the ids in join order and the start.
async fn prequeue_on(
    server: &RedisServer,
    tag: &str,
    log2: u8,
    paused: bool,
    people: u64,
    id: impl Fn(u64) -> String,
) -> (RedisStore, String, Vec<String>, u64) {
    let store = RedisStore::builder(server.url())
        .draw_buckets_log2(log2)
        .connect()
        .await
        .unwrap();
    let ev = event(tag);
    store.init(&ev, &far_draw(paused)).await.unwrap();
    let start = 1_800_000_000_000u64;
    let sessions = fill_prequeue(&store, &ev, start, people, id).await;
    (store, ev, sessions, start)
}

/// An on-sale of capacity 10 (paused or not) whose random draw is far off.
fn far_draw(paused: bool) -> Settings {
    Settings {
        capacity: 10,
        admit_per_minute: None,
        paused,
        closed: false,
        opens_at_ms: Some(u64::MAX / 2),
        random_draw: true,
        inventory: None,
        prequeue_opens_at_ms: None,
        closes_at_ms: None,
    }
}

/// `people` join the pre-queue of `ev`, one a millisecond from `start`, their ids from `id`: the ids in join order.
async fn fill_prequeue(
    store: &RedisStore,
    ev: &str,
    start: u64,
    people: u64,
    id: impl Fn(u64) -> String,
) -> Vec<String> {
    let mut sessions = Vec::new();
    for k in 0..people {
        let join = Join {
            session: id(k),
            account: None,
            now_ms: start + k,
            draw_key: rand::random(),
        };
        let p = store.join(ev, &join).await.unwrap();
        assert_eq!(p.state, SessionState::PreQueue);
        sessions.push(join.session);
    }
    sessions
}

/// Runs a tick, and the sessions it lets in take their place and finish at once (their places free). Returns how many
/// it let in.
async fn let_in_and_finish(
    store: &RedisStore,
    ev: &str,
    tick: &waitroom_layer::store::Tick,
) -> usize {
    let r = store.tick(ev, tick).await.unwrap();
    for sid in &r.admitted {
        store.claim(ev, sid, tick.now_ms, 60_000).await.unwrap();
        assert!(store.finish(ev, sid, 0, tick.now_ms).await.unwrap());
    }
    r.admitted.len()
}

/// How many of `kept` are no longer waiting (let in after their page was read).
async fn kept_let_in(store: &RedisStore, ev: &str, kept: &HashMap<String, u64>) -> usize {
    let mut n = 0;
    for sid in kept.keys() {
        if store.lookup(ev, sid).await.unwrap().expect("known").state != SessionState::Waiting {
            n += 1;
        }
    }
    n
}

/// A room over its own `RedisStore` (eight draw buckets) on `clock`, with a random draw at `opens_ms`, driven by
/// hand, behind a real HTTP server protecting `/checkout`.
async fn drawn_site(
    server: &RedisServer,
    ev: &str,
    clock: &ManualClock,
    opens_ms: u64,
) -> (RedisStore, WaitingRoom, String) {
    drawn_site_over(server, ev, clock, opens_ms, None).await
}

/// The Redis store, each page of the draw's read waiting for a permit of `pages`: a test holds the read between
/// pages to poll while it is under way (else a fast read can finish before the first poll). Everything else goes
/// straight to Redis.
#[derive(Debug)]
struct HeldDraw {
    inner: RedisStore,
    pages: Arc<tokio::sync::Semaphore>,
}

#[async_trait::async_trait]
impl Store for HeldDraw {
    async fn init(&self, e: &str, d: &Settings) -> Result<Settings, StoreError> {
        self.inner.init(e, d).await
    }
    async fn join(&self, e: &str, j: &Join) -> Result<Placement, StoreError> {
        self.inner.join(e, j).await
    }
    async fn ticket(&self, e: &str, now_ms: u64) -> Result<Ticket, StoreError> {
        self.inner.ticket(e, now_ms).await
    }
    async fn tickets(&self, e: &str, n: usize, now_ms: u64) -> Result<Vec<Ticket>, StoreError> {
        self.inner.tickets(e, n, now_ms).await
    }
    async fn line_tickets(&self, e: &str, n: usize, known: u64) -> Result<Option<u64>, StoreError> {
        self.inner.line_tickets(e, n, known).await
    }
    fn ticket_batch(&self) -> usize {
        self.inner.ticket_batch()
    }
    fn claims_in_touches(&self) -> bool {
        self.inner.claims_in_touches()
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
    async fn drawn_numbers(
        &self,
        e: &str,
        from: &DrawCursor,
        most: usize,
    ) -> Result<Option<DrawnPage>, StoreError> {
        self.pages
            .acquire()
            .await
            .expect("the gate stays open")
            .forget();
        self.inner.drawn_numbers(e, from, most).await
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
        self.inner.tick(e, t).await
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

/// [`drawn_site`], its read of the draw held between pages by `pages` when given (see [`HeldDraw`]).
async fn drawn_site_over(
    server: &RedisServer,
    ev: &str,
    clock: &ManualClock,
    opens_ms: u64,
    pages: Option<Arc<tokio::sync::Semaphore>>,
) -> (RedisStore, WaitingRoom, String) {
    let store = RedisStore::builder(server.url())
        .draw_buckets_log2(3)
        .connect()
        .await
        .unwrap();
    let room = WaitingRoom::builder(ev)
        .capacity(10)
        .fairness(waitroom_layer::Fairness::RandomAtOpen {
            opens_at: std::time::UNIX_EPOCH + Duration::from_millis(opens_ms),
        })
        .clock(Arc::new(clock.clone()))
        .cookie_secret(*b"a-cookie-secret-shared-by-both!!")
        .secure_cookies(false)
        .background(false)
        .straight_in(false);
    let room = match pages {
        Some(pages) => room.store(HeldDraw {
            inner: store.clone(),
            pages,
        }),
        None => room.store(store.clone()),
    }
    .build()
    .await
    .unwrap();
    let app = axum::Router::new()
        .route("/checkout", axum::routing::get(|| async { "seat map" }))
        .layer(
            waitroom_layer::WaitingRoomLayer::builder(room.clone())
                .protect_prefix("/checkout")
                .build()
                .unwrap(),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (store, room, url)
}

/// A drawn person's poll (`GET /waitroom/status?return_to=%2Fcheckout` with `cookie`, as JSON), answered 200: the
/// status and the cookies it sets (`Set-Cookie` lines).
async fn drawn_poll(
    client: &reqwest::Client,
    url: &str,
    cookie: &str,
) -> (serde_json::Value, Vec<String>) {
    let res = client
        .get(format!("{url}/waitroom/status?return_to=%2Fcheckout"))
        .header("accept", "application/json")
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let set: Vec<String> = res
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect();
    (res.json().await.unwrap(), set)
}

/// The session cookie among `set` (see [`drawn_poll`]), if any.
fn session_set(set: Vec<String>) -> Option<String> {
    set.into_iter().find(|c| c.starts_with("waitroom_session="))
}

/// `n` people join the pre-queue at `url` (a protected page, as a browser asks for it): a client that follows no
/// redirect, and each one's session cookie (`name=value`), checked to carry the pre-queue mark.
async fn join_prequeue(url: &str, n: usize) -> (reqwest::Client, Vec<String>) {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut people = Vec::new();
    for _ in 0..n {
        let res = client
            .get(format!("{url}/checkout"))
            .header("accept", "text/html")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "the holding page");
        let cookie = res
            .headers()
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().unwrap().split(';').next().unwrap().to_owned())
            .find(|c| c.starts_with("waitroom_session="))
            .expect("a session cookie");
        // The pre-queue mark: `p`, or `pt<time>` for a pre-queue ticket (the opening further off than the grace).
        assert!(
            cookie.contains(".p.") || cookie.contains(".pt"),
            "a pre-queue cookie: {cookie}"
        );
        people.push(cookie);
    }
    (client, people)
}

/// The status JSON `url` answers the person with `cookie` (`name=value`).
async fn status_with(client: &reqwest::Client, url: &str, cookie: &str) -> serde_json::Value {
    client
        .get(format!("{url}/waitroom/status"))
        .header("accept", "application/json")
        .header("cookie", cookie)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// This instance's drawn numbers kept so far (`waitroom_draw_numbers_kept`).
fn draw_numbers_kept(room: &WaitingRoom) -> u64 {
    room.metrics_text()
        .lines()
        .find_map(|l| l.strip_prefix("waitroom_draw_numbers_kept"))
        .and_then(|v| v.split_whitespace().last())
        .and_then(|v| v.parse().ok())
        .expect("the draw_numbers_kept gauge")
}

/// After the draw, each instance reads the draw's numbers (two pages of up to 1,000 here) and answers a drawn person's
/// polls from them, with no Redis command: the number the store gives (a lookup), whichever instance the person
/// polls, and sealed into their cookie as a number from the store would be, at their moment of the ten minutes
/// after the draw (`RESEAL_SPREAD_MS`), not all at the first poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drawn_persons_first_poll_is_answered_from_the_kept_draw_with_the_stores_number() {
    let server = RedisServer::from_env_or_start();
    let ev = event("drawkept");
    let clock = ManualClock::starting_now();
    let opens_ms = clock.now_ms() + 60_000;
    let (store_a, a, url_a) = drawn_site(&server, &ev, &clock, opens_ms).await;
    let (store_b, b, url_b) = drawn_site(&server, &ev, &clock, opens_ms).await;
    // 1,200 people join the pre-queue (a request, as a browser makes it); each keeps its cookie.
    let (client, people) = join_prequeue(&url_a, 1_200).await;
    // The door opens, paused so nobody is let in: the draw runs at the tick.
    clock.set_ms(opens_ms + 1);
    a.pause().await.unwrap();
    a.tick_now().await.unwrap();
    for room in [&a, &b] {
        room.refresh().await.unwrap();
        let kept = tokio::time::timeout(Duration::from_secs(30), async {
            while draw_numbers_kept(room) < 1_200 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        assert!(
            kept.is_ok(),
            "the draw's 1,200 numbers were not read within 30 s: {} kept",
            draw_numbers_kept(room)
        );
    }
    let (a0, b0) = (store_a.commands_sent(), store_b.commands_sent());
    // Three rounds of polls: at the draw, half the re-seal spread on, and the whole spread on (`RESEAL_SPREAD_MS`,
    // ten minutes). Each answer gives the person's number; their cookie is sealed again with it at their moment
    // of the spread (picked by their id), so at the draw nearly nobody's is (1,200 people, a moment each among
    // 600,000 ms: 0.002 expected at 0), half-way about half (600, sd 17), and at the end everyone's.
    let spread = 600_000;
    let mut numbers = vec![0u64; people.len()];
    let mut sealed_at = Vec::new();
    for round in 0..3u64 {
        clock.set_ms(opens_ms + 1 + round * spread / 2);
        let mut sealed_now = 0;
        for (i, cookie) in people.iter().enumerate() {
            // Half poll one instance, half the other.
            let url = if i % 2 == 0 { &url_a } else { &url_b };
            let (st, set) = drawn_poll(&client, url, cookie).await;
            let sealed = session_set(set);
            assert_eq!(st["state"], "paused", "{st}");
            let n = st["number"].as_u64().expect("a number");
            assert!(
                numbers[i] == 0 || numbers[i] == n,
                "the same number at every poll"
            );
            numbers[i] = n;
            if let Some(sealed) = sealed {
                assert!(sealed.contains(&format!(".{n}.")), "{sealed} {st}");
                sealed_now += 1;
            }
        }
        sealed_at.push(sealed_now);
    }
    assert!(
        sealed_at[0] <= 2 && (500..=700).contains(&sealed_at[1]) && sealed_at[2] == 1_200,
        "cookies sealed again at the draw, half-way through the spread and at its end: {sealed_at:?}"
    );
    assert_eq!(
        (store_a.commands_sent() - a0, store_b.commands_sent() - b0),
        (0, 0),
        "3 x 1,200 polls after the draw, answered without a Redis command"
    );
    // The numbers are the store's.
    let mut sorted = numbers.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), 1_200, "1,200 people, 1,200 numbers");
    for (cookie, n) in people.iter().zip(&numbers) {
        let sid = cookie
            .strip_prefix("waitroom_session=")
            .and_then(|v| v.split('.').next())
            .unwrap();
        let p = store_a.lookup(&ev, sid).await.unwrap().expect("known");
        assert_eq!(p.number, Some(*n), "{sid}");
    }
}

/// A Redis that restarts empty after the draw, while the drawn people's cookies still carry only their pre-queue
/// mark (their numbers not sealed in yet, `RESEAL_SPREAD_MS`): the instance that kept the draw's numbers takes each
/// of them back at the number the draw gave them, from their next poll, and seals it into their cookie then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drawn_people_whose_cookies_lack_their_number_get_it_back_after_redis_restarts_empty() {
    let mut server = RedisServer::start();
    let ev = event("drawlost");
    let clock = ManualClock::starting_now();
    let opens_ms = clock.now_ms() + 60_000;
    let (_store, room, url) = drawn_site(&server, &ev, &clock, opens_ms).await;
    let (client, people) = join_prequeue(&url, 200).await;
    clock.set_ms(opens_ms + 1);
    room.pause().await.unwrap();
    room.tick_now().await.unwrap();
    room.refresh().await.unwrap();
    let kept = tokio::time::timeout(Duration::from_secs(30), async {
        while draw_numbers_kept(&room) < 200 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(
        kept.is_ok(),
        "the draw's 200 numbers were not read within 30 s"
    );
    let (mut drawn, mut sealed_now) = (Vec::new(), 0);
    for cookie in &people {
        let (st, set) = drawn_poll(&client, &url, cookie).await;
        let sealed = session_set(set);
        assert_eq!(st["state"], "paused", "{st}");
        drawn.push(st["number"].as_u64().expect("a drawn number"));
        sealed_now += usize::from(sealed.is_some());
    }
    // 200 moments among 600,000 ms: 0.0003 expected at the draw.
    assert!(sealed_now <= 1, "{sealed_now} cookies sealed at the draw");
    // Redis is killed and comes back with nothing; the room's next rounds restore the on-sale.
    server.restart_empty();
    let mut rounds = 0;
    while room.tick_now().await.is_err() {
        rounds += 1;
        assert!(
            rounds < 10,
            "the room did not get the on-sale back within 10 rounds"
        );
    }
    // Each polls with the cookie they had (no number in it): back at the draw's number, sealed in now.
    for (cookie, n) in people.iter().zip(&drawn) {
        let (st, set) = drawn_poll(&client, &url, cookie).await;
        let sealed = session_set(set);
        assert_eq!(
            st["number"].as_u64(),
            Some(*n),
            "the draw's number back: {st}"
        );
        assert!(
            matches!(st["state"].as_str(), Some("paused" | "waiting")),
            "in line: {st}"
        );
        let sealed = sealed.expect("the number sealed into the cookie after the restore");
        assert!(sealed.contains(&format!(".{n}.")), "{sealed}");
    }
}

/// While an instance is still reading the draw's numbers, a drawn person it has not read yet is answered from
/// memory, in line with their number to come (the read goes in number order and has passed the head, so they are
/// behind it), with no Redis command of their own; once read, their poll gives the store's number. Every command
/// the instance sends meanwhile is a page of the read.
#[tokio::test]
async fn a_drawn_person_not_read_yet_is_answered_in_line_without_a_store_call() {
    let server = RedisServer::from_env_or_start();
    let ev = event("drawunread");
    let clock = ManualClock::starting_now();
    let opens_ms = clock.now_ms() + 60_000;
    // The read goes one page at a time as the test lets it: the first at once, the rest after the polls.
    let gate = Arc::new(tokio::sync::Semaphore::new(1));
    let (store, room, url) =
        drawn_site_over(&server, &ev, &clock, opens_ms, Some(gate.clone())).await;
    let client = reqwest::Client::new();
    let mut people = Vec::new();
    // Eight pages of the read (eight buckets of about 375: a page holds whole buckets, up to 500 sessions).
    for _ in 0..3_000 {
        let res = client
            .get(format!("{url}/checkout"))
            .header("accept", "text/html")
            .send()
            .await
            .unwrap();
        let cookie = res
            .headers()
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().unwrap().split(';').next().unwrap().to_owned())
            .find(|c| c.starts_with("waitroom_session="))
            .expect("a session cookie");
        assert!(cookie.contains(".p."), "a pre-queue cookie: {cookie}");
        people.push(cookie);
    }
    clock.set_ms(opens_ms + 1);
    room.pause().await.unwrap();
    room.tick_now().await.unwrap();
    let pages = |room: &WaitingRoom| {
        room.metrics_text()
            .lines()
            .find_map(|l| l.strip_prefix("waitroom_draw_pages_total"))
            .and_then(|v| v.split_whitespace().last())
            .and_then(|v| v.parse::<u64>().ok())
            .expect("the draw_pages counter")
    };
    let (c0, p0) = (store.commands_sent(), pages(&room));
    // The read starts at this refresh, in the background; the polls go on meanwhile.
    room.refresh().await.unwrap();
    let c1 = store.commands_sent();
    let mut to_come = Vec::new();
    let mut numbered = 0;
    for cookie in &people {
        let (st, _) = drawn_poll(&client, &url, cookie).await;
        match st["number"].as_u64() {
            None => {
                assert_eq!(st["state"], "waiting", "in line, the number to come: {st}");
                assert!(st["position"].is_null(), "{st}");
                to_come.push(cookie.clone());
            }
            Some(_) => numbered += 1,
        }
    }
    let read = pages(&room) - p0;
    // (The first page may have gone with the refresh.)
    let during = store.commands_sent() - c1;
    assert!(
        during <= read,
        "every command during the polls is a page of the read: {during} commands, {read} pages (the refresh \
         sent {})",
        c1 - c0
    );
    assert!(
        !to_come.is_empty(),
        "some people polled before their number was read (else this shows nothing): {numbered} numbered"
    );
    assert!(
        numbered > 0,
        "the first page's people are answered with their number"
    );
    // Once the read is done, they poll again and get the store's number.
    gate.add_permits(1_000);
    let done = tokio::time::timeout(Duration::from_secs(30), async {
        while draw_numbers_kept(&room) < 3_000 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(done.is_ok(), "the read did not finish within 30 s");
    for cookie in &to_come {
        let (st, _) = drawn_poll(&client, &url, cookie).await;
        let n = st["number"].as_u64().expect("the number, once read");
        let sid = cookie
            .strip_prefix("waitroom_session=")
            .and_then(|v| v.split('.').next())
            .unwrap();
        let p = store.lookup(&ev, sid).await.unwrap().expect("known");
        assert_eq!(p.number, Some(n), "{sid}");
    }
}

/// Before a draw whose opening is further off than the grace, first contacts get pre-queue tickets from the
/// instance's snapshot with no Redis command; the store counts them with the next flush, each comes back into the
/// pre-queue at its first poll, and the draw lets the capacity in at the opening.
#[tokio::test]
async fn prequeue_tickets_far_from_the_opening_cost_no_redis_command_and_are_counted_at_the_next_flush()
 {
    let server = RedisServer::from_env_or_start();
    let ev = event("pqticket");
    let clock = ManualClock::starting_now();
    let opens_ms = clock.now_ms() + 3_600_000;
    let (store, room, url) = drawn_site(&server, &ev, &clock, opens_ms).await;
    let sent = store.commands_sent();
    let (client, people) = join_prequeue(&url, 20).await;
    assert_eq!(
        store.commands_sent() - sent,
        0,
        "20 first contacts an hour before the draw: no Redis command"
    );
    assert_eq!(store.snapshot(&ev).await.unwrap().counters.tickets, 0);
    room.tick_now().await.unwrap();
    let c = store.snapshot(&ev).await.unwrap().counters;
    assert_eq!(
        (c.tickets, c.joined),
        (20, 0),
        "counted, nobody written yet"
    );
    for cookie in &people {
        let body = status_with(&client, &url, cookie).await;
        assert_eq!(body["state"], "prequeue", "{body}");
    }
    let c = store.snapshot(&ev).await.unwrap().counters;
    assert_eq!((c.tickets, c.redeemed, c.joined), (20, 20, 20));
    // They keep polling up to the opening; the draw lets the capacity in.
    clock.set_ms(opens_ms - 10_000);
    for cookie in &people {
        assert_eq!(
            status_with(&client, &url, cookie).await["state"],
            "prequeue"
        );
    }
    room.tick_now().await.unwrap();
    clock.set_ms(opens_ms + 1);
    assert_eq!(room.tick_now().await.unwrap().admitted.len(), 10);
}

/// The people a draw lets in get their pass at their first poll, on either instance, with no Redis command: each
/// instance hears of the admissions in its snapshots and claims them from there, the claims going to Redis with
/// its next touches (within a flush). Until then the store holds them as admitted, inside the capacity.
#[tokio::test]
async fn the_people_let_in_at_a_draw_get_their_pass_at_their_first_poll_with_no_store_call() {
    let server = RedisServer::from_env_or_start();
    let ev = event("drawclaim");
    let clock = ManualClock::starting_now();
    let opens_ms = clock.now_ms() + 60_000;
    let (store_a, a, url_a) = drawn_site(&server, &ev, &clock, opens_ms).await;
    let (store_b, b, url_b) = drawn_site(&server, &ev, &clock, opens_ms).await;
    let (client, people) = join_prequeue(&url_a, 30).await;
    // The opening: the draw, and the capacity of 10 let in by instance a's tick.
    clock.set_ms(opens_ms + 1);
    assert_eq!(a.tick_now().await.unwrap().admitted.len(), 10);
    for room in [&a, &b] {
        room.refresh().await.unwrap();
        let kept = tokio::time::timeout(Duration::from_secs(30), async {
            while draw_numbers_kept(room) < 20 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        assert!(kept.is_ok(), "the draw's 20 waiting numbers were not read");
    }
    let (a0, b0) = (store_a.commands_sent(), store_b.commands_sent());
    let mut admitted = Vec::new();
    for (i, cookie) in people.iter().enumerate() {
        let url = if i % 2 == 0 { &url_a } else { &url_b };
        let (st, set) = drawn_poll(&client, url, cookie).await;
        let token = set.iter().any(|c| c.starts_with("waitroom_token="));
        let sid = cookie
            .strip_prefix("waitroom_session=")
            .and_then(|v| v.split('.').next())
            .unwrap()
            .to_owned();
        match st["state"].as_str() {
            Some("admitted") => {
                assert!(
                    token,
                    "an admitted person's first poll carries the pass: {st}"
                );
                admitted.push((sid, st["number"].as_u64().expect("a number")));
            }
            Some("waiting") => assert!(!token, "{st}"),
            other => panic!("{other:?}: {st}"),
        }
    }
    assert_eq!(admitted.len(), 10, "the ten let in got their pass");
    assert_eq!(
        (store_a.commands_sent() - a0, store_b.commands_sent() - b0),
        (0, 0),
        "30 first polls after the draw, ten of them claiming a pass, without a Redis command"
    );
    // The claims are not in Redis yet: the ten are admitted there, within the capacity.
    for (sid, n) in &admitted {
        let p = store_a.lookup(&ev, sid).await.unwrap().expect("known");
        assert_eq!(
            (p.state, p.number),
            (SessionState::Admitted, Some(*n)),
            "{sid}"
        );
    }
    // The next flush of each instance sends them: active, their idle deadline started.
    a.tick_now().await.unwrap();
    b.tick_now().await.unwrap();
    for (sid, _) in &admitted {
        let p = store_a.lookup(&ev, sid).await.unwrap().expect("known");
        assert_eq!(
            p.state,
            SessionState::Active,
            "{sid} claimed with the touches"
        );
    }
    assert_eq!(b.snapshot().active, 10, "the capacity holds");
    // Long after the arrival window they are still inside (claimed), and nobody else was let in.
    clock.advance(Duration::from_secs(120));
    let r = a.tick_now().await.unwrap();
    assert!(
        r.expired.is_empty(),
        "claimed, so not expired: {:?}",
        r.expired
    );
    assert!(r.admitted.is_empty());
}

/// Figures for BENCHMARKS.md (issue 31), not a check: what the room spends on a poll once a random draw has run,
/// against a poll in the pre-queue before it, measured in one run so that the machine's drift (which moves the
/// soak's after / before figure by a fifth either way with no opening at all) falls on both alike. One Redis
/// server of its own and two on-sales over it with the seed's settings (random draw, capacity 8,000, 20 s polls),
/// each with `WAITROOM_POLL_PEOPLE` people (default 600,000) who came as browsers do, through the whole layer in
/// process: a protected page without a cookie, then a poll with the ticket it set. One on-sale stays in its
/// pre-queue with its opening a minute and a half away (its polls marked for the draw, as in the soak's rounds
/// before the opening); the other opens, draws, and keeps its drawn numbers. Then rounds of `WAITROOM_POLL_ROUND_MS`
/// (default 2,000) alternate between the two: two tasks poll the on-sale's people round robin through the layer,
/// each keeping the cookie an answer sets and dropping those let in. A round gives the process's CPU time a poll
/// (the polls and every background task of both rooms) and Redis's. Also the draw's one-off work: the process's
/// and Redis's CPU from the opening until every drawn number is kept.
/// `cargo test --release -p waitroom-layer --features redis --test redis_room measure_a_drawn_poll -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "prints the figures for BENCHMARKS.md; slow"]
async fn measure_a_drawn_poll_against_a_prequeued_poll() {
    use bytes::Bytes;
    use http::header::{ACCEPT, COOKIE, SET_COOKIE};
    use http::{HeaderValue, Request, Response};
    use http_body_util::Full;
    use std::convert::Infallible;
    use tower::{ServiceBuilder, ServiceExt, service_fn};
    use waitroom_layer::{Fairness, WaitingRoomLayer};

    let env = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let people = env("WAITROOM_POLL_PEOPLE", 600_000) as usize;
    let round = Duration::from_millis(env("WAITROOM_POLL_ROUND_MS", 2_000));
    const ROUNDS: usize = 8;
    const TASKS: usize = 2;
    let server = RedisServer::start();
    let cpu = || {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
        t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
    };
    let redis_cpu = || {
        server
            .command(&["INFO", "cpu"])
            .lines()
            .filter_map(|l| {
                let (k, v) = l.split_once(':')?;
                ["used_cpu_sys", "used_cpu_user"]
                    .contains(&k)
                    .then(|| v.trim().parse::<f64>().ok())?
            })
            .sum::<f64>()
    };
    async fn shop(_req: Request<Full<Bytes>>) -> Result<Response<Full<Bytes>>, Infallible> {
        Ok(Response::new(Full::new(Bytes::from_static(b"seat map"))))
    }
    let session_of = |res: &Response<_>| -> Option<HeaderValue> {
        res.headers().get_all(SET_COOKIE).iter().find_map(|v| {
            let pair = v.to_str().ok()?.split(';').next()?;
            pair.starts_with("waitroom_session=")
                .then(|| HeaderValue::try_from(pair).ok())?
        })
    };
    let get = |path: &str, cookie: Option<&HeaderValue>, accept: &'static str| {
        let mut r = Request::get(path).body(Full::default()).unwrap();
        if let Some(c) = cookie {
            r.headers_mut().insert(COOKIE, c.clone());
        }
        r.headers_mut()
            .insert(ACCEPT, HeaderValue::from_static(accept));
        r
    };
    let far = std::time::SystemTime::now() + Duration::from_secs(3_600);
    let mut sites = Vec::new();
    for tag in ["drawn", "prequeue"] {
        let room = WaitingRoom::builder(event(tag))
            .capacity(8_000)
            .fairness(Fairness::RandomAtOpen { opens_at: far })
            .secure_cookies(false) // as the demo over plain HTTP: the soak's cookies
            .poll_interval(Duration::from_secs(20))
            .store(RedisStore::connect(server.url()).await.unwrap())
            .build()
            .await
            .unwrap();
        let layer = WaitingRoomLayer::builder(room.clone())
            .protect_prefix("/seats")
            .build()
            .unwrap();
        let svc = ServiceBuilder::new().layer(layer).service(service_fn(shop));
        // The joins, from 32 tasks: a first contact's ticket, then its first poll (the ticket redeemed).
        let started = Instant::now();
        let joined: Vec<HeaderValue> = futures_util::future::join_all((0..32).map(|t| {
            let svc = svc.clone();
            let n = people / 32 + usize::from(t < people % 32);
            async move {
                let mut mine = Vec::with_capacity(n);
                while mine.len() < n {
                    let res = svc
                        .clone()
                        .oneshot(get("/seats", None, "text/html"))
                        .await
                        .unwrap();
                    let ticket = session_of(&res).expect("a first contact is given a ticket");
                    let res = svc
                        .clone()
                        .oneshot(get("/waitroom/status", Some(&ticket), "application/json"))
                        .await
                        .unwrap();
                    assert_eq!(res.headers()["waitroom-state"], "prequeue");
                    mine.push(session_of(&res).unwrap_or(ticket));
                }
                mine
            }
        }))
        .await
        .into_iter()
        .flatten()
        .collect();
        println!(
            "{tag}: {} people joined through the layer in {:.1} s",
            joined.len(),
            started.elapsed().as_secs_f64()
        );
        sites.push((tag, room, svc, joined));
    }
    // The pre-queue's opening a minute and a half away: its polls are marked for the draw from now on.
    let soon = Clock::now_ms(&waitroom_layer::SystemClock) + 90_000;
    sites[1]
        .1
        .set_schedule(Some(soon), None, None)
        .await
        .unwrap();
    // The draw, and every drawn number kept.
    let kept = |room: &WaitingRoom| {
        room.metrics_text()
            .lines()
            .find(|l| l.starts_with("waitroom_draw_numbers_kept{"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or(0.0) as usize
    };
    let (cpu0, redis0, started) = (cpu(), redis_cpu(), Instant::now());
    sites[0].1.open_now().await.unwrap();
    let expect = people - 8_000;
    while kept(&sites[0].1) < expect {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "only {} of {expect} drawn numbers kept after two minutes",
            kept(&sites[0].1)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "the draw and its {expect} numbers kept: {:.2} s; the process's CPU {:.2} s, Redis's {:.2} s",
        started.elapsed().as_secs_f64(),
        cpu() - cpu0,
        redis_cpu() - redis0
    );

    // The rounds, alternating.
    let mut crowds: Vec<Vec<Vec<HeaderValue>>> = sites
        .iter_mut()
        .map(|(_, _, _, joined)| {
            let all = std::mem::take(joined);
            (0..TASKS)
                .map(|t| all.iter().skip(t).step_by(TASKS).cloned().collect())
                .collect()
        })
        .collect();
    let mut cursors = vec![vec![0usize; TASKS]; 2];
    let mut figures: Vec<Vec<(f64, f64)>> = vec![Vec::new(), Vec::new()];
    let mut states: Vec<HashMap<String, u64>> = vec![HashMap::new(), HashMap::new()];
    let mut drawn_polls: Vec<u64> = Vec::new();
    for r in 0..2 * ROUNDS {
        let k = r % 2;
        let svc = sites[k].2.clone();
        let parts = std::mem::take(&mut crowds[k]);
        let (cpu0, redis0) = (cpu(), redis_cpu());
        let until = Instant::now() + round;
        let done = futures_util::future::join_all(parts.into_iter().zip(cursors[k].clone()).map(
            |(mut mine, mut at)| {
                let svc = svc.clone();
                async move {
                    let (mut polls, mut states) = (0u64, HashMap::<String, u64>::new());
                    while Instant::now() < until && !mine.is_empty() {
                        for _ in 0..64 {
                            at %= mine.len();
                            let res = svc
                                .clone()
                                .oneshot(get(
                                    "/waitroom/status",
                                    Some(&mine[at]),
                                    "application/json",
                                ))
                                .await
                                .unwrap();
                            polls += 1;
                            let state =
                                res.headers()["waitroom-state"].to_str().unwrap().to_owned();
                            if state == "admitted" {
                                mine.swap_remove(at);
                            } else {
                                if let Some(c) = session_of(&res) {
                                    mine[at] = c;
                                }
                                at += 1;
                            }
                            *states.entry(state).or_default() += 1;
                            if mine.is_empty() {
                                break;
                            }
                        }
                    }
                    (mine, at, polls, states)
                }
            },
        ))
        .await;
        let (cpu_s, redis_s) = (cpu() - cpu0, redis_cpu() - redis0);
        let mut polls = 0;
        for (t, (mine, at, p, s)) in done.into_iter().enumerate() {
            crowds[k].push(mine);
            cursors[k][t] = at;
            polls += p;
            for (state, n) in s {
                *states[k].entry(state).or_default() += n;
            }
        }
        let per = |s: f64| s * 1e6 / polls.max(1) as f64;
        println!(
            "round {r:2} {:8}: {polls:7} polls, {:6.0} a second, the process {:.2} µs a poll, Redis {:.3} µs",
            sites[k].0,
            polls as f64 / round.as_secs_f64(),
            per(cpu_s),
            per(redis_s)
        );
        figures[k].push((per(cpu_s), per(redis_s)));
        if k == 0 {
            drawn_polls.push(polls);
        }
    }
    let median = |mut xs: Vec<f64>| {
        xs.sort_by(f64::total_cmp);
        xs[xs.len() / 2]
    };
    let [drawn, pre] = [0, 1].map(|k| {
        (
            median(figures[k].iter().map(|f| f.0).collect()),
            median(figures[k].iter().map(|f| f.1).collect()),
        )
    });
    let pairs: Vec<f64> = (0..ROUNDS)
        .map(|i| figures[0][i].0 / figures[1][i].0)
        .collect();
    // The pairs from the first round begun after every drawn person had polled once since the draw.
    let first_steady = drawn_polls
        .iter()
        .scan(0, |sum, p| {
            let before = *sum;
            *sum += p;
            Some(before)
        })
        .position(|before| before >= people as u64)
        .unwrap_or(ROUNDS);
    let steady = pairs[first_steady..].to_vec();
    println!(
        "medians of {ROUNDS} rounds each: drawn {:.2} µs of the process and {:.3} µs of Redis a poll, pre-queue {:.2} and {:.3}; \
         drawn / pre-queue (the process) {:.3}, each pair of rounds {:?}",
        drawn.0,
        drawn.1,
        pre.0,
        pre.1,
        drawn.0 / pre.0,
        pairs
            .iter()
            .map(|x| (x * 1000.0).round() / 1000.0)
            .collect::<Vec<_>>()
    );
    if steady.is_empty() {
        println!(
            "no pair of rounds after every drawn person had polled once: more WAITROOM_POLL_ROUND_MS"
        );
    } else {
        println!(
            "once every drawn person had polled (pairs {} to {ROUNDS}): drawn / pre-queue median {:.3}",
            first_steady + 1,
            median(steady)
        );
    }
    println!("answers: drawn {:?}; pre-queue {:?}", states[0], states[1]);
    assert!(
        states[0].get("waiting").copied().unwrap_or(0) > 0
            && states[1].get("prequeue").copied().unwrap_or(0) > 0,
        "each on-sale's polls were answered as its state says"
    );
}
