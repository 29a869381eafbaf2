//! The durable embedded store's figures: joins per second into the store, in memory only and durable (the same
//! run); bytes on disk per waiting session; how long 600,000 in line take to be read back at start.
//!
//! `cargo bench -p waitroom-layer --bench durable` (a plain program, not criterion: each figure is one timed pass
//! over 600,000 joins; about 20 s on a 2-core machine).

use std::time::{Duration, Instant};

use waitroom_layer::store::{DATA_FILE, Join, Settings, Store};
use waitroom_layer::{MemoryStore, WaitingRoom};

const IN_LINE: u64 = 600_000;
const EVENT: &str = "bench";

fn sid(i: u64) -> String {
    // The shape of a real session id: 22 base64url characters.
    format!("{i:0>22}")
}

fn settings() -> Settings {
    Settings {
        capacity: 8_000,
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

/// Joins `IN_LINE` sessions from 8 tasks at once; returns the time taken.
async fn fill(store: &MemoryStore) -> Duration {
    store.init(EVENT, &settings()).await.unwrap();
    let t = Instant::now();
    let tasks: Vec<_> = (0..8u64)
        .map(|k| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in (k..IN_LINE).step_by(8) {
                    let join = Join {
                        session: sid(i),
                        account: None,
                        now_ms: 1_000 + i,
                        draw_key: 0,
                    };
                    store.join(EVENT, &join).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    t.elapsed()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = std::env::temp_dir().join(format!(
            "waitroom-bench-durable-{}",
            WaitingRoom::new_session_id()
        ));
        let memory = fill(&MemoryStore::new()).await;
        let durable_store = MemoryStore::open(&dir).unwrap();
        let durable = fill(&durable_store).await;
        let flush = Instant::now();
        durable_store.flush().unwrap();
        let flush = flush.elapsed();
        drop(durable_store);
        let bytes = std::fs::metadata(dir.join(DATA_FILE)).unwrap().len();
        let open = Instant::now();
        let back = MemoryStore::open(&dir).unwrap();
        let recovery = open.elapsed();
        let snap = back.snapshot(EVENT).await.unwrap();
        assert_eq!(snap.waiting(), IN_LINE);
        drop(back);
        std::fs::remove_dir_all(&dir).unwrap();
        let rate = |d: Duration| IN_LINE as f64 / d.as_secs_f64();
        println!("# durable store, {IN_LINE} joins from 8 tasks on 2 worker threads");
        println!(
            "joins/s into the store: memory only {:.0}, durable {:.0} ({:.0}% of memory only); last flush {} ms",
            rate(memory),
            rate(durable),
            100.0 * rate(durable) / rate(memory),
            flush.as_millis()
        );
        println!(
            "data file: {bytes} bytes, {:.1} bytes per waiting session",
            bytes as f64 / IN_LINE as f64
        );
        println!(
            "recovery of {IN_LINE} in line (open, read, rebuild the line): {} ms",
            recovery.as_millis()
        );
    });
}
