//! The durable `MemoryStore` killed with SIGKILL in the middle of a burst of joins, twice, and opened again on the
//! same directory each time.
//!
//! The store runs in a child process (this test binary started again on its ignored child test), which joins as
//! fast as it can and prints every number it hands out the moment the join returns: what a room would put in that
//! person's signed session cookie. The parent kills it once thousands have joined and checks, with the data file
//! taken back: no number was ever given to two people (across both crashes and the newcomers after them); every
//! person printed is either in line at their own number, or was lost in the last commit interval, and then their
//! number is a hole nobody else holds (and a room can put them back there from their cookie); what was lost is
//! the tail of the burst (each commit is one instant); the line is let in in number order.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use waitroom_layer::MemoryStore;
use waitroom_layer::store::{Join, Reclaim, SessionState, Settings, Store, Tick};

const EVENT: &str = "crash";
const CHILD_DIR: &str = "WAITROOM_CRASH_CHILD_DIR";
const CHILD_TAG: &str = "WAITROOM_CRASH_CHILD_TAG";
/// Joins the parent waits for before it kills the child.
const KILL_AFTER: usize = 20_000;
/// The most the parent waits for them (a debug build on a shared machine joins thousands a second).
const CHILD_DEADLINE: Duration = Duration::from_secs(120);

fn settings() -> Settings {
    Settings {
        capacity: 1_000_000,
        admit_per_minute: None,
        paused: true,
        closed: false,
        opens_at_ms: None,
        random_draw: false,
        inventory: None,
        prequeue_opens_at_ms: None,
        closes_at_ms: None,
    }
}

fn join(session: String, now_ms: u64) -> Join {
    Join {
        session,
        account: None,
        now_ms,
        draw_key: 0,
    }
}

/// The child: opens the store in `$WAITROOM_CRASH_CHILD_DIR` and joins until it is killed, printing
/// `joined <session> <number>` after each join returns.
#[test]
#[ignore = "the child process of the crash test; does nothing on its own"]
fn crash_child_joins_until_killed() {
    let (Ok(dir), Ok(tag)) = (std::env::var(CHILD_DIR), std::env::var(CHILD_TAG)) else {
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = MemoryStore::open(&dir).unwrap();
        store.init(EVENT, &settings()).await.unwrap();
        let mut out = std::io::stdout().lock();
        // Bounded, in case the parent died without killing it.
        for i in 0..2_000_000u64 {
            let sid = format!("{tag}-{i:08}");
            let p = store
                .join(EVENT, &join(sid.clone(), 1_000 + i))
                .await
                .unwrap();
            let n = p.number.expect("a FIFO join has a number");
            writeln!(out, "joined {sid} {n}").unwrap();
            out.flush().unwrap();
        }
    });
}

/// Runs the child on `dir`, kills it (SIGKILL) after `KILL_AFTER` joins, and returns every join it printed.
fn burst_until_killed(dir: &Path, tag: &str) -> Vec<(String, u64)> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "crash_child_joins_until_killed",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir)
        .env(CHILD_TAG, tag)
        .stdout(Stdio::piped())
        .stderr(Stdio::from(
            std::fs::File::create(dir.with_extension(format!("{tag}.stderr"))).unwrap(),
        ))
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // (libtest's "test ... " starts the first line)
            if let Some((_, rest)) = line.split_once("joined ") {
                let (sid, n) = rest.split_once(' ').unwrap();
                if tx
                    .send((sid.to_owned(), n.parse::<u64>().unwrap()))
                    .is_err()
                {
                    break;
                }
            }
        }
    });
    let deadline = Instant::now() + CHILD_DEADLINE;
    let mut joined = Vec::new();
    while joined.len() < KILL_AFTER {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(j) => joined.push(j),
            Err(e) => {
                let _ = child.kill();
                let stderr = std::fs::read_to_string(dir.with_extension(format!("{tag}.stderr")))
                    .unwrap_or_default();
                panic!(
                    "the child printed {} joins within {CHILD_DEADLINE:?}, not {KILL_AFTER}: {e}; its stderr:\n{stderr}",
                    joined.len()
                );
            }
        }
    }
    // Mid-burst: the child is still joining.
    child.kill().unwrap();
    child.wait().unwrap();
    // Whatever it printed before it died reached someone's cookie too.
    reader.join().unwrap();
    joined.extend(rx.try_iter());
    let _ = std::fs::remove_file(dir.with_extension(format!("{tag}.stderr")));
    joined
}

