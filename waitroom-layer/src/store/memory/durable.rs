//! The data file of a durable [`MemoryStore`](super::MemoryStore): what it holds, the background commit, and taking
//! the on-sales back at start.
//!
//! One redb database, [`DATA_FILE`], in the store's directory. Per on-sale: one row in the `meta` table (the
//! settings, the numbers, the counters, the reserved high-water mark, as JSON), and three tables of its own:
//! `sessions/<event>` (join sequence number to the session's record, so new joins append at the end of the tree),
//! `accounts/<event>` (account to session) and `finished/<event>` (the last finishes, for `finished_since`).
//! A commit writes the records changed since the last one, read from memory under the store's lock at one instant,
//! so the file always holds the state of every on-sale at the instant of its last commit.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redb::{Database, DatabaseError, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use super::{Event, FINISHED_LOG, Rec, Sid};
use crate::error::StoreError;
use crate::store::{Counters, SessionState, Settings};

/// The data file's name in the store's directory.
pub const DATA_FILE: &str = "line.redb";

/// How often the background thread commits what changed: the most a crash loses.
pub const COMMIT_INTERVAL: Duration = Duration::from_millis(100);

/// The fewest line numbers reserved ahead of the last one given out.
const MIN_RESERVE: u64 = 64;

/// How long a join waits for the data file to reserve numbers before it fails as an outage: long enough for an
/// `fsync` on a disk busy with other writers (seconds, seen on a loaded 2-core machine), short of a client's patience.
const RESERVE_WAIT: Duration = Duration::from_secs(30);

/// A commit slower than this is logged (the joins of a burst may be waiting for it).
const SLOW_COMMIT: Duration = Duration::from_secs(1);

/// The layout this code writes (in every on-sale's meta row).
const FORMAT: u32 = 1;

const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

fn sessions_table(event: &str) -> String {
    format!("sessions/{event}")
}

fn accounts_table(event: &str) -> String {
    format!("accounts/{event}")
}

fn finished_table(event: &str) -> String {
    format!("finished/{event}")
}

/// What changed in one on-sale since its last commit.
#[derive(Debug, Default)]
pub(super) struct Journal {
    /// Anything at all (the numbers, the settings, a record).
    pub(super) changed: bool,
    /// Sessions whose records changed.
    pub(super) sessions: HashSet<Sid>,
    /// The record keys written since the last commit: the draw key of a session that joined the pre-queue, the
    /// place in the returning queue (returns so far) of one that came back after missing its turn.
    pub(super) keys: HashMap<Sid, u64>,
    /// Accounts that took a session since the last commit.
    pub(super) accounts: Vec<(Box<str>, Sid)>,
    /// The keys of records forgotten (or replaced by a new join) since the last commit: deleted from the file.
    pub(super) removed: Vec<u32>,
    /// A join or draw is waiting for numbers up to this.
    pub(super) want: u64,
    /// The last number given out at the last commit.
    committed_numbers: u64,
    /// The finish sequence at the last commit.
    committed_finishes: u64,
}

/// One on-sale's row in the `meta` table.
#[derive(Debug, Serialize, Deserialize)]
struct Meta {
    format: u32,
    settings: Settings,
    scheduled_open_ms: Option<u64>,
    drawn: bool,
    last_number: u64,
    /// Numbers up to this may have been given out (the high-water mark).
    reserved: u64,
    served: u64,
    counters: Counters,
    recent_admits: Vec<(u64, u64)>,
    finished_seq: u64,
    /// Set by a restore (or a restart after a crash): numbers up to this may be held by sessions the store does
    /// not know, taken back from their cookies.
    #[serde(default)]
    reclaim_upto: Option<u64>,
    /// Nobody is let in before this (ms), after a restore.
    #[serde(default)]
    hold_until_ms: u64,
    /// A number the head passed is taken back until this (ms), after a restore or a crash.
    #[serde(default)]
    late_until_ms: u64,
    /// No later than the sessions the head passed while away and no tick's report named yet missed their turn
    /// (`None`: every one was named). A restart names every missed session from then on again.
    #[serde(default)]
    unreported_since: Option<u64>,
}

