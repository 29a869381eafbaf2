//! Liveness marks: the polls of waiting sessions and the requests of active ones, batched in per-thread shards
//! and flushed to the store once a second (kept for the next attempt while the store is down).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use compact_str::CompactString;

use super::WaitingRoom;
use crate::error::StoreError;
use crate::store::{Mark, Placement, SessionState, Snapshot, Touches};

#[derive(Debug, Default)]
pub(super) struct Pending {
    /// The polls of waiting sessions since the last flush, in order, each with the line number it knew (when
    /// known). Repeats included: a poll appends without looking anything up (a lookup in a table of thousands
    /// of sessions is a cache miss on every poll); the flush keeps one mark per session.
    waiting: Vec<(CompactString, Option<u64>)>,
    /// The previous window's buffer, emptied by the flush and swapped in at the next one (so the polls of a
    /// window land in memory already in use, not in fresh pages from the system).
    spare: Vec<(CompactString, Option<u64>)>,
    /// The active sessions that made a request since the last flush.
    active: SessionSet,
}

/// Session ids marked since the last flush. Hashed with foldhash (randomly seeded) rather than SipHash: an
/// admitted request marks its session on every call, and the ids are the room's own random ones (read from a
/// session cookie whose HMAC verified), so nobody chooses them. The ids are `CompactString`s here and in
/// [`Pending::waiting`]: the room's 22-character ids are stored inline (up to 24 bytes), so a mark allocates
/// nothing and comparing one reads no second place in memory.
type SessionSet = HashSet<CompactString, foldhash::fast::RandomState>;

/// Waiting sessions' marks, one per session (with its line number when any of its marks knew it).
type WaitingMarks = HashMap<CompactString, Option<u64>, foldhash::fast::RandomState>;

fn lock_pending(shard: &Mutex<Pending>) -> std::sync::MutexGuard<'_, Pending> {
    shard.lock().unwrap_or_else(|e| e.into_inner())
}

/// Bound on liveness marks held between two flushes, all shards together: one flush window's polls, or while the
/// store is down every session's mark (each failed flush puts them back one per session) plus one window's polls.
/// Beyond it, new marks are dropped until a flush succeeds.
const MAX_PENDING: usize = 2_000_000;

/// Shards of the liveness marks.
pub(super) const PENDING_SHARDS: usize = 8;

/// Bound per shard.
const MAX_PENDING_PER_SHARD: usize = MAX_PENDING / PENDING_SHARDS;

/// The shard of the liveness marks this thread writes to. Every poll and every admitted request marks its
/// session; with one lock for all, that lock's cache line would move between cores on nearly every request.
/// Each thread keeps to one shard (threads are numbered as they first mark), and the flush drains them all.
fn pending_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % PENDING_SHARDS;
    }
    SHARD.with(|s| *s)
}

/// How often touches are flushed to the store.
pub(super) const FLUSH_EVERY_MS: u64 = 1_000;

impl WaitingRoom {
    /// Records a waiting session's poll for the next batch. A numbered session is always marked (the store may keep
    /// it as one bit). A pre-queued one is marked only in the last stretch before the scheduled opening: the draw
    /// reads liveness as of the opening, so earlier marks would only be overwritten, and at 10x the seed's crowd
    /// they are hundreds of thousands of record writes a second. (Should the door open earlier than scheduled, the
    /// store counts every drawn session as seen at the draw; see [`Store::tick`].)
    pub(super) fn mark_waiting(&self, session: &str, number: Option<u64>, snap: &Snapshot) {
        if number.is_none() && !self.prequeue_marks_due(snap) {
            return;
        }
        let mut p = self.pending_here();
        if p.waiting.len() < MAX_PENDING_PER_SHARD {
            p.waiting.push((CompactString::new(session), number));
        }
    }

    /// Whether pre-queue polls are marked now: no opening scheduled, or the opening is within the abandon grace
    /// plus one poll interval and two flushes (so every page that still polls leaves a mark the draw can read).
    fn prequeue_marks_due(&self, snap: &Snapshot) -> bool {
        let c = &self.inner.config;
        let lead = (c.abandon_after + c.poll_interval).as_millis() as u64 + 2 * FLUSH_EVERY_MS;
        snap.settings
            .opens_at_ms
            .is_none_or(|t| self.now_ms().saturating_add(lead) >= t)
    }

