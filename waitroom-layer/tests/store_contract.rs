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
        AUDIT_KEEP, AuditEntry, Counters, Inventory, Join, Mark, Placement, Redeem, Return,
        SessionState, Settings, SettingsChange, Store, TURN_AWAY_PER_TICK, Tick, TickReport,
        Ticket, Touches,
    };

    pub const IDLE_MS: u64 = 30_000;
    pub const ABANDON_MS: u64 = 10_000;
    pub const ARRIVAL_MS: u64 = 5_000;
    /// The return window: a session missed at `t` comes back until `t + RETURN_MS` (exclusive).
    pub const RETURN_MS: u64 = 20_000;

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
            prequeue_opens_at_ms: None,
            closes_at_ms: None,
        }
    }

    fn tick_at(now_ms: u64) -> Tick {
        Tick {
            now_ms,
            arrival_window_ms: ARRIVAL_MS,
            abandon_after_ms: ABANDON_MS,
            return_window_ms: RETURN_MS,
            max_scan: 1_000,
        }
    }

    /// The most sessions one tick call of the model looks at: a tick is several calls, as the room makes them.
    pub const CHUNK: u64 = 3;

    /// One tick as the room runs it: calls of at most [`CHUNK`] sessions each while a call says there is more.
    /// Checks that each call stays within its budget and that a call after the last finds nothing to do.
    pub async fn tick_in_chunks(store: &Arc<dyn Store>, event: &str, now_ms: u64) -> TickReport {
        let t = Tick {
            max_scan: CHUNK,
            ..tick_at(now_ms)
        };
        let mut report = TickReport::default();
        for _ in 0..1_000 {
            let r = store.tick(event, &t).await.unwrap();
            assert!(
                r.looked_at() <= CHUNK,
                "one call looked at {} sessions, over its budget of {CHUNK}: {r:?}",
                r.looked_at()
            );
            report.absorb(r);
            if !report.more {
                let again = store.tick(event, &t).await.unwrap();
                assert_eq!(
                    again.looked_at(),
                    0,
                    "a call after one that said it was done found work: {again:?}"
                );
                return report;
            }
        }
        panic!("a tick still had more to do after 1,000 calls of {CHUNK}");
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
        // When each was last let in: one that does not come within the arrival window misses its turn (it keeps
        // it for the return window, and may be let in again when back).
        let mut admitted_at: HashMap<String, u64> = HashMap::new();
        let mut joins = 0u64;
        // Who missed their turn, and when; who came back, in the order they came back (the returning queue).
        let mut missed_at: HashMap<String, u64> = HashMap::new();
        let mut returning: Vec<String> = Vec::new();

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
                    // A poll reaches the store as the room sends it: a come-back look, then a liveness mark.
                    let s = sid(*i);
                    let before = store.lookup(event, &s).await.unwrap();
                    let (p, counted) = store.come_back(event, &s, now, RETURN_MS).await.unwrap();
                    match before.as_ref().map(|b| b.state) {
                        Some(SessionState::Missed) => {
                            let at = missed_at[&s];
                            let p = p.clone().expect("a missed session is known");
                            assert_eq!(
                                p.number,
                                before.as_ref().unwrap().number,
                                "a return keeps its number"
                            );
                            if now < at + RETURN_MS {
                                assert_eq!(
                                    (p.state, counted),
                                    (SessionState::Returning, Some(Return::InTime)),
                                    "{s} missed at {at} is back at {now}, within the window"
                                );
                                returning.push(s.clone());
                                seen.insert(s.clone(), now);
                            } else {
                                assert_eq!(
                                    (p.state, counted),
                                    (SessionState::Abandoned, Some(Return::TooLate)),
                                    "{s} missed at {at} is back at {now}, after the window"
                                );
                            }
                        }
                        Some(SessionState::Abandoned) => {
                            // Counted late once (by this look, or an earlier one).
                            assert_eq!(p.as_ref().map(|p| p.state), Some(SessionState::Abandoned));
                        }
                        _ => {
                            assert_eq!(p, before, "a come-back look changes only a missed session");
                            assert_eq!(counted, None);
                        }
                    }
                    if let Some(p) = p
                        && matches!(
                            p.state,
                            SessionState::Waiting
                                | SessionState::PreQueue
                                | SessionState::Returning
                        )
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
                            tickets: 0,
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
                        tickets: 0,
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
                    let report = tick_in_chunks(&store, event, now).await;
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
                    // Those taken from the returning queue (they left the head before): ahead of the line, in the
                    // order they came back.
                    let from_queue: HashSet<&String> = report
                        .admitted
                        .iter()
                        .chain(&report.missed)
                        .chain(&report.turned_away)
                        .filter(|s| returning.contains(s))
                        .collect();
                    let k = from_queue.len();
                    assert_eq!(
                        from_queue,
                        returning[..k].iter().collect::<HashSet<_>>(),
                        "the returning queue is served in the order people came back"
                    );
                    let queue_left = returning.len() - k;
                    returning.drain(..k);
                    for s in &report.admitted {
                        assert!(
                            admitted_ever.insert((s.clone(), number_of[s])),
                            "{s} admitted twice"
                        );
                        admitted_at.insert(s.clone(), now);
                        if !from_queue.contains(s) {
                            left.push((number_of[s], true, s.clone()));
                        }
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
                        // From the returning queue, the line (its number counts as served) or the pre-queue.
                        if let Some(n) = p.number
                            && !from_queue.contains(s)
                        {
                            assert_eq!(number_of.get(s), Some(&n));
                            left.push((n, false, s.clone()));
                        }
                    }
                    for s in &report.missed {
                        let p = store.lookup(event, s).await.unwrap().unwrap();
                        assert_eq!(p.state, SessionState::Missed);
                        if !from_queue.contains(s)
                            && admitted_ever.remove(&(s.clone(), number_of[s]))
                        {
                            // Let in before and not come within the arrival window: its number left the head
                            // then; it may be let in again when back.
                            let at = admitted_at[s];
                            assert!(
                                at + ARRIVAL_MS <= now,
                                "{s} let in at {at} missed its turn at {now}, within the arrival window"
                            );
                            assert_eq!(
                                p.number,
                                Some(number_of[s]),
                                "a lapsed admission keeps its number"
                            );
                            missed_at.insert(s.clone(), now);
                            continue;
                        }
                        if !from_queue.contains(s) {
                            left.push((number_of[s], false, s.clone()));
                        }
                        let last = seen[s];
                        assert!(
                            last + ABANDON_MS < now,
                            "{s} skipped as away but seen at {last} (now {now})"
                        );
                        missed_at.insert(s.clone(), now);
                    }
                    for s in &report.abandoned {
                        let p = store.lookup(event, s).await.unwrap().unwrap();
                        assert_eq!(p.state, SessionState::Abandoned);
                        let at = missed_at[s];
                        assert!(
                            at + RETURN_MS <= now,
                            "{s} missed at {at} ended abandoned at {now}, within its window"
                        );
                    }
                    assert!(
                        left.is_empty() || queue_left == 0,
                        "the line moved while {queue_left} who came back still wait"
                    );
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
            tick_in_chunks(&store, event, now).await;
            let snap = store.snapshot(event).await.unwrap();
            if snap.active == 0 && snap.waiting() == 0 && snap.away() == 0 {
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
    /// First contacts from many tasks at once, through `instances` (one handle per room instance sharing the
    /// store): batches of tickets ([`Store::tickets`], 1 to 8 at a time), batches of numbers alone
    /// ([`Store::line_tickets`], counted by a touch as a room counts them), single tickets and joins, all on one
    /// counter. Each call's numbers are consecutive and in its order; all numbers together are distinct and
    /// gap-free (exactly `1..=` the highest); the store counts every ticket, and the numbers alone only once a
    /// touch has brought their count.
    pub async fn concurrent_tickets(instances: Vec<Arc<dyn Store>>, event: &str) {
        const TASKS: usize = 12;
        const ROUNDS: usize = 40;
        let mut tasks = Vec::new();
        for t in 0..TASKS {
            let store = instances[t % instances.len()].clone();
            let event = event.to_owned();
            tasks.push(tokio::spawn(async move {
                let (mut numbers, mut tickets) = (Vec::new(), 0u64);
                for k in 0..ROUNDS {
                    let now = 1_000_000 + k as u64;
                    match (t + k) % 5 {
                        // A lone first contact, and a join: the same counter.
                        0 => {
                            let Ticket::Number(n) = store.ticket(&event, now).await.unwrap() else {
                                panic!("a FIFO line gives numbers");
                            };
                            numbers.push(n);
                            tickets += 1;
                        }
                        1 => {
                            let j = Join {
                                session: format!("ctk-{t:02}-{k:03}-xxxxxxxxxxx"),
                                account: None,
                                now_ms: now,
                                draw_key: 0,
                            };
                            numbers.push(store.join(&event, &j).await.unwrap().number.unwrap());
                        }
                        // Numbers alone, as a room whose snapshot shows the line open asks for them; it counts
                        // them with a touch.
                        2 => {
                            let count = 1 + (t * 5 + k) % 8;
                            let last = store
                                .line_tickets(&event, count, 0)
                                .await
                                .unwrap()
                                .expect("both stores give numbers alone");
                            let first = last + 1 - count as u64;
                            numbers.extend(first..=last);
                            let touch = Touches {
                                now_ms: now,
                                tickets: count as u64,
                                ..Touches::default()
                            };
                            store.touch(&event, &touch).await.unwrap();
                            tickets += count as u64;
                        }
                        _ => {
                            let count = 1 + (t * 7 + k * 3) % 8;
                            let ts = store.tickets(&event, count, now).await.unwrap();
                            assert_eq!(ts.len(), count);
                            let Ticket::Number(first) = ts[0] else {
                                panic!("a FIFO line gives numbers");
                            };
                            let expected: Vec<Ticket> =
                                (first..first + count as u64).map(Ticket::Number).collect();
                            assert_eq!(ts, expected, "one batch: consecutive numbers in its order");
                            numbers.extend(first..first + count as u64);
                            tickets += count as u64;
                        }
                    }
                }
                (numbers, tickets)
            }));
        }
        let (mut all, mut tickets) = (Vec::new(), 0);
        for t in tasks {
            let (numbers, n) = t.await.unwrap();
            assert!(
                numbers.windows(2).all(|w| w[0] < w[1]),
                "one caller's numbers increase"
            );
            all.extend(numbers);
            tickets += n;
        }
        all.sort_unstable();
        let total = all.len() as u64;
        assert_eq!(
            all,
            (1..=total).collect::<Vec<_>>(),
            "distinct and gap-free"
        );
        let snap = instances[0].snapshot(event).await.unwrap();
        assert_eq!(snap.last_number, total);
        assert_eq!(snap.counters.tickets, tickets);
    }

    /// Numbers alone ([`Store::line_tickets`]) come from the one counter, after the tickets and joins before them
    /// and before those after, and the store counts them only when a touch brings their count
    /// ([`Touches::tickets`]), as the room sends it with its next flush.
    pub async fn numbers_alone_share_the_counter_and_are_counted_by_a_touch(
        store: Arc<dyn Store>,
        event: &str,
    ) {
        store.init(event, &settings(1, false, None)).await.unwrap();
        let now = 1_000_000;
        assert_eq!(store.ticket(event, now).await.unwrap(), Ticket::Number(1));
        let last = store.line_tickets(event, 3, 1).await.unwrap();
        assert_eq!(last, Some(4), "2, 3 and 4, after the ticket before them");
        let j = Join {
            session: "after-the-numbers-xxxxxx".into(),
            account: None,
            now_ms: now,
            draw_key: 0,
        };
        assert_eq!(store.join(event, &j).await.unwrap().number, Some(5));
        let snap = store.snapshot(event).await.unwrap();
        assert_eq!(snap.last_number, 5);
        assert_eq!(
            snap.counters.tickets, 1,
            "the numbers alone not counted yet"
        );
        let touch = Touches {
            now_ms: now,
            tickets: 3,
            ..Touches::default()
        };
        assert!(!touch.is_empty(), "a count alone is something to send");
        store.touch(event, &touch).await.unwrap();
        assert_eq!(store.snapshot(event).await.unwrap().counters.tickets, 4);
        // A number alone comes back as any ticket does: its place is written.
        let redeem = Redeem {
            session: "number-alone-xxxxxxxxxx".into(),
            number: Some(3),
            issued_ms: now,
            now_ms: now + 1,
            grace_ms: 10_000,
            draw_key: 0,
        };
        let p = store.redeem(event, &redeem).await.unwrap().unwrap();
        assert_eq!((p.state, p.number), (SessionState::Waiting, Some(3)));
    }

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
                                return_window_ms: RETURN_MS,
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
                                    tickets: 0,
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
                        return_window_ms: RETURN_MS,
                        max_scan: 10_000,
                    },
                )
                .await
                .unwrap();
            let s = store.snapshot(event).await.unwrap();
            if s.waiting() == 0 && s.active == 0 && s.away() == 0 {
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

    /// A full restore into a store that knows nothing of the on-sale (Redis restarted empty) keeps whether the draw
    /// had run: a FIFO line is always "drawn" (newcomers get numbers at once), a random draw that had not run keeps
    /// its pre-queue, one that had run numbers newcomers.
    pub async fn restore_keeps_the_draw(store: Arc<dyn Store>, event: &str) {
        use waitroom_layer::store::Restore;
        let t0 = 3_000_000u64;
        for (i, (random, drawn, expect_drawn, expect_state)) in [
            (false, false, true, SessionState::Waiting),
            (true, false, false, SessionState::PreQueue),
            (true, true, true, SessionState::Waiting),
        ]
        .into_iter()
        .enumerate()
        {
            let ev = format!("{event}-{i}");
            let restore = Restore {
                // The opening is ahead: a random draw that had not run has not run yet at the join below.
                settings: settings(2, random, Some(t0 + 60_000)),
                drawn,
                last_number: 0,
                served: 0,
                counters: Counters::default(),
                now_ms: t0,
                hold_ms: 0,
                late_ms: 0,
                behind: false,
            };
            store.restore(&ev, &restore).await.unwrap();
            let snap = store.snapshot(&ev).await.unwrap();
            assert_eq!(
                snap.drawn, expect_drawn,
                "random draw {random}, drawn {drawn}: restored as drawn {}",
                snap.drawn
            );
            let join = Join {
                session: format!("restored-{i}-abcdefghijklmnop"),
                account: None,
                now_ms: t0 + 1,
                draw_key: 7,
            };
            let p = store.join(&ev, &join).await.unwrap();
            assert_eq!(p.state, expect_state, "random draw {random}, drawn {drawn}");
        }
    }

    /// Finding sessions (the operator's search) goes through the whole on-sale, beyond one batch of the store's
    /// scan (Redis: `HSCAN … COUNT 10000`), and stops at the limit.
    pub async fn finding_goes_through_every_session(store: Arc<dyn Store>, event: &str) {
        const N: u64 = 25_000;
        store.init(event, &settings(1, false, None)).await.unwrap();
        join_many(&store, event, "find", N, 4_000_000).await;
        let all = store
            .find_sessions(event, &|_| true, usize::MAX)
            .await
            .unwrap();
        assert_eq!(all.len() as u64, N, "every session is found");
        let some = store.find_sessions(event, &|_| true, 5).await.unwrap();
        assert_eq!(some.len(), 5, "the limit holds");
        let one = store
            .find_sessions(event, &|id| id == "find-024999-qqqqqqqq", usize::MAX)
            .await
            .unwrap();
        assert_eq!(one, vec!["find-024999-qqqqqqqq".to_owned()]);
    }

    /// A store shared by many processes reads its finishes back ([`Store::finished_since`]): from an empty cursor,
    /// those within the lookback; after a cursor, only the later ones, then nothing. (A store one process writes
    /// to returns nothing: the room saw every finish itself.)
    pub async fn shared_finishes_are_read_back(store: Arc<dyn Store>, event: &str) {
        let t0 = 5_000_000u64;
        let s = |i: u64| format!("fin-{i:02}-abcdefghijklmnop");
        store.init(event, &settings(2, false, None)).await.unwrap();
        for i in 1..=2 {
            let join = Join {
                session: s(i),
                account: None,
                now_ms: t0,
                draw_key: i,
            };
            store.join(event, &join).await.unwrap();
        }
        let admitted = store.tick(event, &tick_at(t0)).await.unwrap().admitted;
        assert_eq!(admitted.len(), 2);
        for i in 1..=2 {
            store.claim(event, &s(i), t0 + 1, IDLE_MS).await.unwrap();
        }
        let (none, start) = store
            .finished_since(event, "", t0 + 2, 60_000)
            .await
            .unwrap();
        assert!(none.is_empty(), "nothing finished yet: {none:?}");
        assert!(store.finish(event, &s(1), 1, t0 + 3).await.unwrap());
        let (first, cursor) = store
            .finished_since(event, "", t0 + 4, 60_000)
            .await
            .unwrap();
        assert_eq!(first, vec![s(1)], "read back over the lookback");
        let (again, _) = store
            .finished_since(event, &start, t0 + 4, 60_000)
            .await
            .unwrap();
        assert_eq!(again, vec![s(1)], "read after the first cursor");
        assert!(store.finish(event, &s(2), 1, t0 + 5).await.unwrap());
        let (second, cursor) = store
            .finished_since(event, &cursor, t0 + 6, 60_000)
            .await
            .unwrap();
        assert_eq!(second, vec![s(2)], "only what came after the cursor");
        let (later, _) = store
            .finished_since(event, &cursor, t0 + 7, 60_000)
            .await
            .unwrap();
        assert!(later.is_empty(), "nothing after the last: {later:?}");
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

    /// One place per account, store by store: a second session of an account that holds a place (waiting, then
    /// admitted) gets that place back, the holder's session and number, and takes none of its own (no number, not
    /// counted); another account queues behind; once the holder's visit ends the account joins again at the back,
    /// under the session that asks. `event` is the on-sale id.
    pub async fn accounts(store: Arc<dyn Store>, event: &str) {
        let t0 = 20_000_000u64;
        let join = |sid: &str, account: &str, now_ms| Join {
            session: sid.to_owned(),
            account: Some(account.to_owned()),
            now_ms,
            draw_key: 5,
        };
        let (laptop, phone, other) = (
            "laptop-session-0000000",
            "phone-session-00000000",
            "other-session-00000000",
        );
        store.init(event, &settings(0, false, None)).await.unwrap();
        let first = store
            .join(event, &join(laptop, "acct-1", t0))
            .await
            .unwrap();
        assert_eq!(
            (first.session.as_str(), first.state, first.number),
            (laptop, SessionState::Waiting, Some(1))
        );
        // The same account from another device: the laptop's place, no second one.
        let again = store
            .join(event, &join(phone, "acct-1", t0 + 1_000))
            .await
            .unwrap();
        assert_eq!(
            again, first,
            "an account holds one place whichever session asks"
        );
        assert_eq!(store.lookup(event, phone).await.unwrap(), None);
        // Another account queues behind it.
        let theirs = store
            .join(event, &join(other, "acct-2", t0 + 2_000))
            .await
            .unwrap();
        assert_eq!((theirs.session.as_str(), theirs.number), (other, Some(2)));
        let snap = store.snapshot(event).await.unwrap();
        assert_eq!((snap.counters.joined, snap.last_number), (2, 2));
        // Let in: the phone is told the laptop's admitted place.
        store
            .update(event, &SettingsChange::Capacity { capacity: 1 })
            .await
            .unwrap();
        let tick = Tick {
            now_ms: t0 + 3_000,
            arrival_window_ms: ARRIVAL_MS,
            abandon_after_ms: 600_000,
            return_window_ms: RETURN_MS,
            max_scan: 1_000,
        };
        let r = store.tick(event, &tick).await.unwrap();
        assert_eq!(r.admitted, vec![laptop.to_owned()]);
        let admitted = store
            .join(event, &join(phone, "acct-1", t0 + 4_000))
            .await
            .unwrap();
        assert_eq!(
            (admitted.session.as_str(), admitted.state, admitted.number),
            (laptop, SessionState::Admitted, Some(1))
        );
        // The visit ends: the account joins again at the back, as the phone.
        assert!(store.finish(event, laptop, 1, t0 + 5_000).await.unwrap());
        let back = store
            .join(event, &join(phone, "acct-1", t0 + 6_000))
            .await
            .unwrap();
        assert_eq!(
            (back.session.as_str(), back.state, back.number),
            (phone, SessionState::Waiting, Some(3))
        );
        assert_eq!(store.snapshot(event).await.unwrap().counters.joined, 3);
    }

    /// Closing and selling out, store by store: a line of thousands (numbered, then a pre-queue) is turned away
    /// from the head within a few ticks, at most [`TURN_AWAY_PER_TICK`] a tick, with `served` and `waiting()` kept
    /// consistent; a join while closed or sold out takes no place and is not counted; seats coming back let people
    /// join again while those turned away stay turned away. `event` is a prefix (two on-sales).
    /// The operator's kit: the timetable ([`SettingsChange::Schedule`]) moves the opening (and the draw) either
    /// way and is read back by every caller; an operator's lookup tells when a session was let in; sessions can be
    /// found by a predicate on their ids; the audit log keeps the last [`AUDIT_KEEP`] actions, newest first.
    pub async fn operator_kit(store: Arc<dyn Store>, event: &str) {
        let t0 = 1_000_000u64;
        let tick = |now_ms| Tick {
            now_ms,
            arrival_window_ms: ARRIVAL_MS,
            abandon_after_ms: 600_000,
            max_scan: 1_000,
            return_window_ms: RETURN_MS,
        };
        let join = |sid: &str, now_ms, key| Join {
            session: sid.to_owned(),
            account: None,
            now_ms,
            draw_key: key,
        };
        let schedule =
            |opens: Option<u64>, pre: Option<u64>, closes: Option<u64>| SettingsChange::Schedule {
                opens_at_ms: opens,
                prequeue_opens_at_ms: pre,
                closes_at_ms: closes,
            };

        // A draw at t0 + 60 s, moved to t0 + 120 s: nothing happens at the first time, the draw runs at the second.
        let ev = format!("{event}-draw");
        store
            .init(&ev, &settings(2, true, Some(t0 + 60_000)))
            .await
            .unwrap();
        for i in 0..3u64 {
            let p = store
                .join(&ev, &join(&format!("pre-{i}-abcdefghijklmn"), t0, i << 60))
                .await
                .unwrap();
            assert_eq!(p.state, SessionState::PreQueue);
        }
        let s = store
            .update(
                &ev,
                &schedule(Some(t0 + 120_000), Some(t0 - 1), Some(t0 + 900_000)),
            )
            .await
            .unwrap();
        assert_eq!(
            (s.opens_at_ms, s.prequeue_opens_at_ms, s.closes_at_ms),
            (Some(t0 + 120_000), Some(t0 - 1), Some(t0 + 900_000))
        );
        assert_eq!(store.snapshot(&ev).await.unwrap().settings, s, "read back");
        let r = store.tick(&ev, &tick(t0 + 60_001)).await.unwrap();
        assert!(
            !r.drew && r.admitted.is_empty(),
            "the old opening time no longer opens the door: {r:?}"
        );
        let r = store.tick(&ev, &tick(t0 + 120_000)).await.unwrap();
        assert!(r.drew, "the draw runs at the new opening time");
        assert_eq!(r.admitted.len(), 2);

        // When it was let in: the tick's time, kept when it claims; nothing while it waits.
        let first = r.admitted[0].clone();
        let d = store.inspect(&ev, &first).await.unwrap().unwrap();
        assert_eq!(d.placement.state, SessionState::Admitted);
        assert_eq!(d.admitted_at_ms, Some(t0 + 120_000));
        store
            .claim(&ev, &first, t0 + 121_000, IDLE_MS)
            .await
            .unwrap();
        let d = store.inspect(&ev, &first).await.unwrap().unwrap();
        assert_eq!(
            (d.placement.state, d.admitted_at_ms),
            (SessionState::Active, Some(t0 + 120_000))
        );
        let waiting = (0..3u64)
            .map(|i| format!("pre-{i}-abcdefghijklmn"))
            .find(|s| !r.admitted.contains(s))
            .unwrap();
        let d = store.inspect(&ev, &waiting).await.unwrap().unwrap();
        assert_eq!(
            (d.placement.state, d.placement.number, d.admitted_at_ms),
            (SessionState::Waiting, Some(3), None)
        );
        assert_eq!(
            store.inspect(&ev, "nobody-abcdefghijklmn").await.unwrap(),
            None
        );

        // Found by a predicate on the id (how a fingerprint is looked up), at most `limit`.
        let want = waiting.clone();
        let found = store
            .find_sessions(&ev, &move |id: &str| id == want, 10)
            .await
            .unwrap();
        assert_eq!(found, std::slice::from_ref(&waiting));
        let all = store.find_sessions(&ev, &|_: &str| true, 2).await.unwrap();
        assert_eq!(all.len(), 2);

        // FIFO: an opening moved later after the door opened shuts it again until then; cleared, it opens at once.
        let ev = format!("{event}-fifo");
        store.init(&ev, &settings(5, false, None)).await.unwrap();
        store
            .join(&ev, &join("fifo-0-abcdefghijklmn", t0, 0))
            .await
            .unwrap();
        store
            .update(&ev, &schedule(Some(t0 + 60_000), None, None))
            .await
            .unwrap();
        assert!(
            store
                .tick(&ev, &tick(t0 + 1))
                .await
                .unwrap()
                .admitted
                .is_empty()
        );
        let s = store
            .update(&ev, &schedule(None, None, None))
            .await
            .unwrap();
        assert_eq!(
            (s.opens_at_ms, s.prequeue_opens_at_ms, s.closes_at_ms),
            (None, None, None)
        );
        assert_eq!(
            store.tick(&ev, &tick(t0 + 2)).await.unwrap().admitted.len(),
            1
        );

        // The audit log: newest first, bounded.
        let entry = |i: u64| AuditEntry {
            at_ms: t0 + i,
            who: format!("op-{}", i % 3),
            action: "pause".into(),
            detail: format!("{{\"n\":{i}}}"),
        };
        assert!(store.audit_log(&ev, 10).await.unwrap().is_empty());
        for i in 0..3 {
            store.audit(&ev, &entry(i)).await.unwrap();
        }
        assert_eq!(store.audit_log(&ev, 2).await.unwrap(), [entry(2), entry(1)]);
        for i in 3..(AUDIT_KEEP as u64 + 5) {
            store.audit(&ev, &entry(i)).await.unwrap();
        }
        let log = store.audit_log(&ev, 10 * AUDIT_KEEP).await.unwrap();
        assert_eq!(log.len(), AUDIT_KEEP, "bounded");
        assert_eq!(log[0], entry(AUDIT_KEEP as u64 + 4));
        assert_eq!(log[AUDIT_KEEP - 1], entry(5));
    }

    /// Customer support moves a waiting session to the front: it goes in at the next free place, nobody else's
    /// number changes, its old place is skipped, everyone is let in exactly once, and every caller is told (in the
    /// snapshot) until the head passes its old number; FIFO and after a draw alike. Closing turns it away first.
    pub async fn move_front(store: Arc<dyn Store>, event: &str) {
        let t0 = 1_000_000u64;
        let tick = |now_ms| Tick {
            now_ms,
            arrival_window_ms: ARRIVAL_MS,
            abandon_after_ms: 600_000,
            max_scan: 1_000,
            return_window_ms: RETURN_MS,
        };
        let sid = |i: u64| format!("front-{i}-abcdefghijklmn");
        for random in [false, true] {
            let ev = format!("{event}-{random}");
            store
                .init(&ev, &settings(1, random, random.then_some(t0 + 10)))
                .await
                .unwrap();
            for i in 0..6u64 {
                let j = Join {
                    session: sid(i),
                    account: None,
                    now_ms: t0,
                    draw_key: i.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                };
                store.join(&ev, &j).await.unwrap();
            }
            let first = store.tick(&ev, &tick(t0 + 10)).await.unwrap().admitted;
            assert_eq!(first.len(), 1);
            // The line in order, with numbers.
            let mut line = Vec::new();
            for i in 0..6u64 {
                let p = store.lookup(&ev, &sid(i)).await.unwrap().unwrap();
                if p.state == SessionState::Waiting {
                    line.push((p.number.unwrap(), sid(i)));
                }
            }
            line.sort();
            assert_eq!(line.len(), 5);
            let (old, moved) = line[2].clone();
            assert_eq!(
                store.move_to_front(&ev, &first[0], t0 + 11).await.unwrap(),
                None,
                "admitted"
            );
            let p = store
                .move_to_front(&ev, &moved, t0 + 11)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(
                (p.state, p.number),
                (SessionState::Waiting, None),
                "random {random}"
            );
            assert_eq!(store.lookup(&ev, &moved).await.unwrap(), Some(p));
            assert_eq!(
                store.move_to_front(&ev, &moved, t0 + 12).await.unwrap(),
                None,
                "moved already"
            );
            let snap = store.snapshot(&ev).await.unwrap();
            assert_eq!(snap.moved, std::slice::from_ref(&moved));
            for (n, s) in &line {
                if *s != moved {
                    let p = store.lookup(&ev, s).await.unwrap().unwrap();
                    assert_eq!(p.number, Some(*n), "nobody else's number changes");
                }
            }
            // Each free place goes to the next: the moved session first, then the line without it.
            let mut expected: Vec<String> = vec![moved.clone()];
            expected.extend(
                line.iter()
                    .filter(|(_, s)| *s != moved)
                    .map(|(_, s)| s.clone()),
            );
            let mut inside = first[0].clone();
            let mut order = Vec::new();
            for k in 0..5u64 {
                assert!(store.finish(&ev, &inside, 0, t0 + 20 + k).await.unwrap());
                let r = store.tick(&ev, &tick(t0 + 20 + k)).await.unwrap();
                assert_eq!(r.admitted.len(), 1, "random {random}, round {k}: {r:?}");
                inside = r.admitted[0].clone();
                order.push(inside.clone());
                let snap = store.snapshot(&ev).await.unwrap();
                assert_eq!(
                    snap.moved.is_empty(),
                    snap.served >= old,
                    "listed until the head passes its old number {old} (served {})",
                    snap.served
                );
            }
            assert_eq!(order, expected, "random {random}");
            let snap = store.snapshot(&ev).await.unwrap();
            assert_eq!(snap.counters.admitted, 6, "everyone let in once");
            assert_eq!((snap.served, snap.last_number, snap.waiting()), (6, 6, 0));
            assert!(
                store
                    .tick(&ev, &tick(t0 + 40))
                    .await
                    .unwrap()
                    .admitted
                    .is_empty()
            );
        }

        // Closing turns those moved to the front away first.
        let ev = format!("{event}-close");
        store.init(&ev, &settings(1, false, None)).await.unwrap();
        for i in 0..3u64 {
            let j = Join {
                session: sid(i),
                account: None,
                now_ms: t0,
                draw_key: 0,
            };
            store.join(&ev, &j).await.unwrap();
        }
        assert_eq!(
            store.tick(&ev, &tick(t0 + 1)).await.unwrap().admitted,
            [sid(0)]
        );
        assert!(
            store
                .move_to_front(&ev, &sid(2), t0 + 2)
                .await
                .unwrap()
                .is_some()
        );
        store.update(&ev, &SettingsChange::Close).await.unwrap();
        let r = store.tick(&ev, &tick(t0 + 3)).await.unwrap();
        assert_eq!(r.turned_away, [sid(2), sid(1)]);
        let p = store.lookup(&ev, &sid(2)).await.unwrap().unwrap();
        assert_eq!(p.state, SessionState::TurnedAway);
    }

    pub async fn turn_away(store: Arc<dyn Store>, event: &str) {
        // More than one call's worth, less than two (a call turns away at most its budget and at most
        // TURN_AWAY_PER_TICK).
        let n = TURN_AWAY_PER_TICK * 3 / 2;
        let tick = |now_ms| Tick {
            now_ms,
            arrival_window_ms: ARRIVAL_MS,
            abandon_after_ms: 600_000,
            return_window_ms: RETURN_MS,
            max_scan: TURN_AWAY_PER_TICK + 1,
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
            return_window_ms: RETURN_MS,
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
                    tickets: 0,
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
            r.missed,
            vec![gone.session.clone()],
            "a session silent for minutes is skipped"
        );
        // `live` comes for its pass (one let in and not come would miss its turn at the end of its arrival window).
        store
            .claim(&ev, &live.session, now + grace - 1_000, IDLE_MS)
            .await
            .unwrap();

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
        assert_eq!(r.missed, vec![late.session.clone()]);

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
            r.missed,
            vec![left.session.clone()],
            "left 30 minutes before the opening"
        );

        // A scheduled draw over a mixed crowd, in the draw's random order: people who joined within the grace
        // (their join is their sign of life), people who joined long before and polled in the last stretch (their
        // pre-queue marks), people who joined long before and left. The head reads a run of them at a time: each is
        // judged by their own mark, wherever they fall in the run and whichever hash holds their mark. (One draw
        // key for all: a store may order them by id within it, and these ids put the kinds in turn.)
        let ev = format!("{event}-mixed");
        store
            .init(&ev, &settings(60, true, Some(opens)))
            .await
            .unwrap();
        let (mut present, mut away) = (Vec::new(), Vec::new());
        for i in 0..20 {
            let old = store
                .join(&ev, &join(&format!("mix-{i:03}-marked-sess"), t0))
                .await
                .unwrap();
            mark(&store, ev.clone(), old.clone(), opens - 30_000 + i).await;
            present.push(old.session);
            let gone = store
                .join(&ev, &join(&format!("mix-{i:03}-gone-session"), t0))
                .await
                .unwrap();
            away.push(gone.session);
            let new = store
                .join(
                    &ev,
                    &join(&format!("mix-{i:03}-new-session0"), opens - 10_000),
                )
                .await
                .unwrap();
            present.push(new.session);
        }
        let (mut admitted, mut missed) = (Vec::new(), Vec::new());
        for call in 0.. {
            assert!(call < 20, "the door settles within 20 calls");
            let r = store.tick(&ev, &tick(opens)).await.unwrap();
            if r.admitted.is_empty() && r.missed.is_empty() && !r.drew {
                break;
            }
            admitted.extend(r.admitted);
            missed.extend(r.missed);
        }
        for v in [&mut present, &mut away, &mut admitted, &mut missed] {
            v.sort();
        }
        assert_eq!(
            admitted, present,
            "the marked and the newly joined are let in"
        );
        assert_eq!(missed, away, "those who left are skipped");

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
        assert!(r.missed.is_empty());

        // Long after a draw, the drawn are seen by the marks of their polls with their drawn numbers: those who kept
        // polling are let in, the one who stopped after the draw is skipped (the head reads a run of the drawn
        // segment at a time on Redis).
        let ev = format!("{event}-after");
        store
            .init(&ev, &settings(0, true, Some(opens)))
            .await
            .unwrap();
        let mut drawn = Vec::new();
        for sid in [
            "after-a-session-000000",
            "after-b-session-000000",
            "after-c-session-000000",
        ] {
            let p = store.join(&ev, &join(sid, t0)).await.unwrap();
            mark(&store, ev.clone(), p, opens - 30_000).await;
        }
        assert!(store.tick(&ev, &tick(opens)).await.unwrap().drew);
        for sid in [
            "after-a-session-000000",
            "after-b-session-000000",
            "after-c-session-000000",
        ] {
            let p = store.lookup(&ev, sid).await.unwrap().unwrap();
            assert_eq!(p.state, SessionState::Waiting);
            drawn.push(p);
        }
        let mut now = opens;
        while now < opens + 300_000 {
            now += 20_000;
            for p in [&drawn[0], &drawn[2]] {
                mark(&store, ev.clone(), p.clone(), now).await;
            }
        }
        store
            .update(&ev, &SettingsChange::Capacity { capacity: 10 })
            .await
            .unwrap();
        let r = store.tick(&ev, &tick(now + 1_000)).await.unwrap();
        let mut got = r.admitted.clone();
        got.sort();
        assert_eq!(
            got,
            vec![drawn[0].session.clone(), drawn[2].session.clone()],
            "the drawn who polled with their numbers are let in"
        );
        assert_eq!(
            r.missed,
            vec![drawn[1].session.clone()],
            "the one silent since the draw is skipped"
        );
    }

    /// Liveness marks of waiting sessions `sids` at `now_ms`, with their numbers (a store may record a mark by
    /// number), as a room's flush sends them.
    async fn poll(store: &Arc<dyn Store>, ev: &str, sids: &[&str], now_ms: u64) {
        let mut waiting = Vec::new();
        for s in sids {
            let p = store.lookup(ev, s).await.unwrap().unwrap();
            waiting.push(Mark {
                session: (*s).to_owned(),
                number: p.number,
            });
        }
        let t = Touches {
            now_ms,
            waiting,
            active: vec![],
            idle_timeout_ms: IDLE_MS,
            abandon_after_ms: ABANDON_MS,
            tickets: 0,
        };
        store.touch(ev, &t).await.unwrap();
    }

    /// A touch claims an admitted session's pass, as a claim does (the room sends the claims it made from what it
    /// heard of admissions with its touches): it turns active and its idle deadline starts, so the arrival window
    /// no longer expires it; a touch of a session neither admitted nor active changes nothing.
    pub async fn touch_claims(store: Arc<dyn Store>, ev: &str) {
        let t0 = 80_000_000u64;
        store.init(ev, &settings(1, false, None)).await.unwrap();
        for sid in ["in", "next"] {
            let j = Join {
                session: sid.to_owned(),
                account: None,
                now_ms: t0,
                draw_key: 0,
            };
            store.join(ev, &j).await.unwrap();
        }
        assert_eq!(
            store.tick(ev, &tick_at(t0)).await.unwrap().admitted,
            vec!["in".to_owned()]
        );
        let touch = Touches {
            now_ms: t0 + 1_000,
            waiting: vec![],
            active: vec!["in".to_owned(), "next".to_owned()],
            idle_timeout_ms: IDLE_MS,
            abandon_after_ms: ABANDON_MS,
            tickets: 0,
        };
        store.touch(ev, &touch).await.unwrap();
        let p = store.lookup(ev, "in").await.unwrap().unwrap();
        assert_eq!(p.state, SessionState::Active, "claimed by the touch");
        let p = store.lookup(ev, "next").await.unwrap().unwrap();
        assert_eq!(
            p.state,
            SessionState::Waiting,
            "a waiting session is not let in by a touch"
        );
        // Past the arrival window, within the idle timeout: still inside.
        let r = store
            .tick(ev, &tick_at(t0 + ARRIVAL_MS + 2_000))
            .await
            .unwrap();
        assert!(r.expired.is_empty(), "expired: {:?}", r.expired);
        assert!(r.admitted.is_empty(), "the one place is held");
        // Past the idle timeout from the touch: expired.
        let r = store
            .tick(ev, &tick_at(t0 + 1_000 + IDLE_MS + 1))
            .await
            .unwrap();
        assert_eq!(r.expired, vec!["in".to_owned()]);
    }

    /// The lanes ahead of the line, in order: a session an operator moved to the front goes in before one coming
    /// back after missing its turn, which goes in before the head of the line; closing turns them away in the
    /// same order. `event` is a prefix (two on-sales).
    pub async fn lanes(store: Arc<dyn Store>, event: &str) {
        let t0 = 70_000_000u64;
        let s = |x: &str| vec![x.to_owned()];
        for close in [false, true] {
            let ev = format!("{event}-{close}");
            store.init(&ev, &settings(1, false, None)).await.unwrap();
            for sid in ["a", "b", "c", "d", "e"] {
                let j = Join {
                    session: sid.to_owned(),
                    account: None,
                    now_ms: t0,
                    draw_key: 0,
                };
                store.join(&ev, &j).await.unwrap();
            }
            // b is away at its turn: missed; c goes in; b comes back (returning); e is moved to the front.
            let mut now = t0 + ABANDON_MS + 1_000;
            poll(&store, &ev, &["a", "c", "d", "e"], now).await;
            assert_eq!(
                store.tick(&ev, &tick_at(now)).await.unwrap().admitted,
                s("a")
            );
            assert!(store.finish(&ev, "a", 0, now).await.unwrap());
            now += 1_000;
            let r = store.tick(&ev, &tick_at(now)).await.unwrap();
            assert_eq!((r.missed, r.admitted), (s("b"), s("c")));
            let (p, _) = store.come_back(&ev, "b", now, RETURN_MS).await.unwrap();
            assert_eq!(p.unwrap().state, SessionState::Returning);
            let p = store.move_to_front(&ev, "e", now).await.unwrap().unwrap();
            assert_eq!((p.state, p.number), (SessionState::Waiting, None));
            poll(&store, &ev, &["d"], now).await;
            if close {
                store.update(&ev, &SettingsChange::Close).await.unwrap();
                let r = store.tick(&ev, &tick_at(now)).await.unwrap();
                assert_eq!(
                    r.turned_away,
                    ["e", "b", "d"],
                    "the front lane, then the returning queue, then the line"
                );
                continue;
            }
            let mut order = Vec::new();
            let mut inside = "c".to_owned();
            for _ in 0..3 {
                assert!(store.finish(&ev, &inside, 0, now).await.unwrap());
                now += 1_000;
                let r = store.tick(&ev, &tick_at(now)).await.unwrap();
                assert_eq!(r.admitted.len(), 1, "{r:?}");
                inside = r.admitted[0].clone();
                order.push(inside.clone());
            }
            assert_eq!(
                order,
                ["e", "b", "d"],
                "the front lane, then the returning queue, then the line"
            );
            // Everyone let in once; e's old place (number 5) stays, empty, until the head passes it: counted as
            // a place by a store that counts numbers, not by one that counts the people holding them.
            let snap = store.snapshot(&ev).await.unwrap();
            let empty_place = u64::from(snap.live.is_none());
            assert_eq!((snap.counters.admitted, snap.waiting()), (5, empty_place));
        }
    }

    /// The return window, step by step: the door skips a person away at their turn and lets the next present one
    /// in at once; back within the window, the missed person is let in at the next free place, ahead of everyone
    /// who joined after them, within the capacity and the pause; after the window they are abandoned, told so once
    /// (a late return), and a join puts them at the back; a pre-queue member away at the draw keeps its drawn
    /// number; the returning queue is turned away first when the on-sale closes; a zero window ends a missed
    /// session at once. `event` is a prefix (several on-sales).
    /// Ended sessions are forgotten once nothing needs them: a finished, expired, turned-away or abandoned record is
    /// kept for the return window after it ended (and at least an abandon grace), then the store no longer knows the
    /// session (`lookup` says `None`), and a join of it is a new join at the back. Nobody waiting, away within the
    /// window or inside is forgotten; a session that ended and joined again keeps its new record.
    pub async fn ended_forgotten(store: Arc<dyn Store>, event: &str) {
        let t0 = 60_000_000u64;
        let tick = |now_ms| Tick {
            now_ms,
            arrival_window_ms: ARRIVAL_MS,
            abandon_after_ms: ABANDON_MS,
            return_window_ms: RETURN_MS,
            max_scan: 1_000,
        };
        let join = |sid: &str, now_ms| Join {
            session: sid.to_owned(),
            account: None,
            now_ms,
            draw_key: 0,
        };
        let state = |store: &Arc<dyn Store>, sid: &str| {
            let (store, ev, sid) = (store.clone(), event.to_owned(), sid.to_owned());
            async move { store.lookup(&ev, &sid).await.unwrap().map(|p| p.state) }
        };
        store.init(event, &settings(1, false, None)).await.unwrap();
        // a goes in and finishes; b is missed (never polls) and abandoned a return window later; c waits, polling.
        for sid in ["a", "b", "c"] {
            store.join(event, &join(sid, t0)).await.unwrap();
        }
        store.tick(event, &tick(t0)).await.unwrap();
        assert_eq!(state(&store, "a").await, Some(SessionState::Admitted));
        let finished_at = t0 + 1_000;
        assert!(store.finish(event, "a", 1, finished_at).await.unwrap());
        let missed_at = t0 + ABANDON_MS + 1;
        poll(&store, event, &["c"], missed_at).await;
        let r = store.tick(event, &tick(missed_at)).await.unwrap();
        assert_eq!(
            (r.missed, r.admitted),
            (vec!["b".to_owned()], vec!["c".to_owned()])
        );
        // c comes for its pass, with a short idle timeout.
        store.claim(event, "c", missed_at, 1_000).await.unwrap();
        // Kept for the return window after it ended: a poll just before it still reads the ending.
        let before = finished_at + RETURN_MS - 1;
        store.tick(event, &tick(before)).await.unwrap();
        assert_eq!(state(&store, "a").await, Some(SessionState::Finished));
        let gone = finished_at + RETURN_MS;
        store.tick(event, &tick(gone)).await.unwrap();
        assert_eq!(
            state(&store, "a").await,
            None,
            "a finished session is forgotten"
        );
        assert_eq!(
            state(&store, "b").await,
            Some(SessionState::Missed),
            "away within its window"
        );
        // b's window ends: abandoned, kept for one more window, then forgotten.
        let abandoned_at = missed_at + RETURN_MS;
        let r = store.tick(event, &tick(abandoned_at)).await.unwrap();
        assert_eq!(r.abandoned, vec!["b".to_owned()]);
        // c, inside and idle, expires at its idle timeout; d joins now and waits (it polls).
        store.join(event, &join("d", abandoned_at)).await.unwrap();
        assert_eq!(state(&store, "c").await, Some(SessionState::Expired));
        // a comes back: a new join at the back, behind d.
        let again = store.join(event, &join("a", abandoned_at)).await.unwrap();
        let d = store.lookup(event, "d").await.unwrap().unwrap();
        assert_eq!(again.state, SessionState::Waiting);
        assert!(again.number > d.number, "{again:?} behind {d:?}");
        let later = abandoned_at + RETURN_MS;
        poll(&store, event, &["a", "d"], later).await;
        store.update(event, &SettingsChange::Pause).await.unwrap();
        store.tick(event, &tick(later)).await.unwrap();
        assert_eq!(
            state(&store, "b").await,
            None,
            "an abandoned session is forgotten"
        );
        assert_eq!(
            state(&store, "c").await,
            None,
            "an expired session is forgotten"
        );
        assert_eq!(state(&store, "d").await, Some(SessionState::Waiting));
        assert_eq!(
            state(&store, "a").await,
            Some(SessionState::Waiting),
            "a's new join is kept"
        );
        // Turned away by a close: forgotten a window later too.
        store.update(event, &SettingsChange::Close).await.unwrap();
        let r = store.tick(event, &tick(later + 1)).await.unwrap();
        assert_eq!(r.turned_away.len(), 2);
        assert_eq!(state(&store, "d").await, Some(SessionState::TurnedAway));
        store
            .tick(event, &tick(later + 1 + RETURN_MS))
            .await
            .unwrap();
        assert_eq!(
            state(&store, "d").await,
            None,
            "a turned-away session is forgotten"
        );
        assert_eq!(state(&store, "a").await, None);
        let snap = store.snapshot(event).await.unwrap();
        assert_eq!(
            snap.counters.finished, 1,
            "the counters keep what the records no longer do"
        );
    }

    /// People away in a row at the head cost the door none of a call's budget: behind 2,000 who joined and went
    /// quiet, the one present goes in at the first call of a tick whose calls look at [`CHUNK`] sessions each; the
    /// calls after it name the 2,000 missed within that budget. One of them who polls before a call names them
    /// is missed and comes back within the window, as anyone missed does. `between` runs after the first call
    /// (the durable store restarts there: the names not yet given are not lost).
    pub async fn absent_run(store: Arc<dyn Store>, event: &str, between: impl AsyncFn()) {
        const AWAY: usize = 2_000;
        let t0 = 70_000_000u64;
        store.init(event, &settings(1, false, None)).await.unwrap();
        let join = |session: String| Join {
            session,
            account: None,
            now_ms: t0,
            draw_key: 0,
        };
        store.join(event, &join("a".into())).await.unwrap();
        for i in 0..AWAY {
            store.join(event, &join(format!("away-{i}"))).await.unwrap();
        }
        store.join(event, &join("z".into())).await.unwrap();
        assert_eq!(
            store.tick(event, &tick_at(t0)).await.unwrap().admitted,
            ["a"]
        );
        assert!(store.finish(event, "a", 0, t0).await.unwrap());
        // Past the grace by two slots of a store that keeps marks in 10-second slots (it may round in the
        // session's favour): only z polls.
        let now = t0 + ABANDON_MS + 20_000;
        poll(&store, event, &["z"], now).await;
        let t = Tick {
            max_scan: CHUNK,
            ..tick_at(now)
        };
        let first = store.tick(event, &t).await.unwrap();
        assert_eq!(
            first.admitted,
            ["z"],
            "the one present goes in at the first call, whoever is away before them"
        );
        assert!(first.looked_at() <= CHUNK, "{first:?}");
        let late = format!("away-{}", AWAY - 1);
        let p = store.lookup(event, &late).await.unwrap().unwrap();
        assert_eq!(p.state, SessionState::Missed, "passed while away");
        let (p, counted) = store.come_back(event, &late, now, RETURN_MS).await.unwrap();
        assert_eq!(
            (p.map(|p| p.state), counted),
            (Some(SessionState::Returning), Some(Return::InTime))
        );
        let mut named: HashSet<String> = first.missed.into_iter().collect();
        between().await;
        let mut calls = 1;
        loop {
            let r = store.tick(event, &t).await.unwrap();
            assert!(r.looked_at() <= CHUNK, "over the budget: {r:?}");
            assert!(r.admitted.is_empty(), "nobody else is let in: {r:?}");
            calls += 1;
            named.extend(r.missed);
            if !r.more {
                break;
            }
            assert!(calls < 10 * AWAY, "the calls never end");
        }
        for i in 0..AWAY - 1 {
            assert!(
                named.contains(&format!("away-{i}")),
                "away-{i} never named missed"
            );
        }
        let c = store.snapshot(event).await.unwrap().counters;
        assert_eq!((c.missed, c.returned), (AWAY as u64, 1));
        let p = store.lookup(event, "away-7").await.unwrap().unwrap();
        assert_eq!(p.state, SessionState::Missed);
    }

    /// The drawn tests' line: `away` people (`away-<i>`) join the pre-queue at `t0` and go quiet, and `z` joins
    /// with a draw key above all of theirs, so the draw puts every one of them ahead of z; the opening (returned)
    /// is two slots past their grace, and z polls at it. `capacity` places.
    async fn drawn_ahead_of_z(
        store: &Arc<dyn Store>,
        event: &str,
        away: u64,
        t0: u64,
        capacity: u64,
    ) -> u64 {
        let opens = t0 + ABANDON_MS + 20_000;
        store
            .init(event, &settings(capacity, true, Some(opens)))
            .await
            .unwrap();
        for i in 0..=away {
            let (session, draw_key) = if i == away {
                ("z".to_owned(), u64::MAX - 1)
            } else {
                (format!("away-{i}"), i * (u64::MAX / 2 / away))
            };
            let j = Join {
                session,
                account: None,
                now_ms: t0,
                draw_key,
            };
            let p = store.join(event, &j).await.unwrap();
            assert_eq!(p.state, SessionState::PreQueue);
        }
        poll(store, event, &["z"], opens).await;
        opens
    }

    /// Ticks at `now_ms` (calls of 1,000) until a call says it is done (100 calls at most): who ended abandoned.
    async fn abandoned_at(store: &Arc<dyn Store>, event: &str, now_ms: u64) -> HashSet<String> {
        let t = Tick {
            max_scan: 1_000,
            ..tick_at(now_ms)
        };
        let mut abandoned = HashSet::new();
        for _ in 0..100 {
            let r = store.tick(event, &t).await.unwrap();
            abandoned.extend(r.abandoned);
            if !r.more {
                break;
            }
        }
        abandoned
    }

    /// The drawn segment likewise: 2,000 people joined the pre-queue and went quiet, drawn ahead of the one person
    /// present. The door passes them beside its budget (each call looks at `CHUNK` sessions, as counted by what it
    /// reports), so the one present goes in within a few calls (a store may pass a bounded number a call: the
    /// embedded store all 2,000 at once, Redis 128 a call), not the 667 calls that deciding them out of the budget
    /// took. Each passed person is missed, keeps their return window and is named missed by a later call.
    pub async fn absent_drawn_run(store: Arc<dyn Store>, event: &str) {
        const AWAY: u64 = 2_000;
        // At the opening only z polled within the grace.
        let opens = drawn_ahead_of_z(&store, event, AWAY, 71_000_000, 1).await;
        let t = Tick {
            max_scan: CHUNK,
            ..tick_at(opens)
        };
        let mut calls = 0;
        let mut named: HashSet<String> = HashSet::new();
        let mut in_at = None;
        loop {
            let r = store.tick(event, &t).await.unwrap();
            assert!(r.looked_at() <= CHUNK, "over the budget: {r:?}");
            calls += 1;
            if r.admitted.iter().any(|s| s == "z") {
                in_at = Some(calls);
            }
            named.extend(r.missed);
            if !r.more {
                break;
            }
            assert!(calls < 10 * AWAY, "the calls never end");
        }
        let in_at = in_at.expect("z let in");
        assert!(
            in_at <= AWAY / 128 + 2,
            "the one present goes in within a few calls whoever is away before them, not at call {in_at}"
        );
        for i in 0..AWAY {
            assert!(
                named.contains(&format!("away-{i}")),
                "away-{i} never named missed"
            );
        }
        let c = store.snapshot(event).await.unwrap().counters;
        assert_eq!((c.missed, c.admitted), (AWAY, 1));
        let late = format!("away-{}", AWAY - 1);
        let p = store.lookup(event, &late).await.unwrap().unwrap();
        assert_eq!(
            (p.state, p.number),
            (SessionState::Missed, Some(AWAY)),
            "missed at their drawn number"
        );
        let (p, counted) = store
            .come_back(event, &late, opens + 1_000, RETURN_MS)
            .await
            .unwrap();
        assert_eq!(
            (p.map(|p| p.state), counted),
            (Some(SessionState::Returning), Some(Return::InTime))
        );
        // Past the return window the others end abandoned, the one who came back does not.
        let abandoned = abandoned_at(&store, event, opens + RETURN_MS + 1).await;
        assert_eq!(abandoned.len() as u64, AWAY - 1);
        assert!(!abandoned.contains(&late), "{late} came back");
        let p = store.lookup(event, "away-0").await.unwrap().unwrap();
        assert_eq!(p.state, SessionState::Abandoned);
    }

    /// 600 people away drawn ahead of one present, the clock going on 50 ms a call (a store with few draw
    /// buckets cuts its runs in the middle of one): every drawn number stays what it was whoever has been passed;
    /// one of them who comes back before a call names them missed is taken back in time; every one is named
    /// missed once; the one present goes in; and past the return window after the last naming all but the one who
    /// came back end abandoned, none of them earlier than a return window after the opening. (Two places: the one
    /// who came back goes in ahead of the line.)
    pub async fn drawn_run_passed_across_calls(store: Arc<dyn Store>, event: &str) {
        const AWAY: u64 = 600;
        let opens = drawn_ahead_of_z(&store, event, AWAY, 73_000_000, 2).await;
        let numbers_hold = async |when: &str| {
            for i in (0..AWAY).step_by(37).chain([AWAY - 1]) {
                let p = store
                    .lookup(event, &format!("away-{i}"))
                    .await
                    .unwrap()
                    .unwrap();
                assert_eq!(p.number, Some(i + 1), "away-{i}'s number {when}");
            }
        };
        let mut now = opens;
        let mut named: HashMap<String, u32> = HashMap::new();
        let mut abandoned = HashSet::new();
        let mut z_in = false;
        let mut calls = 0;
        loop {
            let t = Tick {
                max_scan: CHUNK,
                ..tick_at(now)
            };
            let r = store.tick(event, &t).await.unwrap();
            assert!(r.looked_at() <= CHUNK, "over the budget: {r:?}");
            calls += 1;
            z_in |= r.admitted.iter().any(|s| s == "z");
            // Those let in come for their passes (one that does not would miss its turn at the end of its arrival
            // window).
            for s in &r.admitted {
                store.claim(event, s, now, IDLE_MS).await.unwrap();
            }
            if !r.abandoned.is_empty() {
                assert!(
                    now >= opens + RETURN_MS,
                    "abandoned before a return window passed: {r:?}"
                );
            }
            for s in r.missed {
                *named.entry(s).or_default() += 1;
            }
            abandoned.extend(r.abandoned);
            if calls == 1 {
                numbers_hold("after the first call").await;
                assert!(!named.contains_key("away-100"));
                let (p, counted) = store
                    .come_back(event, "away-100", now + 500, RETURN_MS)
                    .await
                    .unwrap();
                assert_eq!(
                    (p.map(|p| p.state), counted),
                    (Some(SessionState::Returning), Some(Return::InTime)),
                    "passed while away, not yet named: taken back"
                );
            }
            now += 50;
            if !r.more {
                break;
            }
            assert!(calls < 10_000, "the calls never end");
        }
        assert!(z_in, "the one present went in");
        for i in 0..AWAY {
            assert_eq!(
                named.get(&format!("away-{i}")),
                Some(&1),
                "away-{i} named once"
            );
        }
        numbers_hold("at the end").await;
        // Past the return window after the last call: everyone but away-100 ended.
        abandoned.extend(abandoned_at(&store, event, now + RETURN_MS).await);
        assert!(!abandoned.contains("away-100"), "away-100 came back");
        assert_eq!(abandoned.len() as u64, AWAY - 1);
    }

    /// 9,000 drawn people away passed by small calls, then named by one call with a large budget: all of them
    /// named in it (a store must not choke on naming thousands at once).
    pub async fn drawn_backlog_named_by_one_large_call(store: Arc<dyn Store>, event: &str) {
        const AWAY: u64 = 9_000;
        let opens = drawn_ahead_of_z(&store, event, AWAY, 74_000_000, 1).await;
        let mut named = HashSet::new();
        let mut calls = 0;
        loop {
            let t = Tick {
                max_scan: CHUNK,
                ..tick_at(opens)
            };
            let r = store.tick(event, &t).await.unwrap();
            named.extend(r.missed);
            calls += 1;
            if r.admitted.iter().any(|s| s == "z") {
                break;
            }
            assert!(r.more && calls < 1_000, "z never let in");
        }
        let t = Tick {
            max_scan: 2 * AWAY,
            ..tick_at(opens)
        };
        let r = store.tick(event, &t).await.unwrap();
        named.extend(r.missed);
        assert_eq!(
            named.len() as u64,
            AWAY,
            "every one named: {} calls before",
            calls
        );
        assert_eq!(store.snapshot(event).await.unwrap().counters.missed, AWAY);
    }

    /// A drawn person whose only sign of life is a poll just after the draw, timed by an instance whose clock is a
    /// second behind the one that drew (so before the draw, in the liveness slot before the draw's), after their
    /// join and with no pre-queue poll, both older than the grace when the head reaches them, is present: a store
    /// that reads liveness only from about the draw's slot on (no drawn number exists before it) must still read
    /// that one.
    pub async fn drawn_marked_by_a_clock_behind(store: Arc<dyn Store>, event: &str) {
        // The opening half a second into a 10-second slot (a store may keep marks in 10-second slots).
        let opens = 72_000_500u64;
        let t0 = opens - 2 * ABANDON_MS;
        store
            .init(event, &settings(1, true, Some(opens)))
            .await
            .unwrap();
        for (sid, key) in [("first", 1u64), ("p", u64::MAX - 1)] {
            let j = Join {
                session: sid.into(),
                account: None,
                now_ms: t0,
                draw_key: key,
            };
            store.join(event, &j).await.unwrap();
        }
        poll(&store, event, &["first"], opens).await;
        let r = store.tick(event, &tick_at(opens)).await.unwrap();
        assert_eq!(r.admitted, ["first"]);
        // p polls with their number just after the draw, at an instance whose clock says a second before it, and
        // never again.
        let p = store.lookup(event, "p").await.unwrap().unwrap();
        assert_eq!((p.state, p.number), (SessionState::Waiting, Some(2)));
        poll(&store, event, &["p"], opens - 1_000).await;
        let now = opens + ABANDON_MS - 1_000;
        assert!(store.finish(event, "first", 0, now).await.unwrap());
        let r = store.tick(event, &tick_at(now)).await.unwrap();
        assert_eq!(
            (r.admitted, r.missed),
            (vec!["p".to_owned()], vec![]),
            "p polled within the grace"
        );
    }

    /// An on-sale `ev` of one place where `first` is let in a second after `t0` and never comes for its pass while
    /// `next` keeps polling: at the end of the arrival window `first` misses its turn and `next` goes in, in the
    /// same tick. Returns that tick's time.
    async fn one_place_lapsed(
        store: &Arc<dyn Store>,
        ev: &str,
        first: &str,
        next: &str,
        t0: u64,
    ) -> u64 {
        store.init(ev, &settings(1, false, None)).await.unwrap();
        for sid in [first, next] {
            let join = Join {
                session: sid.to_owned(),
                account: None,
                now_ms: t0,
                draw_key: sid.len() as u64,
            };
            store.join(ev, &join).await.unwrap();
        }
        let mut now = t0 + 1_000;
        poll(store, ev, &[first, next], now).await;
        assert_eq!(
            store.tick(ev, &tick_at(now)).await.unwrap().admitted,
            [first]
        );
        now += ARRIVAL_MS;
        poll(store, ev, &[next], now).await;
        let r = store.tick(ev, &tick_at(now)).await.unwrap();
        assert_eq!(
            (r.missed, r.admitted),
            (vec![first.to_owned()], vec![next.to_owned()])
        );
        now
    }

    /// Let in while present, then not come within the arrival window (a phone asleep as its turn came): the place
    /// frees at once for the next present person and the turn is kept for the return window (counted missed, not
    /// expired, and away); back within it, the person goes in at the next free place, ahead of those who joined
    /// after; one that stays away past the window is abandoned, and its late return is told so.
    pub async fn no_show_keeps_turn(store: Arc<dyn Store>, event: &str) {
        let t0 = 60_000_000u64;
        let tick = tick_at;
        let join = |sid: &str, now_ms| Join {
            session: sid.to_owned(),
            account: None,
            now_ms,
            draw_key: sid.len() as u64,
        };
        let s = |x: &str| vec![x.to_owned()];
        // Those let in are inside until they finish, expire, or their admission lapses (`lapsed`, here).
        let active_adds_up = |snap: &waitroom_layer::store::Snapshot, lapsed: u64| {
            let c = &snap.counters;
            assert_eq!(
                snap.active,
                c.admitted - c.finished - c.expired - lapsed,
                "the active count is what the counters say: {snap:?}"
            );
        };

        let ev = format!("{event}-fifo");
        store.init(&ev, &settings(1, false, None)).await.unwrap();
        for sid in ["a", "b", "c"] {
            store.join(&ev, &join(sid, t0)).await.unwrap();
        }
        let mut now = t0 + 1_000;
        poll(&store, &ev, &["a", "b", "c"], now).await;
        let r = store.tick(&ev, &tick(now)).await.unwrap();
        assert_eq!(r.admitted, s("a"), "a is here when its turn comes");
        // a never comes for its pass; b and c keep polling. At the end of the arrival window a's place frees and b
        // goes in, in the same tick.
        now += ARRIVAL_MS;
        poll(&store, &ev, &["b", "c"], now).await;
        let r = store.tick(&ev, &tick(now)).await.unwrap();
        assert_eq!(
            (r.expired.clone(), r.missed.clone(), r.admitted.clone()),
            (vec![], s("a"), s("b")),
            "the no-show's place frees for the next present person, and its turn is kept"
        );
        let a = store.lookup(&ev, "a").await.unwrap().unwrap();
        assert_eq!((a.state, a.number), (SessionState::Missed, Some(1)));
        let snap = store.snapshot(&ev).await.unwrap();
        assert_eq!(
            (
                snap.counters.expired,
                snap.counters.missed,
                snap.away(),
                snap.active
            ),
            (0, 1, 1, 1)
        );
        active_adds_up(&snap, 1);
        assert!(
            store
                .claim(&ev, "a", now, IDLE_MS)
                .await
                .unwrap()
                .unwrap()
                .state
                != SessionState::Active,
            "a lapsed admission is not claimed"
        );
        // a wakes up within the return window: returning, and the capacity holds while b is inside.
        now += RETURN_MS - 1_000;
        poll(&store, &ev, &["c"], now).await;
        store.claim(&ev, "b", now, IDLE_MS).await.unwrap();
        let (p, counted) = store.come_back(&ev, "a", now, RETURN_MS).await.unwrap();
        assert_eq!(
            (p.unwrap().state, counted),
            (SessionState::Returning, Some(Return::InTime))
        );
        let r = store.tick(&ev, &tick(now)).await.unwrap();
        assert!(r.admitted.is_empty(), "the one place is b's: {r:?}");
        // b finishes: a goes in before c, who joined after it, with its own number.
        assert!(store.finish(&ev, "b", 0, now).await.unwrap());
        let r = store.tick(&ev, &tick(now)).await.unwrap();
        assert_eq!(r.admitted, s("a"), "the one who came back goes first");
        let a = store.claim(&ev, "a", now, IDLE_MS).await.unwrap().unwrap();
        assert_eq!((a.state, a.number), (SessionState::Active, Some(1)));
        let snap = store.snapshot(&ev).await.unwrap();
        assert_eq!(
            (snap.active, snap.away(), snap.counters.returned),
            (1, 0, 1)
        );
        active_adds_up(&snap, 1);

        // Once: a done, c goes in and does not come; a joins again at the back, goes in and does not come either
        // (its pass claimed last time, so this is its first lapse); c, back, goes in again and again does not
        // come: it expires, where a keeps its turn.
        assert!(store.finish(&ev, "a", 0, now).await.unwrap());
        poll(&store, &ev, &["c"], now).await;
        assert_eq!(store.tick(&ev, &tick(now)).await.unwrap().admitted, s("c"));
        let again = store.join(&ev, &join("a", now)).await.unwrap();
        assert_eq!(again.state, SessionState::Waiting);
        now += ARRIVAL_MS;
        poll(&store, &ev, &["a"], now).await;
        let r = store.tick(&ev, &tick(now)).await.unwrap();
        assert_eq!((r.missed.clone(), r.admitted.clone()), (s("c"), s("a")));
        let (p, _) = store.come_back(&ev, "c", now, RETURN_MS).await.unwrap();
        assert_eq!(p.unwrap().state, SessionState::Returning);
        now += ARRIVAL_MS;
        let r = store.tick(&ev, &tick(now)).await.unwrap();
        assert_eq!(
            (r.missed.clone(), r.expired.clone(), r.admitted.clone()),
            (s("a"), vec![], s("c")),
            "a's first lapse keeps its turn; c, back, goes in again"
        );
        now += ARRIVAL_MS;
        let r = store.tick(&ev, &tick(now)).await.unwrap();
        assert_eq!(
            (r.missed.clone(), r.expired.clone()),
            (vec![], s("c")),
            "let in again and not come again: expired"
        );
        let c = store.lookup(&ev, "c").await.unwrap().unwrap();
        assert_eq!(c.state, SessionState::Expired);
        let snap = store.snapshot(&ev).await.unwrap();
        assert_eq!(
            (
                snap.active,
                snap.counters.expired,
                snap.counters.missed,
                snap.away()
            ),
            (0, 1, 3, 1),
            "{snap:?}"
        );

        // Another on-sale: the no-show stays away past the return window: abandoned when it passes, told so late.
        let ev = format!("{event}-late");
        let mut now = one_place_lapsed(&store, &ev, "x", "y", t0).await;
        store.claim(&ev, "y", now, IDLE_MS).await.unwrap();
        now += RETURN_MS + 1_000;
        poll(&store, &ev, &["y"], now).await;
        let r = store.tick(&ev, &tick(now)).await.unwrap();
        assert_eq!(r.abandoned, s("x"), "the window passed");
        let (_, counted) = store.come_back(&ev, "x", now, RETURN_MS).await.unwrap();
        assert_ne!(counted, Some(Return::InTime), "too late to come back");
        let snap = store.snapshot(&ev).await.unwrap();
        assert_eq!(
            (snap.away(), snap.counters.abandoned, snap.active),
            (0, 1, 1)
        );
        active_adds_up(&snap, 1);

        // Another: let in again from the returning queue, u takes its pass through a touch (as a room instance
        // that claims in its touches sends it): the once is spent only by a second lapse, so after u finishes and
        // joins again, a lapse keeps its turn.
        let ev = format!("{event}-touch");
        let mut now = one_place_lapsed(&store, &ev, "u", "v", t0).await;
        store.come_back(&ev, "u", now, RETURN_MS).await.unwrap();
        assert!(store.finish(&ev, "v", 0, now).await.unwrap());
        assert_eq!(store.tick(&ev, &tick(now)).await.unwrap().admitted, s("u"));
        let touch = Touches {
            now_ms: now,
            active: s("u"),
            idle_timeout_ms: IDLE_MS,
            abandon_after_ms: ABANDON_MS,
            ..Touches::default()
        };
        store.touch(&ev, &touch).await.unwrap();
        assert_eq!(
            store.lookup(&ev, "u").await.unwrap().unwrap().state,
            SessionState::Active
        );
        assert!(store.finish(&ev, "u", 0, now).await.unwrap());
        store.join(&ev, &join("u", now)).await.unwrap();
        poll(&store, &ev, &["u"], now).await;
        assert_eq!(store.tick(&ev, &tick(now)).await.unwrap().admitted, s("u"));
        now += ARRIVAL_MS;
        let r = store.tick(&ev, &tick(now)).await.unwrap();
        assert_eq!(
            (r.missed.clone(), r.expired.clone()),
            (s("u"), vec![]),
            "a new admission's first lapse keeps its turn"
        );
    }

    pub async fn return_window(store: Arc<dyn Store>, event: &str) {
        let t0 = 50_000_000u64;
        let tick = |now_ms| Tick {
            now_ms,
            arrival_window_ms: ARRIVAL_MS,
            abandon_after_ms: ABANDON_MS,
            return_window_ms: RETURN_MS,
            max_scan: 1_000,
        };
        let join = |sid: &str, now_ms| Join {
            session: sid.to_owned(),
            account: None,
            now_ms,
            draw_key: sid.len() as u64,
        };
        let s = |x: &str| vec![x.to_owned()];

        let ev = format!("{event}-fifo");
        store.init(&ev, &settings(1, false, None)).await.unwrap();
        for sid in ["a", "b", "c", "d"] {
            store.join(&ev, &join(sid, t0)).await.unwrap();
        }
        // Everyone but b polls; b's tab sleeps.
        let mut now = t0 + ABANDON_MS + 1_000;
        poll(&store, &ev, &["a", "c", "d"], now).await;
        let r = store.tick(&ev, &tick(now)).await.unwrap();
        assert_eq!(r.admitted, s("a"));
        assert!(store.finish(&ev, "a", 0, now).await.unwrap());
        // b's turn comes while b is away: skipped, and the next present person goes in in the same tick.
        now += 1_000;
        let r = store.tick(&ev, &tick(now)).await.unwrap();
        assert_eq!(
            (r.missed.clone(), r.admitted.clone()),
            (s("b"), s("c")),
            "the door admits the next present person without waiting for the absent one"
        );
        store.claim(&ev, "c", now, IDLE_MS).await.unwrap();
        let b = store.lookup(&ev, "b").await.unwrap().unwrap();
        assert_eq!((b.state, b.number), (SessionState::Missed, Some(2)));
        assert_eq!(store.snapshot(&ev).await.unwrap().away(), 1);
        // b comes back within the window: returning, ahead of d.
        now += RETURN_MS - 1_001;
        poll(&store, &ev, &["d"], now).await;
        let (p, counted) = store.come_back(&ev, "b", now, RETURN_MS).await.unwrap();
        let p = p.unwrap();
        assert_eq!(
            (p.state, p.number, counted),
            (SessionState::Returning, Some(2), Some(Return::InTime))
        );
        let (again, counted) = store.come_back(&ev, "b", now, RETURN_MS).await.unwrap();
        assert_eq!(
            (again.unwrap().state, counted),
            (SessionState::Returning, None),
            "a return is counted once"
        );
        let snap = store.snapshot(&ev).await.unwrap();
        assert_eq!((snap.returning, snap.away(), snap.waiting()), (1, 0, 2));
        // The capacity holds: c is still in.
        let r = store.tick(&ev, &tick(now)).await.unwrap();
        assert!(r.admitted.is_empty() && r.missed.is_empty());
        // The pause holds.
        store.update(&ev, &SettingsChange::Pause).await.unwrap();
        assert!(store.finish(&ev, "c", 0, now).await.unwrap());
        assert!(
            store
                .tick(&ev, &tick(now))
                .await
                .unwrap()
                .admitted
                .is_empty()
        );
        store.update(&ev, &SettingsChange::Resume).await.unwrap();
        // Next free place: b, before d who joined after b (d polls, b polled when it came back).
        now += 1_000;
        poll(&store, &ev, &["d"], now).await;
        let r = store.tick(&ev, &tick(now)).await.unwrap();
        assert_eq!(r.admitted, s("b"), "the one who came back goes first");
        assert_eq!(
            store.snapshot(&ev).await.unwrap().served,
            3,
            "b's number does not leave the head twice"
        );
        assert!(store.finish(&ev, "b", 0, now).await.unwrap());
        let r = store.tick(&ev, &tick(now)).await.unwrap();
        assert_eq!(r.admitted, s("d"));
        assert!(store.finish(&ev, "d", 0, now).await.unwrap());

        // A return after the window: abandoned by the tick, told once, and a join starts at the back.
        store.join(&ev, &join("e", now)).await.unwrap();
        store.join(&ev, &join("f", now)).await.unwrap();
        now += ABANDON_MS + 1_000;
        poll(&store, &ev, &["f"], now).await;
        let r = store.tick(&ev, &tick(now)).await.unwrap();
        assert_eq!((r.missed.clone(), r.admitted.clone()), (s("e"), s("f")));
        store.claim(&ev, "f", now, IDLE_MS).await.unwrap();
        let missed_at = now;
        let r = store
            .tick(&ev, &tick(missed_at + RETURN_MS - 1))
            .await
            .unwrap();
        assert!(
            r.abandoned.is_empty(),
            "within the window until its last millisecond"
        );
        now = missed_at + RETURN_MS;
        let r = store.tick(&ev, &tick(now)).await.unwrap();
        assert_eq!(r.abandoned, s("e"));
        let (p, counted) = store.come_back(&ev, "e", now, RETURN_MS).await.unwrap();
        assert_eq!(
            (p.unwrap().state, counted),
            (SessionState::Abandoned, Some(Return::TooLate))
        );
        let (_, counted) = store.come_back(&ev, "e", now, RETURN_MS).await.unwrap();
        assert_eq!(counted, None, "a late return is counted once");
        let e = store.join(&ev, &join("e", now)).await.unwrap();
        assert_eq!(
            (e.state, e.number),
            (SessionState::Waiting, Some(7)),
            "at the back"
        );
        let c = store.snapshot(&ev).await.unwrap().counters;
        assert_eq!(
            (c.missed, c.returned, c.returned_late, c.abandoned),
            (2, 1, 1, 1)
        );

        // Back too late before any tick ended it: the look itself ends it.
        let ev = format!("{event}-late");
        store.init(&ev, &settings(1, false, None)).await.unwrap();
        store.join(&ev, &join("g", t0)).await.unwrap();
        let r = store.tick(&ev, &tick(t0 + ABANDON_MS + 1)).await.unwrap();
        assert_eq!(r.missed, s("g"));
        let (p, counted) = store
            .come_back(&ev, "g", t0 + ABANDON_MS + 1 + RETURN_MS, RETURN_MS)
            .await
            .unwrap();
        assert_eq!(
            (p.unwrap().state, counted),
            (SessionState::Abandoned, Some(Return::TooLate))
        );
        let c = store.snapshot(&ev).await.unwrap().counters;
        assert_eq!((c.missed, c.abandoned, c.returned_late), (1, 1, 1));

        // The draw: a pre-queue member away at the draw keeps its drawn number.
        let opens = t0 + 600_000;
        let ev = format!("{event}-draw");
        store
            .init(&ev, &settings(1, true, Some(opens)))
            .await
            .unwrap();
        store.join(&ev, &join("here", t0)).await.unwrap();
        store.join(&ev, &join("away-at-draw", t0)).await.unwrap();
        poll(&store, &ev, &["here"], opens - 1_000).await;
        let r = store.tick(&ev, &tick(opens)).await.unwrap();
        assert!(r.drew);
        let drawn = store.lookup(&ev, "away-at-draw").await.unwrap().unwrap();
        let n = drawn.number.expect("numbered by the draw");
        // Whichever order the draw made, the one away is missed when reached, and keeps its number.
        let mut now = opens;
        assert_eq!(r.admitted, s("here"));
        if r.missed.is_empty() {
            assert!(store.finish(&ev, "here", 0, now).await.unwrap());
            now += 1_000;
            let r = store.tick(&ev, &tick(now)).await.unwrap();
            assert_eq!(r.missed, s("away-at-draw"));
        }
        now += 1_000;
        let (p, _) = store
            .come_back(&ev, "away-at-draw", now, RETURN_MS)
            .await
            .unwrap();
        assert_eq!(p.unwrap().number, Some(n), "the drawn number is kept");
        if store.snapshot(&ev).await.unwrap().active > 0 {
            assert!(store.finish(&ev, "here", 0, now).await.unwrap());
        }
        let r = store.tick(&ev, &tick(now)).await.unwrap();
        assert_eq!(r.admitted, s("away-at-draw"));

        // Closing: the returning queue is turned away first.
        let ev = format!("{event}-close");
        store.init(&ev, &settings(1, false, None)).await.unwrap();
        store.join(&ev, &join("h", t0)).await.unwrap();
        store.join(&ev, &join("i", t0)).await.unwrap();
        let now = t0 + ABANDON_MS + 1;
        poll(&store, &ev, &["i"], now).await;
        let r = store.tick(&ev, &tick(now)).await.unwrap();
        assert_eq!((r.missed.clone(), r.admitted.clone()), (s("h"), s("i")));
        store.come_back(&ev, "h", now, RETURN_MS).await.unwrap();
        store.join(&ev, &join("j", now)).await.unwrap();
        store.update(&ev, &SettingsChange::Close).await.unwrap();
        let r = store.tick(&ev, &tick(now)).await.unwrap();
        assert_eq!(r.turned_away, vec!["h".to_owned(), "j".to_owned()]);
        assert_eq!(store.snapshot(&ev).await.unwrap().waiting(), 0);

        // A zero window: a missed turn is lost at once, in the tick that skipped it.
        let ev = format!("{event}-zero");
        store.init(&ev, &settings(1, false, None)).await.unwrap();
        store.join(&ev, &join("k", t0)).await.unwrap();
        let zero = Tick {
            return_window_ms: 0,
            ..tick(t0 + ABANDON_MS + 1)
        };
        let r = store.tick(&ev, &zero).await.unwrap();
        assert_eq!((r.missed.clone(), r.abandoned.clone()), (s("k"), s("k")));
        let (p, _) = store
            .come_back(&ev, "k", t0 + ABANDON_MS + 1, 0)
            .await
            .unwrap();
        assert_eq!(p.unwrap().state, SessionState::Abandoned);
    }

    /// A store that lost only its latest writes (a failover to a lagging replica): numbers 4 to 6 were given out
    /// and lost. A restore with `behind` keeps what the store has, makes the lost numbers free for their owners,
    /// and gives newcomers numbers after them; the owners are taken back; nobody is let in during the hold; an older
    /// view changes nothing.
    pub async fn behind(store: Arc<dyn Store>, event: &str) {
        use waitroom_layer::store::{Reclaim, Restore};
        let t0 = 2_000_000u64;
        let s = |i: u64| format!("behind-{i:02}-abcdefghijkl");
        store.init(event, &settings(1, false, None)).await.unwrap();
        for i in 1..=3 {
            let join = Join {
                session: s(i),
                account: None,
                now_ms: t0,
                draw_key: i,
            };
            assert_eq!(store.join(event, &join).await.unwrap().number, Some(i));
        }
        assert_eq!(
            store.tick(event, &tick_at(t0)).await.unwrap().admitted,
            vec![s(1)]
        );
        let before = store.snapshot(event).await.unwrap();
        assert_eq!((before.served, before.last_number), (1, 3));
        let (hold, late) = (5_000, 20_000);
        let restore = Restore {
            settings: before.settings.clone(),
            drawn: before.drawn,
            last_number: 6,
            served: before.served,
            counters: before.counters,
            now_ms: t0 + 1,
            hold_ms: hold,
            late_ms: late,
            behind: true,
        };
        store.restore(event, &restore).await.unwrap();
        // An older view from another instance changes nothing.
        let older = Restore {
            last_number: 5,
            ..restore.clone()
        };
        store.restore(event, &older).await.unwrap();
        let snap = store.snapshot(event).await.unwrap();
        assert_eq!(
            (
                snap.served,
                snap.last_number,
                snap.reclaim_upto,
                snap.active
            ),
            (1, 6, Some(6), 1),
            "the floor is the room's, the rest is the store's"
        );
        // The store's own sessions are where they were.
        let p2 = store.lookup(event, &s(2)).await.unwrap().unwrap();
        assert_eq!((p2.state, p2.number), (SessionState::Waiting, Some(2)));
        // A newcomer joins behind the lost numbers; their owners come back to them.
        let newcomer = Join {
            session: s(7),
            account: None,
            now_ms: t0 + 2,
            draw_key: 7,
        };
        assert_eq!(store.join(event, &newcomer).await.unwrap().number, Some(7));
        let reclaim = |i: u64| Reclaim {
            session: s(i),
            number: Some(i),
            now_ms: t0 + 3,
            draw_key: i,
        };
        for i in [5, 4] {
            let p = store.reclaim(event, &reclaim(i)).await.unwrap().unwrap();
            assert_eq!((p.state, p.number), (SessionState::Waiting, Some(i)));
        }
        // Someone else asking for a number held is not given it.
        let thief = Reclaim {
            session: s(40),
            number: Some(5),
            now_ms: t0 + 3,
            draw_key: 40,
        };
        assert_eq!(store.reclaim(event, &thief).await.unwrap(), None);
        // The door waits out the hold, then goes on in order (6 never came back: passed over).
        assert!(store.finish(event, &s(1), 1, t0 + 4).await.unwrap());
        assert!(
            store
                .tick(event, &tick_at(t0 + 5))
                .await
                .unwrap()
                .admitted
                .is_empty()
        );
        let mut order = Vec::new();
        let first = t0 + 1 + hold + 1;
        for now in first..first + 6 {
            let r = store.tick(event, &tick_at(now)).await.unwrap();
            for a in &r.admitted {
                order.push(a.clone());
                assert!(store.finish(event, a, 1, now).await.unwrap());
            }
        }
        assert_eq!(order, vec![s(2), s(3), s(4), s(5), s(7)]);
    }

    /// A store that forgets the on-sale ("When the store forgets" in the store docs): restored from the room's
    /// last view, it takes people back at their numbers, lets newcomers in behind the highest number given, lets
    /// nobody in during the hold, skips numbers nobody came back for, takes a passed number back ahead of the line
    /// within the late window only, never gives a number twice and never moves `served` back.
    pub async fn forgetting<F, Fut>(store: Arc<dyn Store>, event: &str, lose: F)
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        use waitroom_layer::store::{Reclaim, Restore};
        let t0 = 1_000_000u64;
        let s = |i: u64| format!("forget-{i:02}-abcdefghijkl");
        store.init(event, &settings(2, false, None)).await.unwrap();
        for i in 1..=6 {
            let p = store
                .join(
                    event,
                    &Join {
                        session: s(i),
                        account: None,
                        now_ms: t0,
                        draw_key: i,
                    },
                )
                .await
                .unwrap();
            assert_eq!(p.number, Some(i));
        }
        let r = store.tick(event, &tick_at(t0)).await.unwrap();
        assert_eq!(r.admitted, vec![s(1), s(2)]);
        let before = store.snapshot(event).await.unwrap();
        assert_eq!(
            (before.served, before.last_number, before.reclaim_upto),
            (2, 6, None)
        );

        lose().await;
        let e = store.snapshot(event).await.unwrap_err();
        assert!(e.is_forgotten(), "{e}");
        let reclaim = |i: u64, n: Option<u64>, now: u64| Reclaim {
            session: s(i),
            number: n,
            now_ms: now,
            draw_key: i,
        };
        // Before a restore, nothing is taken back (the store does not know the on-sale).
        assert!(
            store
                .reclaim(event, &reclaim(4, Some(4), t0))
                .await
                .unwrap_err()
                .is_forgotten()
        );

        let t1 = t0 + 60_000;
        let (hold, late) = (5_000, 20_000);
        let restore = Restore {
            settings: before.settings.clone(),
            drawn: before.drawn,
            last_number: before.last_number,
            served: before.served,
            counters: before.counters,
            now_ms: t1,
            hold_ms: hold,
            late_ms: late,
            behind: false,
        };
        store.restore(event, &restore).await.unwrap();
        // A second restore (another instance, an older view) changes nothing.
        let stale = Restore {
            last_number: 3,
            served: 0,
            ..restore.clone()
        };
        store.restore(event, &stale).await.unwrap();
        let snap = store.snapshot(event).await.unwrap();
        assert_eq!(
            (snap.served, snap.last_number, snap.reclaim_upto),
            (2, 6, Some(6))
        );
        assert_eq!(snap.counters, before.counters, "the counters go on");

        // A newcomer joins behind every number given before the loss.
        let newcomer = store
            .join(
                event,
                &Join {
                    session: s(20),
                    account: None,
                    now_ms: t1,
                    draw_key: 20,
                },
            )
            .await
            .unwrap();
        assert_eq!(newcomer.number, Some(7));
        // People come back with their numbers; idempotent; a number someone holds is not given again.
        let p5 = store
            .reclaim(event, &reclaim(5, Some(5), t1))
            .await
            .unwrap()
            .unwrap();
        assert_eq!((p5.state, p5.number), (SessionState::Waiting, Some(5)));
        assert_eq!(
            store
                .reclaim(event, &reclaim(5, Some(5), t1))
                .await
                .unwrap(),
            Some(p5.clone())
        );
        assert_eq!(
            store
                .reclaim(event, &reclaim(21, Some(5), t1))
                .await
                .unwrap(),
            None
        );
        assert_eq!(
            store
                .reclaim(event, &reclaim(21, Some(7), t1))
                .await
                .unwrap(),
            None,
            "the newcomer's"
        );
        assert_eq!(
            store.lookup(event, &s(21)).await.unwrap(),
            None,
            "nothing written"
        );
        let p4 = store
            .reclaim(event, &reclaim(4, Some(4), t1))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(p4.number, Some(4));
        // A number given just before the loss that the room's view had not seen: taken, and the next join is after it.
        let p10 = store
            .reclaim(event, &reclaim(10, Some(10), t1))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(p10.number, Some(10));
        let after = store
            .join(
                event,
                &Join {
                    session: s(22),
                    account: None,
                    now_ms: t1,
                    draw_key: 22,
                },
            )
            .await
            .unwrap();
        assert_eq!(after.number, Some(11));
        // A session the store knows is never put back in line (a join's place stays what it is).
        assert_eq!(
            store
                .reclaim(event, &reclaim(20, Some(3), t1))
                .await
                .unwrap(),
            Some(newcomer.clone())
        );

        // Nobody goes in during the hold, whatever the capacity.
        let r = store.tick(event, &tick_at(t1 + hold - 1)).await.unwrap();
        assert!(r.admitted.is_empty() && r.abandoned.is_empty(), "{r:?}");
        // Then the head resumes in order: number 3 (nobody came back for it yet) is passed over, 4 and 5 go in.
        let t2 = t1 + hold;
        let r = store.tick(event, &tick_at(t2)).await.unwrap();
        assert_eq!(r.admitted, vec![s(4), s(5)]);
        assert!(r.abandoned.is_empty(), "a free number is nobody to abandon");
        let snap = store.snapshot(event).await.unwrap();
        assert_eq!(snap.served, 5);
        // 3 comes back late (within the late window): it goes ahead of everyone still in line.
        let p3 = store
            .reclaim(event, &reclaim(3, Some(3), t2))
            .await
            .unwrap()
            .unwrap();
        assert_eq!((p3.state, p3.number), (SessionState::Waiting, Some(3)));
        // 1 and 2 were let in before the loss: after the late window they are not taken back.
        assert_eq!(
            store
                .reclaim(event, &reclaim(2, Some(2), t1 + late + 1))
                .await
                .unwrap(),
            None
        );
        assert!(store.finish(event, &s(4), 1, t2).await.unwrap());
        assert!(store.finish(event, &s(5), 1, t2).await.unwrap());
        let r = store.tick(event, &tick_at(t2 + 1)).await.unwrap();
        assert_eq!(
            r.admitted,
            vec![s(3), s(20)],
            "the passed number first, then the line"
        );
        assert_eq!(
            store.snapshot(event).await.unwrap().served,
            7,
            "served never moves back"
        );
        // Every number is held once.
        let mut held = HashMap::new();
        for i in (1..=22).filter(|i| *i <= 6 || *i >= 10) {
            if let Some(p) = store.lookup(event, &s(i)).await.unwrap()
                && let Some(n) = p.number
            {
                assert!(held.insert(n, i).is_none(), "number {n} held twice");
            }
        }
        // The rest of the line: 10 and 11, numbers 8 and 9 passed over.
        assert!(store.finish(event, &s(3), 0, t2 + 2).await.unwrap());
        assert!(store.finish(event, &s(20), 0, t2 + 2).await.unwrap());
        let r = store.tick(event, &tick_at(t2 + 3)).await.unwrap();
        assert_eq!(r.admitted, vec![s(10), s(22)]);
        let snap = store.snapshot(event).await.unwrap();
        assert_eq!((snap.served, snap.last_number), (11, 11));
    }

    /// What happens after a store forgot the on-sale, in random order.
    #[derive(Debug, Clone)]
    pub enum After {
        /// Person `i` of the line before the loss polls with its cookie's number.
        Reclaim(usize),
        /// Newcomer `k` joins.
        Join(usize),
        Tick,
        Advance(u64),
        /// The `k`-th admitted session (of those admitted so far) finishes.
        Finish(usize),
    }

    pub fn after_strategy() -> impl proptest::strategy::Strategy<Value = (u64, Vec<After>)> {
        use proptest::prelude::*;
        let op = prop_oneof![
            5 => (0usize..10).prop_map(After::Reclaim),
            2 => (0usize..6).prop_map(After::Join),
            3 => Just(After::Tick),
            2 => (0u64..8_000).prop_map(After::Advance),
            2 => (0usize..10).prop_map(After::Finish),
        ];
        (1u64..4, proptest::collection::vec(op, 1..60))
    }

    /// The rules of "When the store forgets" over random interleavings: ten people in line, `capacity` let in, the
    /// store forgets, is restored, and then people come back (or not), newcomers join, the door ticks, time passes.
    /// Checked after every step: no number held twice; a person taken back holds its cookie's number; newcomers
    /// queue after every number given; nobody is let in during the hold; `served` never moves back; someone taken
    /// back after the head passed them goes before anyone in line; nobody waiting is left behind the head.
    pub async fn after_forgetting<F, Fut>(
        store: Arc<dyn Store>,
        event: &str,
        capacity: u64,
        ops: &[After],
        lose: F,
    ) where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        use waitroom_layer::store::{Reclaim, Restore};
        let t0 = 1_000_000u64;
        let old = |i: usize| format!("old-{i:02}-abcdefghijklmn");
        let new = |k: usize| format!("new-{k:02}-abcdefghijklmn");
        store
            .init(event, &settings(capacity, false, None))
            .await
            .unwrap();
        for i in 0..10 {
            let j = Join {
                session: old(i),
                account: None,
                now_ms: t0,
                draw_key: 0,
            };
            assert_eq!(
                store.join(event, &j).await.unwrap().number,
                Some(i as u64 + 1)
            );
        }
        let mut admitted: Vec<String> = store.tick(event, &tick_at(t0)).await.unwrap().admitted;
        let before = store.snapshot(event).await.unwrap();
        lose().await;
        let t1 = t0 + 30_000;
        let (hold, late) = (5_000u64, 20_000u64);
        store
            .restore(
                event,
                &Restore {
                    settings: before.settings.clone(),
                    drawn: true,
                    last_number: before.last_number,
                    served: before.served,
                    counters: before.counters,
                    now_ms: t1,
                    hold_ms: hold,
                    late_ms: late,
                    behind: false,
                },
            )
            .await
            .unwrap();
        let mut now = t1;
        let mut served = before.served;
        let mut top = before.last_number;
        // Sessions taken back after the head had passed their number (they go first).
        let mut passed: HashSet<String> = HashSet::new();
        let mut sessions: Vec<String> = Vec::new();
        for op in ops {
            match op {
                After::Reclaim(i) => {
                    let s = old(*i);
                    let n = *i as u64 + 1;
                    let known = store.lookup(event, &s).await.unwrap();
                    let r = Reclaim {
                        session: s.clone(),
                        number: Some(n),
                        now_ms: now,
                        draw_key: 0,
                    };
                    let got = store.reclaim(event, &r).await.unwrap();
                    match (&known, &got) {
                        (Some(k), g) => {
                            assert_eq!(g.as_ref(), Some(k), "idempotent for a known session")
                        }
                        (None, Some(p)) => {
                            assert_eq!(
                                (p.state, p.number),
                                (SessionState::Waiting, Some(n)),
                                "at its number"
                            );
                            if n <= served {
                                assert!(
                                    now <= t1 + late,
                                    "a passed number taken back after the late window"
                                );
                                passed.insert(s.clone());
                            }
                            top = top.max(n);
                            sessions.push(s);
                        }
                        (None, None) => assert!(
                            n <= served && now > t1 + late,
                            "{s} (number {n}) not taken back with the head at {served}"
                        ),
                    }
                }
                After::Join(k) => {
                    let s = new(*k);
                    let known = store.lookup(event, &s).await.unwrap();
                    let j = Join {
                        session: s.clone(),
                        account: None,
                        now_ms: now,
                        draw_key: 0,
                    };
                    let p = store.join(event, &j).await.unwrap();
                    if known.is_none() {
                        let n = p.number.expect("a number");
                        assert!(n > top, "newcomer {n} not after every number given ({top})");
                        top = n;
                        // A session that ended and was forgotten joins again as a newcomer: it is followed once.
                        if !sessions.contains(&s) {
                            sessions.push(s);
                        }
                    }
                }
                After::Advance(ms) => now += ms,
                After::Finish(k) => {
                    if let Some(s) = admitted.get(*k) {
                        store.finish(event, s, 0, now).await.unwrap();
                    }
                }
                After::Tick => {
                    let r = store.tick(event, &tick_at(now)).await.unwrap();
                    // Missed, apart from the head: let in before and not come within the arrival window.
                    let head_missed: Vec<&String> =
                        r.missed.iter().filter(|s| !admitted.contains(*s)).collect();
                    if now < t1 + hold {
                        assert!(
                            r.admitted.is_empty() && head_missed.is_empty(),
                            "let in during the hold"
                        );
                    }
                    let after = store.snapshot(event).await.unwrap();
                    assert!(after.served >= served, "served moved back");
                    // Taken from the head: let in, or missed (away when taken; it keeps its turn for the window).
                    let from_line = r
                        .admitted
                        .iter()
                        .chain(head_missed.iter().copied())
                        .any(|s| !passed.contains(s));
                    for s in r.admitted.iter().chain(&r.missed) {
                        passed.remove(s);
                    }
                    if from_line {
                        assert!(passed.is_empty(), "the line went before {passed:?}");
                    }
                    served = after.served;
                    admitted.extend(r.admitted);
                }
            }
            // Nobody waiting behind the head but those taken back after it passed; no number held twice.
            let mut held: HashMap<u64, String> = HashMap::new();
            for s in &sessions {
                // A store may forget a session that ended long enough ago (see
                // `ended_sessions_are_forgotten_after_the_return_window`); nobody waiting is ever forgotten.
                let Some(p) = store.lookup(event, s).await.unwrap() else {
                    continue;
                };
                if let Some(n) = p.number
                    && p.state == SessionState::Waiting
                {
                    assert!(
                        n > served || passed.contains(s),
                        "{s} ({n}) left behind the head at {served}"
                    );
                }
                if let Some(n) = p.number
                    && let Some(other) = held.insert(n, s.clone())
                {
                    panic!("number {n} held by {other} and {s}");
                }
            }
        }
    }

    /// One step of the ticket model: first contacts, returns and never-returns (a ticket nobody redeems).
    #[derive(Debug, Clone)]
    pub enum TicketOp {
        /// Person `i`'s first contact: a ticket (nothing written).
        First(usize),
        /// The first contacts of persons `i, i + 1, ...` (`n` of them, those not seen yet) in one
        /// [`Store::tickets`] call: a room's batch.
        Batch(usize, usize),
        /// Person `i` comes back with its ticket (its page's first poll).
        Return(usize),
        /// A join written at once (an account's, or a rejoin): it takes the same counter's next number.
        Join(usize),
        /// Everyone waiting and inside is marked here, then the admission tick.
        Tick,
        /// Person `i` leaves the place it was let into.
        Finish(usize),
        Advance(u64),
    }

    pub fn ticket_ops_strategy() -> impl proptest::strategy::Strategy<Value = Vec<TicketOp>> {
        use proptest::prelude::*;
        let op = prop_oneof![
            5 => (0usize..30).prop_map(TicketOp::First),
            2 => ((0usize..30), (1usize..6)).prop_map(|(i, n)| TicketOp::Batch(i, n)),
            4 => (0usize..30).prop_map(TicketOp::Return),
            1 => (30usize..36).prop_map(TicketOp::Join),
            4 => Just(TicketOp::Tick),
            2 => (0usize..36).prop_map(TicketOp::Finish),
            2 => (1u64..8_000).prop_map(TicketOp::Advance),
        ];
        proptest::collection::vec(op, 1..150)
    }

    /// Tickets, one model for every store: a first contact takes the next number and writes nothing (no session
    /// the store knows); a batch of first contacts takes the next numbers, consecutive, in its order; a ticket that comes back within the grace is written at its number, or ahead of the line
    /// when the head passed it meanwhile; one that comes back later takes no place and writes nothing; numbers
    /// (tickets and joins) are unique and increasing; and the door lets in the people who came back in the order
    /// of their first contact: every tick admits the lowest-numbered of those waiting (everyone waiting is present
    /// here), as many as places are free, and never anyone who did not come back. Counted: tickets and redeemed.
    /// Positions and the waiting count are the live rank among the people in line, tickets between them free.
    pub async fn tickets(store: Arc<dyn Store>, event: &str, capacity: u64, ops: &[TicketOp]) {
        #[derive(Debug, Clone, Copy, PartialEq)]
        enum P {
            /// A ticket out: its number, when given out.
            Ticket(u64, u64),
            /// Written, waiting, with its number.
            Waiting(u64),
            Inside,
            /// Gone: finished, or its ticket came back too late.
            Gone,
        }
        let sid = |i: usize| format!("ticket-{i:04}-abcdefghijkl");
        let mut now = 1_000_000u64;
        let mut people: HashMap<usize, P> = HashMap::new();
        let mut last_number = 0u64;
        let (mut issued, mut redeemed) = (0u64, 0u64);
        for op in ops {
            match *op {
                TicketOp::First(i) => {
                    if people.contains_key(&i) {
                        continue;
                    }
                    let t = store.ticket(event, now).await.unwrap();
                    let Ticket::Number(n) = t else {
                        panic!("a FIFO line gives a number, not {t:?}");
                    };
                    assert!(n > last_number, "numbers increase: {n} after {last_number}");
                    last_number = n;
                    issued += 1;
                    assert_eq!(
                        store.lookup(event, &sid(i)).await.unwrap(),
                        None,
                        "a ticket writes no session"
                    );
                    people.insert(i, P::Ticket(n, now));
                }
                TicketOp::Batch(i, n) => {
                    let new: Vec<usize> = (i..i + n).filter(|j| !people.contains_key(j)).collect();
                    if new.is_empty() {
                        continue;
                    }
                    let ts = store.tickets(event, new.len(), now).await.unwrap();
                    let expected: Vec<Ticket> = (last_number + 1..=last_number + new.len() as u64)
                        .map(Ticket::Number)
                        .collect();
                    assert_eq!(ts, expected, "a batch takes the next numbers, in its order");
                    last_number += new.len() as u64;
                    issued += new.len() as u64;
                    for (j, t) in new.into_iter().zip(ts) {
                        let Ticket::Number(n) = t else { unreachable!() };
                        assert_eq!(store.lookup(event, &sid(j)).await.unwrap(), None);
                        people.insert(j, P::Ticket(n, now));
                    }
                }
                TicketOp::Return(i) => {
                    let Some(&P::Ticket(n, at)) = people.get(&i) else {
                        continue;
                    };
                    let r = Redeem {
                        session: sid(i),
                        number: Some(n),
                        issued_ms: at,
                        now_ms: now,
                        grace_ms: ABANDON_MS,
                        draw_key: rand_key(i, now),
                    };
                    let p = store.redeem(event, &r).await.unwrap();
                    if now <= at + ABANDON_MS {
                        let p = p.expect("a ticket back within the grace takes its place");
                        assert_eq!((p.state, p.number), (SessionState::Waiting, Some(n)));
                        redeemed += 1;
                        people.insert(i, P::Waiting(n));
                        // Idempotent: a copy of the ticket coming back finds the same place.
                        assert_eq!(store.redeem(event, &r).await.unwrap(), Some(p));
                    } else {
                        assert_eq!(p, None, "a ticket back after the grace takes no place");
                        assert_eq!(store.lookup(event, &sid(i)).await.unwrap(), None);
                        people.insert(i, P::Gone);
                    }
                }
                TicketOp::Join(i) => {
                    if people.contains_key(&i) {
                        continue;
                    }
                    let j = Join {
                        session: sid(i),
                        account: None,
                        now_ms: now,
                        draw_key: rand_key(i, now),
                    };
                    let p = store.join(event, &j).await.unwrap();
                    let n = p.number.expect("a FIFO join has a number");
                    assert!(
                        n > last_number,
                        "a join after tickets: {n} after {last_number}"
                    );
                    last_number = n;
                    people.insert(i, P::Waiting(n));
                }
                TicketOp::Tick => {
                    let waiting: BTreeMap<u64, usize> = people
                        .iter()
                        .filter_map(|(&i, p)| match p {
                            P::Waiting(n) => Some((*n, i)),
                            _ => None,
                        })
                        .collect();
                    let inside: Vec<String> = people
                        .iter()
                        .filter(|(_, p)| **p == P::Inside)
                        .map(|(&i, _)| sid(i))
                        .collect();
                    let marks = Touches {
                        now_ms: now,
                        waiting: waiting
                            .iter()
                            .map(|(&n, &i)| Mark {
                                session: sid(i),
                                number: Some(n),
                            })
                            .collect(),
                        active: inside.clone(),
                        idle_timeout_ms: IDLE_MS,
                        abandon_after_ms: ABANDON_MS,
                        tickets: 0,
                    };
                    store.touch(event, &marks).await.unwrap();
                    let report = store.tick(event, &tick_at(now)).await.unwrap();
                    assert!(report.missed.is_empty(), "nobody here is away: {report:?}");
                    assert!(report.expired.is_empty(), "nobody here idles: {report:?}");
                    let free = capacity.saturating_sub(inside.len() as u64) as usize;
                    let expected: Vec<String> =
                        waiting.values().take(free).map(|&i| sid(i)).collect();
                    let mut got = report.admitted.clone();
                    got.sort_by_key(|s| {
                        waiting
                            .iter()
                            .find(|(_, i)| sid(**i) == *s)
                            .map(|(n, _)| *n)
                    });
                    assert_eq!(
                        got, expected,
                        "the door lets in the lowest numbers of those who came back, {free} free places"
                    );
                    for s in &report.admitted {
                        let claimed = store.claim(event, s, now, IDLE_MS).await.unwrap();
                        assert_eq!(claimed.map(|p| p.state), Some(SessionState::Active));
                    }
                    for (_, &i) in waiting.iter().take(free) {
                        people.insert(i, P::Inside);
                    }
                }
                TicketOp::Finish(i) => {
                    if people.get(&i) == Some(&P::Inside) {
                        assert!(store.finish(event, &sid(i), 0, now).await.unwrap());
                        people.insert(i, P::Gone);
                    }
                }
                TicketOp::Advance(ms) => now += ms,
            }
            let snap = store.snapshot(event).await.unwrap();
            assert_eq!(snap.last_number, last_number);
            assert_eq!(
                (snap.counters.tickets, snap.counters.redeemed),
                (issued, redeemed)
            );
            assert!(snap.active <= capacity);
            // The numbers count the living: a person in line is told how many people who came back stand ahead
            // of them, plus one, whatever number of tickets lie between; `waiting` counts those people only.
            let in_line: Vec<u64> = people
                .values()
                .filter_map(|p| match p {
                    P::Waiting(n) if *n > snap.served => Some(*n),
                    _ => None,
                })
                .collect();
            for &n in &in_line {
                let ahead = in_line.iter().filter(|&&m| m < n).count() as u64;
                assert_eq!(
                    snap.position_of(n),
                    ahead + 1,
                    "the live rank of number {n}"
                );
            }
            assert_eq!(snap.waiting(), in_line.len() as u64, "only people count");
        }
        // Tickets never redeemed left nothing behind.
        for (i, p) in &people {
            if let P::Ticket(..) = p {
                assert_eq!(store.lookup(event, &sid(*i)).await.unwrap(), None);
            }
        }
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
        fn people_who_come_back_with_their_tickets_go_in_in_the_order_of_first_contact(ops in contract::ticket_ops_strategy(), capacity in 1u64..5) {
            rt().block_on(async {
                let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
                store.init("ev", &contract::settings(capacity, false, None)).await.unwrap();
                contract::tickets(store, "ev", capacity, &ops).await;
            });
        }

        #[test]
        fn after_the_store_forgets_people_come_back_at_their_numbers((capacity, ops) in contract::after_strategy()) {
            rt().block_on(async move {
                let store = MemoryStore::new();
                let lost = store.clone();
                contract::after_forgetting(Arc::new(store), "forgets", capacity, &ops, || async move {
                    assert!(lost.purge("forgets"));
                })
                .await;
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
    async fn a_store_that_forgets_takes_people_back_at_their_numbers() {
        let store = MemoryStore::new();
        let lost = store.clone();
        contract::forgetting(Arc::new(store), "forget", || async move {
            assert!(lost.purge("forget"));
        })
        .await;
    }

    #[tokio::test]
    async fn a_store_behind_the_room_keeps_the_lost_numbers_for_their_owners() {
        contract::behind(Arc::new(MemoryStore::new()), "behind").await;
    }

    #[tokio::test]
    async fn a_restore_keeps_whether_the_draw_had_run() {
        contract::restore_keeps_the_draw(Arc::new(MemoryStore::new()), "redraw").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn finding_sessions_goes_through_every_session() {
        contract::finding_goes_through_every_session(Arc::new(MemoryStore::new()), "find").await;
    }

    #[tokio::test]
    async fn closing_and_selling_out_turn_the_line_away() {
        contract::turn_away(Arc::new(MemoryStore::new()), "turn").await;
    }

    #[tokio::test]
    async fn the_timetable_lookups_and_the_audit_log_follow_the_operator() {
        contract::operator_kit(Arc::new(MemoryStore::new()), "ops").await;
    }

    #[tokio::test]
    async fn a_session_moved_to_the_front_goes_in_next_and_nobody_twice() {
        contract::move_front(Arc::new(MemoryStore::new()), "front").await;
    }

    #[tokio::test]
    async fn a_turn_missed_while_away_is_kept_for_the_return_window() {
        contract::return_window(Arc::new(MemoryStore::new()), "back").await;
    }

    #[tokio::test]
    async fn an_admitted_person_who_does_not_come_within_the_arrival_window_keeps_their_turn() {
        contract::no_show_keeps_turn(Arc::new(MemoryStore::new()), "noshow").await;
    }

    #[tokio::test]
    async fn people_away_in_a_row_cost_the_door_none_of_its_budget() {
        contract::absent_run(Arc::new(MemoryStore::new()), "away", async || {}).await;
    }

    #[tokio::test]
    async fn drawn_people_away_in_a_row_cost_the_door_none_of_its_budget() {
        contract::absent_drawn_run(Arc::new(MemoryStore::new()), "drawnaway").await;
    }

    #[tokio::test]
    async fn a_backlog_of_drawn_people_passed_is_named_by_one_large_call() {
        contract::drawn_backlog_named_by_one_large_call(Arc::new(MemoryStore::new()), "backlog")
            .await;
    }

    #[tokio::test]
    async fn drawn_people_passed_across_calls_keep_their_numbers_and_end_once() {
        contract::drawn_run_passed_across_calls(Arc::new(MemoryStore::new()), "drawncalls").await;
    }

    #[tokio::test]
    async fn a_drawn_person_marked_by_a_clock_a_second_behind_the_draw_is_present() {
        contract::drawn_marked_by_a_clock_behind(Arc::new(MemoryStore::new()), "drawslot").await;
    }

    #[tokio::test]
    async fn numbers_alone_share_the_counter_and_are_counted_by_the_touch_that_brings_them() {
        contract::numbers_alone_share_the_counter_and_are_counted_by_a_touch(
            Arc::new(MemoryStore::new()),
            "alone",
        )
        .await;
    }

    #[tokio::test]
    async fn ended_sessions_are_forgotten_after_the_return_window() {
        contract::ended_forgotten(Arc::new(MemoryStore::new()), "ended").await;
    }

    #[tokio::test]
    async fn an_account_holds_one_place_whichever_session_asks() {
        contract::accounts(Arc::new(MemoryStore::new()), "acct").await;
    }

    #[tokio::test]
    async fn the_front_lane_goes_before_the_returning_queue_and_the_line() {
        contract::lanes(Arc::new(MemoryStore::new()), "lanes").await;
    }

    #[tokio::test]
    async fn a_touch_claims_an_admitted_sessions_pass() {
        contract::touch_claims(Arc::new(MemoryStore::new()), "touchclaim").await;
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn tickets_from_many_tasks_at_once_are_distinct_gap_free_and_consecutive_per_batch() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        store
            .init("ev", &contract::settings(7, false, None))
            .await
            .unwrap();
        contract::concurrent_tickets(vec![store], "ev").await;
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
    use waitroom_layer::store::{
        Join, Reclaim, Redeem, Restore, Return, SessionState, SettingsChange, Store, Tick,
        TickReport, Ticket, Touches,
    };
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
                self.restart().await;
            }
            self.store.read().await
        }

        /// Closes the store (its last commit) and opens its directory again.
        pub async fn restart(&self) {
            let mut w = self.store.write().await;
            // The last handle: its drop commits and closes the file, so it opens again at once.
            drop(w.take());
            *w = Some(MemoryStore::open(&self.dir).expect("the data directory opens again"));
            self.restarts.fetch_add(1, Ordering::SeqCst);
        }

        /// Forgets the on-sale (`MemoryStore::purge`: from memory and, at the next commit, from the data file).
        pub async fn purge(&self, event: &str) -> bool {
            let g = self.get().await;
            g.as_ref().expect("open").purge(event)
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
        async fn ticket(&self, event: &str, now_ms: u64) -> Result<Ticket, StoreError> {
            call!(self.ticket(event, now_ms))
        }
        async fn tickets(
            &self,
            event: &str,
            count: usize,
            now_ms: u64,
        ) -> Result<Vec<Ticket>, StoreError> {
            call!(self.tickets(event, count, now_ms))
        }
        async fn line_tickets(
            &self,
            event: &str,
            count: usize,
            known_last: u64,
        ) -> Result<Option<u64>, StoreError> {
            call!(self.line_tickets(event, count, known_last))
        }
        async fn redeem(
            &self,
            event: &str,
            redeem: &Redeem,
        ) -> Result<Option<Placement>, StoreError> {
            call!(self.redeem(event, redeem))
        }
        async fn lookup(
            &self,
            event: &str,
            session: &str,
        ) -> Result<Option<Placement>, StoreError> {
            call!(self.lookup(event, session))
        }
        async fn come_back(
            &self,
            event: &str,
            session: &str,
            now_ms: u64,
            return_window_ms: u64,
        ) -> Result<(Option<Placement>, Option<Return>), StoreError> {
            call!(self.come_back(event, session, now_ms, return_window_ms))
        }
        async fn restore(&self, event: &str, restore: &Restore) -> Result<Settings, StoreError> {
            call!(self.restore(event, restore))
        }
        async fn reclaim(
            &self,
            event: &str,
            reclaim: &Reclaim,
        ) -> Result<Option<Placement>, StoreError> {
            call!(self.reclaim(event, reclaim))
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
        fn people_who_come_back_with_their_tickets_go_in_in_the_order_of_first_contact_across_restarts(ops in contract::ticket_ops_strategy(), capacity in 1u64..5, every in 5u64..40) {
            rt().block_on(async {
                let store = Arc::new(Restarting::new("tickets", every));
                store.init("ev", &contract::settings(capacity, false, None)).await.unwrap();
                contract::tickets(store.clone(), "ev", capacity, &ops).await;
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

    /// A forgotten record leaves the data file (a restart does not bring it back); an ended record taken back from
    /// the file is kept for a return window from the first tick, then forgotten.
    #[tokio::test]
    async fn forgotten_sessions_leave_the_data_file() {
        use contract::{ABANDON_MS, ARRIVAL_MS, RETURN_MS};
        let store = Restarting::new("forgot", 0);
        let restart = || store.restart();
        let tick = |now_ms| Tick {
            now_ms,
            arrival_window_ms: ARRIVAL_MS,
            abandon_after_ms: ABANDON_MS,
            return_window_ms: RETURN_MS,
            max_scan: 1_000,
        };
        let ev = "forgot";
        let state = |sid: &'static str| {
            let store = &store;
            async move { store.lookup(ev, sid).await.unwrap().map(|p| p.state) }
        };
        store
            .init(ev, &contract::settings(1, false, None))
            .await
            .unwrap();
        let t0 = 70_000_000u64;
        for sid in ["a", "b"] {
            let j = Join {
                session: sid.into(),
                account: None,
                now_ms: t0,
                draw_key: 0,
            };
            store.join(ev, &j).await.unwrap();
        }
        store.tick(ev, &tick(t0)).await.unwrap();
        assert!(store.finish(ev, "a", 1, t0 + 1).await.unwrap());
        restart().await;
        assert_eq!(state("a").await, Some(SessionState::Finished), "taken back");
        let first = t0 + 2;
        store.tick(ev, &tick(first)).await.unwrap();
        // b comes for its pass, with a short idle timeout: it expires at the next tick.
        store.claim(ev, "b", first, 1_000).await.unwrap();
        store.tick(ev, &tick(first + RETURN_MS - 1)).await.unwrap();
        assert_eq!(
            state("a").await,
            Some(SessionState::Finished),
            "kept a window from the first tick"
        );
        store.tick(ev, &tick(first + RETURN_MS)).await.unwrap();
        assert_eq!(state("a").await, None);
        restart().await;
        assert_eq!(state("a").await, None, "its record left the data file");
        assert_eq!(state("b").await, Some(SessionState::Expired), "b's is kept");
    }

    #[tokio::test]
    async fn ended_sessions_are_forgotten_after_the_return_window_across_restarts() {
        // Marks are not written (a restart counts everyone as seen at the first tick), so no restarts here; the
        // forgotten records leaving the data file are checked in `forgotten_sessions_leave_the_data_file`.
        contract::ended_forgotten(Arc::new(Restarting::new("ended", 0)), "ended").await;
    }

    #[tokio::test]
    async fn liveness_marks_and_the_draw() {
        // Marks of people in line are not written (a restart counts everyone as seen), so no restarts here.
        contract::liveness(Arc::new(Restarting::new("live", 0)), "live").await;
    }

    #[tokio::test]
    async fn a_restore_keeps_whether_the_draw_had_run_across_restarts() {
        contract::restore_keeps_the_draw(Arc::new(Restarting::new("redraw", 1)), "redraw").await;
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

    /// The people the head passed while away whom no tick's report has named yet are named after a restart.
    #[tokio::test]
    async fn people_passed_while_away_are_named_missed_across_a_restart() {
        let store = Arc::new(Restarting::new("away", 0));
        contract::absent_run(store.clone(), "away", async || store.restart().await).await;
        assert_eq!(store.restarts.load(Ordering::SeqCst), 1);
    }

    /// Missed and returning sessions, the returning queue's order, the missed queue (the window's end), the
    /// counters of returns and a late return told once are read back from the data file after each restart. (The
    /// shared `return_window` model needs absences the store sees across calls, and a restart counts everyone in
    /// line as seen, so it runs here with restarts at chosen points.)
    #[tokio::test]
    async fn missed_and_returning_sessions_and_their_queues_survive_restarts() {
        use contract::{ABANDON_MS, ARRIVAL_MS, RETURN_MS};
        let store = Restarting::new("turns", 0);
        let ev = "turns";
        let t0 = 50_000_000u64;
        let tick = |now_ms| Tick {
            now_ms,
            arrival_window_ms: ARRIVAL_MS,
            abandon_after_ms: ABANDON_MS,
            return_window_ms: RETURN_MS,
            max_scan: 1_000,
        };
        let restart = || store.restart();
        store
            .init(ev, &contract::settings(1, false, None))
            .await
            .unwrap();
        for sid in ["a", "b", "c", "d", "e"] {
            let j = Join {
                session: sid.into(),
                account: None,
                now_ms: t0,
                draw_key: 0,
            };
            store.join(ev, &j).await.unwrap();
        }
        assert_eq!(store.tick(ev, &tick(t0)).await.unwrap().admitted, ["a"]);
        let later = t0 + 2 * ABANDON_MS;
        assert!(store.finish(ev, "a", 0, later).await.unwrap());
        let touches = Touches {
            now_ms: later,
            idle_timeout_ms: 60_000,
            waiting: vec![waitroom_layer::store::Mark {
                session: "e".into(),
                number: Some(5),
            }],
            active: vec![],
            abandon_after_ms: ABANDON_MS,
            tickets: 0,
        };
        store.touch(ev, &touches).await.unwrap();
        let r = store.tick(ev, &tick(later)).await.unwrap();
        assert_eq!(
            (r.missed, r.admitted),
            (
                vec!["b".to_owned(), "c".into(), "d".into()],
                vec!["e".to_owned()]
            )
        );
        restart().await;
        for sid in ["b", "c", "d"] {
            let p = store.lookup(ev, sid).await.unwrap().unwrap();
            assert_eq!(
                p.state,
                SessionState::Missed,
                "{sid} is still missed after a restart"
            );
        }
        // d comes back before b: the returning queue keeps that order across the restart.
        let (p, r) = store
            .come_back(ev, "d", later + 1, RETURN_MS)
            .await
            .unwrap();
        assert_eq!(
            (p.unwrap().state, r),
            (SessionState::Returning, Some(Return::InTime))
        );
        let (_, r) = store
            .come_back(ev, "b", later + 2, RETURN_MS)
            .await
            .unwrap();
        assert_eq!(r, Some(Return::InTime));
        restart().await;
        let snap = store.snapshot(ev).await.unwrap();
        assert_eq!(
            (
                snap.returning,
                snap.away(),
                snap.counters.missed,
                snap.counters.returned
            ),
            (2, 1, 3, 2),
            "the returning queue and the counters survive a restart: {snap:?}"
        );
        assert!(store.finish(ev, "e", 0, later + 3).await.unwrap());
        assert_eq!(
            store.tick(ev, &tick(later + 3)).await.unwrap().admitted,
            ["d"]
        );
        restart().await;
        assert!(store.finish(ev, "d", 0, later + 4).await.unwrap());
        assert_eq!(
            store.tick(ev, &tick(later + 4)).await.unwrap().admitted,
            ["b"]
        );
        store
            .claim(ev, "b", later + 4, contract::IDLE_MS)
            .await
            .unwrap();
        restart().await;
        // c's window ends on the clock of its miss, read back from the file.
        let r = store.tick(ev, &tick(later + RETURN_MS - 1)).await.unwrap();
        assert!(r.abandoned.is_empty(), "c's window has not passed");
        let r = store.tick(ev, &tick(later + RETURN_MS)).await.unwrap();
        assert_eq!(r.abandoned, ["c"]);
        let (_, r) = store
            .come_back(ev, "c", later + RETURN_MS + 1, RETURN_MS)
            .await
            .unwrap();
        assert_eq!(r, Some(Return::TooLate));
        restart().await;
        let (p, r) = store
            .come_back(ev, "c", later + RETURN_MS + 2, RETURN_MS)
            .await
            .unwrap();
        assert_eq!(
            (p.unwrap().state, r),
            (SessionState::Abandoned, None),
            "a late return is told once"
        );
        let c = store.snapshot(ev).await.unwrap().counters;
        assert_eq!(
            (c.missed, c.returned, c.abandoned, c.returned_late),
            (3, 2, 1, 1)
        );
    }

    #[tokio::test]
    async fn a_store_behind_the_room_keeps_the_lost_numbers_for_their_owners_across_restarts() {
        let store = Arc::new(Restarting::new("behind", 5));
        contract::behind(store.clone(), "behind").await;
        assert!(
            store.restarts.load(Ordering::SeqCst) > 2,
            "restarted along the way"
        );
    }

    #[tokio::test]
    async fn a_purged_store_takes_people_back_at_their_numbers_across_restarts() {
        // The purge reaches the data file: a restart does not bring the forgotten on-sale back; the restore, the
        // holes, the late window and the sessions taken back (the `back` map included) are read back.
        let store = Arc::new(Restarting::new("forget", 5));
        let lost = store.clone();
        contract::forgetting(store.clone(), "forget", || async move {
            assert!(lost.purge("forget").await);
        })
        .await;
        assert!(
            store.restarts.load(Ordering::SeqCst) > 2,
            "restarted along the way"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn tickets_from_many_tasks_at_once_are_distinct_gap_free_and_consecutive_per_batch_across_restarts()
     {
        let store = Arc::new(Restarting::new("ctickets", 53));
        store
            .init("ev", &contract::settings(7, false, None))
            .await
            .unwrap();
        contract::concurrent_tickets(vec![store.clone()], "ev").await;
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

    /// The rules of a store that forgets, over random interleavings, against Redis (the loss: the on-sale's keys
    /// deleted).
    #[test]
    fn after_the_store_forgets_people_come_back_at_their_numbers() {
        let server = RedisServer::from_env_or_start();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let store = rt.block_on(RedisStore::connect(server.url())).unwrap();
        let mut runner = TestRunner::new(Config {
            cases: cases(),
            ..Config::default()
        });
        let result = runner.run(&contract::after_strategy(), |(capacity, ops)| {
            let store = store.clone();
            rt.block_on(async move {
                let event = fresh_event("forgets");
                let lost = store.clone();
                let ev = event.clone();
                contract::after_forgetting(
                    Arc::new(store),
                    &event,
                    capacity,
                    &ops,
                    || async move {
                        lost.purge(&ev).await.unwrap();
                    },
                )
                .await;
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

    /// The ticket model against Redis, through two connections taken in turn (two room instances).
    #[test]
    fn people_who_come_back_with_their_tickets_go_in_in_the_order_of_first_contact() {
        let server = RedisServer::from_env_or_start();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let store: Arc<dyn Store> = Arc::new(RoundRobin {
            stores: vec![
                rt.block_on(RedisStore::connect(server.url())).unwrap(),
                rt.block_on(RedisStore::connect(server.url())).unwrap(),
            ],
            next: AtomicU64::new(0),
        });
        let mut runner = TestRunner::new(Config {
            cases: cases(),
            ..Config::default()
        });
        let result = runner.run(
            &(contract::ticket_ops_strategy(), 1u64..5),
            |(ops, capacity)| {
                let store = store.clone();
                rt.block_on(async move {
                    let event = fresh_event("tickets");
                    store
                        .init(&event, &contract::settings(capacity, false, None))
                        .await
                        .unwrap();
                    contract::tickets(store, &event, capacity, &ops).await;
                });
                Ok(())
            },
        );
        drop(server);
        if let Err(e) = result {
            panic!("{e}");
        }
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
                return_window_ms: crate::contract::RETURN_MS,
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

    /// Redis forgets the on-sale (its keys go, as in a Redis restarted without persistence): the contract's rules
    /// for restoring and taking people back hold.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_store_that_forgets_takes_people_back_at_their_numbers() {
        let server = RedisServer::from_env_or_start();
        let store = RedisStore::connect(server.url()).await.unwrap();
        let event = fresh_event("forget");
        let lost = store.clone();
        let ev = event.clone();
        contract::forgetting(Arc::new(store), &event, || async move {
            assert!(lost.purge(&ev).await.unwrap() > 0);
        })
        .await;
    }

    /// Redis loses the on-sale's meta hash alone (an operator's `DEL`, a partial loss) and keeps its other keys:
    /// the restore clears what was left (the session records, the line), so the same rules hold as when every key
    /// went: people are taken back at their numbers, the door resumes in order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_store_that_loses_only_the_meta_hash_takes_people_back_at_their_numbers() {
        let server = RedisServer::from_env_or_start();
        let store = RedisStore::connect(server.url()).await.unwrap();
        let event = fresh_event("forgetmeta");
        let meta = store.key(&event, "meta");
        let server = &server;
        contract::forgetting(Arc::new(store), &event, || async move {
            assert_eq!(server.command(&["DEL", &meta]).trim(), "1");
        })
        .await;
    }

    /// A Redis that lost its latest writes (a failover to a lagging replica) gets the room's number floor.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_store_behind_the_room_keeps_the_lost_numbers_for_their_owners() {
        let server = RedisServer::from_env_or_start();
        let store = RedisStore::connect(server.url()).await.unwrap();
        contract::behind(Arc::new(store), &fresh_event("behind")).await;
    }

    /// Ended records move to the hashes of the slots they ended in and are read from there for a return window by
    /// the last tick's clock; Redis expires the hashes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ended_sessions_are_forgotten_after_the_return_window() {
        let server = RedisServer::from_env_or_start();
        let store = RedisStore::connect(server.url()).await.unwrap();
        contract::ended_forgotten(Arc::new(store), &fresh_event("ended")).await;
    }

    /// Numbered marks go to the `seen` bitmaps (no session record rewritten); the contract's liveness edges hold.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_turn_missed_while_away_is_kept_for_the_return_window() {
        let server = RedisServer::from_env_or_start();
        let store = RedisStore::connect(server.url()).await.unwrap();
        contract::return_window(Arc::new(store), &fresh_event("back")).await;
    }

    /// A lapsed admission writes a missed record (its number kept) into the seconds' set the report ends.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_admitted_person_who_does_not_come_within_the_arrival_window_keeps_their_turn() {
        let server = RedisServer::from_env_or_start();
        let store = RedisStore::connect(server.url()).await.unwrap();
        contract::no_show_keeps_turn(Arc::new(store), &fresh_event("noshow")).await;
    }

    /// The head passes the run with bit operations over the `seen` slots and `line:held`, and writes them missed
    /// behind it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn people_away_in_a_row_cost_the_door_none_of_its_budget() {
        let server = RedisServer::from_env_or_start();
        let store = RedisStore::connect(server.url()).await.unwrap();
        contract::absent_run(Arc::new(store), &fresh_event("away"), async || {}).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn drawn_people_away_in_a_row_cost_the_door_none_of_its_budget() {
        let server = RedisServer::from_env_or_start();
        let store = RedisStore::connect(server.url()).await.unwrap();
        contract::absent_drawn_run(Arc::new(store), &fresh_event("drawnaway")).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_backlog_of_drawn_people_passed_is_named_by_one_large_call() {
        let server = RedisServer::from_env_or_start();
        let store = RedisStore::connect(server.url()).await.unwrap();
        contract::drawn_backlog_named_by_one_large_call(Arc::new(store), &fresh_event("backlog"))
            .await;
    }

    /// With two draw buckets, so the door's runs stop in the middle of one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn drawn_people_passed_across_calls_keep_their_numbers_and_end_once() {
        let server = RedisServer::from_env_or_start();
        let store = RedisStore::builder(server.url())
            .draw_buckets_log2(1)
            .connect()
            .await
            .unwrap();
        contract::drawn_run_passed_across_calls(Arc::new(store), &fresh_event("drawncalls")).await;
    }

    #[tokio::test]
    async fn a_drawn_person_marked_by_a_clock_a_second_behind_the_draw_is_present() {
        let server = RedisServer::from_env_or_start();
        let store = RedisStore::connect(server.url()).await.unwrap();
        contract::drawn_marked_by_a_clock_behind(Arc::new(store), &fresh_event("drawslot")).await;
    }

    #[tokio::test]
    async fn numbers_alone_share_the_counter_and_are_counted_by_the_touch_that_brings_them() {
        let server = RedisServer::from_env_or_start();
        let store = RedisStore::connect(server.url()).await.unwrap();
        let event = fresh_event("alone");
        contract::numbers_alone_share_the_counter_and_are_counted_by_a_touch(
            Arc::new(store.clone()),
            &event,
        )
        .await;
        let meta = store.key(&event, "meta");
        // Redis lost its latest writes (a failover to a replica that lagged: its counter went back from 5 to 2):
        // numbers alone that may have been given out before are not handed on.
        assert_eq!(server.command(&["HSET", &meta, "last", "2"]), "0");
        let r = store.line_tickets(&event, 2, 5).await;
        assert!(
            matches!(
                &r,
                Err(waitroom_layer::StoreError::Behind { store_last: 2 })
            ),
            "3 and 4 were given out before the writes were lost: {r:?}"
        );
        // Redis loses the on-sale: numbers alone below what the room saw are refused as forgotten (the room
        // restores it and asks again); the lone `HINCRBY`'s meta hash of `last` alone is an on-sale no script
        // knows.
        assert_eq!(server.command(&["DEL", &meta]), "1");
        let r = store.line_tickets(&event, 2, 5).await;
        assert!(
            matches!(&r, Err(e) if e.is_forgotten()),
            "a counter behind the room's numbers on a forgotten on-sale: {r:?}"
        );
        assert_eq!(server.command(&["HEXISTS", &meta, "cap"]), "0");
        let r = store.snapshot(&event).await;
        assert!(
            matches!(&r, Err(e) if e.is_forgotten()),
            "a meta of `last` alone is unknown: {r:?}"
        );
        // A touch that brings a count to a forgotten on-sale writes nothing either.
        let touch = waitroom_layer::store::Touches {
            now_ms: 1_000_000,
            tickets: 2,
            ..Default::default()
        };
        let r = store.touch(&event, &touch).await;
        assert!(
            r.is_err(),
            "the touch's script answers that it does not know the on-sale"
        );
        assert_eq!(
            server.command(&["HEXISTS", &meta, "tickets"]),
            "0",
            "nothing counted"
        );
    }

    #[tokio::test]
    async fn the_front_lane_goes_before_the_returning_queue_and_the_line() {
        let server = RedisServer::from_env_or_start();
        let store = RedisStore::connect(server.url()).await.unwrap();
        contract::lanes(Arc::new(store), &fresh_event("lanes")).await;
    }

    #[tokio::test]
    async fn a_touch_claims_an_admitted_sessions_pass() {
        let server = RedisServer::from_env_or_start();
        let store = RedisStore::connect(server.url()).await.unwrap();
        contract::touch_claims(Arc::new(store), &fresh_event("touchclaim")).await;
    }

    #[tokio::test]
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
        assert!(
            keys.iter().any(|k| !k.contains(":j")),
            "no bitmap of marks under {pattern}: {keys:?}"
        );
        let slots = 2 * waitroom_layer::store::SEEN_SLOT_MS as i64;
        for k in keys {
            let ttl: i64 = ::redis::cmd("PTTL")
                .arg(&k)
                .query_async(&mut conn)
                .await
                .unwrap();
            // The joins' bitmaps (`seen:j:<slot>`, `seen:js:<second>`) take the grace of the last tick, or the keep time's default
            // of 10 minutes when they were written before any tick.
            let most = if k.contains(":j") { 600_000 } else { 60_000 };
            assert!(ttl > 0 && ttl <= most + slots, "{k}: {ttl}");
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
                return_window_ms: crate::contract::RETURN_MS,
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_restore_keeps_whether_the_draw_had_run() {
        let server = RedisServer::from_env_or_start();
        let store = RedisStore::connect(server.url()).await.unwrap();
        contract::restore_keeps_the_draw(Arc::new(store), &fresh_event("redraw")).await;
    }

    /// Beyond one `HSCAN` batch.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn finding_sessions_goes_through_every_session() {
        let server = RedisServer::from_env_or_start();
        let store = RedisStore::connect(server.url()).await.unwrap();
        contract::finding_goes_through_every_session(Arc::new(store), &fresh_event("find")).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn finishes_are_read_back_over_the_lookback_and_after_the_cursor() {
        let server = RedisServer::from_env_or_start();
        let store = RedisStore::connect(server.url()).await.unwrap();
        contract::shared_finishes_are_read_back(Arc::new(store), &fresh_event("fin")).await;
    }

    /// One place per account, through the join script.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_account_holds_one_place_whichever_session_asks() {
        let server = RedisServer::from_env_or_start();
        let store = RedisStore::connect(server.url()).await.unwrap();
        contract::accounts(Arc::new(store), &fresh_event("acct")).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_timetable_lookups_and_the_audit_log_follow_the_operator() {
        let server = RedisServer::from_env_or_start();
        let store = RedisStore::builder(server.url())
            .draw_buckets_log2(6)
            .connect()
            .await
            .unwrap();
        contract::operator_kit(Arc::new(store), &fresh_event("ops")).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_session_moved_to_the_front_goes_in_next_and_nobody_twice() {
        let server = RedisServer::from_env_or_start();
        let store = RedisStore::builder(server.url())
            .draw_buckets_log2(6)
            .connect()
            .await
            .unwrap();
        contract::move_front(Arc::new(store), &fresh_event("front")).await;
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

    /// Three connections, as three room instances, numbering first contacts at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn tickets_from_many_tasks_at_once_are_distinct_gap_free_and_consecutive_per_batch() {
        let server = RedisServer::from_env_or_start();
        let event = fresh_event("ctickets");
        let mut instances: Vec<Arc<dyn Store>> = Vec::new();
        for _ in 0..3 {
            instances.push(Arc::new(RedisStore::connect(server.url()).await.unwrap()));
        }
        instances[0]
            .init(&event, &contract::settings(7, false, None))
            .await
            .unwrap();
        contract::concurrent_tickets(instances, &event).await;
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
        async fn ticket(
            &self,
            event: &str,
            now_ms: u64,
        ) -> Result<waitroom_layer::store::Ticket, waitroom_layer::StoreError> {
            self.pick().ticket(event, now_ms).await
        }
        async fn tickets(
            &self,
            event: &str,
            count: usize,
            now_ms: u64,
        ) -> Result<Vec<waitroom_layer::store::Ticket>, waitroom_layer::StoreError> {
            self.pick().tickets(event, count, now_ms).await
        }
        async fn line_tickets(
            &self,
            event: &str,
            count: usize,
            known_last: u64,
        ) -> Result<Option<u64>, waitroom_layer::StoreError> {
            self.pick().line_tickets(event, count, known_last).await
        }
        async fn redeem(
            &self,
            event: &str,
            redeem: &waitroom_layer::store::Redeem,
        ) -> Result<Option<waitroom_layer::Placement>, waitroom_layer::StoreError> {
            self.pick().redeem(event, redeem).await
        }
        async fn lookup(
            &self,
            event: &str,
            session: &str,
        ) -> Result<Option<waitroom_layer::Placement>, waitroom_layer::StoreError> {
            self.pick().lookup(event, session).await
        }
        async fn come_back(
            &self,
            event: &str,
            session: &str,
            now_ms: u64,
            return_window_ms: u64,
        ) -> Result<
            (
                Option<waitroom_layer::Placement>,
                Option<waitroom_layer::store::Return>,
            ),
            waitroom_layer::StoreError,
        > {
            self.pick()
                .come_back(event, session, now_ms, return_window_ms)
                .await
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
        async fn restore(
            &self,
            event: &str,
            restore: &waitroom_layer::store::Restore,
        ) -> Result<waitroom_layer::Settings, waitroom_layer::StoreError> {
            self.pick().restore(event, restore).await
        }
        async fn reclaim(
            &self,
            event: &str,
            reclaim: &waitroom_layer::store::Reclaim,
        ) -> Result<Option<waitroom_layer::Placement>, waitroom_layer::StoreError> {
            self.pick().reclaim(event, reclaim).await
        }
    }
}