/// A session's record: state code, number, last seen (for a missed session: when it missed its turn), deadline
/// (admitted or active), key (the draw key in the pre-queue, the place in the returning queue), then the session
/// id.
const RECORD_HEAD: usize = 1 + 8 * 4;

fn encode(rec: &Rec, deadline: u64, draw_key: u64, sid: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(RECORD_HEAD + sid.len());
    out.push(rec.state.code());
    for n in [rec.number, rec.last_seen_ms, deadline, draw_key] {
        out.extend_from_slice(&n.to_le_bytes());
    }
    out.extend_from_slice(sid.as_bytes());
    out
}

struct Decoded<'a> {
    state: SessionState,
    number: u64,
    last_seen_ms: u64,
    deadline: u64,
    draw_key: u64,
    sid: &'a str,
}

fn decode(bytes: &[u8]) -> Option<Decoded<'_>> {
    if bytes.len() <= RECORD_HEAD {
        return None;
    }
    let n = |i: usize| u64::from_le_bytes(bytes[1 + 8 * i..9 + 8 * i].try_into().expect("8 bytes"));
    Some(Decoded {
        state: SessionState::from_code(bytes[0])?,
        number: n(0),
        last_seen_ms: n(1),
        deadline: n(2),
        draw_key: n(3),
        sid: std::str::from_utf8(&bytes[RECORD_HEAD..]).ok()?,
    })
}

fn corrupt(path: &Path, what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!(
        "{}: {what}; the store refuses to start on it rather than start an empty line (move the file away to \
         start a new sale)",
        path.display()
    ))
}

fn unavailable(path: &Path, what: impl std::fmt::Display) -> StoreError {
    StoreError::unavailable(format!("{}: {what}", path.display()))
}

/// Opens (or creates) the data file in `dir` and takes back every on-sale in it.
pub(super) fn open(dir: &Path) -> Result<(HashMap<String, Event>, Start), StoreError> {
    if !dir.is_dir() {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
            .create(dir)
            .map_err(|e| unavailable(dir, format_args!("cannot create the data directory: {e}")))?;
    }
    let path = dir.join(DATA_FILE);
    // A file that exists but cannot be read is an error of its own (redb would report it less clearly); a new one
    // is its owner's only (it holds session ids).
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    if let Err(e) = opts.open(&path) {
        return Err(unavailable(
            &path,
            format_args!("cannot open the data file: {e}"),
        ));
    }
    let db = Database::builder().create(&path).map_err(|e| match e {
        DatabaseError::DatabaseAlreadyOpen => unavailable(
            &path,
            "the data file is already open (another process, or another store in this one)",
        ),
        DatabaseError::Storage(redb::StorageError::Io(io))
            if io.kind() != std::io::ErrorKind::InvalidData =>
        {
            unavailable(&path, format_args!("cannot open the data file: {io}"))
        }
        other => corrupt(&path, format_args!("not a readable data file: {other}")),
    })?;
    let started = Instant::now();
    let events = load(&db, &path)?;
    for (name, ev) in &events {
        let in_line = ev.line.len() + ev.prequeue.len() + ev.returning.len() + ev.back.len();
        tracing::info!(
            file = %path.display(),
            event = %name,
            in_line,
            active = ev.active.len(),
            served = ev.served,
            last_number = ev.last_number,
            missed = ev.missed.len(),
            records = ev.sessions.len(),
            free_numbers = ev.last_number.saturating_sub(ev.served) - ev.line.len() as u64,
            reclaim_upto = ev.reclaim_upto,
            took_ms = started.elapsed().as_millis() as u64,
            "on-sale taken back from the data file"
        );
    }
    Ok((events, Start { db, path }))
}

