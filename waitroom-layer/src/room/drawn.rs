//! The random draw's numbers, kept here: after the draw, every person in the pre-queue holds a line number only the
//! store can work out, and each one's first poll after the draw would otherwise ask the store for it (one script
//! call each: with 600,000 people polling every 20 s, 30,000 store calls a second in the minute that matters
//! most). Instead, once a snapshot says the draw has run, this instance reads the draw's numbers from the store a
//! page at a time ([`Store::drawn_numbers`](crate::store::Store::drawn_numbers), [`PAGE`] sessions a call, each
//! call a short script) and answers drawn people from memory, as it answers people with a number in their cookie;
//! the number then goes into their re-sealed cookie at a poll of theirs, so the index is only needed once per
//! person. Not at the first poll after the draw, though: that would re-seal everyone's cookie within one poll
//! interval, the opening's busiest seconds (a new `Set-Cookie` on nearly every answer, for every browser to store).
//! Each person's cookie is re-sealed at their first poll from a moment of the [`RESEAL_SPREAD_MS`] after this
//! instance kept the draw's first numbers, picked by their session id; until then the index answers them, as it
//! does at the first poll. Should the store forget the on-sale meanwhile, the index takes them back at the number
//! it kept ([`DrawIndex::restored`]).
//!
//! A number is the one the store would answer (the same arithmetic, read in one call per page) and does not change
//! while the person waits, so a kept number is never stale while it is ahead of the head; a person the head has
//! reached, one an operator moved to the front, and anyone after a restore of a store that forgot the on-sale are
//! asked of the store as before. A store that does not page its draw (the embedded store, whose lookups cost no
//! round trip) answers `None` and nothing is kept. At most [`MOST`] numbers are kept (50 to 100 bytes each); past
//! it, people are asked of the store. A failed page is read again at a later refresh, from where the load stopped.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

use arc_swap::ArcSwap;

use super::{Inner, WaitingRoom};
use crate::store::DrawCursor;

/// Sessions read per store call while loading: one short script each (a `ZRANGE` of at most this many members of
/// one or a few pre-queue buckets).
pub(crate) const PAGE: usize = 500;

/// The most drawn numbers one instance keeps.
pub(crate) const MOST: usize = 4_000_000;

/// The time after this instance kept the draw's first page over which the drawn people's cookies are re-sealed
/// with their numbers, each at a moment picked by their session id (see the module docs): ten minutes, so the
/// opening's first minute carries a tenth of the new cookies (with 600,000 drawn, 1,000 a second instead of
/// 30,000 at the default 20 s polls). Nothing waits on them meanwhile: the index answers.
pub(crate) const RESEAL_SPREAD_MS: u64 = 600_000;

const IDLE: u8 = 0;
const LOADING: u8 = 1;
const DONE: u8 = 2;

/// The longest session id kept in the table (the room's own are 22 characters); a longer one is kept apart.
const INLINE: usize = 23;

/// A session id as a table key: its length, then its bytes, in three words.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Key([u64; 3]);

impl Key {
    fn of(session: &str) -> Option<Key> {
        let b = session.as_bytes();
        if b.len() > INLINE {
            return None;
        }
        let mut raw = [0u8; 24];
        raw[0] = b.len() as u8;
        raw[1..=b.len()].copy_from_slice(b);
        let word = |i: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&raw[8 * i..8 * i + 8]);
            u64::from_le_bytes(w)
        };
        Some(Key([word(0), word(1), word(2)]))
    }
}

/// One kept number beside its key, in half a cache line: a lookup reads one line, where a `HashMap` reads its
/// control bytes and then the entry (two cache misses in a table of tens of megabytes, a third of a microsecond a
/// drawn poll, measured).
#[derive(Default, zerocopy::FromZeros)]
#[repr(C, align(32))]
struct Slot {
    key: [AtomicU64; 3],
    /// 0: free (a drawn number is never 0). Written last, with `Release`, so a reader that sees it sees the key.
    number: AtomicU64,
}

