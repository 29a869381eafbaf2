//! The store contract, written once and run against every store: the embedded `MemoryStore` here, the same store
//! durable in a directory and restarted from it every few calls, and `RedisStore` (with the `redis` feature)
//! against a real redis-server.
//!
//! Random interleavings of join, poll, tick, claim, touch, finish and clock advances (proptest), and a concurrency
//! test, checking: active never exceeds capacity; line numbers are unique and dense; admission follows line order
//! exactly, skipping only sessions that were really abandoned; nothing is admitted twice; every join ends in exactly
//! one terminal state. The operations include closing the on-sale and selling it out (and seats coming back), so
//! "every join ends" covers sessions turned away; while closed or sold out a join takes no place and is not counted.

mod contract {
    use std::collections::{BTreeMap, HashMap, HashSet};
    use std::sync::Arc;

    use waitroom_layer::store::{
        Inventory, Join, Mark, Placement, SessionState, Settings, SettingsChange, Store,
        TURN_AWAY_PER_TICK, Tick, Touches,
    };

    pub const IDLE_MS: u64 = 30_000;
    pub const ABANDON_MS: u64 = 10_000;
    pub const ARRIVAL_MS: u64 = 5_000;

    #[derive(Debug, Clone)]
    pub enum Op {
        Join(usize),
        Poll(usize),
        Tick,
        Claim(usize),
        Touch(usize),
        Finish(usize, u32),
        Advance(u64),
        OpenNow,
        /// Closes the on-sale when the value is below 8 (of 0..64): closing is for good, so it stays rare.
        Close(u8),
        /// Reports every seat sold.
        SoldOut,
        /// Reports seats available again (sold out withdrawn).
        Restock,
    }

    /// Every seat sold (none held: sold out, not merely all held).
    const SOLD_OUT: Inventory = Inventory {
        total: 10,
        sold: 10,
        held: 0,
    };
    /// Seats again, far more than the contract's sessions.
    const RESTOCKED: Inventory = Inventory {
        total: 1_000_000,
        sold: 10,
        held: 0,
    };

    pub fn settings(capacity: u64, random: bool, opens_at_ms: Option<u64>) -> Settings {
        Settings {
            capacity,
            admit_per_minute: None,
            paused: false,
            closed: false,
            opens_at_ms,
            random_draw: random,
            inventory: None,
        }
    }

    fn tick_at(now_ms: u64) -> Tick {
        Tick {
            now_ms,
            arrival_window_ms: ARRIVAL_MS,
            abandon_after_ms: ABANDON_MS,
            max_scan: 1_000,
        }
    }

