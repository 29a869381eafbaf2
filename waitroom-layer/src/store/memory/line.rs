//! The embedded store's numbered line: who holds each number after the head, counted by number so that positions
//! count only the people in it (see [`LiveLine`]).

use std::collections::BTreeMap;

use super::Sid;
use crate::store::LiveLine;

/// Sessions waiting with a number after the head, by number. A number nobody holds (a ticket not redeemed, a
/// number a restore keeps for its owner, the old place of a session moved to the front) has no entry: the head
/// passes it for free ([`pop_first`](Self::pop_first) is one B-tree step whatever lies between), and it costs no
/// memory.
///
/// The numbers are kept in blocks of 64: per block with someone in it, a 64-bit word with one bit per held number
/// (the counted structure a [`LiveLine`] is read from: a session's position is the number of bits before its own)
/// and the holders' ids in number order, one per set bit. A person in a full block costs their id (24 bytes) and
/// a 64th of the block's entry; a map entry per number would cost about twice that.
#[derive(Debug, Default)]
pub(super) struct Line {
    blocks: BTreeMap<u64, Block>,
    len: usize,
}

/// The held numbers `64 w ..= 64 w + 63` of block `w`.
#[derive(Debug, Default)]
struct Block {
    /// Bit `n % 64` for each held number `n`.
    bits: u64,
    /// The holders, in number order (the `k`-th set bit's holder at `k`).
    sids: Vec<Sid>,
}

impl Block {
    /// The index in `sids` of the holder of bit `bit`, set or not.
    fn rank(&self, bit: u64) -> usize {
        (self.bits & ((1u64 << bit) - 1)).count_ones() as usize
    }
}

impl Line {
    /// Puts `sid` at `n`; false (nothing changed) when someone holds it.
    pub(super) fn insert(&mut self, n: u64, sid: Sid) -> bool {
        let block = self.blocks.entry(n / 64).or_default();
        let bit = n % 64;
        if block.bits & (1 << bit) != 0 {
            return false;
        }
        let at = block.rank(bit);
        block.sids.insert(at, sid);
        block.bits |= 1 << bit;
        self.len += 1;
        true
    }

    /// Who holds `n`.
    pub(super) fn get(&self, n: u64) -> Option<&Sid> {
        let block = self.blocks.get(&(n / 64))?;
        let bit = n % 64;
        (block.bits & (1 << bit) != 0).then(|| &block.sids[block.rank(bit)])
    }

    /// Frees `n`; returns who held it.
    pub(super) fn remove(&mut self, n: u64) -> Option<Sid> {
        let std::collections::btree_map::Entry::Occupied(mut e) = self.blocks.entry(n / 64) else {
            return None;
        };
        let block = e.get_mut();
        let bit = n % 64;
        if block.bits & (1 << bit) == 0 {
            return None;
        }
        let sid = block.sids.remove(block.rank(bit));
        block.bits &= !(1 << bit);
        if block.bits == 0 {
            e.remove();
        }
        self.len -= 1;
        Some(sid)
    }

    /// The lowest held number and its session, taken off the line.
    pub(super) fn pop_first(&mut self) -> Option<(u64, Sid)> {
        let mut e = self.blocks.first_entry()?;
        let w = *e.key();
        let block = e.get_mut();
        let bit = u64::from(block.bits.trailing_zeros());
        let sid = block.sids.remove(0);
        block.bits &= !(1 << bit);
        if block.bits == 0 {
            e.remove();
        }
        self.len -= 1;
        Some((w * 64 + bit, sid))
    }

    /// Sessions in the line.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The counts a room reads positions from: one entry per block with a held number (a few bytes per 64
    /// numbers where someone waits; nothing for stretches nobody holds).
    pub(super) fn live(&self) -> LiveLine {
        let mut before = 0u64;
        let words = self
            .blocks
            .iter()
            .map(|(&w, b)| {
                let entry = (w, b.bits, before);
                before += u64::from(b.bits.count_ones());
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
        // Each holder is found at its own number within a block, inserted in any order.
        let mut block = Line::default();
        for n in [130, 128, 191, 129, 150] {
            assert!(block.insert(n, Sid::from(n.to_string())));
        }
        for n in [128, 129, 130, 150, 191] {
            assert_eq!(
                block.get(n).map(|s| s.as_str()),
                Some(n.to_string().as_str())
            );
        }
        assert_eq!(block.remove(129).as_deref(), Some("129"));
        assert_eq!(block.get(130).map(|s| s.as_str()), Some("130"));
        assert_eq!(
            block.pop_first().map(|(n, s)| (n, s.to_string())),
            Some((128, "128".into()))
        );
        assert_eq!(block.pop_first().map(|(n, _)| n), Some(130));

        let mut line = Line::default();
        let s = Sid::from("s");
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
        assert_eq!(line.len(), 2, "1,000,000 and 1,000,063 share a block");
        assert!(line.remove(64).is_none(), "a free number frees nothing");
        assert!(line.get(999_999).is_none() && line.get(1_000_000).is_some());
    }

    #[test]
    fn a_live_line_counts_who_is_ahead_alike_whether_every_word_is_there_or_some_are_missing() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        // Dense (someone in every 64 numbers), with gaps of whole words, and a few far apart.
        for (start, span, keep_one_in) in [
            (8_001, 20_000, 2),
            (100, 50_000, 200),
            (5, 10_000_000, 50_000),
        ] {
            let held: Vec<u64> = (start..start + span)
                .filter(|_| next() % keep_one_in == 0)
                .collect();
            let mut line = Line::default();
            for &n in &held {
                assert!(line.insert(n, Sid::from("s")));
            }
            let live = line.live();
            for _ in 0..2_000 {
                let n = start.saturating_sub(200) + next() % (span + 400);
                let expected = held.partition_point(|&h| h < n) as u64;
                assert_eq!(live.ahead_of(n), expected, "ahead of {n}");
            }
            assert_eq!(live.ahead_of(0), 0);
            assert_eq!(live.ahead_of(u64::MAX), held.len() as u64);
        }
        assert_eq!(Line::default().live().ahead_of(7), 0, "an empty line");
    }
}