/// The drawn numbers: open addressing, linear probing, at most 5/8 full, insert only (a number does not change while
/// its holder waits; everything goes at once with the room), one writer at a time. Polls read it with no lock at
/// all: an `RwLock`'s reader count is a cache line both cores write on every poll. No crate was found with this
/// layout: `hashbrown` (and `dashmap`, `horde` over it) keeps control bytes apart from the entries, and the
/// lock-free insert-only tables (`lock_free_hashtable`, `papaya`) hold a pointer to each entry.
#[derive(Default)]
struct Table {
    slots: Box<[Slot]>,
    hasher: foldhash::fast::RandomState,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("slots", &self.slots.len())
            .finish()
    }
}

impl Table {
    /// A table for `n` numbers, at most 5/8 full then.
    fn with_room_for(n: usize) -> Table {
        let len = (n.saturating_mul(8) / 5 + 1).next_power_of_two().max(1024);
        // Zeroed by the allocator (fresh pages are zero already), not slot by slot: tens of megabytes written at
        // once would hold a worker for a tenth of a second at the opening (a page first touched costs 12.5 µs on
        // the machines measured); the pages are touched as the numbers land instead.
        let slots = <[Slot] as zerocopy::FromZeros>::new_box_zeroed_with_elems(len)
            .unwrap_or_else(|_| std::alloc::handle_alloc_error(std::alloc::Layout::new::<Slot>()));
        Table {
            slots,
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    fn has_room_for(&self, n: usize) -> bool {
        n <= self.slots.len() / 8 * 5
    }

    /// Where `key` is (`Ok`, with its number) or the free slot where it would go (`Err`). The ids are the room's
    /// random ones from a signed cookie and the hash is seeded per instance: nobody lines keys up to collide.
    fn find(&self, key: &Key) -> Result<(usize, u64), usize> {
        let mask = self.slots.len() - 1;
        let mut i = self.hasher.hash_one(key) as usize & mask;
        loop {
            let s = &self.slots[i];
            let n = s.number.load(Ordering::Acquire);
            if n == 0 {
                return Err(i);
            }
            if s.key
                .iter()
                .zip(key.0)
                .all(|(w, v)| w.load(Ordering::Relaxed) == v)
            {
                return Ok((i, n));
            }
            i = (i + 1) & mask;
        }
    }

    fn get(&self, session: &str) -> Option<u64> {
        if self.slots.is_empty() {
            return None;
        }
        self.find(&Key::of(session)?).ok().map(|(_, n)| n)
    }

    /// Keeps `n` (not 0) for `key`; whether the key is new. The caller is the one writer and made room.
    fn put(&self, key: &Key, n: u64) -> bool {
        match self.find(key) {
            Ok((i, _)) => {
                self.slots[i].number.store(n, Ordering::Release);
                false
            }
            Err(i) => {
                let s = &self.slots[i];
                for (w, v) in s.key.iter().zip(key.0) {
                    w.store(v, Ordering::Relaxed);
                }
                s.number.store(n, Ordering::Release);
                true
            }
        }
    }

    /// Puts every number kept here into `to` (which has room for them).
    fn copy_into(&self, to: &Table) {
        for s in &self.slots {
            let n = s.number.load(Ordering::Acquire);
            if n != 0 {
                let key = Key([0, 1, 2].map(|i| s.key[i].load(Ordering::Relaxed)));
                to.put(&key, n);
            }
        }
    }
}

/// The drawn numbers this instance keeps (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct DrawIndex {
    state: AtomicU8,
    /// Bumped when the index is dropped (a restore): a load begun before stops.
    generation: AtomicU64,
    /// Where the load goes on from after a failed page.
    cursor: Mutex<DrawCursor>,
    /// The numbers, read without a lock (see [`Table`]); replaced whole only when it grows, which the load avoids
    /// by sizing it at the first page for the people in line (at most [`MOST`]).
    table: ArcSwap<Table>,
    /// Held by whoever writes the table (the load, a page at a time) and by a restore, so a page read before a
    /// restore never lands after it.
    writer: Mutex<()>,
    /// Numbers of session ids too long for the table (none of the room's own), asked only for such an id.
    long: RwLock<HashMap<Box<str>, u64>>,
    /// How many numbers are kept.
    kept: AtomicUsize,
    /// The lowest number a drawn person not kept yet can hold (0: nothing known): the pages go in number order, so
    /// while a page goes in it is that page's first number, and then the one after its last.
    frontier: AtomicU64,
    /// When this instance kept the draw's first page (ms on the room's clock; 0: not yet), from when the cookies
    /// are re-sealed over [`RESEAL_SPREAD_MS`].
    since_ms: AtomicU64,
}

impl DrawIndex {
    /// The drawn number kept for `session`, if any.
    pub(crate) fn get(&self, session: &str) -> Option<u64> {
        if session.len() > INLINE {
            let long = self.long.read().unwrap_or_else(|e| e.into_inner());
            return long.get(session).copied();
        }
        self.table.load().get(session)
    }