fn load(db: &Database, path: &Path) -> Result<HashMap<String, Event>, StoreError> {
    let read_err = |e: &dyn std::fmt::Display| corrupt(path, format_args!("cannot read: {e}"));
    let txn = db.begin_read().map_err(|e| read_err(&e))?;
    let meta = match txn.open_table(META) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(HashMap::new()),
        Err(e) => return Err(read_err(&e)),
    };
    let mut events = HashMap::new();
    for row in meta.iter().map_err(|e| read_err(&e))? {
        let (name, bytes) = row.map_err(|e| read_err(&e))?;
        let name = name.value().to_owned();
        let m: Meta = serde_json::from_slice(bytes.value())
            .map_err(|e| corrupt(path, format_args!("on-sale `{name}`: {e}")))?;
        if m.format != FORMAT {
            return Err(corrupt(
                path,
                format_args!(
                    "on-sale `{name}` is in format {}, this build reads {FORMAT}",
                    m.format
                ),
            ));
        }
        let ev = load_event(&txn, path, &name, m)?;
        events.insert(name, ev);
    }
    Ok(events)
}

fn load_event(
    txn: &redb::ReadTransaction,
    path: &Path,
    name: &str,
    m: Meta,
) -> Result<Event, StoreError> {
    let bad =
        |what: &dyn std::fmt::Display| corrupt(path, format_args!("on-sale `{name}`: {what}"));
    let mut ev = Event::new(m.settings);
    ev.scheduled_open_ms = m.scheduled_open_ms;
    ev.drawn = m.drawn;
    ev.served = m.served;
    ev.counters = m.counters;
    ev.recent_admits = m.recent_admits.into_iter().collect();
    ev.finished_seq = m.finished_seq;
    ev.reclaim_upto = m.reclaim_upto;
    ev.hold_until_ms = m.hold_until_ms;
    ev.late_until_ms = m.late_until_ms;
    // Numbers up to the high-water mark may be in someone's cookie: nobody new gets one of them.
    ev.last_number = m.last_number.max(m.reserved);
    ev.reserved = ev.last_number;
    ev.seen_at_first_tick = true;
    if m.reserved > m.last_number {
        // Not closed cleanly (a clean close commits the exact count): joins of the lost moment may hold numbers
        // up to the mark. Their owners are taken back from their cookies (`Store::reclaim`), as after a restore.
        ev.reclaim_upto = Some(ev.reclaim_upto.unwrap_or(0).max(ev.last_number));
        ev.lost_writes = true;
    }

    // The records in join order; a session that joined again has a later record, which wins.
    let table_name = sessions_table(name);
    let mut extra: HashMap<Sid, (u64, u64)> = HashMap::new();
    let mut superseded = Vec::new();
    match txn.open_table(TableDefinition::<u64, &[u8]>::new(&table_name)) {
        Ok(table) => {
            for row in table.iter().map_err(|e| bad(&e))? {
                let (seq, bytes) = row.map_err(|e| bad(&e))?;
                let seq = seq.value() as u32;
                let d = decode(bytes.value())
                    .ok_or_else(|| bad(&format_args!("session record {seq} does not read")))?;
                let sid: Sid = Sid::from(d.sid);
                let rec = Rec {
                    state: d.state,
                    number: d.number,
                    last_seen_ms: d.last_seen_ms,
                    seq,
                };
                ev.next_seq = ev.next_seq.max(seq);
                extra.insert(sid.clone(), (d.deadline, d.draw_key));
                if let Some(old) = ev.sessions.insert(sid, rec) {
                    // Written by a version that kept the row of a session that ended and joined again.
                    superseded.push(old.seq);
                }
            }
        }
        Err(redb::TableError::TableDoesNotExist(_)) => {}
        Err(e) => return Err(bad(&e)),
    }
    let mut in_order: Vec<(&Sid, &Rec)> = ev.sessions.iter().collect();
    in_order.sort_unstable_by_key(|(_, r)| r.seq);
    let mut numbered: Vec<(u64, Sid)> = Vec::new();
    let mut returning: Vec<(u64, u32, Sid)> = Vec::new();
    let mut missed: Vec<(u64, u32, Sid)> = Vec::new();
    let mut back = BTreeMap::new();
    for (sid, r) in in_order {
        let (deadline, key) = extra[sid];
        match r.state {
            SessionState::Waiting if r.number > ev.served => numbered.push((r.number, sid.clone())),
            // Taken back after the head passed its number: let in ahead of the line.
            SessionState::Waiting if r.number > 0 => {
                back.insert(r.number, sid.clone());
            }
            SessionState::PreQueue => ev.prequeue.push((key, sid.clone())),
            SessionState::Admitted | SessionState::Active => {
                ev.active.insert(sid.clone(), deadline);
            }
            SessionState::Returning => returning.push((key, r.seq, sid.clone())),
            SessionState::Missed => missed.push((r.last_seen_ms, r.seq, sid.clone())),
            // Ended: forgotten a return window after the first tick (when it ended was not kept).
            _ => ev.ended.push_back((0, r.seq, sid.clone())),
        }
    }
    // The returning queue in the order they came back; the missed ones in the order they missed their turn.
    returning.sort_unstable();
    ev.returning = returning.into_iter().map(|(_, _, sid)| sid).collect();
    missed.sort_unstable();
    ev.missed = missed.into_iter().map(|(at, _, sid)| (at, sid)).collect();
    // The passed ones not yet named when the data was written: named by the next ticks (with, at worst, some named
    // before, whose names come twice).
    if let Some(since) = m.unreported_since {
        ev.unreported = ev
            .missed
            .iter()
            .filter(|(at, _)| *at >= since)
            .map(|(_, sid)| sid.clone())
            .collect();
        ev.unreported_floor = Some(since);
    }
    ev.back = back;
    numbered.sort_unstable();
    // The line: the numbers after the served ones that someone holds (the others are free: tickets not redeemed,
    // numbers given out in the last moments before a crash or reserved and never given out, numbers kept by a
    // restore for an owner not back yet).
    for (n, sid) in numbered {
        if n > ev.last_number {
            return Err(bad(&format_args!(
                "session number {n} is beyond the last number {}",
                ev.last_number
            )));
        }
        if !ev.line.insert(n, sid) {
            return Err(bad(&format_args!("two sessions hold number {n}")));
        }
    }

    let table_name = accounts_table(name);
    match txn.open_table(TableDefinition::<&str, &str>::new(&table_name)) {
        Ok(table) => {
            for row in table.iter().map_err(|e| bad(&e))? {
                let (account, sid) = row.map_err(|e| bad(&e))?;
                if let Some((key, _)) = ev.sessions.get_key_value(sid.value()) {
                    let key = key.clone();
                    ev.accounts.insert(account.value().into(), key);
                }
            }
        }
        Err(redb::TableError::TableDoesNotExist(_)) => {}
        Err(e) => return Err(bad(&e)),
    }

    let table_name = finished_table(name);
    match txn.open_table(TableDefinition::<u64, &[u8]>::new(&table_name)) {
        Ok(table) => {
            for row in table.iter().map_err(|e| bad(&e))? {
                let (seq, bytes) = row.map_err(|e| bad(&e))?;
                let b = bytes.value();
                let at = b
                    .get(..8)
                    .map(|a| u64::from_le_bytes(a.try_into().expect("8 bytes")));
                let sid = std::str::from_utf8(&b[b.len().min(8)..]).ok();
                let (Some(at), Some(sid)) = (at, sid) else {
                    return Err(bad(&format_args!(
                        "finish record {} does not read",
                        seq.value()
                    )));
                };
                ev.finished_log.push_back((seq.value(), at, Sid::from(sid)));
            }
        }
        Err(redb::TableError::TableDoesNotExist(_)) => {}
        Err(e) => return Err(bad(&e)),
    }
    while ev.finished_log.len() > FINISHED_LOG {
        ev.finished_log.pop_front();
    }
    ev.journal = Some(Box::new(Journal {
        changed: !superseded.is_empty(),
        committed_numbers: ev.last_number,
        committed_finishes: ev.finished_seq,
        removed: superseded,
        ..Journal::default()
    }));
    Ok(ev)
}

