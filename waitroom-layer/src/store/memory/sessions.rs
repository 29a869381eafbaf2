//! The embedded store's session records: many small hash maps instead of one large one, so that no join ever
//! waits for the whole line to be rehashed (see [`Sessions`]).

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::LazyLock;

use compact_str::CompactString;

use super::Rec;

/// A session id as the embedded store keeps it: the room's 22-character ids inline (up to 24 bytes), so a record,
/// a place in the line or a queue entry allocates nothing of its own; a longer id (up to 64) on the heap.
pub(super) type Sid = CompactString;

/// How many maps the records are spread over.
const SHARDS: usize = 128;

/// The shard of a session is read from the top bits of its hash: `SLOTS` entries, each naming a shard.
const SLOT_BITS: u32 = 13;
const SLOTS: usize = 1 << SLOT_BITS;

/// Which shard each slot belongs to. Shard `i` owns a share of the slots proportional to `2^(i / SHARDS)`, so the
/// shards' sizes are spread evenly (on a log scale) over one doubling: as the line grows they reach their next
/// doubling one after another, about 1 % of the line apart, never all at once. (With equal shares every shard
/// would double at nearly the same join, and the joins there would wait for all of them in a row: the same stall
/// as one map, cut into pieces.) The largest share is `2 ln 2 / SHARDS`, about 1.1 % of the sessions: the longest
/// rehash is that of 1.1 % of the line.
static SHARD_OF_SLOT: LazyLock<Box<[u8; SLOTS]>> = LazyLock::new(|| {
    let weights: Vec<f64> = (0..SHARDS)
        .map(|i| (i as f64 / SHARDS as f64).exp2())
        .collect();
    let total: f64 = weights.iter().sum();
    let mut table = Box::new([0u8; SLOTS]);
    let mut below = 0.0;
    let mut start = 0;
    for (shard, w) in weights.iter().enumerate() {
        below += w;
        let end = ((below / total) * SLOTS as f64).round() as usize;
        let end = if shard + 1 == SHARDS { SLOTS } else { end };
        for slot in &mut table[start..end.max(start)] {
            *slot = shard as u8;
        }
        start = end.max(start);
    }
    table
});

type Shard = HashMap<Sid, Rec, foldhash::fast::RandomState>;

/// Session records by id, spread over [`SHARDS`] hash maps of unequal shares.
///
/// One hash map of every session rehashes all of them each time it doubles: measured on the demo at 0.5 µs a
/// session, 903 ms past 1.8 million people during which every join and poll waited (issue #30). Here a session's
/// shard is picked by one hash (seeded at random, as the maps' own hashes are, with foldhash: the ids are the
/// room's random ones, verified from a signed cookie, so nobody chooses them) and each map doubles on its own, so a
/// growth rehashes about 1 % of the line at most, and the shards' doublings come one after another (see
/// `SHARD_OF_SLOT`). Memory is that of one map: each shard doubles when it is full, as one map would.
#[derive(Debug)]
pub(super) struct Sessions {
    pick: foldhash::fast::RandomState,
    shards: Box<[Shard]>,
    len: usize,
}

impl Default for Sessions {
    fn default() -> Self {
        let hashes = foldhash::fast::RandomState::default();
        Self {
            pick: foldhash::fast::RandomState::default(),
            shards: (0..SHARDS)
                .map(|_| HashMap::with_hasher(hashes.clone()))
                .collect(),
            len: 0,
        }
    }
}

impl Sessions {
    fn shard_index(&self, sid: &str) -> usize {
        let h = self.pick.hash_one(sid);
        usize::from(SHARD_OF_SLOT[(h >> (64 - SLOT_BITS)) as usize])
    }

    fn shard(&self, sid: &str) -> &Shard {
        &self.shards[self.shard_index(sid)]
    }

    fn shard_mut(&mut self, sid: &str) -> &mut Shard {
        let i = self.shard_index(sid);
        &mut self.shards[i]
    }

    pub(super) fn get(&self, sid: &str) -> Option<&Rec> {
        self.shard(sid).get(sid)
    }

    pub(super) fn get_mut(&mut self, sid: &str) -> Option<&mut Rec> {
        self.shard_mut(sid).get_mut(sid)
    }

    pub(super) fn get_key_value(&self, sid: &str) -> Option<(&Sid, &Rec)> {
        self.shard(sid).get_key_value(sid)
    }

    /// Sets `sid`'s record; returns the one it replaces.
    pub(super) fn insert(&mut self, sid: Sid, rec: Rec) -> Option<Rec> {
        let old = self.shard_mut(&sid).insert(sid, rec);
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    /// Forgets `sid`'s record.
    pub(super) fn remove(&mut self, sid: &str) -> Option<Rec> {
        let old = self.shard_mut(sid).remove(sid);
        if old.is_some() {
            self.len -= 1;
        }
        old
    }

    /// Every record, in no order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&Sid, &Rec)> {
        self.shards.iter().flat_map(|s| s.iter())
    }

    /// How many records there are.
    pub(super) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shard_owns_slots_and_the_shares_grow_over_one_doubling() {
        let mut owned = [0usize; SHARDS];
        for &s in SHARD_OF_SLOT.iter() {
            owned[usize::from(s)] += 1;
        }
        assert_eq!(owned.iter().sum::<usize>(), SLOTS);
        // Shard i owns 8192 · 2^(i/128) / 184.2 slots (184.2 = the sum of the weights 2^(i/128)): 44.5 for the
        // first, 88.5 for the last, give or take a rounding.
        assert!((43..=46).contains(&owned[0]), "{owned:?}");
        assert!((86..=90).contains(&owned[SHARDS - 1]), "{owned:?}");
        assert!(owned.windows(2).all(|w| w[0] <= w[1] + 1), "{owned:?}");
    }

    #[test]
    fn records_are_found_replaced_and_removed_whatever_their_shard() {
        let mut s = Sessions::default();
        let rec = |number| Rec {
            state: crate::store::SessionState::Waiting,
            number,
            last_seen_ms: 0,
            seq: number as u32,
        };
        for n in 0..10_000u64 {
            assert!(
                s.insert(Sid::from(format!("session-{n:016}")), rec(n))
                    .is_none()
            );
        }
        assert_eq!(s.len(), 10_000);
        assert_eq!(s.iter().count(), 10_000);
        assert_eq!(
            s.get("session-0000000000000042").map(|r| r.number),
            Some(42)
        );
        assert!(
            s.insert("session-0000000000000042".into(), rec(7))
                .is_some()
        );
        assert_eq!(s.len(), 10_000);
        assert_eq!(
            s.remove("session-0000000000000042").map(|r| r.number),
            Some(7)
        );
        assert!(s.get("session-0000000000000042").is_none());
        assert_eq!(s.len(), 9_999);
        let used = s.shards.iter().filter(|m| !m.is_empty()).count();
        assert_eq!(used, SHARDS, "10,000 sessions reach every shard");
    }
}