    /// Keeps the numbers of a page read for `generation` at `now_ms` (at most [`MOST`] in all) and returns how many
    /// are kept; `None`, keeping nothing, when the index is no longer that generation (checked under the lock a
    /// restore takes too, so a page read before a restore never lands after it). The first numbers kept start the
    /// re-seal spread.
    fn keep(
        &self,
        page: Vec<(String, u64)>,
        expect: usize,
        generation: u64,
        now_ms: u64,
    ) -> Option<usize> {
        let _writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if self.generation.load(Ordering::Acquire) != generation {
            return None;
        }
        // Everyone of this page holds its first number or a later one, known before the page goes in: polls do not
        // wait for it (the first page also allocates the table, tens of megabytes), and meanwhile its people are
        // answered as in line (`unread_are_behind`) instead of asking the store, one call each. The frontier moves
        // twice a page, not once an entry: every poll reads it, and a write an entry would pull its cache line away
        // from the polls' cores (it was a third of the load's time).
        if let Some(lowest) = page.iter().map(|&(_, n)| n).filter(|&n| n > 0).min() {
            self.frontier.fetch_max(lowest, Ordering::AcqRel);
        }
        if !page.is_empty() {
            let _ = self.since_ms.compare_exchange(
                0,
                now_ms.max(1),
                Ordering::Release,
                Ordering::Relaxed,
            );
        }
        let mut kept = self.kept.load(Ordering::Relaxed);
        let mut table = self.table.load_full();
        let mut highest = 0;
        for (session, n) in page {
            if kept >= MOST {
                break;
            }
            if n == 0 {
                continue;
            }
            highest = highest.max(n);
            let new = match Key::of(&session) {
                Some(key) => {
                    if !table.has_room_for(kept + 1) {
                        // Sized for everyone in line at the first page (so polls keep reading the same table),
                        // twice as large when more came than expected.
                        let grown = Table::with_room_for(
                            (2 * kept).min(MOST).max(expect.min(MOST)).max(kept + 1),
                        );
                        table.copy_into(&grown);
                        table = Arc::new(grown);
                        self.table.store(Arc::clone(&table));
                    }
                    table.put(&key, n)
                }
                None => {
                    let mut long = self.long.write().unwrap_or_else(|e| e.into_inner());
                    long.insert(session.into_boxed_str(), n).is_none()
                }
            };
            if new {
                kept += 1;
            }
        }
        self.kept.store(kept, Ordering::Relaxed);
        if highest > 0 {
            self.frontier.fetch_max(highest + 1, Ordering::AcqRel);
        }
        Some(kept)
    }

    /// Whether a drawn person this instance has not read yet is certainly still waiting behind the head at
    /// `served`: the read is not done and has already passed the head (their number is the frontier or beyond).
    /// Such a person is answered from memory, in line, until their number is read (see `locate_local`).
    pub(crate) fn unread_are_behind(&self, served: u64) -> bool {
        self.state.load(Ordering::Acquire) != DONE && self.frontier.load(Ordering::Acquire) > served
    }

    /// Whether a drawn person's cookie is re-sealed with their number at a poll at `now_ms`: from their moment of
    /// the [`RESEAL_SPREAD_MS`] after this instance kept the draw's first page (see the module docs); before that,
    /// at once.
    pub(crate) fn reseal_due(&self, session: &str, now_ms: u64) -> bool {
        let since = self.since_ms.load(Ordering::Relaxed);
        since == 0 || now_ms >= since.saturating_add(reseal_offset(session))
    }

    /// Moves the load on (its cursor, its state) for `generation` only, under the lock a restore takes: a page
    /// answered before a restore does not undo what the restore set.
    fn settle(&self, generation: u64, then: impl FnOnce(&Self)) {
        let _writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if self.generation.load(Ordering::Acquire) == generation {
            then(self);
        }
    }