/// An opened data file, before its committer runs.
pub(super) struct Start {
    db: Database,
    path: PathBuf,
}

impl Start {
    /// Starts the background thread, and reserves numbers for the on-sales taken back before returning.
    pub(super) fn spawn(self, events: Arc<Mutex<HashMap<String, Event>>>) -> Committer {
        let ctl = Arc::new(Control::default());
        let (tx, rx) = tokio::sync::watch::channel(0u64);
        let path = self.path.clone();
        let thread = {
            let ctl = ctl.clone();
            std::thread::Builder::new()
                .name("waitroom-commit".into())
                .spawn(move || run(self, &events, &ctl, &tx))
                .expect("a thread for the store's commits")
        };
        let committer = Committer {
            ctl,
            commits: rx,
            thread: Mutex::new(Some(thread)),
            path,
        };
        if let Err(e) = committer.flush_now() {
            tracing::error!(error = %e, "the first commit failed; joins wait for the next");
        }
        committer
    }
}

#[derive(Debug, Default)]
struct Control {
    state: Mutex<Ctl>,
    cv: Condvar,
}

#[derive(Debug, Default)]
struct Ctl {
    wake: bool,
    stop: bool,
    started: u64,
    finished: u64,
    last_error: Option<String>,
    /// On-sales purged since the last commit: removed from the data file by the next one.
    forgotten: Vec<String>,
}