    /// Runs `ops` against `store` (on-sale `event`, already initialised) and checks every invariant.
    pub async fn run(store: Arc<dyn Store>, event: &str, capacity: u64, start_ms: u64, ops: &[Op]) {
        let sid = |i: usize| format!("session-{i:04}-abcdefghij");
        let mut now = start_ms;
        // What the test knows: the number each join got (by session and join round), when each was last seen.
        let mut seen: HashMap<String, u64> = HashMap::new();
        let mut number_of: HashMap<String, u64> = HashMap::new();
        let mut owner_of_number: BTreeMap<u64, String> = BTreeMap::new();
        let mut served_numbers: Vec<u64> = Vec::new();
        let mut admitted_ever: HashSet<(String, u64)> = HashSet::new();
        let mut joins = 0u64;

        for op in ops {
            match op {
                Op::Join(i) => {
                    let s = sid(*i);
                    let shut = store.snapshot(event).await.unwrap().settings.turning_away();
                    let before = store.lookup(event, &s).await.unwrap();
                    let p = store
                        .join(
                            event,
                            &Join {
                                session: s.clone(),
                                account: None,
                                now_ms: now,
                                draw_key: rand_key(*i, now),
                            },
                        )
                        .await
                        .unwrap();
                    let rejoined = before.as_ref().is_none_or(|b| b.state.is_terminal());
                    if rejoined && shut {
                        // Closed or sold out: no place, nothing recorded, not counted.
                        assert_eq!(p.state, SessionState::TurnedAway);
                        assert_eq!(p.number, None);
                        assert_eq!(store.lookup(event, &s).await.unwrap(), before);
                        continue;
                    }
                    if rejoined {
                        joins += 1;
                        seen.insert(s.clone(), now);
                        number_of.remove(&s);
                    } else {
                        assert_eq!(Some(&p), before.as_ref(), "join must be idempotent");
                    }
                    assert!(
                        matches!(p.state, SessionState::Waiting | SessionState::PreQueue)
                            || !rejoined
                    );
                }
                Op::Poll(i) => {
                    let s = sid(*i);
                    if let Some(p) = store.lookup(event, &s).await.unwrap()
                        && matches!(p.state, SessionState::Waiting | SessionState::PreQueue)
                    {
                        // Marked by number when it has one (Redis keeps those as bits), else by session.
                        let t = Touches {
                            now_ms: now,
                            waiting: vec![Mark {
                                session: s.clone(),
                                number: p.number,
                            }],
                            active: vec![],
                            idle_timeout_ms: IDLE_MS,
                            abandon_after_ms: ABANDON_MS,
                        };
                        store.touch(event, &t).await.unwrap();
                        seen.insert(s, now);
                    }
                }
                Op::Touch(i) => {
                    let t = Touches {
                        now_ms: now,
                        waiting: vec![],
                        active: vec![sid(*i)],
                        idle_timeout_ms: IDLE_MS,
                        abandon_after_ms: ABANDON_MS,
                    };
                    store.touch(event, &t).await.unwrap();
                }
                Op::Claim(i) => {
                    let s = sid(*i);
                    let before = store.lookup(event, &s).await.unwrap();
                    let after = store.claim(event, &s, now, IDLE_MS).await.unwrap();
                    if let Some(b) = before {
                        let a = after.expect("claim of a known session returns it");
                        if b.state.is_active() {
                            assert_eq!(a.state, SessionState::Active);
                        } else {
                            assert_eq!(
                                a.state, b.state,
                                "claim must not change a session that is not admitted"
                            );
                        }
                    }
                }
                Op::Finish(i, seats) => {
                    let s = sid(*i);
                    let before = store.lookup(event, &s).await.unwrap();
                    let done = store.finish(event, &s, *seats, now).await.unwrap();
                    assert_eq!(done, before.is_some_and(|b| b.state.is_active()));
                    if done {
                        let p = store.lookup(event, &s).await.unwrap().unwrap();
                        assert_eq!(p.state, SessionState::Finished);
                    }
                }
                Op::Advance(ms) => now += ms,
                Op::OpenNow => {
                    store
                        .update(
                            event,
                            &waitroom_layer::store::SettingsChange::OpenNow { now_ms: now },
                        )
                        .await
                        .unwrap();
                }
                Op::Close(k) => {
                    if *k < 8 {
                        store.update(event, &SettingsChange::Close).await.unwrap();
                    }
                }
                Op::SoldOut => {
                    let change = SettingsChange::Inventory {
                        inventory: SOLD_OUT,
                    };
                    store.update(event, &change).await.unwrap();
                }
                Op::Restock => {
                    let change = SettingsChange::Inventory {
                        inventory: RESTOCKED,
                    };
                    store.update(event, &change).await.unwrap();
                }
                Op::Tick => {
                    let snap_before = store.snapshot(event).await.unwrap();
                    let report = store.tick(event, &tick_at(now)).await.unwrap();
                    // Numbers of everyone that has one, now (the draw may just have given them).
                    for i in 0..64 {
                        let s = sid(i);
                        if let Some(p) = store.lookup(event, &s).await.unwrap()
                            && let Some(n) = p.number
                            && !number_of.contains_key(&s)
                        {
                            number_of.insert(s.clone(), n);
                            let prev = owner_of_number.insert(n, s.clone());
                            assert!(
                                prev.is_none(),
                                "line number {n} given twice ({prev:?} and {s})"
                            );
                        }
                    }
                    let mut left: Vec<(u64, bool, String)> = Vec::new();
                    for s in &report.admitted {
                        left.push((number_of[s], true, s.clone()));
                        assert!(
                            admitted_ever.insert((s.clone(), number_of[s])),
                            "{s} admitted twice"
                        );
                    }
                    let shut = snap_before.settings.turning_away();
                    assert!(
                        shut || report.turned_away.is_empty(),
                        "turned away while open"
                    );
                    assert!(!shut || report.admitted.is_empty(), "admitted while shut");
                    for s in &report.turned_away {
                        let p = store.lookup(event, s).await.unwrap().unwrap();
                        assert_eq!(p.state, SessionState::TurnedAway);
                        // From the line (its number counts as served) or from the pre-queue (no number).
                        if let Some(n) = p.number {
                            assert_eq!(number_of.get(s), Some(&n));
                            left.push((n, false, s.clone()));
                        }
                    }
                    for s in &report.abandoned {
                        left.push((number_of[s], false, s.clone()));
                        let last = seen[s];
                        assert!(
                            last + ABANDON_MS < now,
                            "{s} skipped as abandoned but seen at {last} (now {now})"
                        );
                    }
                    left.sort();
                    // Exactly the next numbers from the head, in order.
                    let expect: Vec<u64> =
                        (snap_before.served + 1..=snap_before.served + left.len() as u64).collect();
                    let got: Vec<u64> = left.iter().map(|l| l.0).collect();
                    assert_eq!(got, expect, "admission must follow line order");
                    served_numbers.extend(got);
                    // Everyone passed over was abandoned; an admitted one after a live one is fine; a live one
                    // left behind cannot be (head order).
                    let snap = store.snapshot(event).await.unwrap();
                    assert!(
                        snap.active <= capacity,
                        "active {} exceeds capacity {capacity}",
                        snap.active
                    );
                    assert_eq!(snap.served, snap_before.served + left.len() as u64);
                    for s in &report.expired {
                        let p = store.lookup(event, s).await.unwrap().unwrap();
                        assert_eq!(p.state, SessionState::Expired);
                    }
                }
            }
            let snap = store.snapshot(event).await.unwrap();
            assert!(
                snap.active <= capacity,
                "active {} exceeds capacity {capacity}",
                snap.active
            );
        }

        // Drain: let time pass until every join has ended.
        for _ in 0..200 {
            now += IDLE_MS;
            store.tick(event, &tick_at(now)).await.unwrap();
            let snap = store.snapshot(event).await.unwrap();
            if snap.active == 0 && snap.waiting() == 0 {
                break;
            }
        }
        let snap = store.snapshot(event).await.unwrap();
        assert_eq!(snap.active, 0);
        assert_eq!(snap.waiting(), 0, "line not drained");
        let c = snap.counters;
        assert_eq!(c.joined, joins, "joins counted");
        assert_eq!(
            c.finished + c.expired + c.abandoned + c.turned_away,
            c.joined,
            "every join ends in exactly one terminal state: {c:?}"
        );
        // Dense: numbers 1..=last_number, each given once.
        assert_eq!(snap.served, snap.last_number);
        for i in 0..64 {
            if let Some(p) = store.lookup(event, &sid(i)).await.unwrap() {
                assert!(p.state.is_terminal(), "{} ended in {:?}", sid(i), p.state);
            }
        }
    }