    /// Tests: keeps `page` for the index's generation (expecting `expect` in all).
    #[cfg(test)]
    fn keep_now(&self, page: Vec<(String, u64)>, expect: usize) {
        let generation = self.generation.load(Ordering::Acquire);
        assert!(self.keep(page, expect, generation, 1).is_some());
    }

    /// Tests elsewhere in the room: keeps `page` as a read under way would (the read not done).
    #[cfg(test)]
    pub(super) fn keep_while_loading(&self, page: Vec<(String, u64)>) {
        self.state.store(LOADING, Ordering::Release);
        let expect = page.len();
        self.keep_now(page, expect);
    }

    /// How many numbers are kept.
    pub(crate) fn len(&self) -> usize {
        self.kept.load(Ordering::Relaxed)
    }

    /// The store was restored after forgetting the on-sale: the numbers kept stay, for taking their owners back
    /// (a drawn person whose cookie has no number yet is reclaimed at the number kept here: see `place` in
    /// `line.rs`), but the read stops (a read under way finds no draw in the restored store) and nobody is answered
    /// from them before the store has them back (`locate_local` asks the store first after a restore). Every
    /// cookie is re-sealed with its number at once from then on, so the next loss finds the numbers in the
    /// cookies. (Restored before the draw, with nothing kept: read again once the draw has run.)
    pub(crate) fn restored(&self) {
        let _writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        self.generation.fetch_add(1, Ordering::AcqRel);
        *self.cursor.lock().unwrap_or_else(|e| e.into_inner()) = DrawCursor::default();
        self.frontier.store(0, Ordering::Release);
        self.since_ms.store(0, Ordering::Relaxed);
        let next = if self.len() == 0 { IDLE } else { DONE };
        self.state.store(next, Ordering::Release);
    }
}

impl WaitingRoom {
    /// Whether the new cookie of a drawn person whose pre-queue cookie has no number yet, answered `number`,
    /// waits for their moment ([`DrawIndex::reseal_due`]). Only an instance that keeps the draw's numbers waits
    /// (on the embedded store, whose draw is not paged, the number is sealed at once); meanwhile its index (or,
    /// for the few it does not hold, its cache of the store's answers) answers them.
    pub(crate) fn reseal_later(&self, session: &str, number: Option<u64>) -> bool {
        number.is_some() && !self.inner.drawn.reseal_due(session, self.now_ms())
    }

    /// Starts reading the draw's numbers into this instance's index when the snapshot in force says the draw has
    /// run and no read is under way or done (see the module docs). Called after each refresh.
    pub(super) fn load_draw_index(&self) {
        let d = &self.inner.drawn;
        if !self.inner.snap.load().drawn
            || d.state
                .compare_exchange(IDLE, LOADING, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return;
        }
        let generation = d.generation.load(Ordering::Acquire);
        tokio::spawn(load(std::sync::Arc::downgrade(&self.inner), generation));
    }
}

/// A session's moment within [`RESEAL_SPREAD_MS`] (ms), from its id: the room's ids are random, so the moments
/// spread evenly, and the same person gets the same one on every instance.
fn reseal_offset(session: &str) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0x7265_7365_616c).hash_one(session) % RESEAL_SPREAD_MS
}

