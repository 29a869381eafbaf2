//! The embedded store's numbered line: who holds each number after the head, counted by number so that positions
//! count only the people in it (see [`LiveLine`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::store::LiveLine;

/// Sessions waiting with a number after the head, by number. A number nobody holds (a ticket not redeemed, a
/// number a restore keeps for its owner, the old place of a session moved to the front) has no entry: the head
/// passes it for free ([`pop_first`](Self::pop_first) is one B-tree step whatever lies between), and it costs no
/// memory.
///
/// Beside the map, a bitmap of the held numbers in 64-bit words (only words with a bit set are kept), the counted
/// structure a [`LiveLine`] is read from: a session's position is the number of bits before its own.
#[derive(Debug, Default)]
pub(super) struct Line {
    by_number: BTreeMap<u64, Arc<str>>,
    /// Word `w` holds bit `n % 64` for each held number `n` with `n / 64 == w`.
    words: BTreeMap<u64, u64>,
}

impl Line {
    /// Puts `sid` at `n`; false (nothing changed) when someone holds it.
    pub(super) fn insert(&mut self, n: u64, sid: Arc<str>) -> bool {
        match self.by_number.entry(n) {
            std::collections::btree_map::Entry::Occupied(_) => false,
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(sid);
                *self.words.entry(n / 64).or_insert(0) |= 1 << (n % 64);
                true
            }
        }
    }

    /// Who holds `n`.
    pub(super) fn get(&self, n: u64) -> Option<&Arc<str>> {
        self.by_number.get(&n)
    }

    /// Frees `n`; returns who held it.
    pub(super) fn remove(&mut self, n: u64) -> Option<Arc<str>> {
        let sid = self.by_number.remove(&n)?;
        self.clear_bit(n);
        Some(sid)
    }

    /// The lowest held number and its session, taken off the line.
    pub(super) fn pop_first(&mut self) -> Option<(u64, Arc<str>)> {
        let (n, sid) = self.by_number.pop_first()?;
        self.clear_bit(n);
        Some((n, sid))
    }

    fn clear_bit(&mut self, n: u64) {
        if let std::collections::btree_map::Entry::Occupied(mut e) = self.words.entry(n / 64) {
            *e.get_mut() &= !(1 << (n % 64));
            if *e.get() == 0 {
                e.remove();
            }
        }
    }

    /// Sessions in the line.
    pub(super) fn len(&self) -> usize {
        self.by_number.len()
    }

    /// The counts a room reads positions from: one entry per word with a held number (a few bytes per 64
    /// numbers where someone waits; nothing for stretches nobody holds).
    pub(super) fn live(&self) -> LiveLine {
        let mut before = 0u64;
        let words = self
            .words
            .iter()
            .map(|(&w, &bits)| {
                let entry = (w, bits, before);
                before += u64::from(bits.count_ones());
                entry
            })
            .collect();
        LiveLine {
            total: before,
            words,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_only_held_numbers() {
        let mut line = Line::default();
        let s: Arc<str> = Arc::from("s");
        for n in [3, 64, 65, 1_000_000, 1_000_063] {
            assert!(line.insert(n, s.clone()));
        }
        assert!(!line.insert(64, s.clone()), "one holder a number");
        let live = line.live();
        assert_eq!(live.total, 5);
        assert_eq!(live.ahead_of(3), 0);
        assert_eq!(live.ahead_of(64), 1);
        assert_eq!(live.ahead_of(65), 2);
        assert_eq!(live.ahead_of(500), 3);
        assert_eq!(live.ahead_of(1_000_063), 4);
        assert_eq!(live.ahead_of(u64::MAX), 5);
        assert_eq!(line.pop_first().map(|(n, _)| n), Some(3));
        assert_eq!(line.remove(65).as_deref(), Some("s"));
        let live = line.live();
        assert_eq!((live.total, live.ahead_of(1_000_000)), (3, 1));
        assert_eq!(live.words.len(), 2, "empty words are dropped");
        assert_eq!(line.remove(64).as_deref(), Some("s"));
        assert_eq!(line.live().words.len(), 1);
    }
}