    fn rand_key(i: usize, now: u64) -> u64 {
        // Any key works for the contract; a real room uses its RNG.
        (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ now.rotate_left(17)
    }

    /// Many tasks join, poll, tick, claim and finish at once; afterwards the invariants hold.
    pub async fn concurrent(store: Arc<dyn Store>, event: &str, capacity: u64) {
        let now = Arc::new(std::sync::atomic::AtomicU64::new(1_000_000));
        // A sampler reads the shared numbers all along, between everyone else's calls: every snapshot is one atomic
        // read in both stores, so a tick that ever let in one too many is seen, not just the state at the end.
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sampler = {
            let (store, event, done) = (store.clone(), event.to_owned(), done.clone());
            tokio::spawn(async move {
                let (mut samples, mut max_active) = (0u64, 0u64);
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    let s = store.snapshot(&event).await.unwrap();
                    let c = s.counters;
                    assert_eq!(
                        s.active,
                        c.admitted - c.finished - c.expired,
                        "the active count is what the counters say"
                    );
                    max_active = max_active.max(s.active);
                    samples += 1;
                    tokio::task::yield_now().await;
                }
                (samples, max_active)
            })
        };
        let mut tasks = Vec::new();
        for t in 0..8u64 {
            let store = store.clone();
            let event = event.to_owned();
            let now = now.clone();
            tasks.push(tokio::spawn(async move {
                let mut max_active = 0;
                for k in 0..150u64 {
                    let at = now.fetch_add(37, std::sync::atomic::Ordering::SeqCst);
                    let s = format!("conc-{t}-{k:04}-xxxxxxxxxx");
                    store
                        .join(
                            &event,
                            &Join {
                                session: s.clone(),
                                account: None,
                                now_ms: at,
                                draw_key: k * 7 + t,
                            },
                        )
                        .await
                        .unwrap();
                    let r = store
                        .tick(
                            &event,
                            &Tick {
                                now_ms: at,
                                arrival_window_ms: 60_000,
                                abandon_after_ms: 600_000,
                                max_scan: 50,
                            },
                        )
                        .await
                        .unwrap();
                    let mut kept = Vec::new();
                    for a in &r.admitted {
                        store.claim(&event, a, at, IDLE_MS).await.unwrap();
                        if k % 3 == 0 {
                            store.finish(&event, a, 1, at).await.unwrap();
                        } else {
                            kept.push(a.clone());
                        }
                    }
                    // Polls and activity, as the room sends them: a lookup of this task's earlier session, and a
                    // flush marking it alive and touching the sessions just let in.
                    if k > 0 {
                        let earlier = format!("conc-{t}-{:04}-xxxxxxxxxx", k - 1);
                        let p = store
                            .lookup(&event, &earlier)
                            .await
                            .unwrap()
                            .expect("joined");
                        let waiting =
                            if matches!(p.state, SessionState::Waiting | SessionState::PreQueue) {
                                vec![Mark {
                                    session: earlier,
                                    number: p.number,
                                }]
                            } else {
                                Vec::new()
                            };
                        store
                            .touch(
                                &event,
                                &Touches {
                                    now_ms: at,
                                    waiting,
                                    active: kept,
                                    idle_timeout_ms: IDLE_MS,
                                    abandon_after_ms: 600_000,
                                },
                            )
                            .await
                            .unwrap();
                    }
                    let snap = store.snapshot(&event).await.unwrap();
                    max_active = max_active.max(snap.active);
                    // The memory store never waits: give the other callers and the sampler their turn, as a
                    // multi-threaded runtime or a network round trip would.
                    tokio::task::yield_now().await;
                }
                max_active
            }));
        }
        let mut seen_by_callers = 0;
        for t in tasks {
            let m = t.await.unwrap();
            assert!(m <= capacity, "active reached {m} > capacity {capacity}");
            seen_by_callers = seen_by_callers.max(m);
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        let (samples, max_active) = sampler.await.unwrap();
        assert!(samples > 10, "only {samples} samples");
        assert!(
            max_active <= capacity,
            "the sampler saw {max_active} active > capacity {capacity}"
        );
        assert_eq!(
            max_active.max(seen_by_callers),
            capacity,
            "the door was full at some point"
        );
        // Drain and check the books.
        let mut at = now.load(std::sync::atomic::Ordering::SeqCst);
        for _ in 0..500 {
            at += IDLE_MS * 10;
            store
                .tick(
                    event,
                    &Tick {
                        now_ms: at,
                        arrival_window_ms: 60_000,
                        abandon_after_ms: 600_000,
                        max_scan: 10_000,
                    },
                )
                .await
                .unwrap();
            let s = store.snapshot(event).await.unwrap();
            if s.waiting() == 0 && s.active == 0 {
                break;
            }
        }
        let s = store.snapshot(event).await.unwrap();
        assert_eq!(s.counters.joined, 8 * 150);
        assert_eq!(s.last_number, 8 * 150, "numbers dense");
        assert_eq!(s.served, s.last_number);
        let c = s.counters;
        assert_eq!(
            c.finished + c.expired + c.abandoned + c.turned_away,
            c.joined,
            "{c:?}"
        );
    }

    /// Joins `n` sessions named `{tag}-{i}` at `now_ms`, eight callers at once.
    async fn join_many(store: &Arc<dyn Store>, event: &str, tag: &str, n: u64, now_ms: u64) {
        let mut tasks = tokio::task::JoinSet::new();
        for t in 0..8 {
            let (store, event, tag) = (store.clone(), event.to_owned(), tag.to_owned());
            tasks.spawn(async move {
                for i in (t..n).step_by(8) {
                    let j = Join {
                        session: format!("{tag}-{i:06}-qqqqqqqq"),
                        account: None,
                        now_ms,
                        draw_key: (i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    };
                    let p = store.join(&event, &j).await.unwrap();
                    assert!(matches!(
                        p.state,
                        SessionState::Waiting | SessionState::PreQueue
                    ));
                }
            });
        }
        while let Some(r) = tasks.join_next().await {
            r.unwrap();
        }
    }

    /// Closing and selling out, store by store: a line of thousands (numbered, then a pre-queue) is turned away
    /// from the head within a few ticks, at most [`TURN_AWAY_PER_TICK`] a tick, with `served` and `waiting()` kept
    /// consistent; a join while closed or sold out takes no place and is not counted; seats coming back let people
    /// join again while those turned away stay turned away. `event` is a prefix (two on-sales).
    pub async fn turn_away(store: Arc<dyn Store>, event: &str) {
        // More than one tick's worth, less than two.
        let n = TURN_AWAY_PER_TICK * 3 / 2;
        let tick = |now_ms| Tick {
            now_ms,
            arrival_window_ms: ARRIVAL_MS,
            abandon_after_ms: 600_000,
            max_scan: 1_000,
        };
        let join = |sid: &str, now_ms| Join {
            session: sid.to_owned(),
            account: None,
            now_ms,
            draw_key: 99,
        };
        let t0 = 1_000_000u64;

        // FIFO, capacity 2: two let in, the rest wait; then the on-sale closes.
        let ev = format!("{event}-fifo");
        store.init(&ev, &settings(2, false, None)).await.unwrap();
        join_many(&store, &ev, "line", n, t0).await;
        let r = store.tick(&ev, &tick(t0 + 1)).await.unwrap();
        assert_eq!(r.admitted.len(), 2);
        // Eight callers joined at once: which two got in first is theirs to race for.
        let let_in = r.admitted.clone();
        store.update(&ev, &SettingsChange::Close).await.unwrap();
        let refused = store
            .join(&ev, &join("late-comer-0000", t0 + 2))
            .await
            .unwrap();
        assert_eq!(
            (refused.state, refused.number),
            (SessionState::TurnedAway, None)
        );
        assert_eq!(store.lookup(&ev, "late-comer-0000").await.unwrap(), None);
        let snap = store.snapshot(&ev).await.unwrap();
        assert_eq!((snap.counters.joined, snap.waiting()), (n, n - 2));
        let r = store.tick(&ev, &tick(t0 + 3)).await.unwrap();
        assert_eq!(r.turned_away.len() as u64, TURN_AWAY_PER_TICK);
        assert!(r.admitted.is_empty());
        let snap = store.snapshot(&ev).await.unwrap();
        assert_eq!(snap.served, 2 + TURN_AWAY_PER_TICK);
        assert_eq!(snap.waiting(), n - 2 - TURN_AWAY_PER_TICK);
        // The head was turned away in line order.
        let head = store.lookup(&ev, &r.turned_away[0]).await.unwrap().unwrap();
        assert_eq!(
            (head.state, head.number),
            (SessionState::TurnedAway, Some(3))
        );
        let r = store.tick(&ev, &tick(t0 + 4)).await.unwrap();
        assert_eq!(r.turned_away.len() as u64, n - 2 - TURN_AWAY_PER_TICK);
        let r = store.tick(&ev, &tick(t0 + 5)).await.unwrap();
        assert!(r.turned_away.is_empty());
        let snap = store.snapshot(&ev).await.unwrap();
        assert_eq!(
            (snap.waiting(), snap.served, snap.last_number, snap.active),
            (0, n, n, 2)
        );
        assert_eq!(snap.counters.turned_away, n - 2);
        assert_eq!(snap.counters.joined, n, "a refused join is not counted");
        // The two inside are not turned away: they finish or idle out as ever.
        for id in &let_in {
            let inside = store.lookup(&ev, id).await.unwrap().unwrap();
            assert_eq!(inside.state, SessionState::Admitted);
        }

        // A random draw, still in the pre-queue when every seat sells: turned away without a draw.
        let ev = format!("{event}-draw");
        let opens = t0 + 3_600_000;
        store
            .init(&ev, &settings(10, true, Some(opens)))
            .await
            .unwrap();
        join_many(&store, &ev, "pre", n, t0).await;
        assert_eq!(store.snapshot(&ev).await.unwrap().prequeue, n);
        let sold_out = SettingsChange::Inventory {
            inventory: SOLD_OUT,
        };
        store.update(&ev, &sold_out).await.unwrap();
        let refused = store
            .join(&ev, &join("late-comer-0000", t0 + 1))
            .await
            .unwrap();
        assert_eq!(refused.state, SessionState::TurnedAway);
        let r = store.tick(&ev, &tick(t0 + 2)).await.unwrap();
        assert_eq!(r.turned_away.len() as u64, TURN_AWAY_PER_TICK);
        assert!(!r.drew);
        let snap = store.snapshot(&ev).await.unwrap();
        assert_eq!(snap.prequeue, n - TURN_AWAY_PER_TICK);
        assert_eq!(snap.waiting(), n - TURN_AWAY_PER_TICK);
        store.tick(&ev, &tick(t0 + 3)).await.unwrap();
        let snap = store.snapshot(&ev).await.unwrap();
        assert_eq!((snap.prequeue, snap.waiting(), snap.served), (0, 0, 0));
        assert_eq!(snap.counters.turned_away, n);
        let gone = store
            .lookup(&ev, "pre-000007-qqqqqqqq")
            .await
            .unwrap()
            .unwrap();
        assert_eq!((gone.state, gone.number), (SessionState::TurnedAway, None));
        // Seats come back: those turned away stay so; a new join (theirs included) takes a place at the back.
        let restocked = SettingsChange::Inventory {
            inventory: RESTOCKED,
        };
        store.update(&ev, &restocked).await.unwrap();
        store.tick(&ev, &tick(t0 + 4)).await.unwrap();
        let still = store
            .lookup(&ev, "pre-000008-qqqqqqqq")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(still.state, SessionState::TurnedAway);
        let again = store
            .join(&ev, &join("pre-000007-qqqqqqqq", t0 + 5))
            .await
            .unwrap();
        assert_eq!(again.state, SessionState::PreQueue);
        let snap = store.snapshot(&ev).await.unwrap();
        assert_eq!((snap.prequeue, snap.counters.joined), (1, n + 1));
        // (Nobody marked it: a grace past the join keeps it alive at the draw.)
        let at_opening = Tick {
            abandon_after_ms: 2 * (opens - t0),
            ..tick(opens)
        };
        let r = store.tick(&ev, &at_opening).await.unwrap();
        assert!(r.drew);
        assert_eq!(r.admitted, vec!["pre-000007-qqqqqqqq".to_owned()]);
    }

    /// Liveness, exactly at the edges: a mark by number keeps a waiting session alive for the grace (a store may
    /// round up to its slot, never down); no mark for longer than the grace plus a slot skips it; a pre-queued
    /// session polled shortly before a scheduled opening is alive at the draw and one that stopped long before is
    /// skipped; a draw run early by "open now" counts every drawn session as seen at the draw. `event` is a
    /// prefix: the function initialises three on-sales under it.
    pub async fn liveness(store: Arc<dyn Store>, event: &str) {
        const SLOT: u64 = 10_000; // the coarsest slot a store may use (RedisStore::SEEN_SLOT_MS)
        let grace = 60_000;
        let t0 = 10_000_000u64;
        let tick = |now_ms| Tick {
            now_ms,
            arrival_window_ms: ARRIVAL_MS,
            abandon_after_ms: grace,
            max_scan: 1_000,
        };
        let join = |sid: &str, now_ms| Join {
            session: sid.to_owned(),
            account: None,
            now_ms,
            draw_key: 7,
        };
        let mark = |store: &Arc<dyn Store>, ev: String, p: Placement, now_ms| {
            let store = store.clone();
            async move {
                let t = Touches {
                    now_ms,
                    waiting: vec![Mark {
                        session: p.session.clone(),
                        number: p.number,
                    }],
                    active: vec![],
                    idle_timeout_ms: IDLE_MS,
                    abandon_after_ms: grace,
                };
                store.touch(&ev, &t).await.unwrap();
            }
        };

        // FIFO, door closed (capacity 0) while people wait.
        let ev = format!("{event}-fifo");
        store.init(&ev, &settings(0, false, None)).await.unwrap();
        let live = store
            .join(&ev, &join("live-session-000000000", t0))
            .await
            .unwrap();
        let gone = store
            .join(&ev, &join("gone-session-000000000", t0))
            .await
            .unwrap();
        assert_eq!((live.number, gone.number), (Some(1), Some(2)));
        // `live` polls every 20 s for five minutes; `gone` never polls after joining.
        let mut now = t0;
        while now < t0 + 300_000 {
            now += 20_000;
            mark(&store, ev.clone(), live.clone(), now).await;
        }
        store
            .update(&ev, &SettingsChange::Capacity { capacity: 10 })
            .await
            .unwrap();
        // Reached 59 s after its last poll: alive.
        let r = store.tick(&ev, &tick(now + grace - 1_000)).await.unwrap();
        assert_eq!(
            r.admitted,
            vec![live.session.clone()],
            "a session marked within the grace is let in"
        );
        assert_eq!(
            r.abandoned,
            vec![gone.session.clone()],
            "a session silent for minutes is skipped"
        );

        // A numbered session silent for longer than the grace plus one slot is skipped, even if it polled before.
        let late = store
            .join(&ev, &join("late-session-000000000", now))
            .await
            .unwrap();
        mark(&store, ev.clone(), late.clone(), now + 5_000).await;
        let r = store
            .tick(&ev, &tick(now + 5_000 + grace + SLOT + 1))
            .await
            .unwrap();
        assert!(r.admitted.is_empty());
        assert_eq!(r.abandoned, vec![late.session.clone()]);

        // A scheduled draw reads the marks made before it.
        let opens = t0 + 1_800_000;
        let ev = format!("{event}-sched");
        store
            .init(&ev, &settings(10, true, Some(opens)))
            .await
            .unwrap();
        let polled = store
            .join(&ev, &join("polled-session-0000000", t0))
            .await
            .unwrap();
        let left = store
            .join(&ev, &join("left-session-000000000", t0))
            .await
            .unwrap();
        assert_eq!(polled.state, SessionState::PreQueue);
        mark(&store, ev.clone(), polled.clone(), opens - 30_000).await;
        let r = store.tick(&ev, &tick(opens)).await.unwrap();
        assert!(r.drew);
        assert_eq!(r.admitted, vec![polled.session.clone()]);
        assert_eq!(
            r.abandoned,
            vec![left.session.clone()],
            "left 30 minutes before the opening"
        );

        // An early draw ("open now" 25 minutes before the scheduled opening): nobody was marked yet, nobody is
        // skipped at the draw.
        let ev = format!("{event}-early");
        store
            .init(&ev, &settings(10, true, Some(opens)))
            .await
            .unwrap();
        let a = store
            .join(&ev, &join("early-a-session-000000", t0))
            .await
            .unwrap();
        let b = store
            .join(&ev, &join("early-b-session-000000", t0))
            .await
            .unwrap();
        let open_now = t0 + 300_000;
        store
            .update(&ev, &SettingsChange::OpenNow { now_ms: open_now })
            .await
            .unwrap();
        let r = store.tick(&ev, &tick(open_now)).await.unwrap();
        assert!(r.drew);
        let mut got = r.admitted.clone();
        got.sort();
        assert_eq!(
            got,
            vec![a.session.clone(), b.session.clone()],
            "an early draw skips nobody"
        );
        assert!(r.abandoned.is_empty());
    }

    pub fn ops_strategy() -> impl proptest::strategy::Strategy<Value = Vec<Op>> {
        use proptest::prelude::*;
        let op = prop_oneof![
            4 => (0usize..24).prop_map(Op::Join),
            3 => (0usize..24).prop_map(Op::Poll),
            4 => Just(Op::Tick),
            2 => (0usize..24).prop_map(Op::Claim),
            2 => (0usize..24).prop_map(Op::Touch),
            2 => ((0usize..24), (0u32..5)).prop_map(|(i, s)| Op::Finish(i, s)),
            3 => (1u64..15_000).prop_map(Op::Advance),
            1 => Just(Op::OpenNow),
            1 => (0u8..64).prop_map(Op::Close),
            1 => Just(Op::SoldOut),
            1 => Just(Op::Restock),
        ];
        proptest::collection::vec(op, 1..120)
    }
}

mod memory {
    use std::sync::Arc;

    use proptest::prelude::*;
    use waitroom_layer::MemoryStore;
    use waitroom_layer::store::Store;

    use super::contract;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        #[test]
        fn fifo_interleavings_keep_the_invariants(ops in contract::ops_strategy(), capacity in 1u64..5) {
            rt().block_on(async {
                let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
                store.init("ev", &contract::settings(capacity, false, None)).await.unwrap();
                contract::run(store, "ev", capacity, 1_000_000, &ops).await;
            });
        }

        #[test]
        fn draw_interleavings_keep_the_invariants(ops in contract::ops_strategy(), capacity in 1u64..5, opens in 0u64..60_000) {
            rt().block_on(async {
                let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
                store.init("ev", &contract::settings(capacity, true, Some(1_000_000 + opens))).await.unwrap();
                contract::run(store, "ev", capacity, 1_000_000, &ops).await;
            });
        }
    }

    #[tokio::test]
    async fn liveness_marks_and_the_draw() {
        contract::liveness(Arc::new(MemoryStore::new()), "live").await;
    }

    #[tokio::test]
    async fn closing_and_selling_out_turn_the_line_away() {
        contract::turn_away(Arc::new(MemoryStore::new()), "turn").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_callers_keep_the_invariants() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        store
            .init("ev", &contract::settings(7, false, None))
            .await
            .unwrap();
        contract::concurrent(store, "ev", 7).await;
    }
}

/// The same contract against the durable `MemoryStore` (`MemoryStore::open`), restarted from its data file every
/// few calls: the store is closed (its last commit) and opened again on the same directory in the middle of the
/// model, so every invariant (unique dense numbers, line order, capacity, one end per join) must hold across
/// restarts too. What a crash loses is shown by the crash tests (`tests/durable_crash.rs`).
mod durable {
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use proptest::prelude::*;
    use tokio::sync::RwLock;
    use waitroom_layer::store::{Join, SettingsChange, Store, Tick, TickReport, Touches};
    use waitroom_layer::{MemoryStore, Placement, Settings, Snapshot, StoreError};

