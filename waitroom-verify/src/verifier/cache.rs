//! The verified-token cache and the deny list: two bounded, sharded concurrent maps read on every admitted
//! request.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use dashmap::DashMap;

use crate::claims::Claims;

/// The hasher of the verified-token cache and the deny list: foldhash (randomly seeded per cache) instead of
/// SipHash, which was a visible part of every admitted request (a token is about 250 bytes). Neither map can be
/// filled by an attacker with keys of their choosing: a token enters the cache only after its signature verified,
/// and a session enters the deny list only when an admitted session finishes.
type FastHash = foldhash::fast::RandomState;

#[derive(Clone)]
pub(super) struct CacheEntry {
    pub(super) claims: Arc<Claims>,
    pub(super) generation: u64,
}

/// A cached token: its entry, and the one session cookie value it was seen with and the caller found authentic
/// (see [`Verifier::verify_for_cookie_vouched`](super::Verifier::verify_for_cookie_vouched); set once, never replaced).
struct Cached {
    entry: CacheEntry,
    cookie: OnceLock<Box<str>>,
}

/// Verified tokens: the token text -> its claims and the key-set generation they were accepted under.
///
/// A sharded concurrent map (dashmap), not a moka cache, for the reason given for [`DenyList`]: the lookup is on
/// every admitted request. Bounded by `capacity`: when full, the tokens past their `exp` go first, then a quarter
/// of the rest, those expiring soonest (a token the room renewed leaves its predecessor behind, and that one
/// expires first). An evicted token is only checked in full again on its next use.
pub(super) struct TokenCache {
    map: DashMap<Box<str>, Cached, FastHash>,
    capacity: usize,
}

impl TokenCache {
    /// An empty cache of at most `capacity` tokens.
    pub(super) fn new(capacity: u64) -> Self {
        TokenCache {
            map: DashMap::with_hasher(FastHash::default()),
            capacity: usize::try_from(capacity).unwrap_or(usize::MAX),
        }
    }

    /// How many tokens are cached.
    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    /// Forgets every token (the key set changed).
    pub(super) fn clear(&self) {
        self.map.clear();
    }

    /// The token's entry, and whether `cookie` is the value remembered with it (compared in constant time).
    pub(super) fn get(&self, token: &str, cookie: Option<&str>) -> Option<(CacheEntry, bool)> {
        self.map.get(token).map(|e| {
            let same = cookie.is_some_and(|c| {
                e.cookie
                    .get()
                    .is_some_and(|m| constant_time_eq::constant_time_eq(m.as_bytes(), c.as_bytes()))
            });
            (e.value().entry.clone(), same)
        })
    }

    pub(super) fn insert(&self, token: &str, entry: CacheEntry, now_secs: u64) {
        if self.map.len() >= self.capacity && !self.map.contains_key(token) {
            self.map.retain(|_, e| e.entry.claims.exp > now_secs);
            if self.map.len() >= self.capacity {
                evict_soonest(&self.map, |e| e.entry.claims.exp, self.capacity.div_ceil(4));
            }
        }
        self.map.insert(
            token.into(),
            Cached {
                entry,
                cookie: OnceLock::new(),
            },
        );
    }

    /// Remembers `cookie` with the token, unless it has one already.
    pub(super) fn remember_cookie(&self, token: &str, cookie: &str) {
        if let Some(e) = self.map.get(token) {
            let _ = e.cookie.set(cookie.into());
        }
    }
}

/// Removes the `count` entries of `map` with the smallest `deadline` (ties broken arbitrarily), or all of them when
/// there are fewer. Keys are collected first, so no shard guard is held while removing.
fn evict_soonest<K, V>(map: &DashMap<K, V, FastHash>, deadline: impl Fn(&V) -> u64, count: usize)
where
    K: Eq + std::hash::Hash + Clone,
{
    let mut by_deadline: Vec<(u64, K)> = map
        .iter()
        .map(|e| (deadline(e.value()), e.key().clone()))
        .collect();
    if count < by_deadline.len() {
        by_deadline.select_nth_unstable_by_key(count, |(d, _)| *d);
        by_deadline.truncate(count);
    }
    for (_, k) in by_deadline {
        map.remove(&k);
    }
}

/// Finished sessions, each with the time (ms, by the verifier's clock) until which its tokens are refused.
///
/// A sharded concurrent map (dashmap) rather than a moka cache: the lookup runs on every admitted request (twice
/// through the room layer and a `VerifyLayer`), and a moka lookup's bookkeeping (a clock reading and a recorded
/// read) cost several times a shard's read lock and one hash. Bounded by `capacity`: when full, the lapsed
/// entries go first, then the eighth of the live ones that lapse soonest (the closest to harmless). Size the capacity
/// above the finishes expected within one deny TTL (see [`VerifierBuilder::deny_capacity`](super::VerifierBuilder::deny_capacity)).
pub(super) struct DenyList {
    map: DashMap<Box<str>, u64, FastHash>,
    capacity: usize,
    /// When the full-list warning was last logged (ms, 0: never).
    warned_at_ms: AtomicU64,
    /// Counts insertions (bumped after each): a session allowed when it read `n` is still allowed while it reads
    /// `n` (entries only ever leave otherwise, which denies nobody new). Lets a marker skip a second lookup.
    epoch: AtomicU64,
}

impl DenyList {
    /// An empty list of at most `capacity` sessions.
    pub(super) fn new(capacity: u64) -> Self {
        DenyList {
            map: DashMap::with_hasher(FastHash::default()),
            capacity: usize::try_from(capacity).unwrap_or(usize::MAX),
            warned_at_ms: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
        }
    }

    /// How many sessions are denied (lapsed entries included until they are swept).
    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    pub(super) fn denies(&self, session_id: &str, now_ms: u64) -> bool {
        self.map
            .get(session_id)
            .is_some_and(|until| *until > now_ms)
    }

    pub(super) fn insert(&self, session_id: &str, until: u64, now_ms: u64) {
        if self.map.len() >= self.capacity && !self.map.contains_key(session_id) {
            self.map.retain(|_, u| *u > now_ms);
            if self.map.len() >= self.capacity {
                // Full of live entries: an eighth goes at once (not one per finish: each sweep locks every
                // shard in turn), the ones lapsing soonest, and the operator hears about it once a minute.
                evict_soonest(&self.map, |u| *u, self.capacity.div_ceil(8));
                if self
                    .warned_at_ms
                    .load(Ordering::Relaxed)
                    .saturating_add(60_000)
                    <= now_ms
                {
                    self.warned_at_ms.store(now_ms.max(1), Ordering::Relaxed);
                    tracing::warn!(
                        capacity = self.capacity,
                        "waitroom: the deny list is full of live entries; the eighth lapsing soonest was dropped \
                         (raise deny_capacity above the finishes one deny TTL sees)"
                    );
                }
            }
        }
        self.map.insert(session_id.into(), until);
        self.epoch.fetch_add(1, Ordering::Release);
    }

    pub(super) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }
}
