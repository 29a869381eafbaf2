//! The embedded store: one process, zero set-up, the default; durable in a directory with [`MemoryStore::open`].

mod durable;
mod line;
mod sessions;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use line::Line;
use sessions::{Sessions, Sid};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use super::{
    AUDIT_KEEP, AuditEntry, Counters, Join, MAX_MOVED, MAX_RECLAIM_GAP, Placement, Reclaim, Redeem,
    Restore, Return, SessionDetail, SessionState, Settings, SettingsChange, Snapshot, Store,
    TURN_AWAY_PER_TICK, Tick, TickReport, Ticket, Touches,
};
use crate::error::StoreError;

/// The embedded in-process store: every on-sale's line in this process's memory, behind one mutex.
///
/// About 110 bytes per waiting session (see BENCHMARKS.md). Cheap to clone; clones share the data.
///
/// # Growth without stalls, and what it keeps
///
/// The session records are spread over 128 hash maps of unequal shares, which double one after another as the
/// line grows: no join waits for the whole line to be rehashed (the longest join measured 1.6 ms at 2.5 million
/// sessions, against 490 ms with one map). Session ids are kept inline (the room's 22-character ids in 24 bytes,
/// no allocation of their own).
///
/// Sessions that ended (finished, expired, turned away, abandoned) are forgotten a return window after they ended
/// ([`Tick::return_window_ms`], and at least [`Tick::abandon_after_ms`]), a tick at a time (at most
/// [`Tick::max_scan`] each), and their rows leave the data file at the next commit: the store holds the live line
/// plus the last return window's ended sessions, not every session that ever came. A forgotten session that comes
/// back is one the store does not know: [`lookup`](Store::lookup) says `None`, and the room gives it a new place at
/// the back (a finished one's admission token stays refused by the verifiers' deny list). The counters keep what the
/// records no longer do.
///
/// # Tickets and the live line
///
/// A ticket ([`Store::ticket`]) is one add to the on-sale's number counter under the lock: nothing else is
/// written, so a one-shot request costs no memory here. The line keeps only the numbers someone holds (a B-tree,
/// beside a sparse bitmap of them, one 64-bit word per 64 numbers where someone waits): the head passes numbers
/// nobody holds in one step, without using [`Tick::max_scan`], and snapshots carry the bitmap
/// ([`Snapshot::live`]) so positions count only people. Reading it costs 24 bytes per word with someone in it,
/// copied at each snapshot (a few times a second per room).
///
/// People away at the head cost the door none of [`Tick::max_scan`] either: each is one record read and written
/// missed, up to 16,384 a call beside the budget, and the next calls name them in their reports out of what is
/// left of it. Behind 900,000 who went quiet that is 55 calls, within the 313 one tick makes at most at the
/// defaults, where the budget alone took 45 ticks (900,000 / 20,000; both by the arithmetic, not measured;
/// `store_contract` `people_away_in_a_row_cost_the_door_none_of_its_budget` checks the rule: behind 2,000, calls
/// of 3).
///
/// [`MemoryStore::new`] keeps nothing: a restart of the process starts an empty line. [`MemoryStore::open`] keeps
/// the line in a directory and takes it back after a restart, a crash included; see [Durability](#durability).
///
/// # Durability
///
/// A store opened with [`MemoryStore::open`] (or a room built with
/// [`RoomBuilder::data_dir`](crate::RoomBuilder::data_dir)) keeps every on-sale in the file `line.redb` in its
/// directory, a [redb](https://docs.rs/redb) database (ACID, copy-on-write B-trees, crash-safe without a repair
/// step of ours). Memory stays the source of truth for every answer: the status poll never reaches the disk and a
/// join waits for no write. A background thread commits what changed every [`COMMIT_INTERVAL`] (100 ms) in one
/// transaction (group commit, one `fsync`); each commit is the state of every on-sale at one instant.
///
/// - **What a crash loses**: what changed since the last commit that reached the disk: at most one commit
///   interval (100 ms) plus the commit in flight, whose `fsync` takes milliseconds on an idle disk and was seen
///   at a few hundred on a busy shared one (like Redis's `appendfsync everysec`, which loses up to a second).
///   `tests/durable_crash.rs` kills a burst of 20,000 joins (as fast as one core joins, a debug build, a loaded
///   machine) and lost the last 3,400 to 3,800. After a restart the line is what it was at the last commit:
///   people who joined in the lost moment are not in it, and a claim, a finish or a settings change made in it
///   is undone. Those who joined
///   carry their line number in their signed session cookie; their numbers are never given to anyone else (see
///   below), and the store taken back after a crash says so ([`Snapshot::reclaim_upto`] up to its mark, as after
///   a [restore](Store::restore)): the room sends each of them to [`Store::reclaim`] at their next poll, which
///   puts them back at their own number (`tests/durable_crash.rs` takes back every join a crash lost). One whose
///   number the head passed first is taken back ahead of the line within the abandon grace after the first tick.
///   A finish made in the lost interval is undone: the session counts as active again (and its pass opens
///   again) until its idle deadline.
/// - **What is kept**: the settings, the numbers and every counter (the returns included); each session's state
///   and number (missed and returning ones too, with when they missed their turn, so the return window runs on
///   across a restart); the returning queue's order; those taken back after the head passed them; a restore's
///   number floor, hold and late window; the accounts; the last finishes; the active sessions' deadlines.
/// - **Line numbers stay unique across a crash**: before it hands out a number, the store has committed a
///   high-water mark beyond it (numbers are reserved ahead in blocks of at least 64, twice the last interval's
///   joins). After a crash, the next number is above the mark, so nobody ever shares a number with a cookie from
///   before the crash. The numbers reserved but unused are empty places at the back of the recovered line, skipped
///   by the next ticks. A clean shutdown (the last handle dropped) commits the exact count and leaves no gap.
/// - **Liveness marks** (the polls of people in line, or in the returning queue) are not written: after a restart,
///   everyone in line counts as seen at the first tick, so nobody misses their turn for the time the process was
///   down (someone who really left is missed a grace later).
/// - **A disk that fails** (full, read-only): the store keeps serving from memory and retries every interval;
///   once the reserved numbers run out, a join waits up to 30 s for a commit and then fails with
///   [`StoreError::Unavailable`] (the room holds newcomers, as in any store outage) until a commit succeeds again.
///   A slow disk (an `fsync` of seconds under other writers) only slows the joins of a burst that outruns the
///   reserve; a commit slower than a second is logged.
/// - **A corrupt or unreadable file** is refused at [`open`](MemoryStore::open) with an error naming it, never
///   replaced by an empty line.
///
/// About 120 bytes on disk per waiting session; 600,000 in line were read back in 5.4 s on a loaded 2-core machine;
/// joins over HTTP within the noise of the memory-only store (see BENCHMARKS.md).
#[derive(Debug, Default, Clone)]
pub struct MemoryStore {
    events: Arc<Mutex<HashMap<String, Event>>>,
    durable: Option<Arc<durable::Committer>>,
}

pub use durable::{COMMIT_INTERVAL, DATA_FILE};