    use super::contract;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// A durable store that restarts (closes and opens its directory again) before every `every`-th call; never
    /// with `every == 0`. The directory is removed when the store drops.
    #[derive(Debug)]
    pub struct Restarting {
        dir: PathBuf,
        every: u64,
        calls: AtomicU64,
        pub restarts: AtomicU64,
        store: RwLock<Option<MemoryStore>>,
    }

    impl Restarting {
        pub fn new(tag: &str, every: u64) -> Self {
            let dir = std::env::temp_dir().join(format!(
                "waitroom-contract-{tag}-{}-{}",
                std::process::id(),
                waitroom_layer::WaitingRoom::new_session_id()
            ));
            let store = MemoryStore::open(&dir).expect("a fresh data directory opens");
            Self {
                dir,
                every,
                calls: AtomicU64::new(0),
                restarts: AtomicU64::new(0),
                store: RwLock::new(Some(store)),
            }
        }

        async fn get(&self) -> tokio::sync::RwLockReadGuard<'_, Option<MemoryStore>> {
            let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            if self.every > 0 && n.is_multiple_of(self.every) {
                let mut w = self.store.write().await;
                // The last handle: its drop commits and closes the file, so it opens again at once.
                drop(w.take());
                *w = Some(MemoryStore::open(&self.dir).expect("the data directory opens again"));
                self.restarts.fetch_add(1, Ordering::SeqCst);
            }
            self.store.read().await
        }
    }

