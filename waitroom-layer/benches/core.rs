//! The room's core with 600,000 sessions in line: join, a waiting session's poll, a tick admitting 100; and the
//! memory one waiting session costs in the embedded store.
//!
//! `cargo bench -p waitroom-layer --bench core -- --warm-up-time 1 --measurement-time 3`

use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group};
use waitroom_layer::{ManualClock, MemoryStore, WaitingRoom};

const IN_LINE: u64 = 600_000;

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn sid(i: u64) -> String {
    // The shape of a real session id: 22 base64url characters.
    format!("{i:0>22}")
}

async fn full_room(rt_clock: &ManualClock) -> WaitingRoom {
    let room = WaitingRoom::builder("bench")
        .capacity(8_000)
        .abandon_after(Duration::from_secs(86_400))
        .clock(Arc::new(rt_clock.clone()))
        .store(MemoryStore::new())
        .background(false)
        .build()
        .await
        .expect("room");
    for i in 0..IN_LINE {
        room.join(&sid(i), None).await.expect("join");
    }
    room.tick_now().await.expect("tick");
    room
}

/// Which memory figure a child process measures (`WAITROOM_MEMORY_CASE`): each runs in a fresh process, so
/// one figure's freed memory is not reused by the other's.
const MEMORY_CASE: &str = "WAITROOM_MEMORY_CASE";

/// Runs this binary twice more, once per figure, and passes on what they print.
fn memory_per_session() {
    let exe = std::env::current_exe().expect("the bench binary");
    for case in ["store", "room"] {
        let out = std::process::Command::new(&exe)
            .env(MEMORY_CASE, case)
            .output()
            .expect("the bench binary runs again");
        print!("{}", String::from_utf8_lossy(&out.stdout));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `store`: the embedded store alone (what `Store::join` keeps). `room`: the room as shipped, every session
/// joined through `WaitingRoom::join` with the default settings (the store, the room's cache of places, the
/// liveness marks and their buffers, flushed by the tick).
fn measure_memory(case: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = MemoryStore::new();
        let clock = ManualClock::new(1_800_000_000_000);
        let mut builder = WaitingRoom::builder("mem")
            .clock(Arc::new(clock))
            .store(store.clone())
            .background(false);
        if case == "store" {
            builder = builder.session_cache_capacity(1);
        }
        let room = builder.build().await.unwrap();
        let before = rss_bytes();
        for i in 0..IN_LINE {
            if case == "store" {
                waitroom_layer::store::Store::join(
                    &store,
                    "mem",
                    &waitroom_layer::store::Join {
                        session: sid(i),
                        account: None,
                        now_ms: 1,
                        draw_key: i,
                    },
                )
                .await
                .unwrap();
            } else {
                room.join(&sid(i), None).await.unwrap();
                // The door's tick (four a second) flushes the liveness marks: one tick per 30,000 joins is a
                // crowd joining at 120,000 a second.
                if i % 30_000 == 29_999 {
                    room.tick_now().await.unwrap();
                }
            }
        }
        let after = rss_bytes();
        let what = if case == "store" {
            "embedded store alone"
        } else {
            "room as shipped (defaults, joins through WaitingRoom::join)"
        };
        println!(
            "{what}: {} waiting sessions, RSS grew {} bytes = {:.0} bytes per waiting session",
            IN_LINE,
            after.saturating_sub(before),
            after.saturating_sub(before) as f64 / IN_LINE as f64
        );
        drop(room);
    });
}

fn core(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let clock = ManualClock::new(1_800_000_000_000);
    let room = rt.block_on(full_room(&clock));
    let mut g = c.benchmark_group("core_600k_in_line");

    let mut next = IN_LINE;
    g.bench_function("join", |b| {
        b.iter(|| {
            next += 1;
            rt.block_on(room.join(&sid(next), None)).expect("join")
        })
    });

    // A waiting session in the middle of the line polls: number from its cookie, status from the local snapshot.
    let middle = sid(IN_LINE / 2);
    g.bench_function("poll_waiting_with_cookie_number", |b| {
        b.iter(|| {
            let p = rt
                .block_on(room.locate(&middle, Some(IN_LINE / 2 + 1)))
                .expect("locate");
            room.status(p.as_ref())
        })
    });
    // The crowd: every poll from another of 30,000 waiting sessions (the seed's polls in one second), so the
    // liveness marks and the line's tables are not all in the CPU's caches, as in a real room. After each round of
    // 30,000 polls the room ticks (which flushes the marks, as the background task does once a second): its cost
    // is shared out over the round's polls.
    let crowd: Vec<(String, u64)> = (0..30_000u64)
        .map(|i| {
            let n = IN_LINE / 3 + i * 8;
            (sid(n), n + 1)
        })
        .collect();
    let mut turn = 0usize;
    g.bench_function("poll_waiting_crowd_of_30000", |b| {
        b.iter(|| {
            turn = (turn + 1) % crowd.len();
            if turn == 0 {
                rt.block_on(room.tick_now()).expect("tick");
            }
            let (s, n) = &crowd[turn];
            let p = rt.block_on(room.locate(s, Some(*n))).expect("locate");
            room.status(p.as_ref())
        })
    });
    g.bench_function("poll_waiting_from_local_cache", |b| {
        b.iter(|| {
            let p = rt.block_on(room.locate(&middle, None)).expect("locate");
            room.status(p.as_ref())
        })
    });

    // A tick that admits 100: first (setup, not measured) the 100 longest-active sessions finish, so the room stays
    // at capacity with 8,000 active and the tick lets exactly 100 in.
    let inside: std::cell::RefCell<std::collections::VecDeque<String>> = (0..8_000)
        .map(sid)
        .collect::<std::collections::VecDeque<_>>()
        .into();
    g.bench_function("tick_admitting_100", |b| {
        b.iter_batched(
            || {
                rt.block_on(async {
                    for _ in 0..100 {
                        let s = inside.borrow_mut().pop_front().expect("active session");
                        room.finish(&s, 1).await.expect("finish");
                    }
                    // Long runs (`--measurement-time 5` and more) would empty the line: top it up, rarely and in
                    // one go, so the tick always has 100 to let in.
                    if room.snapshot().waiting() < 10_000 {
                        for _ in 0..100_000 {
                            next += 1;
                            room.join(&sid(next), None).await.expect("join");
                        }
                    }
                })
            },
            |()| {
                let r = rt.block_on(room.tick_now()).expect("tick");
                assert_eq!(r.admitted.len(), 100);
                inside.borrow_mut().extend(r.admitted);
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, core);

fn main() {
    if let Ok(case) = std::env::var(MEMORY_CASE) {
        measure_memory(&case);
        return;
    }
    memory_per_session();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