    /// Records that an active session made a protected request (batched; its idle deadline moves at the next flush).
    pub fn touch_active(&self, session: &str) {
        let mut p = self.pending_here();
        if p.active.len() < MAX_PENDING_PER_SHARD {
            p.active.insert(CompactString::new(session));
        }
    }

    /// Drops the activity marks of a session that finished (its idle deadline must not move any more).
    pub(super) fn forget_active(&self, session: &str) {
        for shard in &self.inner.pending {
            lock_pending(shard).active.remove(session);
        }
    }

    /// This thread's shard of the liveness marks, locked.
    fn pending_here(&self) -> std::sync::MutexGuard<'_, Pending> {
        lock_pending(&self.inner.pending[pending_shard()])
    }

    /// Records a waiting session's liveness and, when `cache` (the store was asked where it stands), its place in
    /// the local cache. A session whose turn passed (finished, expired, abandoned, turned away) is cached too, so
    /// its later polls cost no store call: nothing but a new join (which replaces the entry) changes that state.
    /// Joins do not fill the cache (they clear it): a browser carries its place in its signed cookie (its number,
    /// or the pre-queue mark), so the cache only holds what a caller without it looked up. Admitted, active,
    /// missed and returning sessions are never cached: the store moves them on.
    pub(super) fn remember(&self, p: &Placement, cache: bool) {
        let waiting = matches!(p.state, SessionState::Waiting | SessionState::PreQueue);
        if cache && (waiting || p.state.is_terminal()) {
            self.inner
                .cache
                .insert(p.session.clone(), (p.state, p.number));
        } else {
            self.inner.cache.invalidate(&p.session);
        }
        if waiting || p.state == SessionState::Returning {
            // Returning: here now, and let in by a tick soon (the store says when it is let in).
            self.mark_waiting(&p.session, p.number, &self.inner.snap.load());
        }
    }

    pub(super) async fn flush(&self) -> Result<(), StoreError> {
        let mut waiting = WaitingMarks::default();
        let mut active = SessionSet::default();
        for shard in &self.inner.pending {
            let mut p = lock_pending(shard);
            let spare = std::mem::take(&mut p.spare);
            let mut marks = std::mem::replace(&mut p.waiting, spare);
            if active.is_empty() {
                active = std::mem::take(&mut p.active);
            } else {
                active.extend(p.active.drain());
            }
            drop(p);
            let polls = marks.len();
            for (session, number) in marks.drain(..) {
                // A session's line number never changes once it has one: a mark that knows it says more.
                let kept = waiting.entry(session).or_insert(number);
                if kept.is_none() {
                    *kept = number;
                }
            }
            // Back as the next spare, trimmed when this window was much quieter than its size (after an outage).
            if marks.capacity() > 4 * polls.max(1024) {
                marks.shrink_to(polls);
            }
            lock_pending(shard).spare = marks;
        }
        let tickets = self.inner.batches.take_unsent();
        if waiting.is_empty() && active.is_empty() && tickets == 0 {
            return Ok(());
        }
        let touches = Touches {
            tickets,
            now_ms: self.now_ms(),
            waiting: waiting
                .iter()
                .map(|(session, number)| Mark {
                    session: session.to_string(),
                    number: *number,
                })
                .collect(),
            active: active.iter().map(CompactString::to_string).collect(),
            idle_timeout_ms: self.inner.config.idle_timeout.as_millis() as u64,
            abandon_after_ms: self.inner.config.abandon_after.as_millis() as u64,
        };
        let r = self
            .call(|| self.inner.store.touch(self.event(), &touches))
            .await;
        if r.is_err() {
            self.inner.batches.add_unsent(tickets);
            // Keep the marks for the next attempt: a store outage must not make people look abandoned.
            // Back into the shards, an equal part in each (the bound is per shard).
            let mut waiting = waiting.into_iter();
            let per_waiting = waiting.len().div_ceil(PENDING_SHARDS);
            let mut active = active.into_iter();
            let per_active = active.len().div_ceil(PENDING_SHARDS);
            for shard in &self.inner.pending {
                let mut p = lock_pending(shard);
                for mark in waiting.by_ref().take(per_waiting) {
                    if p.waiting.len() < MAX_PENDING_PER_SHARD {
                        p.waiting.push(mark);
                    }
                }
                for s in active.by_ref().take(per_active) {
                    if p.active.len() < MAX_PENDING_PER_SHARD {
                        p.active.insert(s);
                    }
                }
            }
        }
        r
    }
}