/// Reads the draw's numbers page by page until the last, the store fails (the next refresh goes on from there),
/// the index is dropped, or the room is gone.
async fn load(room: Weak<Inner>, generation: u64) {
    loop {
        let Some(inner) = room.upgrade() else { return };
        let d = &inner.drawn;
        if d.generation.load(Ordering::Acquire) != generation {
            return;
        }
        let from = d.cursor.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let page = super::outage::timed(
            &inner.metrics,
            inner.store.drawn_numbers(&inner.config.event, &from, PAGE),
        )
        .await;
        if d.generation.load(Ordering::Acquire) != generation {
            return;
        }
        let page = match page {
            // Nothing drawn yet, or a store that does not page its draw: nothing to keep.
            Ok(None) => {
                d.settle(generation, |d| d.state.store(DONE, Ordering::Release));
                return;
            }
            Ok(Some(page)) => page,
            Err(e) => {
                tracing::debug!(event = %inner.config.event, error = %e, "reading the draw's numbers failed; the next refresh goes on");
                d.settle(generation, |d| d.state.store(IDLE, Ordering::Release));
                return;
            }
        };
        // Everyone in line may be in the draw: the index is sized for the people in line at once (the live line's
        // count; numbers nobody holds, a flood's tickets, take no room).
        let snap = inner.snap.load();
        let expect = usize::try_from(snap.waiting()).unwrap_or(MOST);
        drop(snap);
        let Some(kept) = d.keep(page.numbers, expect, generation, inner.clock.now_ms()) else {
            return;
        };
        let full = kept >= MOST;
        inner.metrics.draw_numbers_kept.set(kept as i64);
        inner.metrics.draw_pages.inc();
        match page.next {
            Some(next) if !full => d.settle(generation, |d| {
                *d.cursor.lock().unwrap_or_else(|e| e.into_inner()) = next;
            }),
            _ => {
                d.settle(generation, |d| d.state.store(DONE, Ordering::Release));
                tracing::debug!(event = %inner.config.event, kept = d.len(), "the draw's numbers are kept here");
                return;
            }
        }
        drop(inner);
        // Other work first: the load is a background chore, never ahead of a request.
        tokio::task::yield_now().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keeps `ids` numbered from `first` in their order, `per_page` a page, expecting `expect` in all.
    fn keep_numbered(d: &DrawIndex, ids: &[String], first: u64, per_page: usize, expect: usize) {
        for (p, page) in ids.chunks(per_page).enumerate() {
            let at = first + (p * per_page) as u64;
            d.keep_now(page.iter().cloned().zip(at..).collect(), expect);
        }
    }

    #[test]
    fn cookies_are_resealed_over_the_spread_after_the_draw_each_at_its_own_moment_and_at_once_after_a_restore()
     {
        let d = DrawIndex::default();
        let ids: Vec<String> = (0..10_000).map(|_| WaitingRoom::new_session_id()).collect();
        assert!(
            ids.iter().all(|id| d.reseal_due(id, 5)),
            "no draw read yet: at once"
        );
        let t0 = 1_000_000;
        d.since_ms.store(t0, Ordering::Relaxed);
        let due = |at: u64| ids.iter().filter(|id| d.reseal_due(id, at)).count();
        // 10,000 moments spread evenly over the spread: a quarter by a quarter of it (2,500, sd 43), and so on.
        assert!(due(t0) <= 2, "{}", due(t0));
        let quarter = due(t0 + RESEAL_SPREAD_MS / 4);
        assert!((2_200..=2_800).contains(&quarter), "{quarter}");
        let half = due(t0 + RESEAL_SPREAD_MS / 2);
        assert!((4_650..=5_350).contains(&half), "{half}");
        assert_eq!(due(t0 + RESEAL_SPREAD_MS), 10_000);
        // Once due, due at every later poll; the same moment on every instance.
        let other = DrawIndex::default();
        other.since_ms.store(t0, Ordering::Relaxed);
        for id in &ids[..100] {
            let at = t0 + reseal_offset(id);
            assert!(d.reseal_due(id, at) && other.reseal_due(id, at) && d.reseal_due(id, at + 1));
            assert!(at == t0 || !d.reseal_due(id, at - 1));
        }
        // After the store was restored: the numbers stay (to take their owners back), every cookie at once.
        d.state.store(LOADING, Ordering::Release);
        d.keep_now(vec![(ids[0].clone(), 5)], 1);
        let before = d.generation.load(Ordering::Acquire);
        d.restored();
        // A page read before the restore lands nowhere.
        assert_eq!(d.keep(vec![(ids[1].clone(), 6)], 1, before, t0), None);
        assert_eq!(d.get(&ids[1]), None);
        assert!(
            ids.iter().all(|id| d.reseal_due(id, t0)),
            "after a restore: at once"
        );
        assert_eq!(d.get(&ids[0]), Some(5), "kept for the reclaim");
        assert!(!d.unread_are_behind(0), "nobody answered as read-to-come");
    }

    #[test]
    fn every_kept_number_is_found_by_its_own_id_and_no_other_id_is_answered() {
        let d = DrawIndex::default();
        let ids: Vec<String> = (0..60_000).map(|_| WaitingRoom::new_session_id()).collect();
        // In pages of 500, told to expect 1,000: the table grows several times while it fills.
        keep_numbered(&d, &ids, 7, 500, 1_000);
        assert_eq!(d.len(), ids.len());
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(d.get(id), Some(7 + i as u64), "{id}");
        }
        let strangers: Vec<String> = (0..60_000).map(|_| WaitingRoom::new_session_id()).collect();
        assert!(strangers.iter().all(|id| d.get(id).is_none()));
        // Kept again (a page read twice): the same count, the same answer.
        d.keep_now(vec![(ids[0].clone(), 7)], 1_000);
        assert_eq!((d.len(), d.get(&ids[0])), (ids.len(), Some(7)));
        // Longer than a table key: kept apart. Numbered 0 (nobody's number): not kept.
        let long = "y".repeat(INLINE + 1);
        d.keep_now(vec![(long.clone(), 9), ("nobody".into(), 0)], 1_000);
        assert_eq!(d.get(&long), Some(9));
        assert_eq!(d.get(&"y".repeat(INLINE + 2)), None);
        assert_eq!((d.get("nobody"), d.len()), (None, ids.len() + 1));
    }

    #[test]
    fn ids_alike_in_all_but_one_byte_or_their_length_each_find_their_own_number() {
        // 575 ids in a table of 1,024 slots (56% full: a first page sized for them), alike but for one byte in one of
        // the key's three words, or but for their length: their probes run through each other's slots.
        let mut alike: Vec<String> = Vec::new();
        for at in [3, 12, 20] {
            for c in (b'0'..=b'9').chain(b'A'..=b'Z').chain(b'a'..=b'z') {
                for len in [21, 22, 23] {
                    let mut id = vec![b'q'; len];
                    id[at] = c;
                    alike.push(String::from_utf8(id).unwrap());
                }
            }
        }
        alike.sort();
        alike.dedup();
        alike.extend((1..=INLINE).map(|len| "z".repeat(len)));
        let d = DrawIndex::default();
        let page = alike
            .iter()
            .enumerate()
            .map(|(i, id)| (id.clone(), 100 + i as u64))
            .collect();
        d.keep_now(page, alike.len());
        assert_eq!(d.table.load().slots.len(), 1_024, "{} ids", alike.len());
        for (i, id) in alike.iter().enumerate() {
            assert_eq!(d.get(id), Some(100 + i as u64), "{id}");
        }
        for other in [
            "q".repeat(20),
            "q".repeat(24),
            format!("{}@", "q".repeat(21)),
            String::new(),
            "z".repeat(INLINE + 1),
        ] {
            assert_eq!(d.get(&other), None, "{other}");
        }
    }

    #[test]
    fn polls_reading_while_pages_are_kept_and_the_table_grows_see_a_number_only_as_kept() {
        let d = DrawIndex::default();
        let ids: Vec<String> = (0..40_000).map(|_| WaitingRoom::new_session_id()).collect();
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            for r in 0..2 {
                let (d, ids, done) = (&d, &ids, &done);
                s.spawn(move || {
                    let mut i = r;
                    while !done.load(Ordering::Acquire) {
                        let at = i % ids.len();
                        if let Some(n) = d.get(&ids[at]) {
                            assert_eq!(n, 1 + at as u64, "a number read while the table filled");
                        }
                        i += 7;
                    }
                });
            }
            keep_numbered(&d, &ids, 1, 500, 600);
            done.store(true, Ordering::Release);
        });
        assert!(
            ids.iter()
                .enumerate()
                .all(|(i, id)| d.get(id) == Some(1 + i as u64))
        );
    }

    /// Figures, not a check: the seed's 592,000 drawn kept, then looked up at random on both cores at once, as the
    /// polls do, against the layout before this table (a `HashMap` of inline ids behind an `RwLock`) in the same run.
    /// `cargo test -p waitroom-layer --release --lib measure_drawn_lookups -- --ignored --nocapture`
    #[test]
    #[ignore = "figures for BENCHMARKS.md"]
    fn measure_drawn_lookups_against_a_locked_hashmap() {
        use compact_str::CompactString;
        const PEOPLE: usize = 592_000;
        const LOOKS: usize = 2_000_000;
        let ids: Vec<String> = (0..PEOPLE).map(|_| WaitingRoom::new_session_id()).collect();
        let d = DrawIndex::default();
        keep_numbered(&d, &ids, 1, PAGE, PEOPLE);
        let mut map =
            HashMap::with_capacity_and_hasher(PEOPLE, foldhash::fast::RandomState::default());
        for (i, id) in ids.iter().enumerate() {
            map.insert(CompactString::from(id.as_str()), 1 + i as u64);
        }
        let locked = RwLock::new(map);
        // Each core its own random order of the people, as polls come.
        let orders: Vec<Vec<usize>> = (0..2)
            .map(|_| (0..LOOKS).map(|_| rand::random_range(0..PEOPLE)).collect())
            .collect();
        let run = |look: &(dyn Fn(&str) -> Option<u64> + Sync)| -> f64 {
            let start = std::time::Instant::now();
            std::thread::scope(|s| {
                for order in &orders {
                    let ids = &ids;
                    s.spawn(move || {
                        let mut sum = 0u64;
                        for &i in order {
                            sum = sum.wrapping_add(look(&ids[i]).unwrap());
                        }
                        std::hint::black_box(sum);
                    });
                }
            });
            start.elapsed().as_nanos() as f64 / LOOKS as f64
        };
        let table = |id: &str| d.get(id);
        let hashmap = |id: &str| locked.read().unwrap().get(id).copied();
        let (mut t, mut h) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            h.push(run(&hashmap));
            t.push(run(&table));
        }
        t.sort_by(f64::total_cmp);
        h.sort_by(f64::total_cmp);
        eprintln!(
            "{PEOPLE} kept, {LOOKS} lookups a core on 2 cores at once, 5 rounds alternated: table {:.0} ns a lookup \
             (rounds {t:.0?}), locked HashMap {:.0} ns (rounds {h:.0?}); table / HashMap {:.2}",
            t[2],
            h[2],
            t[2] / h[2]
        );
    }

    #[test]
    fn while_the_first_page_goes_in_its_people_are_known_to_be_in_line() {
        // The first page after the draw, the head at 0 and the drawn numbers from 1: from the moment the page is
        // taken (its re-seal moment set), each of its people is either kept or known to be behind the head, never
        // left to the store while the table is allocated and filled.
        let d = DrawIndex::default();
        d.state.store(LOADING, Ordering::Release);
        let ids: Vec<String> = (0..100_000)
            .map(|_| WaitingRoom::new_session_id())
            .collect();
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
                while d.since_ms.load(Ordering::Acquire) == 0 {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "the page was never taken"
                    );
                    std::hint::spin_loop();
                }
                let (mut seen, mut unkept, mut i) = (0u64, 0u64, 0);
                while !done.load(Ordering::Acquire) {
                    let id = &ids[i % ids.len()];
                    let kept = d.get(id).is_some();
                    assert!(
                        kept || d.unread_are_behind(0),
                        "{id} neither kept nor known to be in line"
                    );
                    seen += 1;
                    unkept += u64::from(!kept);
                    i += 7_919;
                }
                (seen, unkept)
            });
            keep_numbered(&d, &ids, 1, ids.len(), ids.len());
            done.store(true, Ordering::Release);
            let (seen, unkept) = reader.join().unwrap();
            eprintln!("{seen} looks while the page went in, {unkept} of them before their entry");
        });
        assert!(ids.iter().all(|id| d.get(id).is_some()));
    }

    #[test]
    fn the_unread_are_behind_the_head_only_while_the_read_is_under_way_and_past_the_head() {
        let d = DrawIndex::default();
        assert!(!d.unread_are_behind(0), "nothing read yet: nothing known");
        d.state.store(LOADING, Ordering::Release);
        assert!(!d.unread_are_behind(0), "nothing read yet: nothing known");
        d.keep_now(vec![("a".into(), 11), ("b".into(), 12)], 3);
        assert!(d.unread_are_behind(10));
        assert!(d.unread_are_behind(12), "everyone unread holds 13 or more");
        assert!(!d.unread_are_behind(13), "the head reached what was read");
        d.keep_now(vec![("c".into(), 13)], 3);
        assert!(d.unread_are_behind(13), "the read moved on");
        assert!(!d.unread_are_behind(14));
        assert_eq!(d.get("c"), Some(13));
        d.state.store(DONE, Ordering::Release);
        assert!(
            !d.unread_are_behind(0),
            "read to the end: who is not kept is not drawn"
        );
        d.restored();
        d.state.store(LOADING, Ordering::Release);
        assert!(
            !d.unread_are_behind(0),
            "a restored index knows nothing to come"
        );
    }
}