impl Control {
    fn lock(&self) -> MutexGuard<'_, Ctl> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The background commit of a durable store (one per data file; its last handle's drop commits one last time,
/// with no numbers reserved beyond those given out, and closes the file).
#[derive(Debug)]
pub(super) struct Committer {
    ctl: Arc<Control>,
    commits: tokio::sync::watch::Receiver<u64>,
    thread: Mutex<Option<JoinHandle<()>>>,
    path: PathBuf,
}

impl Committer {
    /// A receiver that sees the next commit finish.
    pub(super) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        let mut rx = self.commits.clone();
        rx.mark_unchanged();
        rx
    }

    fn wake(&self) {
        self.ctl.lock().wake = true;
        self.ctl.cv.notify_all();
    }

    /// Asks for a commit now and waits (asynchronously) until one has finished after `commits` was subscribed.
    pub(super) async fn wait_for_commit(
        &self,
        commits: &mut tokio::sync::watch::Receiver<u64>,
    ) -> Result<(), StoreError> {
        self.wake();
        match tokio::time::timeout(RESERVE_WAIT, commits.changed()).await {
            Ok(Ok(())) => match self.ctl.lock().last_error.clone() {
                Some(e) => Err(unavailable(
                    &self.path,
                    format_args!("the last commit failed: {e}"),
                )),
                None => Ok(()),
            },
            Ok(Err(_)) => Err(unavailable(
                &self.path,
                "the store's commit thread has stopped",
            )),
            Err(_) => Err(unavailable(
                &self.path,
                format_args!("no commit within {RESERVE_WAIT:?} to reserve line numbers"),
            )),
        }
    }

    /// Removes the on-sale `event` from the data file at the next commit (called under the store's lock, as the
    /// on-sale leaves memory).
    pub(super) fn forget(&self, event: &str) {
        self.ctl.lock().forgotten.push(event.to_owned());
        self.wake();
    }

    /// Commits now and waits until that commit is on disk.
    pub(super) fn flush_now(&self) -> Result<(), StoreError> {
        let mut ctl = self.ctl.lock();
        // A commit already running may have read memory before the caller's changes: wait for the next one.
        let target = ctl.started + 1;
        ctl.wake = true;
        self.ctl.cv.notify_all();
        while ctl.finished < target {
            if ctl.stop && ctl.finished == ctl.started {
                return Err(unavailable(&self.path, "the store is closing"));
            }
            ctl = self.ctl.cv.wait(ctl).unwrap_or_else(|p| p.into_inner());
        }
        match &ctl.last_error {
            Some(e) => Err(unavailable(&self.path, format_args!("commit failed: {e}"))),
            None => Ok(()),
        }
    }
}