    impl Drop for Restarting {
        fn drop(&mut self) {
            drop(self.store.get_mut().take());
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    macro_rules! call {
        ($self:ident . $m:ident ( $($a:expr),* )) => {{
            let g = $self.get().await;
            g.as_ref().expect("open").$m($($a),*).await
        }};
    }

    #[async_trait::async_trait]
    impl Store for Restarting {
        async fn init(&self, event: &str, defaults: &Settings) -> Result<Settings, StoreError> {
            call!(self.init(event, defaults))
        }
        async fn join(&self, event: &str, join: &Join) -> Result<Placement, StoreError> {
            call!(self.join(event, join))
        }
        async fn lookup(
            &self,
            event: &str,
            session: &str,
        ) -> Result<Option<Placement>, StoreError> {
            call!(self.lookup(event, session))
        }
        async fn claim(
            &self,
            event: &str,
            session: &str,
            now_ms: u64,
            idle_timeout_ms: u64,
        ) -> Result<Option<Placement>, StoreError> {
            call!(self.claim(event, session, now_ms, idle_timeout_ms))
        }
        async fn touch(&self, event: &str, touches: &Touches) -> Result<(), StoreError> {
            call!(self.touch(event, touches))
        }
        async fn tick(&self, event: &str, tick: &Tick) -> Result<TickReport, StoreError> {
            call!(self.tick(event, tick))
        }
        async fn finish(
            &self,
            event: &str,
            session: &str,
            seats: u32,
            now_ms: u64,
        ) -> Result<bool, StoreError> {
            call!(self.finish(event, session, seats, now_ms))
        }
        async fn snapshot(&self, event: &str) -> Result<Snapshot, StoreError> {
            call!(self.snapshot(event))
        }
        async fn update(
            &self,
            event: &str,
            change: &SettingsChange,
        ) -> Result<Settings, StoreError> {
            call!(self.update(event, change))
        }
        async fn finished_since(
            &self,
            event: &str,
            cursor: &str,
            now_ms: u64,
            lookback_ms: u64,
        ) -> Result<(Vec<String>, String), StoreError> {
            call!(self.finished_since(event, cursor, now_ms, lookback_ms))
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

        #[test]
        fn fifo_interleavings_keep_the_invariants_across_restarts(ops in contract::ops_strategy(), capacity in 1u64..5, every in 5u64..40) {
            rt().block_on(async {
                let store = Arc::new(Restarting::new("fifo", every));
                store.init("ev", &contract::settings(capacity, false, None)).await.unwrap();
                contract::run(store.clone(), "ev", capacity, 1_000_000, &ops).await;
            });
        }

        #[test]
        fn draw_interleavings_keep_the_invariants_across_restarts(ops in contract::ops_strategy(), capacity in 1u64..5, opens in 0u64..60_000, every in 5u64..40) {
            rt().block_on(async {
                let store = Arc::new(Restarting::new("draw", every));
                store.init("ev", &contract::settings(capacity, true, Some(1_000_000 + opens))).await.unwrap();
                contract::run(store.clone(), "ev", capacity, 1_000_000, &ops).await;
            });
        }
    }

    #[tokio::test]
    async fn liveness_marks_and_the_draw() {
        // Marks of people in line are not written (a restart counts everyone as seen), so no restarts here.
        contract::liveness(Arc::new(Restarting::new("live", 0)), "live").await;
    }

    #[tokio::test]
    async fn closing_and_selling_out_turn_the_line_away_across_restarts() {
        let store = Arc::new(Restarting::new("turn", 501));
        contract::turn_away(store.clone(), "turn").await;
        assert!(
            store.restarts.load(Ordering::SeqCst) > 2,
            "restarted along the way"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_callers_keep_the_invariants_across_restarts() {
        let store = Arc::new(Restarting::new("conc", 97));
        store
            .init("ev", &contract::settings(7, false, None))
            .await
            .unwrap();
        contract::concurrent(store.clone(), "ev", 7).await;
        assert!(
            store.restarts.load(Ordering::SeqCst) > 2,
            "restarted along the way"
        );
    }
}

/// The same contract against `RedisStore` on a real redis-server (started here on a free port, or `REDIS_URL`).
/// Each case uses a fresh on-sale id, so cases never see each other's keys.
#[cfg(feature = "redis")]
mod redis {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use proptest::strategy::Strategy;
    use proptest::test_runner::{Config, TestRunner};
    use waitroom_layer::RedisStore;
    use waitroom_layer::store::Store;
    use waitroom_testkit::redis::RedisServer;

    use super::contract;

    static CASE: AtomicU64 = AtomicU64::new(0);

    fn fresh_event(tag: &str) -> String {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        format!(
            "{tag}-{}-{nanos}-{}",
            std::process::id(),
            CASE.fetch_add(1, Ordering::Relaxed)
        )
    }

    fn cases() -> u32 {
        std::env::var("WAITROOM_REDIS_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(48)
    }

    /// Runs the proptest by hand (not with the `proptest!` macro) so the server and the runtime live exactly as
    /// long as the test and the server is stopped when it ends, pass or fail.
    fn run_property(random: bool) {
        let server = RedisServer::from_env_or_start();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        // Four draw buckets, so that sessions share buckets and the ranks inside a bucket are exercised too.
        let store: Arc<dyn Store> = Arc::new(
            rt.block_on(
                RedisStore::builder(server.url())
                    .draw_buckets_log2(2)
                    .connect(),
            )
            .unwrap(),
        );
        let mut runner = TestRunner::new(Config {
            cases: cases(),
            ..Config::default()
        });
        let strategy = (contract::ops_strategy(), 1u64..5, 0u64..60_000).boxed();
        let result = runner.run(&strategy, |(ops, capacity, opens)| {
            let store = store.clone();
            rt.block_on(async move {
                let event = fresh_event(if random { "draw" } else { "fifo" });
                let opens_at = random.then_some(1_000_000 + opens);
                store
                    .init(&event, &contract::settings(capacity, random, opens_at))
                    .await
                    .unwrap();
                contract::run(store, &event, capacity, 1_000_000, &ops).await;
            });
            Ok(())
        });
        drop(server);
        if let Err(e) = result {
            panic!("{e}");
        }
    }

    #[test]
    fn fifo_interleavings_keep_the_invariants() {
        run_property(false);
    }

    #[test]
    fn draw_interleavings_keep_the_invariants() {
        run_property(true);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_callers_keep_the_invariants() {
        let server = RedisServer::from_env_or_start();
        let store: Arc<dyn Store> = Arc::new(RedisStore::connect(server.url()).await.unwrap());
        let event = fresh_event("conc");
        store
            .init(&event, &contract::settings(7, false, None))
            .await
            .unwrap();
        contract::concurrent(store, &event, 7).await;
    }

    /// `purge` removes every key of one on-sale and nothing of another, even when the id holds glob characters
    /// that, unescaped, would match the other's keys.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn purge_deletes_one_onsale_only() {
        let server = RedisServer::from_env_or_start();
        let store = RedisStore::connect(server.url()).await.unwrap();
        let base = fresh_event("purge");
        let (glob, other) = (format!("{base}-*"), format!("{base}-x"));
        for ev in [&glob, &other] {
            // A pre-queue (bucket keys), then the draw, marks and an admission: every kind of key.
            store
                .init(ev, &contract::settings(2, true, Some(2_000)))
                .await
                .unwrap();
            for i in 0..50u64 {
                let j = waitroom_layer::store::Join {
                    session: format!("purge-{i:03}-zzzzzzzzzzzzz"),
                    account: None,
                    now_ms: 1_000,
                    draw_key: i.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                };
                store.join(ev, &j).await.unwrap();
            }
            let t = waitroom_layer::store::Tick {
                now_ms: 2_000,
                arrival_window_ms: 60_000,
                abandon_after_ms: 60_000,
                max_scan: 100,
            };
            assert_eq!(store.tick(ev, &t).await.unwrap().admitted.len(), 2);
        }
        let count = |ev: &str| {
            let out = server.command(&["KEYS", &format!("wr:{{{ev}}}:*")]);
            out.lines().filter(|l| !l.trim().is_empty()).count()
        };
        let before = count(&other);
        assert!(before >= 5, "{before} keys");
        let deleted = store.purge(&glob).await.unwrap();
        assert!(deleted >= 5, "{deleted}");
        assert_eq!(count(&other), before, "the other on-sale's keys stay");
        assert!(
            store.snapshot(&glob).await.is_err(),
            "the purged on-sale is gone"
        );
        assert_eq!(store.snapshot(&other).await.unwrap().served, 2);
        assert_eq!(store.purge(&glob).await.unwrap(), 0);
    }

    /// Numbered marks go to the `seen` bitmaps (no session record rewritten); the contract's liveness edges hold.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn liveness_marks_and_the_draw() {
        let server = RedisServer::from_env_or_start();
        let store = RedisStore::connect(server.url()).await.unwrap();
        let event = fresh_event("live");
        contract::liveness(Arc::new(store.clone()), &event).await;
        // The polls above went to per-slot bitmaps that expire a little after the grace.
        let client = ::redis::Client::open(server.url()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let pattern = format!("{}:*", store.key(&format!("{event}-fifo"), "seen"));
        let keys: Vec<String> = ::redis::cmd("KEYS")
            .arg(&pattern)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(!keys.is_empty(), "no bitmap under {pattern}");
        for k in keys {
            let ttl: i64 = ::redis::cmd("PTTL")
                .arg(&k)
                .query_async(&mut conn)
                .await
                .unwrap();
            assert!(
                ttl > 0 && ttl <= 60_000 + 2 * waitroom_layer::store::SEEN_SLOT_MS as i64,
                "{k}: {ttl}"
            );
        }
    }

    /// The draw in Redis (implicit numbers: bucket start + rank) numbers a pre-queue exactly as the memory store's
    /// sort does, for few buckets (hundreds of sessions per bucket) and many (mostly one per bucket); the head then
    /// leaves in that order, and later joiners queue behind.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_draw_numbers_the_prequeue_like_the_memory_store() {
        use waitroom_layer::MemoryStore;
        use waitroom_layer::store::{Join, SettingsChange, Tick};
        let server = RedisServer::from_env_or_start();
        for bits in [3u8, 14] {
            let redis = RedisStore::builder(server.url())
                .draw_buckets_log2(bits)
                .connect()
                .await
                .unwrap();
            let memory = MemoryStore::new();
            let event = fresh_event("drawcmp");
            let stores: [&dyn Store; 2] = [&redis, &memory];
            for st in stores {
                st.init(&event, &contract::settings(100_000, true, Some(5_000_000)))
                    .await
                    .unwrap();
            }
            let n = 2_000u64;
            let join = |i: u64, now_ms: u64| Join {
                session: format!("draw-{i:05}-aaaaaaaaaaaa"),
                account: None,
                now_ms,
                draw_key: (i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(7),
            };
            for i in 0..n {
                for st in stores {
                    let p = st.join(&event, &join(i, 1_000_000)).await.unwrap();
                    assert_eq!(p.number, None);
                }
            }
            for st in stores {
                assert_eq!(st.snapshot(&event).await.unwrap().prequeue, n);
                st.update(&event, &SettingsChange::OpenNow { now_ms: 2_000_000 })
                    .await
                    .unwrap();
                // A join after opening runs the draw and queues behind the pre-queue.
                let late = st.join(&event, &join(n, 2_000_001)).await.unwrap();
                assert_eq!(late.number, Some(n + 1));
            }
            for i in 0..n {
                let sid = format!("draw-{i:05}-aaaaaaaaaaaa");
                let r = redis.lookup(&event, &sid).await.unwrap().unwrap();
                let m = memory.lookup(&event, &sid).await.unwrap().unwrap();
                assert_eq!(r, m, "bits {bits}: {sid}");
            }
            let tick = Tick {
                now_ms: 2_000_002,
                arrival_window_ms: 60_000,
                abandon_after_ms: 600_000_000,
                max_scan: 700,
            };
            for _ in 0..3 {
                let r = redis.tick(&event, &tick).await.unwrap();
                let m = memory.tick(&event, &tick).await.unwrap();
                assert_eq!(r.admitted, m.admitted, "bits {bits}");
            }
            let snap = redis.snapshot(&event).await.unwrap();
            assert_eq!((snap.served, snap.active), (n + 1, n + 1));
        }
    }

    /// Closing and selling out turn a line of thousands away in a few tick scripts (the numbered line, then the
    /// pre-queue's buckets); a join meanwhile takes no place.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn closing_and_selling_out_turn_the_line_away() {
        let server = RedisServer::from_env_or_start();
        let store = RedisStore::builder(server.url())
            .draw_buckets_log2(6)
            .connect()
            .await
            .unwrap();
        contract::turn_away(Arc::new(store), &fresh_event("turn")).await;
    }

    /// Several stores (separate connections, as separate room instances would have) tick one on-sale at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_instances_keep_the_invariants() {
        let server = RedisServer::from_env_or_start();
        let event = fresh_event("inst");
        let first = RedisStore::connect(server.url()).await.unwrap();
        first
            .init(&event, &contract::settings(5, false, None))
            .await
            .unwrap();
        // `concurrent` spreads its tasks over clones of one handle; a wrapper hands each call to one of three
        // independent connections in turn.
        let stores = vec![
            first,
            RedisStore::connect(server.url()).await.unwrap(),
            RedisStore::connect(server.url()).await.unwrap(),
        ];
        let store: Arc<dyn Store> = Arc::new(RoundRobin {
            stores,
            next: AtomicU64::new(0),
        });
        contract::concurrent(store, &event, 5).await;
    }

    #[derive(Debug)]
    struct RoundRobin {
        stores: Vec<RedisStore>,
        next: AtomicU64,
    }

    impl RoundRobin {
        fn pick(&self) -> &RedisStore {
            let i = self.next.fetch_add(1, Ordering::Relaxed) as usize;
            &self.stores[i % self.stores.len()]
        }
    }

    #[async_trait::async_trait]
    impl Store for RoundRobin {
        async fn init(
            &self,
            event: &str,
            defaults: &waitroom_layer::Settings,
        ) -> Result<waitroom_layer::Settings, waitroom_layer::StoreError> {
            self.pick().init(event, defaults).await
        }
        async fn join(
            &self,
            event: &str,
            join: &waitroom_layer::store::Join,
        ) -> Result<waitroom_layer::Placement, waitroom_layer::StoreError> {
            self.pick().join(event, join).await
        }
        async fn lookup(
            &self,
            event: &str,
            session: &str,
        ) -> Result<Option<waitroom_layer::Placement>, waitroom_layer::StoreError> {
            self.pick().lookup(event, session).await
        }
        async fn claim(
            &self,
            event: &str,
            session: &str,
            now_ms: u64,
            idle_timeout_ms: u64,
        ) -> Result<Option<waitroom_layer::Placement>, waitroom_layer::StoreError> {
            self.pick()
                .claim(event, session, now_ms, idle_timeout_ms)
                .await
        }
        async fn touch(
            &self,
            event: &str,
            touches: &waitroom_layer::store::Touches,
        ) -> Result<(), waitroom_layer::StoreError> {
            self.pick().touch(event, touches).await
        }
        async fn tick(
            &self,
            event: &str,
            tick: &waitroom_layer::store::Tick,
        ) -> Result<waitroom_layer::store::TickReport, waitroom_layer::StoreError> {
            self.pick().tick(event, tick).await
        }
        async fn finish(
            &self,
            event: &str,
            session: &str,
            seats: u32,
            now_ms: u64,
        ) -> Result<bool, waitroom_layer::StoreError> {
            self.pick().finish(event, session, seats, now_ms).await
        }
        async fn snapshot(
            &self,
            event: &str,
        ) -> Result<waitroom_layer::Snapshot, waitroom_layer::StoreError> {
            self.pick().snapshot(event).await
        }
        async fn update(
            &self,
            event: &str,
            change: &waitroom_layer::store::SettingsChange,
        ) -> Result<waitroom_layer::Settings, waitroom_layer::StoreError> {
            self.pick().update(event, change).await
        }
    }
}
