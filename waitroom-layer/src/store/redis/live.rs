//! Each room instance's copy of the live line on Redis (`line:held`, "The numbers count the living" in
//! [`RedisStore`](super::RedisStore)'s docs): the blocks of the held-number bitmap it has read, by version, so a
//! snapshot carries only the blocks that changed since the last one, and the [`LiveLine`] positions are read from.

use std::collections::BTreeMap;

use super::reply::corrupt;
use crate::error::StoreError;
use crate::store::LiveLine;

/// Numbers per block of `line:held` (512 bytes); `LIVE_BLOCK` in `scripts/prelude.lua` says the same.
pub(super) const LIVE_BLOCK: u64 = 4096;

/// The blocks of one on-sale's `line:held` an instance holds.
#[derive(Debug, Default)]
pub(super) struct LiveCache {
    /// `meta.lver` at the last snapshot: a Redis whose counter went back (a failover to a replica that lagged)
    /// may reuse versions, so the copy is dropped and read again whole.
    lver: u64,
    /// Block → (version, its bytes: bit `7 - n % 8` of byte `n / 8 - 512 * block` is number `n`).
    blocks: BTreeMap<u64, (u64, Vec<u8>)>,
    /// Where the next snapshot reads the sessions let in since this one ([`Snapshot::admitted_lately`]): a
    /// deadline in `active` and how many members at exactly that deadline were read already. (Not the live line,
    /// but kept with it: per on-sale, per store handle, read and moved by each snapshot.)
    ///
    /// [`Snapshot::admitted_lately`]: crate::store::Snapshot::admitted_lately
    pub(super) admitted_from: (u64, u64),
}

/// One block as a snapshot names it: its index, its version, its bytes (`None`: unchanged from the version the
/// caller sent).
pub(super) type Block = (u64, u64, Option<Vec<u8>>);

impl LiveCache {
    /// The `(block, version)` pairs held, for the snapshot script's arguments.
    pub(super) fn known(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.blocks.iter().map(|(&b, &(v, _))| (b, v))
    }

    /// Takes a snapshot's page of sessions let in (`[session, deadline, number (0: none), ...]`, in deadline
    /// order) and moves the cursor past it. A session let in later at a deadline already passed (another instance's tick a
    /// millisecond behind) may be missed: the room then asks the store about it, as it would without the page.
    pub(super) fn admitted(
        &mut self,
        page: Vec<::redis::Value>,
    ) -> Result<Vec<(String, Option<u64>)>, StoreError> {
        let mut sessions = Vec::with_capacity(page.len() / 3);
        let (mut from, mut skip) = self.admitted_from;
        for entry in page.chunks(3) {
            let [session, deadline, number] = entry else {
                return Err(corrupt("an admitted entry"));
            };
            let deadline = super::reply::int(deadline)?;
            if deadline == from {
                skip += 1;
            } else {
                (from, skip) = (deadline, 1);
            }
            let number = Some(super::reply::int(number)?).filter(|&n| n > 0);
            sessions.push((super::reply::text(session)?, number));
        }
        self.admitted_from = (from, skip);
        Ok(sessions)
    }

    /// Takes a snapshot's blocks (every block with a held number; the others are empty now). False, with the copy
    /// emptied, when the reply cannot be trusted against it (Redis's version counter went back, or it names as
    /// unchanged a block not held at that version): the caller reads the snapshot again with nothing known.
    pub(super) fn update(&mut self, lver: u64, blocks: Vec<Block>) -> bool {
        let mut fresh = BTreeMap::new();
        let trusted = lver >= self.lver;
        for (b, v, bytes) in blocks {
            let bytes = match bytes {
                Some(bytes) => bytes,
                None => match self.blocks.remove(&b) {
                    Some((held, bytes)) if trusted && held == v => bytes,
                    _ => {
                        *self = Self::default();
                        return false;
                    }
                },
            };
            fresh.insert(b, (v, bytes));
        }
        self.lver = lver;
        self.blocks = fresh;
        true
    }