impl Drop for Committer {
    fn drop(&mut self) {
        self.ctl.lock().stop = true;
        self.ctl.cv.notify_all();
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

fn run(
    start: Start,
    events: &Mutex<HashMap<String, Event>>,
    ctl: &Control,
    commits: &tokio::sync::watch::Sender<u64>,
) {
    let Start { db, path } = start;
    loop {
        let (generation, stop) = {
            let mut c = ctl.lock();
            if !c.wake && !c.stop {
                c = ctl
                    .cv
                    .wait_timeout(c, COMMIT_INTERVAL)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            c.wake = false;
            c.started += 1;
            (c.started, c.stop)
        };
        let (mut batches, forgotten) = {
            let mut events = events.lock().unwrap_or_else(|p| p.into_inner());
            let forgotten = std::mem::take(&mut ctl.lock().forgotten);
            (collect(&mut events, stop), forgotten)
        };
        let began = Instant::now();
        let result = if batches.is_empty() && forgotten.is_empty() {
            Ok(())
        } else {
            write(&db, &forgotten, &batches)
        };
        if began.elapsed() > SLOW_COMMIT {
            tracing::warn!(
                file = %path.display(),
                took_ms = began.elapsed().as_millis() as u64,
                "slow commit (the disk is busy); joins beyond the reserved numbers wait for it"
            );
        }
        if !batches.is_empty() || !forgotten.is_empty() {
            let mut events = events.lock().unwrap_or_else(|p| p.into_inner());
            settle(&mut events, &mut batches, result.is_ok());
            if result.is_err() {
                let mut c = ctl.lock();
                let later = std::mem::replace(&mut c.forgotten, forgotten);
                c.forgotten.extend(later);
            }
        }
        let error = result.err().map(|e| e.to_string());
        if let Some(e) = &error {
            tracing::error!(file = %path.display(), error = %e, "commit failed; retrying at the next interval");
        }
        {
            let mut c = ctl.lock();
            c.finished = generation;
            c.last_error = error;
        }
        ctl.cv.notify_all();
        commits.send_replace(generation);
        if stop {
            break;
        }
    }
    drop(db);
}

/// What one commit writes for one on-sale.
struct Batch {
    event: String,
    meta: Vec<u8>,
    reserved: u64,
    numbers: u64,
    finished_seq: u64,
    records: Vec<(u64, Vec<u8>)>,
    sessions: Vec<Sid>,
    keys: Vec<(Sid, u64)>,
    accounts: Vec<(Box<str>, Sid)>,
    removed: Vec<u32>,
    finishes: Vec<(u64, Vec<u8>)>,
    prune_below: u64,
}

/// Reads what changed, under the store's lock (one instant for every on-sale), and clears the journals.
fn collect(events: &mut HashMap<String, Event>, closing: bool) -> Vec<Batch> {
    let mut out = Vec::new();
    for (name, ev) in events.iter_mut() {
        let Some(mut j) = ev.journal.take() else {
            continue;
        };
        let issued = ev.last_number;
        let pace = issued - j.committed_numbers.min(issued);
        let ahead = MIN_RESERVE.max(pace.saturating_mul(2));
        let reserved = if closing {
            // Nothing more is given out: the exact count, and no gap at the next start.
            issued
        } else if ev.reserved < issued.saturating_add(ahead / 2) || j.want > ev.reserved {
            issued.max(j.want).saturating_add(ahead)
        } else {
            ev.reserved
        };
        if !j.changed && reserved == ev.reserved {
            ev.journal = Some(j);
            continue;
        }
        let mut records = Vec::with_capacity(j.sessions.len());
        let mut keys = Vec::new();
        let sessions: Vec<Sid> = j.sessions.drain().collect();
        for sid in &sessions {
            let Some(r) = ev.sessions.get(sid) else {
                continue;
            };
            let draw_key = match j.keys.remove(sid) {
                Some(k) => {
                    keys.push((sid.clone(), k));
                    k
                }
                None => 0,
            };
            let deadline = ev.active.get(sid).copied().unwrap_or(0);
            records.push((u64::from(r.seq), encode(r, deadline, draw_key, sid)));
        }
        let first_new = ev
            .finished_log
            .partition_point(|(seq, _, _)| *seq <= j.committed_finishes);
        let finishes: Vec<(u64, Vec<u8>)> = ev
            .finished_log
            .range(first_new..)
            .map(|(seq, at, sid)| {
                let mut b = at.to_le_bytes().to_vec();
                b.extend_from_slice(sid.as_bytes());
                (*seq, b)
            })
            .collect();
        let meta = Meta {
            format: FORMAT,
            settings: ev.settings.clone(),
            scheduled_open_ms: ev.scheduled_open_ms,
            drawn: ev.drawn,
            last_number: issued,
            reserved,
            served: ev.served,
            counters: ev.counters,
            recent_admits: ev.recent_admits.iter().copied().collect(),
            finished_seq: ev.finished_seq,
            reclaim_upto: ev.reclaim_upto,
            hold_until_ms: ev.hold_until_ms,
            late_until_ms: ev.late_until_ms,
            unreported_since: ev.unreported_floor,
        };
        out.push(Batch {
            event: name.clone(),
            meta: serde_json::to_vec(&meta).expect("the meta row serialises"),
            reserved,
            numbers: issued,
            finished_seq: ev.finished_seq,
            records,
            sessions,
            keys,
            accounts: std::mem::take(&mut j.accounts),
            removed: std::mem::take(&mut j.removed),
            prune_below: if finishes.is_empty() {
                0
            } else {
                ev.finished_seq.saturating_sub(FINISHED_LOG as u64)
            },
            finishes,
        });
        j.changed = false;
        j.want = 0;
        ev.journal = Some(j);
    }
    out
}

fn write(db: &Database, forgotten: &[String], batches: &[Batch]) -> Result<(), redb::Error> {
    let txn = db.begin_write()?;
    // Purged on-sales first: one purged and set up again since the last commit is written afresh below.
    for event in forgotten {
        txn.open_table(META)?.remove(event.as_str())?;
        txn.delete_table(TableDefinition::<u64, &[u8]>::new(&sessions_table(event)))?;
        txn.delete_table(TableDefinition::<&str, &str>::new(&accounts_table(event)))?;
        txn.delete_table(TableDefinition::<u64, &[u8]>::new(&finished_table(event)))?;
    }
    {
        let mut meta = txn.open_table(META)?;
        for b in batches {
            meta.insert(b.event.as_str(), b.meta.as_slice())?;
            let name = sessions_table(&b.event);
            let mut t = txn.open_table(TableDefinition::<u64, &[u8]>::new(&name))?;
            // Forgotten records first: a key given out again after the count wrapped is written afresh below.
            for seq in &b.removed {
                t.remove(u64::from(*seq))?;
            }
            for (seq, bytes) in &b.records {
                t.insert(seq, bytes.as_slice())?;
            }
            if !b.accounts.is_empty() {
                let name = accounts_table(&b.event);
                let mut t = txn.open_table(TableDefinition::<&str, &str>::new(&name))?;
                for (account, sid) in &b.accounts {
                    t.insert(&**account, &**sid)?;
                }
            }
            if !b.finishes.is_empty() {
                let name = finished_table(&b.event);
                let mut t = txn.open_table(TableDefinition::<u64, &[u8]>::new(&name))?;
                for (seq, bytes) in &b.finishes {
                    t.insert(seq, bytes.as_slice())?;
                }
                if b.prune_below > 0 {
                    t.retain_in(..b.prune_below, |_, _| false)?;
                }
            }
        }
    }
    txn.commit()?;
    Ok(())
}

/// After a commit: on success the reserve grows to what is now on disk; on failure, what the batch held is marked
/// changed again for the next try.
fn settle(events: &mut HashMap<String, Event>, batches: &mut [Batch], ok: bool) {
    for b in batches {
        let Some(ev) = events.get_mut(&b.event) else {
            continue;
        };
        let reserved = &mut ev.reserved;
        let Some(j) = ev.journal.as_mut() else {
            continue;
        };
        if ok {
            *reserved = (*reserved).max(b.reserved);
            j.committed_numbers = b.numbers;
            j.committed_finishes = b.finished_seq;
            tracing::debug!(
                event = %b.event,
                last_number = b.numbers,
                reserved = b.reserved,
                records = b.records.len(),
                "committed"
            );
        } else {
            j.changed = true;
            j.sessions.extend(b.sessions.drain(..));
            j.keys.extend(b.keys.drain(..));
            j.accounts.append(&mut b.accounts);
            j.removed.append(&mut b.removed);
        }
    }
}