fn temp_dir() -> PathBuf {
    std::env::temp_dir().join(format!(
        "waitroom-crash-{}-{}",
        std::process::id(),
        waitroom_layer::WaitingRoom::new_session_id()
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_joins_killed_twice_gives_no_number_twice_and_loses_nobody_with_a_number() {
    let dir = temp_dir();
    // Every number ever handed out (printed, so in somebody's cookie), across both runs and the newcomers.
    let mut holder: BTreeMap<u64, String> = BTreeMap::new();
    let mut printed_total = Vec::new();
    let mut lost_total = 0usize;
    for round in ["first", "second"] {
        let joined = {
            let dir = dir.clone();
            let tag = round.to_owned();
            tokio::task::spawn_blocking(move || burst_until_killed(&dir, &tag))
                .await
                .unwrap()
        };
        for (sid, n) in &joined {
            let before = holder.insert(*n, sid.clone());
            assert!(
                before.is_none(),
                "number {n} given to {before:?} and to {sid}"
            );
        }
        let store = MemoryStore::open(&dir).expect("the data directory opens after a crash");
        let snap = store.snapshot(EVENT).await.unwrap();
        // Each printed join: in line at its own number, or lost in the last commit interval.
        let mut lost = Vec::new();
        let mut kept_max = 0;
        for (sid, n) in &joined {
            match store.lookup(EVENT, sid).await.unwrap() {
                Some(p) => {
                    assert_eq!(p.number, Some(*n), "{sid} kept its number");
                    assert_eq!(p.state, SessionState::Waiting);
                    kept_max = kept_max.max(*n);
                }
                None => lost.push(*n),
            }
        }
        // A commit is one instant: what was lost is the tail of the burst, and its numbers stay reserved (nobody
        // new gets one of them).
        assert!(
            lost.iter().all(|&n| n > kept_max),
            "lost joins {lost:?} are not the tail after {kept_max}"
        );
        assert!(
            joined.iter().all(|(_, n)| *n <= snap.last_number),
            "every number handed out is below the next one ({})",
            snap.last_number
        );
        // The store knows it lost writes: the numbers up to its mark are open to their owners, who come back
        // with their signed cookies and are taken back at their own numbers (`Store::reclaim`).
        assert_eq!(
            snap.reclaim_upto,
            Some(snap.last_number),
            "after a crash the room takes people back from their cookies"
        );
        for (sid, n) in &joined {
            if lost.contains(n) {
                let back = store
                    .reclaim(
                        EVENT,
                        &Reclaim {
                            session: sid.clone(),
                            number: Some(*n),
                            now_ms: 1_000,
                            draw_key: 0,
                        },
                    )
                    .await
                    .unwrap()
                    .unwrap_or_else(|| panic!("{sid} lost in the crash is taken back at {n}"));
                assert_eq!((back.state, back.number), (SessionState::Waiting, Some(*n)));
            }
        }
        eprintln!(
            "{round} crash: {} joins printed, {} kept, {} lost in the last commit interval and taken back from their cookies",
            joined.len(),
            joined.len() - lost.len(),
            lost.len()
        );
        lost_total += lost.len();
        printed_total.extend(joined);
        drop(store);
    }
    // A number past the reserve is handed out only after a commit has reached the disk: a burst of thousands
    // cannot lose every join (how many it loses depends on the disk's speed, so no bound on that).
    assert!(lost_total < printed_total.len(), "commits reached the disk");

    // After both crashes: newcomers queue behind every number ever handed out, and the line goes in in order.
    let store = MemoryStore::open(&dir).unwrap();
    let highest = *holder.keys().next_back().unwrap();
    for i in 0..100u64 {
        let sid = format!("newcomer-{i:04}");
        let p = store
            .join(EVENT, &join(sid.clone(), 10_000_000))
            .await
            .unwrap();
        let n = p.number.unwrap();
        assert!(n > highest, "newcomer {sid} got {n}, at or below {highest}");
        assert!(holder.insert(n, sid).is_none());
    }
    store
        .update(EVENT, &waitroom_layer::store::SettingsChange::Resume)
        .await
        .unwrap();
    let mut admitted_numbers: HashMap<String, u64> = HashMap::new();
    let mut order = Vec::new();
    let mut now = 20_000_000;
    loop {
        now += 1;
        let tick = Tick {
            now_ms: now,
            arrival_window_ms: 60_000,
            abandon_after_ms: 60_000,
            return_window_ms: 600_000,
            max_scan: 5_000,
        };
        let report = store.tick(EVENT, &tick).await.unwrap();
        for s in &report.admitted {
            let n = store
                .lookup(EVENT, s)
                .await
                .unwrap()
                .unwrap()
                .number
                .unwrap();
            if let Some(h) = holder.get(&n) {
                assert_eq!(
                    h, s,
                    "number {n} was handed to {h}, the store let in {s} with it"
                );
            }
            admitted_numbers.insert(s.clone(), n);
            order.push(n);
        }
        assert!(
            report.missed.is_empty() && report.abandoned.is_empty(),
            "a restart counts everyone as seen"
        );
        let snap = store.snapshot(EVENT).await.unwrap();
        if snap.waiting() == 0 {
            break;
        }
        assert!(
            now < 20_000_000 + 10_000,
            "the line never drained: {snap:?}"
        );
    }
    assert!(order.is_sorted(), "let in in number order");
    for i in 0..100u64 {
        assert!(admitted_numbers.contains_key(&format!("newcomer-{i:04}")));
    }
    drop(store);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A data file that is not one (overwritten, truncated to garbage) is refused with an error naming it; the
/// directory is left as it was.
#[tokio::test]
async fn a_corrupt_data_file_is_refused_with_its_name() {
    let dir = temp_dir();
    {
        let store = MemoryStore::open(&dir).unwrap();
        store.init(EVENT, &settings()).await.unwrap();
        store.join(EVENT, &join("someone".into(), 1)).await.unwrap();
    }
    let file = dir.join(waitroom_layer::store::DATA_FILE);
    let len = std::fs::metadata(&file).unwrap().len() as usize;
    std::fs::write(&file, vec![0x5a; len]).unwrap();
    let err = MemoryStore::open(&dir).unwrap_err().to_string();
    assert!(err.contains(&file.display().to_string()), "{err}");
    assert_eq!(
        std::fs::metadata(&file).unwrap().len() as usize,
        len,
        "left as it was"
    );
    // A second store on a directory in use is refused too (one process at a time).
    std::fs::remove_file(&file).unwrap();
    let first = MemoryStore::open(&dir).unwrap();
    let err = MemoryStore::open(&dir).unwrap_err().to_string();
    assert!(err.contains("already open"), "{err}");
    drop(first);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A room built on a data directory: after a restart its line, its signing key (same `kid`, same JWKS) and its
/// passes are the same; the key files are its owner's only; and a rotation (a new key given, the file's published)
/// keeps the passes signed before it.
#[tokio::test]
async fn a_room_on_a_data_directory_keeps_its_line_keys_and_passes_and_rotates() {
    use std::sync::Arc;
    use waitroom_layer::{ManualClock, SigningKey, WaitingRoom};

    let dir = temp_dir();
    let clock = ManualClock::starting_now();
    let builder = || {
        WaitingRoom::builder("keys")
            .clock(Arc::new(clock.clone()))
            .background(false)
            .data_dir(dir.clone())
    };
    let room = builder().build().await.unwrap();
    let placed = room.join("session-one", None).await.unwrap();
    room.join("session-two", None).await.unwrap();
    let token = room.issue_token("session-one").unwrap();
    let jwks = room.jwks_json();
    drop(room);

    let room = builder().build().await.unwrap();
    assert_eq!(room.jwks_json(), jwks, "the same key after a restart");
    room.verifier()
        .verify(&token)
        .expect("a pass from before the restart");
    let again = room.store().lookup("keys", "session-one").await.unwrap();
    assert_eq!(again.as_ref().and_then(|p| p.number), placed.number);
    #[cfg(unix)]
    for f in [
        waitroom_layer::SIGNING_KEY_FILE,
        waitroom_layer::COOKIE_SECRET_FILE,
        DATA_FILE_NAME,
    ] {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.join(f)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{f}");
    }
    drop(room);

    // Rotation: sign with a new key, publish the file's until its passes have expired.
    let old =
        waitroom_layer::load_or_create_signing_key(&dir.join(waitroom_layer::SIGNING_KEY_FILE))
            .unwrap();
    let new = SigningKey::generate_ed25519("room-2027").unwrap();
    let room = builder()
        .signing_key(new)
        .publish_key(old.verifying_key())
        .build()
        .await
        .unwrap();
    room.verifier()
        .verify(&token)
        .expect("a pass signed before the rotation");
    let fresh = room.issue_token("session-one").unwrap();
    room.verifier().verify(&fresh).unwrap();
    assert!(
        String::from_utf8_lossy(&room.jwks_json()).contains("room-2027"),
        "the new key is published"
    );
    drop(room);
    std::fs::remove_dir_all(&dir).unwrap();
}

const DATA_FILE_NAME: &str = waitroom_layer::store::DATA_FILE;