    /// The live line after the head (`served`): the drawn segment `dbase + 1 ..= dbase + dcount` (held by its
    /// buckets: every number, except the old numbers of sessions moved to the front, `moved`) and the held bits of
    /// the blocks.
    pub(super) fn live(&self, served: u64, dbase: u64, dcount: u64, moved: &[u64]) -> LiveLine {
        // Two ascending runs of words, the drawn segment's and the blocks', merged (a snapshot builds this four
        // times a second per instance, with hundreds of thousands of numbers in line: no map, no allocation per
        // word).
        let (lo, hi) = (served.max(dbase) + 1, dbase + dcount);
        let mut segment: Vec<(u64, u64)> = Vec::new();
        if lo <= hi {
            segment.reserve(usize::try_from(hi / 64 - lo / 64 + 1).unwrap_or(0));
            for w in lo / 64..=hi / 64 {
                let from = lo.max(w * 64) - w * 64;
                let to = hi.min(w * 64 + 63) - w * 64;
                segment.push((w, (u64::MAX >> (63 - to)) & (u64::MAX << from)));
            }
            let first = lo / 64;
            for &n in moved {
                if let Some(e) = (n / 64)
                    .checked_sub(first)
                    .and_then(|i| segment.get_mut(usize::try_from(i).ok()?))
                {
                    e.1 &= !(1 << (n % 64));
                }
            }
        }
        // Then the blocks' words, ascending too.
        let mut words = segment;
        for (&b, (_, bytes)) in &self.blocks {
            for (i, chunk) in bytes.chunks(8).enumerate() {
                let mut be = [0u8; 8];
                be[..chunk.len()].copy_from_slice(chunk);
                let w = b * (LIVE_BLOCK / 64) + i as u64;
                let mut bits = u64::from_be_bytes(be).reverse_bits();
                // Numbers the head passed are never held; a stray bit there would count someone twice.
                if w * 64 + 63 <= served {
                    continue;
                }
                if w * 64 <= served {
                    bits &= u64::MAX << (served - w * 64 + 1);
                }
                if bits != 0 {
                    words.push((w, bits));
                }
            }
        }
        // Two ascending runs one after the other: the stable sort merges them in one pass, and a word in both (a
        // number both drawn and held) is kept once, its bits joined.
        words.sort_by_key(|&(w, _)| w);
        words.dedup_by(|next, kept| {
            let same = next.0 == kept.0;
            if same {
                kept.1 |= next.1;
            }
            same
        });
        let mut total = 0;
        let words = words
            .into_iter()
            .filter(|&(_, bits)| bits != 0)
            .map(|(w, bits)| {
                let e = (w, bits, total);
                total += u64::from(bits.count_ones());
                e
            })
            .collect();
        LiveLine { total, words }
    }
}

/// Reads the snapshot's blocks: `[block, version, bytes or '', ...]`.
pub(super) fn blocks(a: Vec<::redis::Value>) -> Result<Vec<Block>, StoreError> {
    use super::reply::int;
    if !a.len().is_multiple_of(3) {
        return Err(corrupt("live blocks not in threes"));
    }
    let mut out = Vec::with_capacity(a.len() / 3);
    let mut it = a.into_iter();
    while let (Some(b), Some(v), Some(bytes)) = (it.next(), it.next(), it.next()) {
        let bytes = match bytes {
            ::redis::Value::BulkString(bytes) if bytes.is_empty() => None,
            ::redis::Value::BulkString(bytes) if bytes.len() as u64 <= LIVE_BLOCK / 8 => {
                Some(bytes)
            }
            other => return Err(corrupt(format_args!("a live block of {other:?}"))),
        };
        out.push((int(&b)?, int(&v)?, bytes));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_line_counts_the_drawn_segment_and_the_held_bits_after_the_head() {
        let mut cache = LiveCache::default();
        // As SETBIT writes them: number n is bit `7 - n % 8` of byte `n / 8`. Block 0: numbers 3 and 70; block 2
        // (from number 8192): 8201.
        let mut b0 = vec![0u8; 16];
        b0[0] = 0x80 >> 3;
        b0[8] = 0x80 >> (70 % 8);
        let mut b2 = vec![0u8; 2];
        b2[(8201 / 8) - 2 * 512] = 0x80 >> (8201 % 8);
        assert!(cache.update(5, vec![(0, 1, Some(b0)), (2, 4, Some(b2))]));
        let live = cache.live(0, 0, 0, &[]);
        assert_eq!(live.total, 3);
        assert_eq!(
            [3, 4, 70, 71, 8201, 8202].map(|n| live.ahead_of(n)),
            [0, 1, 1, 2, 2, 3]
        );
        // The head at 3; a drawn segment 10..=12 with 11 moved out of it.
        let live = cache.live(3, 9, 3, &[11]);
        assert_eq!(live.total, 4);
        assert_eq!([10, 12, 70, 8201].map(|n| live.ahead_of(n)), [0, 1, 2, 3]);
        // A drawn segment over held bits (a number both drawn and held counts once), and a word of the segment
        // emptied by moves (it takes no entry).
        let live = cache.live(0, 0, 80, &[]);
        assert_eq!(live.total, 81, "1..=80 and 8201");
        assert_eq!(
            [3, 70, 81, 8201, 8202].map(|n| live.ahead_of(n)),
            [2, 69, 80, 80, 81]
        );
        let live = cache.live(0, 4, 4, &[]);
        assert_eq!(live.total, 7, "3, 5..=8, 70 and 8201: one word from both");
        assert_eq!([4, 6, 71].map(|n| live.ahead_of(n)), [1, 2, 6]);
        let live = cache.live(0, 127, 2, &[128, 129]);
        assert_eq!(live.total, 3, "3, 70 and 8201");
        assert_eq!(live.words.len(), 3);
        // Unchanged blocks are kept; a block no longer named is gone; a version not held is not trusted.
        assert!(cache.update(6, vec![(0, 1, None)]));
        assert_eq!(cache.live(0, 0, 0, &[]).total, 2);
        assert!(!cache.update(7, vec![(0, 2, None)]));
        assert_eq!(cache.known().count(), 0, "read again whole");
        assert!(cache.update(7, vec![(0, 2, Some(vec![1]))]));
        assert!(
            !cache.update(3, vec![(0, 2, None)]),
            "the counter went back"
        );
    }
}