impl MemoryStore {
    /// An empty store that keeps nothing on disk.
    pub fn new() -> Self {
        Self::default()
    }

    /// The store kept in the directory `dir` (created, mode 0700, if missing): every on-sale found in its data
    /// file ([`DATA_FILE`]) is taken back, and logged in one line each (people in line, active, served); changes
    /// are committed every [`COMMIT_INTERVAL`] by a background thread. See [Durability](#durability).
    ///
    /// One process at a time: a second `open` of the same directory, in this process or another, is refused.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] when the data file is not a database this store wrote, or a record in it does not
    /// read; [`StoreError::Unavailable`] when the directory or the file cannot be created, read or locked. Both
    /// name the file.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, StoreError> {
        let (events, committer) = durable::open(dir.as_ref())?;
        Ok(Self {
            events: Arc::new(Mutex::new(events)),
            durable: None,
        }
        .with_committer(committer))
    }

    fn with_committer(mut self, start: durable::Start) -> Self {
        self.durable = Some(Arc::new(start.spawn(self.events.clone())));
        self
    }

    /// Commits what changed now and waits for it to be on disk (a durable store; nothing to do otherwise). The
    /// background thread does this every [`COMMIT_INTERVAL`]; call it before a planned stop to lose nothing, or
    /// drop the last handle, which does the same.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the commit fails (the error names the file).
    pub fn flush(&self) -> Result<(), StoreError> {
        match &self.durable {
            Some(d) => d.flush_now(),
            None => Ok(()),
        }
    }

    /// Waits (off the lock) until the background commit has reserved line numbers, after `try_once` found too
    /// few: a join or a draw never hands out a number the data file has not reserved.
    async fn within_reserve<T>(
        &self,
        event: &str,
        mut try_once: impl FnMut(&mut Event) -> Option<T>,
    ) -> Result<T, StoreError> {
        let Some(d) = &self.durable else {
            return self.with_event(event, |ev| {
                try_once(ev).expect("no reserve without a data file")
            });
        };
        loop {
            let mut commits = d.subscribe();
            if let Some(out) = self.with_event(event, &mut try_once)? {
                return Ok(out);
            }
            d.wait_for_commit(&mut commits).await?;
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Event>> {
        // A panic while holding the lock cannot leave an event half-updated in a way later calls misread (every
        // step below completes before it returns), so a poisoned lock is taken over rather than spread.
        self.events.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets the on-sale `event`, as a store that lost its data would (and to free its memory once it is
    /// over). Returns whether it was known. A room still running it restores it ([`Store::restore`]).
    /// On a durable store the on-sale leaves the data file too, at the next commit.
    pub fn purge(&self, event: &str) -> bool {
        let mut events = self.lock();
        let known = events.remove(event).is_some();
        if known && let Some(d) = &self.durable {
            // Under the store's lock, so the commit that deletes it sees the on-sale gone at the same instant.
            d.forget(event);
        }
        known
    }

    fn with_event<T>(&self, event: &str, f: impl FnOnce(&mut Event) -> T) -> Result<T, StoreError> {
        let mut events = self.lock();
        match events.get_mut(event) {
            Some(ev) => Ok(f(ev)),
            None => Err(StoreError::Forgotten(format!(
                "on-sale `{event}` was not initialised"
            ))),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Rec {
    /// 0 while it has no number.
    number: u64,
    /// When it was last seen (waiting, returning); when it was let in (admitted, active: for [`Store::inspect`]);
    /// when its turn passed ([`SessionState::Missed`]); for [`SessionState::Abandoned`], [`LATE_TOLD`] once a late
    /// return was counted, else 0.
    last_seen_ms: u64,
    /// This record's place in the on-sale's order of joins (and reclaims): its key in the data file, so a commit
    /// appends at the end of the file's tree instead of writing all over it. 32 bits keep the record at 24 bytes;
    /// the count wraps after 4.3 billion records, when the records of that key's time have long been forgotten
    /// (see [`Event::forget_ended`]).
    seq: u32,
    state: SessionState,
}

/// The time field of an abandoned session whose late return was counted (in both stores' records).
const LATE_TOLD: u64 = 1;

#[derive(Debug)]
struct Event {
    settings: Settings,
    /// The opening as first configured (an "open now" moves `settings.opens_at_ms`, not this).
    scheduled_open_ms: Option<u64>,
    drawn: bool,
    sessions: Sessions,
    accounts: HashMap<Box<str>, Sid>,
    prequeue: Vec<(u64, Sid)>,
    /// Sessions waiting with a number after `served`, by number, counted. A number in `served + 1 ..=
    /// last_number` nobody holds is free: a ticket not redeemed (yet), a number kept for an owner the store forgot
    /// (see [`Store::reclaim`]), the old place of a session moved to the front. The head passes free numbers at no
    /// cost.
    line: Line,
    /// Sessions that came back after missing their turn, served ahead of `line`, in the order they came back.
    returning: VecDeque<Sid>,
    /// Sessions let in from `returning` that have not claimed their pass yet: one that does not come within the
    /// arrival window expires (a lapsed admission keeps its turn once; see `tick`). Not kept across a restart.
    again: HashSet<Sid>,
    /// Sessions that missed their turn, with when, in the order they missed it (entries of sessions that came back
    /// since, or missed again later, are passed over when they reach the front).
    missed: VecDeque<(u64, Sid)>,
    /// Sessions taken back after the head passed their number, by number: let in ahead of the line.
    back: BTreeMap<u64, Sid>,
    /// Sessions the head passed while away without using the tick's budget (they are missed already), not yet
    /// named in a [`TickReport`]: the next calls name them out of what is left of their budget
    /// ([`Event::report_passed`]). The data file keeps `unreported_floor` (`Meta::unreported_since`): after a
    /// restart, every missed session from then on is named again, so a name is reported twice at worst, never lost.
    unreported: VecDeque<Sid>,
    /// The earliest time one of `unreported` missed their turn since it was last empty (a clock stepped back leaves
    /// later ones with earlier times: the floor covers them too, at the cost of naming a few twice after a restart).
    unreported_floor: Option<u64>,
    /// Set by a restore: the last number given out before the loss.
    reclaim_upto: Option<u64>,
    /// Nobody is let in before this (ms), after a restore.
    hold_until_ms: u64,
    /// A passed number is taken back until this (ms), after a restore.
    late_until_ms: u64,
    last_number: u64,
    served: u64,
    /// Admitted and active sessions with their deadlines (kept apart from `sessions` so the expiry scan touches
    /// only these few thousand entries).
    active: HashMap<Sid, u64>,
    /// (second, admissions in that second) over the last minute.
    recent_admits: VecDeque<(u64, u64)>,
    counters: Counters,
    /// (sequence, when on the room's clock, session) of the last finishes, for [`Store::finished_since`].
    finished_log: VecDeque<(u64, u64, Sid)>,
    finished_seq: u64,
    /// The last [`AUDIT_KEEP`] admin actions, oldest first.
    audit: VecDeque<AuditEntry>,
    /// Sessions moved to the front, let in before the line.
    front: VecDeque<Sid>,
    /// (old number, session) of sessions moved to the front whose old number the head has not passed.
    moved: Vec<(u64, Sid)>,
    /// Line numbers up to this may be handed out: the high-water mark the data file holds (`u64::MAX` without
    /// one).
    reserved: u64,
    /// Taken back from a data file: the first tick counts everyone in line as seen (their marks were not kept).
    seen_at_first_tick: bool,
    /// Everyone in line counts as seen at this time (set by the first tick after a restart).
    seen_floor_ms: u64,
    /// The last record key given out ([`Rec::seq`]).
    next_seq: u32,
    /// Sessions that ended (finished, expired, turned away, abandoned), with when and their record's key, in the
    /// order they ended: forgotten a return window later ([`Event::forget_ended`]).
    ended: VecDeque<(u64, u32, Sid)>,
    /// Taken back after a crash, with numbers kept free for owners whose joins were lost: the first tick opens
    /// the late window ([`late_until_ms`](Self::late_until_ms)) for those the head passes before they come back.
    lost_writes: bool,
    /// What changed since the last commit, with a data file.
    journal: Option<Box<durable::Journal>>,
}

/// The most people away one tick call of the embedded store passes at the head of the line, beside its budget
/// ([`Tick::max_scan`]), which they do not use (each is a record read and written under the lock), so a call's
/// work stays bounded, and a run of 900,000 people who went quiet is crossed in one tick of a few dozen calls.
const ABSENT_PER_CALL: u64 = 16_384;

/// How many finishes the memory store remembers for [`Store::finished_since`].
const FINISHED_LOG: usize = 100_000;

impl Event {
    fn new(settings: Settings) -> Self {
        let drawn = !settings.random_draw;
        Self {
            scheduled_open_ms: settings.opens_at_ms,
            settings,
            drawn,
            sessions: Sessions::default(),
            accounts: HashMap::new(),
            prequeue: Vec::new(),
            line: Line::default(),
            returning: VecDeque::new(),
            again: HashSet::new(),
            missed: VecDeque::new(),
            back: BTreeMap::new(),
            unreported: VecDeque::new(),
            unreported_floor: None,
            reclaim_upto: None,
            hold_until_ms: 0,
            late_until_ms: 0,
            last_number: 0,
            served: 0,
            active: HashMap::new(),
            recent_admits: VecDeque::new(),
            counters: Counters::default(),
            finished_log: VecDeque::new(),
            finished_seq: 0,
            audit: VecDeque::new(),
            front: VecDeque::new(),
            moved: Vec::new(),
            reserved: u64::MAX,
            seen_at_first_tick: false,
            seen_floor_ms: 0,
            next_seq: 0,
            ended: VecDeque::new(),
            lost_writes: false,
            journal: None,
        }
    }

    /// Notes a change to `sid`'s record (and to the on-sale's numbers) for the next commit.
    fn dirty(&mut self, sid: &Sid) {
        if let Some(j) = self.journal.as_mut() {
            j.changed = true;
            j.sessions.insert(sid.clone());
        }
    }

    /// Notes a change to the on-sale's numbers or settings for the next commit.
    fn changed(&mut self) {
        if let Some(j) = self.journal.as_mut() {
            j.changed = true;
        }
    }

    /// Writes a new record for `sid` (a join, a redemption, a reclaim) under the next record key. The record it
    /// replaces (a session that ended and joined again) leaves the data file at the next commit.
    fn put(&mut self, sid: &Sid, state: SessionState, number: u64, now_ms: u64) {
        self.next_seq = self.next_seq.wrapping_add(1);
        let rec = Rec {
            state,
            number,
            last_seen_ms: now_ms,
            seq: self.next_seq,
        };
        if let Some(old) = self.sessions.insert(sid.clone(), rec) {
            self.drop_row(old.seq);
        }
        self.dirty(sid);
    }

    /// Deletes the data file's record under `seq` at the next commit.
    fn drop_row(&mut self, seq: u32) {
        if let Some(j) = self.journal.as_mut() {
            j.changed = true;
            j.removed.push(seq);
        }
    }

    /// Counts a turn `sid` missed now (its record just turned [`SessionState::Missed`]) and queues it for the
    /// return window's end.
    fn note_missed(&mut self, sid: &Sid, now_ms: u64) {
        self.counters.missed += 1;
        self.missed.push_back((now_ms, sid.clone()));
    }

    /// Notes that `sid` ended now (its record is terminal): it is forgotten a return window later.
    fn note_ended(&mut self, sid: &Sid, now_ms: u64) {
        if let Some(r) = self.sessions.get(sid) {
            self.ended.push_back((now_ms, r.seq, sid.clone()));
        }
    }

    /// Forgets the sessions that ended a return window ago or more (and at least an abandon grace ago, so one told
    /// it ended can read it again at its next poll; at most `max_scan` a tick): nothing needs their
    /// records any more. A finished one's admission token is refused by the verifiers' deny list (fed from the
    /// finished log, which keeps its own copy) for the token's lifetime; a missed one had its return window before
    /// it was abandoned; the others' cookies lead nowhere the room cannot answer without the record. A session
    /// forgotten and back is unknown to the store: the room answers it as any session the store does not know (a
    /// number the head passed: a new place at the back). The live line plus the last return window's ended
    /// sessions is all the store holds.
    fn forget_ended(&mut self, t: &Tick) {
        let keep = t.return_window_ms.max(t.abandon_after_ms);
        let mut budget = t.max_scan.max(1);
        while budget > 0 {
            let Some(&(at, seq, _)) = self.ended.front() else {
                break;
            };
            if at.saturating_add(keep) > t.now_ms {
                break;
            }
            let Some((_, _, sid)) = self.ended.pop_front() else {
                break;
            };
            // Not if it joined again since (a new record, a new key) or came back to life.
            if self
                .sessions
                .get(&sid)
                .is_some_and(|r| r.seq == seq && r.state.is_terminal())
            {
                self.sessions.remove(&sid);
                self.drop_row(seq);
                budget -= 1;
            }
        }
    }

    /// How many new line numbers a join would hand out (the draw's included, when the join runs it).
    fn numbers_for_join(&self, j: &Join) -> u64 {
        let holds_place = |sid: &str| self.placement(sid).is_some_and(|p| !p.state.is_terminal());
        if j.account
            .as_deref()
            .and_then(|a| self.accounts.get(a))
            .is_some_and(|owner| holds_place(owner))
            || holds_place(&j.session)
            || self.settings.turning_away()
        {
            return 0;
        }
        if self.draw_due(j.now_ms) {
            // The draw numbers the pre-queue, then this join takes the next number.
            self.prequeue.len() as u64 + 1
        } else if self.drawn {
            1
        } else {
            0
        }
    }

    /// Whether `n` more numbers are within the reserve; if not, asks the next commit for them.
    fn reserve(&mut self, n: u64) -> bool {
        let need = self.last_number.saturating_add(n);
        if n == 0 || need <= self.reserved {
            return true;
        }
        if let Some(j) = self.journal.as_mut() {
            j.want = j.want.max(need);
        }
        false
    }

    /// The on-sale as a restore gives it back: the numbers up to `last_number` kept free for their owners.
    fn restored(r: &Restore) -> Self {
        let mut ev = Self::new(r.settings.clone());
        ev.drawn = r.drawn || !r.settings.random_draw;
        ev.served = r.served;
        ev.last_number = r.last_number.max(r.served);
        ev.counters = r.counters;
        ev.reclaim_upto = Some(ev.last_number);
        ev.hold_until_ms = r.now_ms.saturating_add(r.hold_ms);
        ev.late_until_ms = r.now_ms.saturating_add(r.late_ms);
        ev
    }

    /// [`Store::restore`] of a store that knows the on-sale but lost its latest writes: numbers up to the room's
    /// highest become holes for their owners, and those owners are taken back as after a restore.
    fn raise_floor(&mut self, r: &Restore) {
        if r.last_number <= self.last_number {
            return;
        }
        let gap = (r.last_number - self.last_number).min(MAX_RECLAIM_GAP);
        self.last_number += gap;
        self.reclaim_upto = Some(self.last_number);
        self.hold_until_ms = r.now_ms.saturating_add(r.hold_ms);
        self.late_until_ms = r.now_ms.saturating_add(r.late_ms);
        self.changed();
    }

    /// [`Store::reclaim`]: the rules are in the store's module docs.
    fn reclaim(&mut self, c: &Reclaim) -> Option<Placement> {
        if let Some(p) = self.placement(&c.session) {
            return Some(p);
        }
        if self.settings.turning_away() {
            return None;
        }
        let sid: Sid = Sid::from(c.session.as_str());
        let (state, number) = match c.number {
            None if !self.drawn => {
                self.prequeue.push((c.draw_key, sid.clone()));
                if let Some(journal) = self.journal.as_mut() {
                    journal.keys.insert(sid.clone(), c.draw_key);
                }
                (SessionState::PreQueue, 0)
            }
            None | Some(0) => return None,
            Some(n) if n > self.last_number => {
                let gap = n - self.last_number - 1;
                if gap > MAX_RECLAIM_GAP {
                    return None;
                }
                self.last_number = n;
                self.line.insert(n, sid.clone());
                (SessionState::Waiting, n)
            }
            Some(n) if n > self.served => {
                if !self.line.insert(n, sid.clone()) {
                    return None;
                }
                (SessionState::Waiting, n)
            }
            Some(n) => {
                let late =
                    self.reclaim_upto.is_some_and(|u| n <= u) && c.now_ms <= self.late_until_ms;
                if !late || self.back.contains_key(&n) {
                    return None;
                }
                self.back.insert(n, sid.clone());
                (SessionState::Waiting, n)
            }
        };
        self.put(&sid, state, number, c.now_ms);
        self.placement(&c.session)
    }

    /// [`Store::ticket`]: the next number (or a pre-queue ticket), nothing recorded.
    fn ticket(&mut self, now_ms: u64) -> Ticket {
        if self.settings.turning_away() {
            return Ticket::TurnedAway;
        }
        if self.draw_due(now_ms) {
            self.draw(now_ms);
        }
        self.counters.tickets += 1;
        self.changed();
        if self.drawn {
            self.last_number += 1;
            Ticket::Number(self.last_number)
        } else {
            Ticket::PreQueue
        }
    }

    /// [`Store::redeem`]: the rules are in the store's module docs ("Tickets").
    fn redeem(&mut self, r: &Redeem) -> Option<Placement> {
        if let Some(p) = self.placement(&r.session) {
            return Some(p);
        }
        if self.settings.turning_away() || r.issued_ms.saturating_add(r.grace_ms) < r.now_ms {
            return None;
        }
        let sid: Sid = Sid::from(r.session.as_str());
        let (state, number) = match r.number {
            None if !self.drawn => {
                self.prequeue.push((r.draw_key, sid.clone()));
                if let Some(journal) = self.journal.as_mut() {
                    journal.keys.insert(sid.clone(), r.draw_key);
                }
                (SessionState::PreQueue, 0)
            }
            None | Some(0) => return None,
            Some(n) if n > self.last_number => {
                // A store that lost its latest writes (the room's signed ticket says the number was given out):
                // as a reclaim, the number is taken and nobody later gets it.
                if n - self.last_number - 1 > MAX_RECLAIM_GAP {
                    return None;
                }
                self.last_number = n;
                self.line.insert(n, sid.clone());
                (SessionState::Waiting, n)
            }
            Some(n) if n > self.served => {
                if !self.line.insert(n, sid.clone()) {
                    return None;
                }
                (SessionState::Waiting, n)
            }
            Some(n) => {
                // The head passed it while the ticket was out: ahead of the line.
                if self.back.contains_key(&n) {
                    return None;
                }
                self.back.insert(n, sid.clone());
                (SessionState::Waiting, n)
            }
        };
        self.counters.joined += 1;
        self.counters.redeemed += 1;
        self.put(&sid, state, number, r.now_ms);
        self.placement(&r.session)
    }

    fn placement(&self, sid: &str) -> Option<Placement> {
        self.sessions.get(sid).map(|r| Placement {
            session: sid.to_owned(),
            state: r.state,
            number: (r.number > 0).then_some(r.number),
        })
    }

    fn draw_due(&self, now_ms: u64) -> bool {
        !self.drawn && self.settings.opens_at_ms.is_none_or(|t| now_ms >= t)
    }

    /// The draw: the pre-queue, ordered by secret random key, takes the next numbers. A draw before the scheduled
    /// opening (the door was opened early) counts every drawn session as seen now: rooms mark pre-queue polls only
    /// shortly before the scheduled opening, so nobody is skipped for not having been marked.
    fn draw(&mut self, now_ms: u64) {
        let early = self.scheduled_open_ms.is_none_or(|t| now_ms < t);
        let mut pre = std::mem::take(&mut self.prequeue);
        pre.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        for (_, sid) in pre {
            self.last_number += 1;
            if let Some(r) = self.sessions.get_mut(&sid) {
                r.state = SessionState::Waiting;
                r.number = self.last_number;
                if early {
                    r.last_seen_ms = r.last_seen_ms.max(now_ms);
                }
            }
            self.dirty(&sid);
            self.line.insert(self.last_number, sid);
        }
        self.drawn = true;
        self.changed();
    }

    fn join(&mut self, j: &Join) -> Placement {
        if let Some(account) = &j.account
            && let Some(owner) = self.accounts.get(account.as_str())
            && let Some(p) = self.placement(owner)
            && !p.state.is_terminal()
        {
            return p;
        }
        if let Some(p) = self.placement(&j.session)
            && !p.state.is_terminal()
        {
            return p;
        }
        if self.settings.turning_away() {
            // Closed or sold out: no place, nothing recorded.
            return Placement {
                session: j.session.clone(),
                state: SessionState::TurnedAway,
                number: None,
            };
        }
        let sid: Sid = Sid::from(j.session.as_str());
        if self.draw_due(j.now_ms) {
            self.draw(j.now_ms);
        }
        self.counters.joined += 1;
        if self.drawn {
            self.last_number += 1;
            let n = self.last_number;
            self.line.insert(n, sid.clone());
            self.put(&sid, SessionState::Waiting, n, j.now_ms);
        } else {
            self.prequeue.push((j.draw_key, sid.clone()));
            if let Some(journal) = self.journal.as_mut() {
                journal.keys.insert(sid.clone(), j.draw_key);
            }
            self.put(&sid, SessionState::PreQueue, 0, j.now_ms);
        }
        if let Some(account) = &j.account {
            self.accounts.insert(account.as_str().into(), sid.clone());
            if let Some(journal) = self.journal.as_mut() {
                journal.accounts.push((account.as_str().into(), sid));
            }
        }
        self.placement(&j.session).expect("just inserted")
    }

    fn admitted_last_minute(&mut self, now_ms: u64) -> u64 {
        let now_s = now_ms / 1000;
        while self
            .recent_admits
            .front()
            .is_some_and(|&(s, _)| s + 60 <= now_s)
        {
            self.recent_admits.pop_front();
        }
        self.recent_admits.iter().map(|&(_, n)| n).sum()
    }

    fn note_admits(&mut self, now_ms: u64, n: u64) {
        if n == 0 {
            return;
        }
        let now_s = now_ms / 1000;
        match self.recent_admits.back_mut() {
            Some((s, c)) if *s == now_s => *c += n,
            _ => self.recent_admits.push_back((now_s, n)),
        }
    }

    fn tick(&mut self, t: &Tick) -> TickReport {
        let served = self.served;
        let report = self.tick_inner(t);
        if self.served != served
            || report.drew
            || !report.expired.is_empty()
            || !report.admitted.is_empty()
            || !report.missed.is_empty()
            || !report.abandoned.is_empty()
            || !report.turned_away.is_empty()
        {
            self.changed();
        }
        report
    }

    fn tick_inner(&mut self, t: &Tick) -> TickReport {
        let mut report = TickReport::default();
        if std::mem::take(&mut self.seen_at_first_tick) {
            self.seen_floor_ms = t.now_ms;
            // The ended sessions taken back from the data file did not keep when they ended: a return window from
            // now.
            for (at, _, _) in self.ended.iter_mut().filter(|(at, _, _)| *at == 0) {
                *at = t.now_ms;
            }
        }
        if std::mem::take(&mut self.lost_writes) {
            // Taken back after a crash: the owners of the numbers given out in the lost moment come back with
            // their cookies; one whose number the head passes before they do is taken back ahead of the line
            // within the abandon grace (every browser still polling has come back by then).
            self.late_until_ms = self
                .late_until_ms
                .max(t.now_ms.saturating_add(t.abandon_after_ms));
            self.changed();
        }
        if self.draw_due(t.now_ms) {
            self.draw(t.now_ms);
            report.drew = true;
        }
        // One call's budget: `max_scan` sessions in all (expired, let in or skipped, turned away, ended), as the
        // Redis store counts them; a part that stops at it says `more`.
        let mut budget = t.max_scan;
        // Expire idle actives; admitted sessions that never came miss their turn (below).
        let expired: Vec<Sid> = self
            .active
            .iter()
            .filter(|(_, deadline)| **deadline <= t.now_ms)
            .map(|(sid, _)| sid.clone())
            .take(budget as usize)
            .collect();
        budget -= expired.len() as u64;
        report.more |= budget == 0;
        for sid in expired {
            self.active.remove(&sid);
            self.dirty(&sid);
            let again = self.again.remove(&sid);
            if let Some(r) = self.sessions.get_mut(&sid)
                && r.state == SessionState::Admitted
                && !again
            {
                // Let in and not come within the arrival window (a phone asleep as its turn came): the place frees
                // and the turn is kept for the return window, as for one passed while away (missed; back within
                // the window, it goes in at the next free place). Once: one let in again from the returning queue
                // that does not come either expires.
                r.state = SessionState::Missed;
                r.last_seen_ms = t.now_ms;
                self.note_missed(&sid, t.now_ms);
                report.missed.push(sid.to_string());
                continue;
            }
            if let Some(r) = self.sessions.get_mut(&sid) {
                r.state = SessionState::Expired;
                self.note_ended(&sid, t.now_ms);
            }
            self.counters.expired += 1;
            report.expired.push(sid.to_string());
        }
        if self.settings.turning_away() {
            budget -= self.turn_away(t.now_ms, budget, &mut report);
        } else if self.settings.door_open(t.now_ms) && t.now_ms >= self.hold_until_ms {
            budget -= self.admit(t, budget, &mut report);
        }
        budget -= self.report_passed(budget, &mut report);
        self.end_missed(t, budget, &mut report);
        self.forget_ended(t);
        let served = self.served;
        self.moved.retain(|(n, _)| *n > served);
        report
    }

    /// Lets people in while there is room: the front lane, the returning queue, then the head of the line; an
    /// absent one is missed (it keeps its turn for the return window) and the next present one goes in its place.
    /// Looks at `budget` sessions at most; returns how many it looked at.
    fn admit(&mut self, t: &Tick, budget: u64, report: &mut TickReport) -> u64 {
        let mut room = self
            .settings
            .capacity
            .saturating_sub(self.active.len() as u64);
        let last_minute = self.admitted_last_minute(t.now_ms);
        if let Some(cap) = self.settings.admit_per_minute {
            room = room.min(cap.saturating_sub(last_minute));
        }
        if let Some(inv) = self.settings.inventory {
            // Never more people let in within a minute than there are seats to pick from.
            room = room.min(inv.available().saturating_sub(last_minute));
        }
        let mut scanned = 0;
        let mut admitted = 0;
        // Sessions an operator moved to the front go first.
        while admitted < room && scanned < budget {
            let Some(sid) = self.front.pop_front() else {
                break;
            };
            scanned += 1;
            if let Some(r) = self.sessions.get_mut(&sid)
                && r.state == SessionState::Waiting
                && r.number == 0
            {
                r.state = SessionState::Admitted;
                r.last_seen_ms = t.now_ms;
                self.active
                    .insert(sid.clone(), t.now_ms + t.arrival_window_ms);
                self.counters.admitted += 1;
                admitted += 1;
                report.admitted.push(sid.to_string());
            }
        }
        // People away at the head of the line cost the door no budget (each is one record read and written):
        // at most ABSENT_PER_CALL of them a call, so a call's work stays bounded whatever lies at the head.
        let mut passed = 0;
        while admitted < room && scanned < budget {
            // Those taken back after the head passed them were in front of everyone in line; then those who came
            // back after missing their turn.
            let from_line = self.back.is_empty() && self.returning.is_empty();
            if from_line && passed >= ABSENT_PER_CALL {
                report.more = true;
                break;
            }
            let mut again = false;
            let sid = if let Some((_, sid)) = self.back.pop_first() {
                sid
            } else if let Some(sid) = self.returning.pop_front() {
                if self
                    .sessions
                    .get(&sid)
                    .is_none_or(|r| r.state != SessionState::Returning)
                {
                    continue;
                }
                again = true;
                sid
            } else if let Some((n, sid)) = self.line.pop_first() {
                // The numbers before it are free: passed at no cost.
                self.served = n;
                sid
            } else {
                break;
            };
            let Some(r) = self.sessions.get_mut(&sid) else {
                scanned += 1;
                continue;
            };
            // After a restart everyone in line counts as seen at the first tick (their marks were not kept).
            let seen = r.last_seen_ms.max(self.seen_floor_ms);
            if seen.saturating_add(t.abandon_after_ms) < t.now_ms {
                r.state = SessionState::Missed;
                r.last_seen_ms = t.now_ms;
                self.note_missed(&sid, t.now_ms);
                if from_line {
                    passed += 1;
                    self.unreported.push_back(sid.clone());
                    self.unreported_floor =
                        Some(self.unreported_floor.map_or(t.now_ms, |f| f.min(t.now_ms)));
                } else {
                    scanned += 1;
                    report.missed.push(sid.to_string());
                }
            } else {
                scanned += 1;
                r.state = SessionState::Admitted;
                r.last_seen_ms = t.now_ms;
                self.active
                    .insert(sid.clone(), t.now_ms + t.arrival_window_ms);
                self.counters.admitted += 1;
                admitted += 1;
                report.admitted.push(sid.to_string());
                if again {
                    self.again.insert(sid.clone());
                }
            }
            self.dirty(&sid);
        }
        self.note_admits(t.now_ms, admitted);
        report.more |= admitted < room && scanned >= budget;
        scanned
    }

    /// Names in `report` (as missed) up to `budget` of the sessions the head passed while away without using the
    /// budget; returns how many.
    fn report_passed(&mut self, budget: u64, report: &mut TickReport) -> u64 {
        let n = self
            .unreported
            .len()
            .min(usize::try_from(budget).unwrap_or(usize::MAX));
        report
            .missed
            .extend(self.unreported.drain(..n).map(|sid| sid.to_string()));
        report.more |= !self.unreported.is_empty();
        if self.unreported.is_empty() {
            self.unreported_floor = None;
        }
        n as u64
    }

    /// Ends [`SessionState::Abandoned`] the missed sessions whose return window has passed (at most `budget`).
    fn end_missed(&mut self, t: &Tick, mut budget: u64, report: &mut TickReport) {
        while budget > 0 {
            let Some((at, sid)) = self.missed.front() else {
                break;
            };
            if let Some((key, r)) = self.sessions.get_key_value(sid)
                && r.state == SessionState::Missed
                && r.last_seen_ms == *at
            {
                if at.saturating_add(t.return_window_ms) > t.now_ms {
                    break;
                }
                let key = key.clone();
                if let Some(r) = self.sessions.get_mut(&key) {
                    r.state = SessionState::Abandoned;
                    r.last_seen_ms = 0;
                }
                self.counters.abandoned += 1;
                report.abandoned.push(key.to_string());
                self.dirty(&key);
                self.note_ended(&key, t.now_ms);
                budget -= 1;
            }
            // Abandoned now, or an entry passed over: the session came back since (or missed again, later).
            self.missed.pop_front();
        }
        report.more |= budget == 0 && !self.missed.is_empty();
    }

    /// A session that is here now: a missed one within its window comes back (see [`Store::come_back`]).
    fn come_back(
        &mut self,
        sid: &str,
        now_ms: u64,
        window_ms: u64,
    ) -> (Option<Placement>, Option<Return>) {
        let Some((key, r)) = self.sessions.get_key_value(sid) else {
            return (None, None);
        };
        let mut counted = None;
        match r.state {
            SessionState::Missed if r.last_seen_ms.saturating_add(window_ms) > now_ms => {
                let key = key.clone();
                self.returning.push_back(key.clone());
                if let Some(r) = self.sessions.get_mut(&key) {
                    r.state = SessionState::Returning;
                    r.last_seen_ms = now_ms;
                }
                self.counters.returned += 1;
                // The data file keeps the returning queue's order as each record's key: returns so far.
                let order = self.counters.returned;
                if let Some(journal) = self.journal.as_mut() {
                    journal.keys.insert(key.clone(), order);
                }
                self.dirty(&key);
                counted = Some(Return::InTime);
            }
            SessionState::Missed | SessionState::Abandoned if r.last_seen_ms != LATE_TOLD => {
                let key = key.clone();
                if r.state == SessionState::Missed {
                    self.counters.abandoned += 1;
                }
                let was_missed = r.state == SessionState::Missed;
                if let Some(r) = self.sessions.get_mut(&key) {
                    r.state = SessionState::Abandoned;
                    r.last_seen_ms = LATE_TOLD;
                }
                self.counters.returned_late += 1;
                self.dirty(&key);
                if was_missed {
                    self.note_ended(&key, now_ms);
                }
                counted = Some(Return::TooLate);
            }
            _ => {}
        }
        (self.placement(sid), counted)
    }

    fn move_to_front(&mut self, session: &str) -> Option<Placement> {
        if self.moved.len() >= MAX_MOVED {
            return None;
        }
        let r = self.sessions.get_mut(session)?;
        if r.state != SessionState::Waiting || r.number <= self.served {
            return None;
        }
        let n = r.number;
        if self.line.get(n).is_none_or(|s| &**s != session) {
            return None;
        }
        r.number = 0;
        // The old place is free: the head passes it.
        let sid = self.line.remove(n)?;
        self.front.push_back(sid.clone());
        self.moved.push((n, sid));
        self.placement(session)
    }

    /// Turns away up to [`TURN_AWAY_PER_TICK`] sessions (and at most `most`): those moved to the front first,
    /// then those taken back after the head passed them, then the returning queue, then the head of the line (their
    /// numbers count as served), then the pre-queue. Returns how many it looked at.
    fn turn_away(&mut self, now_ms: u64, most: u64, report: &mut TickReport) -> u64 {
        let most = most.min(TURN_AWAY_PER_TICK);
        let mut budget = most;
        while budget > 0 {
            let Some(sid) = self.front.pop_front() else {
                break;
            };
            if self
                .sessions
                .get(&sid)
                .is_some_and(|r| r.state == SessionState::Waiting && r.number == 0)
            {
                budget -= 1;
                self.turn_away_one(sid, now_ms, report);
            }
        }
        while budget > 0 {
            let Some((_, sid)) = self.back.pop_first() else {
                break;
            };
            budget -= 1;
            self.turn_away_one(sid, now_ms, report);
        }
        while budget > 0 {
            let Some(sid) = self.returning.pop_front() else {
                break;
            };
            if self
                .sessions
                .get(&sid)
                .is_some_and(|r| r.state == SessionState::Returning)
            {
                budget -= 1;
                self.turn_away_one(sid, now_ms, report);
            }
        }
        while budget > 0 {
            let Some((n, sid)) = self.line.pop_first() else {
                break;
            };
            budget -= 1;
            self.served = n;
            self.turn_away_one(sid, now_ms, report);
        }
        while budget > 0 {
            let Some((_, sid)) = self.prequeue.pop() else {
                break;
            };
            budget -= 1;
            self.turn_away_one(sid, now_ms, report);
        }
        report.more |= budget == 0;
        most - budget
    }

    fn turn_away_one(&mut self, sid: Sid, now_ms: u64, report: &mut TickReport) {
        if let Some(r) = self.sessions.get_mut(&sid) {
            r.state = SessionState::TurnedAway;
            self.counters.turned_away += 1;
            report.turned_away.push(sid.to_string());
            self.dirty(&sid);
            self.note_ended(&sid, now_ms);
        }
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot {
            settings: self.settings.clone(),
            drawn: self.drawn,
            prequeue: self.prequeue.len() as u64,
            last_number: self.last_number,
            served: self.served,
            active: self.active.len() as u64,
            returning: self.returning.len() as u64,
            counters: self.counters,
            moved: self
                .moved
                .iter()
                .filter(|(n, _)| *n > self.served)
                .map(|(_, s)| s.to_string())
                .collect(),
            reclaim_upto: self.reclaim_upto,
            live: Some(self.line.live()),
            admitted_lately: Vec::new(),
        }
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn init(&self, event: &str, defaults: &Settings) -> Result<Settings, StoreError> {
        let settings = {
            let mut events = self.lock();
            let durable = self.durable.is_some();
            let ev = events.entry(event.to_owned()).or_insert_with(|| {
                let mut ev = Event::new(defaults.clone());
                if durable {
                    ev.reserved = 0;
                    ev.journal = Some(Box::default());
                    ev.changed();
                }
                ev
            });
            ev.settings.clone()
        };
        // A new on-sale is on disk (with its first reserve of numbers) before the room starts.
        self.flush()?;
        Ok(settings)
    }

    async fn join(&self, event: &str, join: &Join) -> Result<Placement, StoreError> {
        self.within_reserve(event, |ev| {
            let n = ev.numbers_for_join(join);
            ev.reserve(n).then(|| ev.join(join))
        })
        .await
    }

    async fn ticket(&self, event: &str, now_ms: u64) -> Result<Ticket, StoreError> {
        let mut one = self.tickets(event, 1, now_ms).await?;
        Ok(one.pop().expect("one ticket asked, one given"))
    }

    async fn tickets(
        &self,
        event: &str,
        count: usize,
        now_ms: u64,
    ) -> Result<Vec<Ticket>, StoreError> {
        // Under one lock: the numbers are consecutive.
        self.within_reserve(event, |ev| {
            let count_n = count as u64;
            let n = if ev.settings.turning_away() {
                0
            } else if ev.draw_due(now_ms) {
                ev.prequeue.len() as u64 + count_n
            } else {
                u64::from(ev.drawn) * count_n
            };
            ev.reserve(n)
                .then(|| (0..count).map(|_| ev.ticket(now_ms)).collect())
        })
        .await
    }

    async fn line_tickets(
        &self,
        event: &str,
        count: usize,
        _known_last: u64,
    ) -> Result<Option<u64>, StoreError> {
        // Under one lock, the numbers consecutive; counted in `tickets` by the room's next touch.
        let n = count as u64;
        self.within_reserve(event, |ev| {
            ev.reserve(n).then(|| {
                ev.last_number += n;
                ev.changed();
                ev.last_number
            })
        })
        .await
        .map(Some)
    }

    async fn redeem(&self, event: &str, redeem: &Redeem) -> Result<Option<Placement>, StoreError> {
        self.with_event(event, |ev| ev.redeem(redeem))
    }

    async fn lookup(&self, event: &str, session: &str) -> Result<Option<Placement>, StoreError> {
        self.with_event(event, |ev| ev.placement(session))
    }

    async fn come_back(
        &self,
        event: &str,
        session: &str,
        now_ms: u64,
        return_window_ms: u64,
    ) -> Result<(Option<Placement>, Option<Return>), StoreError> {
        self.with_event(event, |ev| ev.come_back(session, now_ms, return_window_ms))
    }

    async fn claim(
        &self,
        event: &str,
        session: &str,
        now_ms: u64,
        idle_timeout_ms: u64,
    ) -> Result<Option<Placement>, StoreError> {
        self.with_event(event, |ev| {
            if let Some(r) = ev.sessions.get_mut(session)
                && r.state.is_active()
                && let Some(deadline) = ev.active.get_mut(session)
            {
                r.state = SessionState::Active;
                *deadline = (*deadline).max(now_ms + idle_timeout_ms);
                ev.again.remove(session);
                if let Some((sid, _)) = ev.active.get_key_value(session) {
                    let sid = sid.clone();
                    ev.dirty(&sid);
                }
            }
            ev.placement(session)
        })
    }

    async fn touch(&self, event: &str, touches: &Touches) -> Result<(), StoreError> {
        self.with_event(event, |ev| {
            if touches.tickets > 0 {
                ev.counters.tickets += touches.tickets;
                ev.changed();
            }
            for m in &touches.waiting {
                if let Some(r) = ev.sessions.get_mut(m.session.as_str())
                    && matches!(
                        r.state,
                        SessionState::Waiting | SessionState::PreQueue | SessionState::Returning
                    )
                {
                    r.last_seen_ms = r.last_seen_ms.max(touches.now_ms);
                }
            }
            // Waiting sessions' marks stay in memory (a restart counts everyone in line as seen); active
            // sessions' deadlines are committed. An admitted one claims its pass (turns active), as `claim` does.
            for sid in &touches.active {
                if let Some(r) = ev.sessions.get_mut(sid.as_str())
                    && r.state.is_active()
                    && let Some((key, deadline)) = ev.active.get_key_value(sid.as_str())
                {
                    let claimed = r.state != SessionState::Active;
                    r.state = SessionState::Active;
                    let key = key.clone();
                    ev.again.remove(&key);
                    let later = (*deadline).max(touches.now_ms + touches.idle_timeout_ms);
                    if later != *deadline || claimed {
                        ev.active.insert(key.clone(), later);
                        ev.dirty(&key);
                    }
                }
            }
        })
    }

    async fn tick(&self, event: &str, tick: &Tick) -> Result<TickReport, StoreError> {
        self.within_reserve(event, |ev| {
            let draw = if ev.draw_due(tick.now_ms) {
                ev.prequeue.len() as u64
            } else {
                0
            };
            ev.reserve(draw).then(|| ev.tick(tick))
        })
        .await
    }

    async fn finish(
        &self,
        event: &str,
        session: &str,
        seats: u32,
        now_ms: u64,
    ) -> Result<bool, StoreError> {
        self.with_event(event, |ev| {
            let Some(r) = ev.sessions.get_mut(session) else {
                return false;
            };
            if !r.state.is_active() {
                return false;
            }
            r.state = SessionState::Finished;
            if let Some((sid, _)) = ev.active.remove_entry(session) {
                ev.dirty(&sid);
            }
            ev.counters.finished += 1;
            ev.finished_seq += 1;
            if ev.finished_log.len() >= FINISHED_LOG {
                ev.finished_log.pop_front();
            }
            let seq = ev.finished_seq;
            let sid = Sid::from(session);
            ev.finished_log.push_back((seq, now_ms, sid.clone()));
            ev.note_ended(&sid, now_ms);
            if seats > 0 {
                ev.counters.orders += 1;
                ev.counters.seats_bought += u64::from(seats);
                if let Some(inv) = ev.settings.inventory.as_mut() {
                    inv.sold = (inv.sold + u64::from(seats)).min(inv.total);
                    inv.held = inv.held.saturating_sub(u64::from(seats));
                }
            }
            true
        })
    }

    async fn snapshot(&self, event: &str) -> Result<Snapshot, StoreError> {
        self.with_event(event, |ev| ev.snapshot())
    }

    async fn update(&self, event: &str, change: &SettingsChange) -> Result<Settings, StoreError> {
        self.with_event(event, |ev| {
            change.apply(&mut ev.settings);
            if let SettingsChange::Schedule { opens_at_ms, .. } = change {
                ev.scheduled_open_ms = *opens_at_ms;
            }
            ev.changed();
            ev.settings.clone()
        })
    }

    async fn inspect(
        &self,
        event: &str,
        session: &str,
    ) -> Result<Option<SessionDetail>, StoreError> {
        self.with_event(event, |ev| {
            let placement = ev.placement(session)?;
            let admitted_at_ms = ev
                .sessions
                .get(session)
                .filter(|r| r.state.is_active())
                .map(|r| r.last_seen_ms);
            Some(SessionDetail {
                placement,
                admitted_at_ms,
            })
        })
    }

    async fn find_sessions(
        &self,
        event: &str,
        matches: &(dyn for<'s> Fn(&'s str) -> bool + Send + Sync),
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        self.with_event(event, |ev| {
            ev.sessions
                .iter()
                .map(|(s, _)| s)
                .filter(|s| matches(s))
                .take(limit)
                .map(|s| s.to_string())
                .collect()
        })
    }

    async fn move_to_front(
        &self,
        event: &str,
        session: &str,
        _now_ms: u64,
    ) -> Result<Option<Placement>, StoreError> {
        self.with_event(event, |ev| ev.move_to_front(session))
    }

    async fn audit(&self, event: &str, entry: &AuditEntry) -> Result<(), StoreError> {
        self.with_event(event, |ev| {
            if ev.audit.len() >= AUDIT_KEEP {
                ev.audit.pop_front();
            }
            ev.audit.push_back(entry.clone());
        })
    }

    async fn audit_log(&self, event: &str, limit: usize) -> Result<Vec<AuditEntry>, StoreError> {
        self.with_event(event, |ev| {
            ev.audit.iter().rev().take(limit).cloned().collect()
        })
    }

    async fn restore(&self, event: &str, restore: &Restore) -> Result<Settings, StoreError> {
        let settings = {
            let mut events = self.lock();
            let durable = self.durable.is_some();
            let ev = match events.entry(event.to_owned()) {
                std::collections::hash_map::Entry::Occupied(e) => {
                    let ev = e.into_mut();
                    if restore.behind {
                        ev.raise_floor(restore);
                    }
                    ev
                }
                std::collections::hash_map::Entry::Vacant(e) => {
                    let mut ev = Event::restored(restore);
                    if durable {
                        // As a new on-sale: nothing reserved until the first commit.
                        ev.reserved = 0;
                        ev.journal = Some(Box::default());
                        ev.changed();
                    }
                    e.insert(ev)
                }
            };
            ev.settings.clone()
        };
        // The restored on-sale (its number floor, its hold) is on disk before anyone is taken back into it.
        self.flush()?;
        Ok(settings)
    }

    async fn reclaim(
        &self,
        event: &str,
        reclaim: &Reclaim,
    ) -> Result<Option<Placement>, StoreError> {
        self.with_event(event, |ev| ev.reclaim(reclaim))
    }

    async fn finished_since(
        &self,
        event: &str,
        cursor: &str,
        now_ms: u64,
        lookback_ms: u64,
    ) -> Result<(Vec<String>, String), StoreError> {
        self.with_event(event, |ev| {
            let (ids, after) = match cursor.parse::<u64>() {
                Ok(after) => {
                    let start = ev.finished_log.partition_point(|(seq, _, _)| *seq <= after);
                    let ids = ev
                        .finished_log
                        .range(start..)
                        .map(|(_, _, s)| s.to_string());
                    (ids.collect(), after)
                }
                // Empty (or foreign) cursor: all it remembers of the lookback window (a scan of at most the
                // remembered finishes, once per room at its start).
                Err(_) => {
                    let since = now_ms.saturating_sub(lookback_ms);
                    let ids = ev.finished_log.iter().filter(|(_, at, _)| *at >= since);
                    (ids.map(|(_, _, s)| s.to_string()).collect(), 0)
                }
            };
            (ids, ev.finished_seq.max(after).to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Tick;

    #[tokio::test]
    async fn finished_since_returns_finishes_after_the_cursor() {
        let store = MemoryStore::new();
        let settings = Settings {
            capacity: 10,
            admit_per_minute: None,
            paused: false,
            closed: false,
            opens_at_ms: None,
            random_draw: false,
            inventory: None,
            prequeue_opens_at_ms: None,
            closes_at_ms: None,
        };
        store.init("ev", &settings).await.unwrap();
        let (none, start) = store.finished_since("ev", "", 0, 60_000).await.unwrap();
        assert!(none.is_empty());
        for s in ["a", "b", "c"] {
            let join = Join {
                session: s.into(),
                account: None,
                now_ms: 1,
                draw_key: 0,
            };
            store.join("ev", &join).await.unwrap();
        }
        let tick = Tick {
            now_ms: 2,
            arrival_window_ms: 1_000,
            abandon_after_ms: 1_000,
            return_window_ms: 600_000,
            max_scan: 10,
        };
        store.tick("ev", &tick).await.unwrap();
        assert!(store.finish("ev", "a", 1, 3).await.unwrap());
        assert!(store.finish("ev", "b", 0, 3).await.unwrap());
        let (ids, next) = store.finished_since("ev", &start, 3, 60_000).await.unwrap();
        assert_eq!(ids, ["a", "b"]);
        assert!(store.finish("ev", "c", 0, 4).await.unwrap());
        let (ids, last) = store.finished_since("ev", &next, 4, 60_000).await.unwrap();
        assert_eq!(ids, ["c"]);
        let (ids, _) = store.finished_since("ev", &last, 4, 60_000).await.unwrap();
        assert!(ids.is_empty());
        // A reader that starts now (an instance started mid-sale) gets the finishes of the lookback window.
        let (ids, from) = store.finished_since("ev", "", 4, 60_000).await.unwrap();
        assert_eq!(
            (ids, from),
            (vec!["a".to_owned(), "b".into(), "c".into()], last.clone())
        );
        let (ids, _) = store.finished_since("ev", "", 4, 0).await.unwrap();
        assert_eq!(ids, ["c"]);
        let (ids, _) = store
            .finished_since("ev", "", 60_004, 60_000)
            .await
            .unwrap();
        assert_eq!(ids, ["c"]);
    }
}
