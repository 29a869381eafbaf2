//! The offline check of an admission token.
//!
//! # What a full check does, in order
//! 1. Size: empty is [`Refusal::Missing`]; longer than `max_token_bytes` is [`Refusal::TooLarge`].
//! 2. Shape: three base64url segments; a header of at most 1 KiB that is a JSON object. Otherwise
//!    [`Refusal::Malformed`].
//! 3. Header, read by this crate before any cryptography: `alg: none` (any case) is [`Refusal::AlgorithmNone`];
//!    `jku`, `x5u`, `jwk`, `x5c` or `crit` is [`Refusal::ForbiddenHeader`] (no key or URL named inside a token is
//!    ever used); a `typ` other than `JWT` is malformed; no `kid` is [`Refusal::MissingKid`]; a `kid` not in the
//!    key set is [`Refusal::UnknownKid`]; an `alg` other than the one pinned to that key is
//!    [`Refusal::AlgorithmMismatch`].
//! 4. Signature, by `jsonwebtoken` with the key's own algorithm: [`Refusal::BadSignature`].
//! 5. Claims: `iss`, `aud`, `exp` required ([`Refusal::MissingClaim`]); issuer and audience among the accepted
//!    ones ([`Refusal::WrongIssuer`], [`Refusal::WrongAudience`]); a non-empty `sub` ([`Refusal::MissingSubject`]).
//! 6. Time, from the verifier's [`Clock`](crate::Clock) (never the system time behind its back), with leeway:
//!    [`Refusal::Expired`], [`Refusal::NotYetValid`], and [`Refusal::LifetimeTooLong`] for an `exp` further
//!    ahead than `max_token_lifetime` (this is what lets a bounded deny list be sound).
//! 7. The deny list: a finished session is [`Refusal::Finished`].
//!
//! `jsonwebtoken` is used for the signature alone (`jsonwebtoken::crypto::verify`): the header and claims are
//! parsed once, here, so there is no second parser to disagree with, and its own system-time checks cannot decide.
//!
//! # The cache
//! A token that passed the full check is kept (a bounded concurrent map keyed by the token text) with its claims. A
//! later request with the same token skips steps 2 to 5, which depend only on the token and the key set; steps
//! 6 and 7 run on every request. Replacing the key set ([`Verifier::replace_keys`]) makes every cached entry
//! stale at once. An entry also remembers the first session cookie value it passed with whose authenticity the
//! caller checked (`verify_for_cookie_vouched`, the room layer's HMAC check): the same token with the very same
//! value skips the caller's check next time.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use dashmap::DashMap;
use serde_json::Value;

use crate::claims::{Claims, RawClaims};
use crate::clock::{SharedClock, SystemClock};
use crate::error::{ConfigError, Refusal};
use crate::keys::KeySet;
use crate::verified::Verified;

/// The hasher of the verified-token cache and the deny list: foldhash (randomly seeded per cache) instead of
/// SipHash, which was a visible part of every admitted request (a token is about 250 bytes). Neither map can be
/// filled by an attacker with keys of their choosing: a token enters the cache only after its signature verified,
/// and a session enters the deny list only when an admitted session finishes.
type FastHash = foldhash::fast::RandomState;

/// Hands out verifier ids (a [`Verified`] names the verifier that made it).
static NEXT_VERIFIER_ID: AtomicU64 = AtomicU64::new(1);

/// Header parameters that name a key, a key URL or extensions; a token carrying any of them is refused.
pub const FORBIDDEN_HEADER_PARAMS: &[&str] = &["jku", "x5u", "jwk", "x5c", "crit"];

/// The largest encoded header segment read, in bytes.
pub const MAX_HEADER_BYTES: usize = 1024;

/// Default leeway for `exp` and `nbf`.
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(30);
/// Default token size limit.
pub const DEFAULT_MAX_TOKEN_BYTES: usize = 4096;
/// Default maximum token lifetime (from now to `exp`).
pub const DEFAULT_MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(3600);
/// Default verified-token cache capacity (entries).
pub const DEFAULT_CACHE_CAPACITY: u64 = 10_000;
/// Default deny-list capacity (sessions).
pub const DEFAULT_DENY_CAPACITY: u64 = 100_000;

/// One or several accepted names (issuers or audiences): `"room"`, `vec!["a", "b"]`, `["a", "b"]`, ...
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accepted(pub Vec<String>);

impl From<&str> for Accepted {
    fn from(v: &str) -> Self {
        Accepted(vec![v.to_owned()])
    }
}
impl From<String> for Accepted {
    fn from(v: String) -> Self {
        Accepted(vec![v])
    }
}
impl From<&String> for Accepted {
    fn from(v: &String) -> Self {
        Accepted(vec![v.clone()])
    }
}
impl From<Vec<String>> for Accepted {
    fn from(v: Vec<String>) -> Self {
        Accepted(v)
    }
}
impl From<Vec<&str>> for Accepted {
    fn from(v: Vec<&str>) -> Self {
        Accepted(v.into_iter().map(str::to_owned).collect())
    }
}
impl From<&[&str]> for Accepted {
    fn from(v: &[&str]) -> Self {
        Accepted(v.iter().map(|s| (*s).to_owned()).collect())
    }
}
impl<const N: usize> From<[&str; N]> for Accepted {
    fn from(v: [&str; N]) -> Self {
        Accepted(v.iter().map(|s| (*s).to_owned()).collect())
    }
}

/// Builds a [`Verifier`]. Required: [`keys`](Self::keys), [`issuer`](Self::issuer), [`audience`](Self::audience).
#[must_use]
#[derive(Debug, Clone)]
pub struct VerifierBuilder {
    keys: KeySet,
    issuers: Vec<String>,
    audiences: Vec<String>,
    leeway: Duration,
    max_token_bytes: usize,
    max_token_lifetime: Duration,
    clock: Option<SharedClock>,
    cache_capacity: u64,
    deny_capacity: u64,
    deny_ttl: Option<Duration>,
}

impl Default for VerifierBuilder {
    fn default() -> Self {
        VerifierBuilder {
            keys: KeySet::new(),
            issuers: Vec::new(),
            audiences: Vec::new(),
            leeway: DEFAULT_LEEWAY,
            max_token_bytes: DEFAULT_MAX_TOKEN_BYTES,
            max_token_lifetime: DEFAULT_MAX_TOKEN_LIFETIME,
            clock: None,
            cache_capacity: DEFAULT_CACHE_CAPACITY,
            deny_capacity: DEFAULT_DENY_CAPACITY,
            deny_ttl: None,
        }
    }
}

impl VerifierBuilder {
    /// The keys tokens may be signed with (replaces any set given before).
    pub fn keys(mut self, keys: impl Into<KeySet>) -> Self {
        self.keys = keys.into();
        self
    }

    /// Accepted issuer(s) (`iss`, the room's name). Adds to those given before.
    pub fn issuer(mut self, issuer: impl Into<Accepted>) -> Self {
        self.issuers.extend(issuer.into().0);
        self
    }

    /// Accepted audience(s) (`aud`, the on-sale ids). Adds to those given before.
    pub fn audience(mut self, audience: impl Into<Accepted>) -> Self {
        self.audiences.extend(audience.into().0);
        self
    }

    /// Clock skew allowed on `exp` and `nbf` (default 30 s, at most 5 min).
    pub fn leeway(mut self, leeway: Duration) -> Self {
        self.leeway = leeway;
        self
    }

    /// Tokens longer than this are refused before any parsing (default 4096, range 256..=65536).
    pub fn max_token_bytes(mut self, max: usize) -> Self {
        self.max_token_bytes = max;
        self
    }

    /// The longest a token may still live when presented (`exp - now`, default 1 h). The room's tokens live for
    /// the idle timeout (10 min), so the default leaves room.
    pub fn max_token_lifetime(mut self, lifetime: Duration) -> Self {
        self.max_token_lifetime = lifetime;
        self
    }

    /// Where time comes from (default [`SystemClock`]).
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// How many verified tokens to keep (default 10 000; 0 turns the cache off).
    pub fn cache_capacity(mut self, entries: u64) -> Self {
        self.cache_capacity = entries;
        self
    }

    /// How many finished sessions to remember (default 100 000). Past this, the entries whose deny TTL is over
    /// go first, then the eighth that lapse soonest (with a warning); size it above the number of orders one deny
    /// TTL can see.
    pub fn deny_capacity(mut self, sessions: u64) -> Self {
        self.deny_capacity = sessions;
        self
    }

    /// How long a finished session stays denied (default and minimum: `max_token_lifetime + 2 x leeway`, the
    /// longest any of its tokens can still be accepted).
    pub fn deny_ttl(mut self, ttl: Duration) -> Self {
        self.deny_ttl = Some(ttl);
        self
    }

    /// The verifier.
    ///
    /// # Errors
    /// [`ConfigError`] naming what to fix: no keys, no issuer or audience, an empty name, a token limit out of
    /// range, a leeway over 5 minutes, a zero lifetime, a deny TTL too short, a zero deny capacity.
    pub fn build(self) -> Result<Verifier, ConfigError> {
        if self.keys.is_empty() {
            return Err(ConfigError::NoKeys);
        }
        if self.issuers.is_empty() {
            return Err(ConfigError::NoIssuer);
        }
        if self.audiences.is_empty() {
            return Err(ConfigError::NoAudience);
        }
        if self.issuers.iter().any(String::is_empty) {
            return Err(ConfigError::EmptyName("issuer"));
        }
        if self.audiences.iter().any(String::is_empty) {
            return Err(ConfigError::EmptyName("audience"));
        }
        if !(256..=65_536).contains(&self.max_token_bytes) {
            return Err(ConfigError::TokenLimit(self.max_token_bytes));
        }
        if self.leeway > Duration::from_secs(300) {
            return Err(ConfigError::LeewayTooLarge(self.leeway));
        }
        if self.max_token_lifetime.as_secs() == 0 {
            return Err(ConfigError::ZeroLifetime);
        }
        let leeway_secs = self.leeway.as_secs();
        let needed = Duration::from_secs(self.max_token_lifetime.as_secs() + 2 * leeway_secs);
        let deny_ttl = self.deny_ttl.unwrap_or(needed);
        if deny_ttl < needed {
            return Err(ConfigError::DenyTtlTooShort {
                given: deny_ttl,
                needed,
            });
        }
        if self.deny_capacity == 0 {
            return Err(ConfigError::ZeroDenyCapacity);
        }
        let cache = (self.cache_capacity > 0).then(|| TokenCache {
            map: DashMap::with_hasher(FastHash::default()),
            capacity: usize::try_from(self.cache_capacity).unwrap_or(usize::MAX),
        });
        let deny = DenyList {
            map: DashMap::with_hasher(FastHash::default()),
            capacity: usize::try_from(self.deny_capacity).unwrap_or(usize::MAX),
            warned_at_ms: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
        };
        Ok(Verifier {
            inner: Arc::new(Inner {
                id: NEXT_VERIFIER_ID.fetch_add(1, Ordering::Relaxed),
                keys: RwLock::new((Arc::new(self.keys), 0)),
                generation: AtomicU64::new(0),
                issuers: self.issuers,
                audiences: self.audiences,
                leeway_secs,
                max_lifetime_secs: self.max_token_lifetime.as_secs(),
                max_token_bytes: self.max_token_bytes,
                clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock)),
                cache,
                deny,
                deny_ttl,
            }),
        })
    }
}

#[derive(Clone)]
struct CacheEntry {
    claims: Arc<Claims>,
    generation: u64,
}

/// A cached token: its entry, and the one session cookie value it was seen with and the caller found authentic
/// (see [`Verifier::verify_for_cookie_vouched`]; set once, never replaced).
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
struct TokenCache {
    map: DashMap<Box<str>, Cached, FastHash>,
    capacity: usize,
}

impl TokenCache {
    /// The token's entry, and whether `cookie` is the value remembered with it (compared in constant time).
    fn get(&self, token: &str, cookie: Option<&str>) -> Option<(CacheEntry, bool)> {
        self.map.get(token).map(|e| {
            let same = cookie.is_some_and(|c| {
                e.cookie
                    .get()
                    .is_some_and(|m| constant_time_eq::constant_time_eq(m.as_bytes(), c.as_bytes()))
            });
            (e.value().entry.clone(), same)
        })
    }

    fn insert(&self, token: &str, entry: CacheEntry, now_secs: u64) {
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
    fn remember_cookie(&self, token: &str, cookie: &str) {
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
/// above the finishes expected within one deny TTL (see [`VerifierBuilder::deny_capacity`]).
struct DenyList {
    map: DashMap<Box<str>, u64, FastHash>,
    capacity: usize,
    /// When the full-list warning was last logged (ms, 0: never).
    warned_at_ms: AtomicU64,
    /// Counts insertions (bumped after each): a session allowed when it read `n` is still allowed while it reads
    /// `n` (entries only ever leave otherwise, which denies nobody new). Lets a marker skip a second lookup.
    epoch: AtomicU64,
}

impl DenyList {
    fn denies(&self, session_id: &str, now_ms: u64) -> bool {
        self.map
            .get(session_id)
            .is_some_and(|until| *until > now_ms)
    }

    fn insert(&self, session_id: &str, until: u64, now_ms: u64) {
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

    fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }
}

struct Inner {
    /// This verifier's id (shared by its clones), unique in the process.
    id: u64,
    /// The key set and its generation, read together.
    keys: RwLock<(Arc<KeySet>, u64)>,
    /// The current generation, for the cached path (no lock).
    generation: AtomicU64,
    issuers: Vec<String>,
    audiences: Vec<String>,
    leeway_secs: u64,
    max_lifetime_secs: u64,
    max_token_bytes: usize,
    clock: SharedClock,
    cache: Option<TokenCache>,
    /// Session id -> denied until (ms, by `clock`).
    deny: DenyList,
    deny_ttl: Duration,
}

/// Checks admission tokens offline. Cheap to clone: every clone shares the keys, cache and deny list.
#[derive(Clone)]
pub struct Verifier {
    inner: Arc<Inner>,
}

impl fmt::Debug for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        f.debug_struct("Verifier")
            .field("kids", &self.keys().kids().collect::<Vec<_>>())
            .field("issuers", &i.issuers)
            .field("audiences", &i.audiences)
            .field("leeway_secs", &i.leeway_secs)
            .field("max_lifetime_secs", &i.max_lifetime_secs)
            .field("max_token_bytes", &i.max_token_bytes)
            .field("cache", &i.cache.as_ref().map(|c| c.map.len()))
            .field("denied", &i.deny.map.len())
            .finish_non_exhaustive()
    }
}

impl Verifier {
    /// A builder with secure defaults; keys, issuer and audience are required.
    pub fn builder() -> VerifierBuilder {
        VerifierBuilder::default()
    }

    /// Checks `token` fully (or through the cache, see the module docs) and returns its claims.
    ///
    /// # Errors
    /// The [`Refusal`] saying why the token is not accepted.
    pub fn verify(&self, token: &str) -> Result<Claims, Refusal> {
        self.verify_shared(token).map(|c| Claims::clone(&c))
    }

    /// [`verify`](Self::verify), and the token's `sub` must be `session_id`.
    ///
    /// # Errors
    /// As [`verify`](Self::verify); then [`Refusal::SessionMismatch`].
    pub fn verify_for_session(&self, token: &str, session_id: &str) -> Result<Claims, Refusal> {
        self.verify_for_session_shared(token, session_id)
            .map(|c| Claims::clone(&c))
    }

    /// [`verify_for_session`](Self::verify_for_session) without copying the claims out of the cache.
    ///
    /// # Errors
    /// As [`verify_for_session`](Self::verify_for_session).
    pub fn verify_for_session_shared(
        &self,
        token: &str,
        session_id: &str,
    ) -> Result<Arc<Claims>, Refusal> {
        let claims = self.verify_shared(token)?;
        if claims.sub != session_id {
            return Err(Refusal::SessionMismatch);
        }
        Ok(claims)
    }

    /// [`verify_for_session_shared`](Self::verify_for_session_shared), and on success a [`Verified`] marker
    /// holding the token's claims, for a [`VerifyService`](crate::VerifyService) using this same verifier
    /// further in (see [`verified`](crate::verified) for when it trusts the marker).
    ///
    /// # Errors
    /// As [`verify_for_session`](Self::verify_for_session).
    pub fn verify_for_session_vouched(
        &self,
        token: &str,
        session_id: &str,
    ) -> Result<Verified, Refusal> {
        // Read before the check: a finish recorded from here on changes it.
        let deny_epoch = self.inner.deny.epoch();
        let (entry, now_ms) = self.lookup(token)?;
        if entry.claims.sub != session_id {
            return Err(Refusal::SessionMismatch);
        }
        Ok(self.vouch(entry, now_ms, deny_epoch))
    }

    /// [`verify_for_session_vouched`](Self::verify_for_session_vouched) for a session presented as a cookie value
    /// whose authenticity the caller decides: `open` returns the session id of an authentic value (`None`: not
    /// authentic, [`Refusal::NoSession`]). `open` runs unless this token is cached and passed before with this very
    /// value (compared in constant time); after that first success the pair passes without it, and the steps that
    /// can change (time, deny list) still run every time. One value is remembered per token, the first that
    /// passed: the same token with another authentic value is checked with `open` every time.
    ///
    /// The room layer checks its session cookie's HMAC this way: once per admitted session and token, not on
    /// every request.
    ///
    /// # Errors
    /// As [`verify_for_session`](Self::verify_for_session); [`Refusal::NoSession`] when `open` refuses the value.
    #[doc(hidden)]
    pub fn verify_for_cookie_vouched<'c>(
        &self,
        token: &str,
        cookie: &'c str,
        open: impl FnOnce(&'c str) -> Option<&'c str>,
    ) -> Result<Verified, Refusal> {
        let inner = &*self.inner;
        let deny_epoch = inner.deny.epoch();
        if let Some(cache) = &inner.cache
            && token.len() <= inner.max_token_bytes
            && let Some((entry, true)) = cache.get(token, Some(cookie))
            && entry.generation == inner.generation.load(Ordering::Acquire)
        {
            let now_ms = inner.clock.now_ms();
            self.check_now(&entry.claims, now_ms)?;
            return Ok(self.vouch(entry, now_ms, deny_epoch));
        }
        // Not seen together yet: the cookie first (cheap), then the token (a full check on a cache miss).
        let session_id = open(cookie).ok_or(Refusal::NoSession)?;
        let (entry, now_ms) = self.lookup(token)?;
        if entry.claims.sub != session_id {
            return Err(Refusal::SessionMismatch);
        }
        if let Some(cache) = &inner.cache {
            cache.remember_cookie(token, cookie);
        }
        Ok(self.vouch(entry, now_ms, deny_epoch))
    }

    /// The marker for a token accepted at `now_ms` with the deny list at `deny_epoch`.
    fn vouch(&self, entry: CacheEntry, now_ms: u64, deny_epoch: u64) -> Verified {
        Verified {
            claims: entry.claims,
            verifier: self.inner.id,
            generation: entry.generation,
            checked_at_ms: now_ms,
            deny_epoch,
        }
    }

    /// The claims of a [`Verified`] marker, when the marker can stand in for the request's credentials: made by
    /// this verifier (or a clone: the same keys, issuers, audiences, cache and deny list) under the current key set.
    /// Then the checks that can change between two presentations of a token run as in
    /// [`verify_for_session_shared`](Self::verify_for_session_shared): expiry, not-yet-valid, lifetime and the deny
    /// list, unless nothing they read has changed since the marker was made (the same second by the verifier's
    /// clock, and no session denied since). `None`: the marker cannot be used, read the request and run the full
    /// check.
    pub(crate) fn check_vouched(&self, verified: Verified) -> Option<Result<Arc<Claims>, Refusal>> {
        let inner = &*self.inner;
        // The issuer and audience were checked by this verifier when it accepted the token.
        let usable = verified.verifier == inner.id
            && verified.generation == inner.generation.load(Ordering::Acquire);
        if !usable {
            return None;
        }
        let claims = verified.claims;
        let now_ms = inner.clock.now_ms();
        // The time checks read whole seconds, and the deny list denies nobody new without a new epoch.
        if now_ms / 1000 == verified.checked_at_ms / 1000
            && inner.deny.epoch() == verified.deny_epoch
        {
            return Some(Ok(claims));
        }
        Some(self.check_now(&claims, now_ms).map(|()| claims))
    }

    /// [`verify`](Self::verify) without copying the claims out of the cache.
    ///
    /// # Errors
    /// As [`verify`](Self::verify).
    pub fn verify_shared(&self, token: &str) -> Result<Arc<Claims>, Refusal> {
        self.lookup(token).map(|(e, _)| e.claims)
    }

    /// The token's cache entry (its claims and the key-set generation they were accepted under), and the clock
    /// reading the time checks used.
    fn lookup(&self, token: &str) -> Result<(CacheEntry, u64), Refusal> {
        let inner = &*self.inner;
        if token.is_empty() {
            return Err(Refusal::Missing);
        }
        if token.len() > inner.max_token_bytes {
            return Err(Refusal::TooLarge);
        }
        let now_ms = inner.clock.now_ms();
        if let Some(cache) = &inner.cache
            && let Some((entry, _)) = cache.get(token, None)
            && entry.generation == inner.generation.load(Ordering::Acquire)
        {
            self.check_now(&entry.claims, now_ms)?;
            return Ok((entry, now_ms));
        }
        let (keys, generation) = {
            let guard = inner.keys.read().unwrap_or_else(|e| e.into_inner());
            (Arc::clone(&guard.0), guard.1)
        };
        let claims = Arc::new(self.check_token(token, &keys)?);
        self.check_now(&claims, now_ms)?;
        let entry = CacheEntry { claims, generation };
        if let Some(cache) = &inner.cache {
            cache.insert(token, entry.clone(), now_ms / 1000);
        }
        Ok((entry, now_ms))
    }

    /// Steps 2 to 5: everything that depends on the token and the key set only.
    fn check_token(&self, token: &str, keys: &KeySet) -> Result<Claims, Refusal> {
        let inner = &*self.inner;
        let (header_b64, rest) = token.split_once('.').ok_or(Refusal::Malformed)?;
        let (payload_b64, signature_b64) = rest.split_once('.').ok_or(Refusal::Malformed)?;
        if signature_b64.contains('.') || header_b64.len() > MAX_HEADER_BYTES {
            return Err(Refusal::Malformed);
        }
        let header_json = URL_SAFE_NO_PAD
            .decode(header_b64)
            .map_err(|_| Refusal::Malformed)?;
        let header: serde_json::Map<String, Value> =
            serde_json::from_slice(&header_json).map_err(|_| Refusal::Malformed)?;
        let alg = match header.get("alg") {
            Some(Value::String(alg)) => alg.as_str(),
            _ => return Err(Refusal::Malformed),
        };
        if alg.eq_ignore_ascii_case("none") {
            return Err(Refusal::AlgorithmNone);
        }
        if let Some(param) = FORBIDDEN_HEADER_PARAMS
            .iter()
            .find(|p| header.contains_key(**p))
        {
            return Err(Refusal::ForbiddenHeader(param));
        }
        match header.get("typ") {
            None => {}
            Some(Value::String(t)) if t.eq_ignore_ascii_case("JWT") => {}
            Some(_) => return Err(Refusal::Malformed),
        }
        let kid = match header.get("kid") {
            None => return Err(Refusal::MissingKid),
            Some(Value::String(kid)) => kid.as_str(),
            Some(_) => return Err(Refusal::Malformed),
        };
        let key = keys.get(kid).ok_or(Refusal::UnknownKid)?;
        if alg != key.algorithm().as_str() {
            return Err(Refusal::AlgorithmMismatch);
        }
        let signing_input = &token[..header_b64.len() + 1 + payload_b64.len()];
        if !key.verify_signature(signing_input.as_bytes(), signature_b64) {
            return Err(Refusal::BadSignature);
        }
        let payload = URL_SAFE_NO_PAD
            .decode(payload_b64)
            .map_err(|_| Refusal::Malformed)?;
        let raw: RawClaims = serde_json::from_slice(&payload).map_err(|_| Refusal::Malformed)?;
        raw.into_claims(&inner.issuers, &inner.audiences)
    }

    /// Steps 6 and 7: what can change between two presentations of the same token (one clock reading, `now_ms`,
    /// for both).
    fn check_now(&self, claims: &Claims, now_ms: u64) -> Result<(), Refusal> {
        let inner = &*self.inner;
        let now_secs = now_ms / 1000;
        let leeway = inner.leeway_secs;
        if now_secs >= claims.exp.saturating_add(leeway) {
            return Err(Refusal::Expired);
        }
        if now_secs.saturating_add(leeway) < claims.nbf {
            return Err(Refusal::NotYetValid);
        }
        if claims.exp
            > now_secs
                .saturating_add(inner.max_lifetime_secs)
                .saturating_add(leeway)
        {
            return Err(Refusal::LifetimeTooLong);
        }
        if inner.deny.denies(&claims.sub, now_ms) {
            return Err(Refusal::Finished);
        }
        Ok(())
    }

    /// Denies every token of `session_id` from now on, for the deny TTL (see
    /// [`VerifierBuilder::deny_ttl`]). Called by [`Admission::finish`](crate::Admission::finish).
    pub fn deny_session(&self, session_id: &str) {
        let now_ms = self.inner.clock.now_ms();
        let until = now_ms.saturating_add(self.inner.deny_ttl.as_millis() as u64);
        self.inner.deny.insert(session_id, until, now_ms);
    }

    /// Whether `session_id` is denied (finished) now.
    #[must_use]
    pub fn is_denied(&self, session_id: &str) -> bool {
        self.inner
            .deny
            .denies(session_id, self.inner.clock.now_ms())
    }

    /// Swaps the key set at run time (key rotation without a restart). Every cached verification is dropped, so
    /// a token signed with a removed key is refused from the next request on. The deny list is kept.
    ///
    /// # Errors
    /// [`ConfigError::NoKeys`] for an empty set (the current set stays).
    pub fn replace_keys(&self, keys: KeySet) -> Result<(), ConfigError> {
        if keys.is_empty() {
            return Err(ConfigError::NoKeys);
        }
        let mut guard = self.inner.keys.write().unwrap_or_else(|e| e.into_inner());
        let generation = guard.1 + 1;
        *guard = (Arc::new(keys), generation);
        self.inner.generation.store(generation, Ordering::Release);
        drop(guard);
        if let Some(cache) = &self.inner.cache {
            cache.map.clear();
        }
        Ok(())
    }

    /// The current key set.
    #[must_use]
    pub fn keys(&self) -> Arc<KeySet> {
        Arc::clone(&self.inner.keys.read().unwrap_or_else(|e| e.into_inner()).0)
    }

    /// The accepted audiences (`aud`, the on-sale ids).
    #[must_use]
    pub fn audiences(&self) -> &[String] {
        &self.inner.audiences
    }

    /// The verifier's clock.
    #[must_use]
    pub fn clock(&self) -> &SharedClock {
        &self.inner.clock
    }

    /// The leeway on `exp` and `nbf`.
    #[must_use]
    pub fn leeway(&self) -> Duration {
        Duration::from_secs(self.inner.leeway_secs)
    }

    /// How long a finished session stays denied.
    #[must_use]
    pub fn deny_ttl(&self) -> Duration {
        self.inner.deny_ttl
    }

    /// The token size limit.
    #[must_use]
    pub fn max_token_bytes(&self) -> usize {
        self.inner.max_token_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::keys::{SigningKey, VerifyingKey};
    use serde_json::json;

    const START_MS: u64 = 1_700_000_000_000;
    const NOW: u64 = START_MS / 1000;
    const SID: &str = "session-0123456789abcdef";

    struct Fixture {
        key: SigningKey,
        clock: ManualClock,
        verifier: Verifier,
    }

    fn fixture_with(key: SigningKey) -> Fixture {
        fixture_tuned(key, |b| b)
    }

    /// The fixture's verifier with settings of the test's own on top.
    fn fixture_tuned(
        key: SigningKey,
        tune: impl FnOnce(VerifierBuilder) -> VerifierBuilder,
    ) -> Fixture {
        let clock = ManualClock::new(START_MS);
        let builder = Verifier::builder()
            .keys(&key)
            .issuer("room")
            .audience(["sale-1", "sale-2"])
            .leeway(Duration::from_secs(5))
            .clock(Arc::new(clock.clone()));
        let verifier = tune(builder).build().unwrap();
        Fixture {
            key,
            clock,
            verifier,
        }
    }

    fn fixture() -> Fixture {
        fixture_with(SigningKey::generate_ed25519("k1").unwrap())
    }

    fn claims() -> Claims {
        Claims::new("room", "sale-1", SID, NOW, Duration::from_secs(600))
    }

    fn b64j(v: &Value) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap())
    }

    /// A token built by hand from its pieces: header and payload JSON, signed by `key` over `h.p`.
    fn hand_token(key: &SigningKey, header: &Value, payload: &Value) -> String {
        let input = format!("{}.{}", b64j(header), b64j(payload));
        let sig = key_sign(key, input.as_bytes());
        format!("{input}.{sig}")
    }

    /// Signs raw bytes with an EdDSA `SigningKey`, straight through ed25519-dalek (not this crate's signer).
    fn key_sign(key: &SigningKey, message: &[u8]) -> String {
        use ed25519_dalek::Signer;
        use ed25519_dalek::pkcs8::DecodePrivateKey;
        assert_eq!(
            key.algorithm(),
            crate::keys::Algorithm::EdDSA,
            "hand tokens use EdDSA"
        );
        let k = ed25519_dalek::SigningKey::from_pkcs8_pem(&key.to_pem().unwrap()).unwrap();
        URL_SAFE_NO_PAD.encode(k.sign(message).to_bytes())
    }

    #[test]
    fn round_trip_for_each_algorithm() {
        for key in [
            SigningKey::generate_ed25519("ed").unwrap(),
            SigningKey::generate_es256("es").unwrap(),
            SigningKey::hs256("hs", [3u8; 32]).unwrap(),
        ] {
            let f = fixture_with(key);
            let c = claims().with_max_qty(4).with_extra("tier", "gold");
            let token = f.key.sign(&c).unwrap();
            assert_eq!(
                f.verifier.verify(&token).unwrap(),
                c,
                "{:?}",
                f.key.algorithm()
            );
            assert_eq!(f.verifier.verify_for_session(&token, SID).unwrap(), c);
        }
    }

    #[test]
    fn hand_built_token_is_accepted() {
        let f = fixture();
        let header = json!({"alg":"EdDSA","kid":"k1"});
        let payload = json!({"iss":"room","aud":"sale-2","sub":SID,"exp":NOW + 60,"max_qty":2});
        let token = hand_token(&f.key, &header, &payload);
        let c = f.verifier.verify(&token).unwrap();
        assert_eq!(
            (c.aud.as_str(), c.max_qty, c.nbf, c.jti.as_str()),
            ("sale-2", Some(2), 0, "")
        );
    }

    #[test]
    fn fixed_vector_is_byte_for_byte() {
        // RFC 8032 test 1 secret key; Ed25519 is deterministic, so the token is fixed. The expected text is
        // assembled independently (literal JSON, base64url, ed25519-dalek) from this crate's signer.
        use ed25519_dalek::pkcs8::EncodePrivateKey;
        let seed: [u8; 32] = [
            0x9d, 0x61, 0xb1, 0x9d, 0xef, 0xfd, 0x5a, 0x60, 0xba, 0x84, 0x4a, 0xf4, 0x92, 0xec,
            0x2c, 0xc4, 0x44, 0x49, 0xc5, 0x69, 0x7b, 0x32, 0x69, 0x19, 0x70, 0x3b, 0xac, 0x03,
            0x1c, 0xae, 0x7f, 0x60,
        ];
        let dalek = ed25519_dalek::SigningKey::from_bytes(&seed);
        let pem = dalek.to_pkcs8_pem(p256::pkcs8::LineEnding::LF).unwrap();
        let key = SigningKey::from_ed25519_pem("2024-01", &pem).unwrap();
        let mut c = Claims::new(
            "room",
            "sale-1",
            SID,
            1_700_000_000,
            Duration::from_secs(600),
        )
        .with_max_qty(4);
        c.jti = "fixed-jti".into();
        let token = key.sign(&c).unwrap();

        let header = r#"{"typ":"JWT","alg":"EdDSA","kid":"2024-01"}"#;
        let payload = format!(
            r#"{{"iss":"room","aud":"sale-1","sub":"{SID}","iat":1700000000,"nbf":1700000000,"exp":1700000600,"jti":"fixed-jti","max_qty":4}}"#
        );
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header),
            URL_SAFE_NO_PAD.encode(payload)
        );
        use ed25519_dalek::Signer;
        let expected = format!(
            "{input}.{}",
            URL_SAFE_NO_PAD.encode(dalek.sign(input.as_bytes()).to_bytes())
        );
        assert_eq!(token, expected);
        assert!(token.starts_with("eyJ0eXAiOiJKV1QiLCJhbGciOiJFZERTQSIsImtpZCI6IjIwMjQtMDEifQ."));
        let f = fixture_with(key);
        assert_eq!(f.verifier.verify(&expected).unwrap(), c);
        assert_eq!(
            f.verifier.keys().jwks()["keys"][0]["x"],
            "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
            "RFC 8032 test 1 public key"
        );
    }

    #[test]
    fn key_rotation() {
        let old = SigningKey::generate_ed25519("2024-old").unwrap();
        let new = SigningKey::generate_es256("2025-new").unwrap();
        let clock = ManualClock::new(START_MS);
        // Both published: tokens of either verify.
        let jwks = KeySet::from_keys([old.verifying_key(), new.verifying_key()])
            .unwrap()
            .to_jwks_json();
        let verifier = Verifier::builder()
            .keys(KeySet::from_jwks_json(&jwks).unwrap())
            .issuer("room")
            .audience("sale-1")
            .clock(Arc::new(clock))
            .build()
            .unwrap();
        let old_token = old.sign(&claims()).unwrap();
        let new_token = new.sign(&claims()).unwrap();
        assert!(verifier.verify(&old_token).is_ok());
        assert!(verifier.verify(&new_token).is_ok());
        // The old key is withdrawn: its (cached!) token is refused, the new one still verifies.
        verifier
            .replace_keys(KeySet::from(new.verifying_key()))
            .unwrap();
        assert_eq!(verifier.verify(&old_token), Err(Refusal::UnknownKid));
        assert!(verifier.verify(&new_token).is_ok());
        // A key never published.
        let stranger = SigningKey::generate_ed25519("stranger").unwrap();
        assert_eq!(
            verifier.verify(&stranger.sign(&claims()).unwrap()),
            Err(Refusal::UnknownKid)
        );
        assert_eq!(
            verifier.replace_keys(KeySet::new()),
            Err(ConfigError::NoKeys)
        );
    }

    #[test]
    fn refusals_of_the_header() {
        let f = fixture();
        let good = json!({"iss":"room","aud":"sale-1","sub":SID,"exp":NOW + 60});
        let cases = [
            (json!({"alg":"none","kid":"k1"}), Refusal::AlgorithmNone),
            (json!({"alg":"nOnE","kid":"k1"}), Refusal::AlgorithmNone),
            (json!({"alg":"EdDSA"}), Refusal::MissingKid),
            (json!({"alg":"EdDSA","kid":"k2"}), Refusal::UnknownKid),
            (json!({"alg":"EdDSA","kid":7}), Refusal::Malformed),
            (
                json!({"alg":"ES256","kid":"k1"}),
                Refusal::AlgorithmMismatch,
            ),
            (
                json!({"alg":"HS256","kid":"k1"}),
                Refusal::AlgorithmMismatch,
            ),
            (
                json!({"alg":"RS256","kid":"k1"}),
                Refusal::AlgorithmMismatch,
            ),
            (json!({"kid":"k1"}), Refusal::Malformed),
            (
                json!({"alg":"EdDSA","kid":"k1","typ":"at+jwt"}),
                Refusal::Malformed,
            ),
            (
                json!({"alg":"EdDSA","kid":"k1","jku":"https://evil/jwks"}),
                Refusal::ForbiddenHeader("jku"),
            ),
            (
                json!({"alg":"EdDSA","kid":"k1","x5u":"https://evil/cert"}),
                Refusal::ForbiddenHeader("x5u"),
            ),
            (
                json!({"alg":"EdDSA","kid":"k1","jwk":{"kty":"OKP"}}),
                Refusal::ForbiddenHeader("jwk"),
            ),
            (
                json!({"alg":"EdDSA","kid":"k1","x5c":["MII"]}),
                Refusal::ForbiddenHeader("x5c"),
            ),
            (
                json!({"alg":"EdDSA","kid":"k1","crit":["exp"]}),
                Refusal::ForbiddenHeader("crit"),
            ),
        ];
        for (header, want) in cases {
            let token = hand_token(&f.key, &header, &good);
            assert_eq!(f.verifier.verify(&token), Err(want), "{header}");
        }
        // alg none with an empty signature, the classic form.
        let none = format!(
            "{}.{}.",
            b64j(&json!({"alg":"none","typ":"JWT"})),
            b64j(&good)
        );
        assert_eq!(f.verifier.verify(&none), Err(Refusal::AlgorithmNone));
    }

    #[test]
    fn hs256_signed_with_the_public_key_is_refused() {
        // The classic confusion: an attacker signs HS256 using the published public key bytes as the secret.
        let f = fixture();
        let public = f.key.verifying_key().to_jwk().unwrap();
        let x = URL_SAFE_NO_PAD
            .decode(public["x"].as_str().unwrap())
            .unwrap();
        let mut secret = x.clone();
        secret.extend_from_slice(&x);
        let forger = SigningKey::hs256("k1", &x).unwrap();
        let token = forger.sign(&claims()).unwrap();
        assert_eq!(f.verifier.verify(&token), Err(Refusal::AlgorithmMismatch));
        let forger = SigningKey::hs256("k1", &secret).unwrap();
        assert_eq!(
            f.verifier.verify(&forger.sign(&claims()).unwrap()),
            Err(Refusal::AlgorithmMismatch)
        );
    }

    #[test]
    fn refusals_of_signature_shape_and_size() {
        let f = fixture();
        let token = f.key.sign(&claims()).unwrap();
        // Flip a signature character.
        let mut bad = token.clone().into_bytes();
        let last = bad.len() - 5;
        bad[last] = if bad[last] == b'A' { b'B' } else { b'A' };
        assert_eq!(
            f.verifier.verify(std::str::from_utf8(&bad).unwrap()),
            Err(Refusal::BadSignature)
        );
        // Another key with the same kid.
        let impostor = SigningKey::generate_ed25519("k1").unwrap();
        assert_eq!(
            f.verifier.verify(&impostor.sign(&claims()).unwrap()),
            Err(Refusal::BadSignature)
        );
        // Payload swapped under a valid signature.
        let parts: Vec<&str> = token.split('.').collect();
        let mut other = claims();
        other.sub = "someone-else-0123456789".into();
        let swapped = format!(
            "{}.{}.{}",
            parts[0],
            b64j(&serde_json::to_value(&other).unwrap()),
            parts[2]
        );
        assert_eq!(f.verifier.verify(&swapped), Err(Refusal::BadSignature));
        // Signature not base64url.
        assert_eq!(
            f.verifier.verify(&format!("{}.{}.!!", parts[0], parts[1])),
            Err(Refusal::BadSignature)
        );
        for malformed in [
            "abc",
            "a.b",
            "a.b.c.d",
            "!!.b.c",
            "e30.e30.e30",
            &format!("{}..", "eyJ"),
        ] {
            assert_eq!(
                f.verifier.verify(malformed),
                Err(Refusal::Malformed),
                "{malformed}"
            );
        }
        let long_header = format!(
            "{}.{}.{}",
            "A".repeat(MAX_HEADER_BYTES + 1),
            parts[1],
            parts[2]
        );
        assert_eq!(f.verifier.verify(&long_header), Err(Refusal::Malformed));
        assert_eq!(f.verifier.verify(""), Err(Refusal::Missing));
        assert_eq!(f.verifier.verify(&"a".repeat(4097)), Err(Refusal::TooLarge));
        // Payload that is not claims, validly signed.
        let token = hand_token(&f.key, &json!({"alg":"EdDSA","kid":"k1"}), &json!([1, 2]));
        assert_eq!(f.verifier.verify(&token), Err(Refusal::Malformed));
        let token = hand_token(
            &f.key,
            &json!({"alg":"EdDSA","kid":"k1"}),
            &json!({"iss":"room","aud":"sale-1","sub":SID,"exp":"soon"}),
        );
        assert_eq!(f.verifier.verify(&token), Err(Refusal::Malformed));
    }

    #[test]
    fn refusals_of_the_claims() {
        let f = fixture();
        let h = json!({"alg":"EdDSA","kid":"k1","typ":"JWT"});
        let base = json!({"iss":"room","aud":"sale-1","sub":SID,"exp":NOW + 60});
        let with = |k: &str, v: Value| {
            let mut p = base.clone();
            p[k] = v;
            p
        };
        let without = |k: &str| {
            let mut p = base.clone();
            p.as_object_mut().unwrap().remove(k);
            p
        };
        let cases = [
            (with("iss", json!("evil")), Refusal::WrongIssuer),
            (with("aud", json!("sale-9")), Refusal::WrongAudience),
            (with("sub", json!("")), Refusal::MissingSubject),
            (without("sub"), Refusal::MissingSubject),
            (without("iss"), Refusal::MissingClaim("iss")),
            (without("aud"), Refusal::MissingClaim("aud")),
            (without("exp"), Refusal::MissingClaim("exp")),
            (with("exp", json!(NOW - 5)), Refusal::Expired),
            (with("nbf", json!(NOW + 6)), Refusal::NotYetValid),
            (with("exp", json!(NOW + 3600 + 6)), Refusal::LifetimeTooLong),
        ];
        for (payload, want) in cases {
            assert_eq!(
                f.verifier.verify(&hand_token(&f.key, &h, &payload)),
                Err(want),
                "{payload}"
            );
        }
        // Inside the leeway both ways.
        assert!(
            f.verifier
                .verify(&hand_token(&f.key, &h, &with("exp", json!(NOW - 4))))
                .is_ok()
        );
        assert!(
            f.verifier
                .verify(&hand_token(&f.key, &h, &with("nbf", json!(NOW + 5))))
                .is_ok()
        );
        // Session binding.
        let token = f.key.sign(&claims()).unwrap();
        assert_eq!(
            f.verifier
                .verify_for_session(&token, "other-session-000000"),
            Err(Refusal::SessionMismatch)
        );
    }

    #[test]
    fn clock_decides_expiry_even_when_cached() {
        let f = fixture();
        let token = f.key.sign(&claims()).unwrap();
        assert!(f.verifier.verify(&token).is_ok()); // now cached
        f.clock.advance(Duration::from_secs(600 + 4));
        assert!(f.verifier.verify(&token).is_ok(), "within leeway");
        f.clock.advance(Duration::from_secs(1));
        assert_eq!(f.verifier.verify(&token), Err(Refusal::Expired));
        f.clock.set_ms(START_MS - 60_000);
        assert_eq!(
            f.verifier.verify(&token),
            Err(Refusal::NotYetValid),
            "the cache re-checks nbf too"
        );
    }

    #[test]
    fn deny_list_applies_to_cached_tokens_and_lapses_after_ttl() {
        let f = fixture();
        let token = f.key.sign(&claims()).unwrap();
        assert!(f.verifier.verify(&token).is_ok());
        f.verifier.deny_session(SID);
        assert!(f.verifier.is_denied(SID));
        assert_eq!(f.verifier.verify(&token), Err(Refusal::Finished));
        assert_eq!(
            f.verifier.verify_for_session(&token, SID),
            Err(Refusal::Finished)
        );
        assert!(!f.verifier.is_denied("another-session-0000"));
        assert_eq!(f.verifier.deny_ttl(), Duration::from_secs(3600 + 10));
        f.clock.advance(f.verifier.deny_ttl());
        assert!(
            !f.verifier.is_denied(SID),
            "deny entries follow the verifier's clock"
        );
    }

    #[test]
    fn a_cookie_that_passed_with_a_token_is_not_opened_again_but_time_and_deny_still_apply() {
        let f = fixture();
        let token = f.key.sign(&claims()).unwrap();
        let opened = std::cell::Cell::new(0);
        // The caller's authenticity check: "<id>.ok" is authentic, anything else is not.
        let open = |v: &'static str| {
            opened.set(opened.get() + 1);
            v.strip_suffix(".ok")
        };
        let good: &'static str = format!("{SID}.ok").leak();
        let v = &f.verifier;
        // A forged cookie is refused before the token is even looked at, and nothing is remembered.
        assert_eq!(
            v.verify_for_cookie_vouched(&token, "forged", open).err(),
            Some(Refusal::NoSession)
        );
        // An authentic cookie of another session: a mismatch, not remembered either.
        let other: &'static str = "another-session-0000.ok";
        for _ in 0..2 {
            assert_eq!(
                v.verify_for_cookie_vouched(&token, other, open).err(),
                Some(Refusal::SessionMismatch)
            );
        }
        assert_eq!(opened.get(), 3);
        // The owner's cookie: opened once, then the same pair passes without it.
        for _ in 0..3 {
            let m = v.verify_for_cookie_vouched(&token, good, open).unwrap();
            assert_eq!(m.claims().sub, SID);
        }
        assert_eq!(opened.get(), 4, "opened on the first pass only");
        // A value differing in one byte is not the remembered one.
        let near: &'static str = format!("{SID}.oK").leak();
        assert_eq!(
            v.verify_for_cookie_vouched(&token, near, open).err(),
            Some(Refusal::NoSession)
        );
        assert_eq!(opened.get(), 5);
        // The remembered pair still meets the clock and the deny list.
        f.clock.advance(Duration::from_secs(600 + 5));
        assert_eq!(
            v.verify_for_cookie_vouched(&token, good, open).err(),
            Some(Refusal::Expired)
        );
        let g = fixture();
        let token = g.key.sign(&claims()).unwrap();
        assert!(
            g.verifier
                .verify_for_cookie_vouched(&token, good, open)
                .is_ok()
        );
        g.verifier.deny_session(SID);
        assert_eq!(
            g.verifier
                .verify_for_cookie_vouched(&token, good, open)
                .err(),
            Some(Refusal::Finished)
        );
        // Without a cache there is nothing to remember: every pass opens the cookie.
        let h = fixture_tuned(SigningKey::generate_ed25519("k1").unwrap(), |b| {
            b.cache_capacity(0)
        });
        let token = h.key.sign(&claims()).unwrap();
        let before = opened.get();
        for _ in 0..2 {
            assert!(
                h.verifier
                    .verify_for_cookie_vouched(&token, good, open)
                    .is_ok()
            );
        }
        assert_eq!(opened.get(), before + 2);
    }

    #[test]
    fn a_full_deny_list_drops_lapsed_entries_first_then_the_one_lapsing_soonest() {
        let f = fixture_tuned(SigningKey::generate_ed25519("k1").unwrap(), |b| {
            b.deny_capacity(3)
        });
        let (v, clock) = (&f.verifier, &f.clock);
        let sid = |i: u32| format!("session-{i:016}");
        v.deny_session(&sid(1));
        clock.advance(Duration::from_secs(60));
        v.deny_session(&sid(2));
        v.deny_session(&sid(3));
        // Full of live entries: the fourth pushes out an eighth of three (one, rounded up), the one that lapses
        // soonest (the oldest), nobody else.
        v.deny_session(&sid(4));
        assert!(!v.is_denied(&sid(1)));
        assert!((2..=4).all(|i| v.is_denied(&sid(i))));
        // Denying a session again refreshes it without evicting anyone.
        v.deny_session(&sid(2));
        assert!((2..=4).all(|i| v.is_denied(&sid(i))));
        // Once 2, 3 and 4 have lapsed, a new entry clears them out instead of evicting anything live.
        clock.advance(v.deny_ttl());
        v.deny_session(&sid(5));
        assert!(v.is_denied(&sid(5)));
        assert_eq!(v.inner.deny.map.len(), 1);
    }

    #[test]
    fn cache_off_still_verifies() {
        let key = SigningKey::generate_ed25519("k1").unwrap();
        let v = Verifier::builder()
            .keys(&key)
            .issuer("room")
            .audience("sale-1")
            .cache_capacity(0)
            .build()
            .unwrap();
        let c = Claims::new(
            "room",
            "sale-1",
            SID,
            crate::clock::Clock::now_secs(&crate::clock::SystemClock),
            Duration::from_secs(60),
        );
        let token = key.sign(&c).unwrap();
        assert!(v.verify(&token).is_ok());
        assert!(v.verify(&token).is_ok());
        assert!(format!("{v:?}").contains("k1"));
    }

    #[test]
    fn a_full_token_cache_drops_expired_tokens_then_those_expiring_soonest() {
        let f = fixture_tuned(SigningKey::generate_ed25519("k1").unwrap(), |b| {
            b.cache_capacity(8)
        });
        let (key, v, clock) = (&f.key, &f.verifier, &f.clock);
        let cached = |t: &str| v.inner.cache.as_ref().unwrap().get(t, None).is_some();
        let len = || v.inner.cache.as_ref().unwrap().map.len();
        let token = |iat: u64, minutes: u64| {
            let c = Claims::new(
                "room",
                "sale-1",
                SID,
                iat,
                Duration::from_secs(60 * minutes),
            );
            key.sign(&c).unwrap()
        };
        // Eight tokens with lifetimes of 1..=8 minutes fill the cache.
        let tokens: Vec<String> = (1..=8).map(|m| token(NOW, m)).collect();
        for t in &tokens {
            assert!(v.verify(t).is_ok());
        }
        assert!(tokens.iter().all(|t| cached(t)));
        // A ninth, with nothing expired: a quarter (the two expiring soonest) goes, the rest stays.
        let ninth = token(NOW, 10);
        assert!(v.verify(&ninth).is_ok());
        assert!(cached(&ninth));
        assert!(tokens[..2].iter().all(|t| !cached(t)));
        assert!(tokens[2..].iter().all(|t| cached(t)));
        assert_eq!(len(), 7);
        // An evicted token still verifies (in full), and is cached again.
        assert!(v.verify(&tokens[1]).is_ok());
        assert!(cached(&tokens[1]));
        // Two more of ten minutes: the next two expiring soonest go as the first of them comes in.
        let same: Vec<String> = (0..2).map(|_| token(NOW, 10)).collect();
        for t in &same {
            assert!(v.verify(t).is_ok());
        }
        assert_eq!(len(), 8);
        // Seven and a half minutes on, a new token pushes out the expired ones only.
        clock.advance(Duration::from_secs(450));
        let late = token(NOW + 450, 10);
        assert!(v.verify(&late).is_ok());
        assert!(tokens[..7].iter().all(|t| !cached(t)), "expired by then");
        assert!(
            [&late, &ninth, &same[0], &same[1], &tokens[7]]
                .iter()
                .all(|t| cached(t))
        );
        assert_eq!(len(), 5);
        // Tokens that all expire in the same second: exactly a quarter goes, not every one sharing that second.
        for _ in 0..10 {
            assert!(v.verify(&token(NOW + 450, 10)).is_ok());
        }
        assert_eq!(
            len(),
            7,
            "an insert into a full cache of 8 leaves 8 - 2 + 1"
        );
    }

    #[test]
    fn builder_refuses_unsafe_configs() {
        let key = VerifyingKey::hs256("h", [1u8; 32]).unwrap();
        let ok = || {
            Verifier::builder()
                .keys(key.clone())
                .issuer("room")
                .audience("sale")
        };
        assert!(ok().build().is_ok());
        assert_eq!(
            Verifier::builder()
                .issuer("r")
                .audience("a")
                .build()
                .unwrap_err(),
            ConfigError::NoKeys
        );
        assert_eq!(
            Verifier::builder()
                .keys(key.clone())
                .audience("a")
                .build()
                .unwrap_err(),
            ConfigError::NoIssuer
        );
        assert_eq!(
            Verifier::builder()
                .keys(key.clone())
                .issuer("r")
                .build()
                .unwrap_err(),
            ConfigError::NoAudience
        );
        assert_eq!(
            ok().issuer("").build().unwrap_err(),
            ConfigError::EmptyName("issuer")
        );
        assert_eq!(
            ok().max_token_bytes(10).build().unwrap_err(),
            ConfigError::TokenLimit(10)
        );
        assert!(matches!(
            ok().leeway(Duration::from_secs(301)).build(),
            Err(ConfigError::LeewayTooLarge(_))
        ));
        assert_eq!(
            ok().max_token_lifetime(Duration::ZERO).build().unwrap_err(),
            ConfigError::ZeroLifetime
        );
        assert!(matches!(
            ok().deny_ttl(Duration::from_secs(60)).build(),
            Err(ConfigError::DenyTtlTooShort { .. })
        ));
        assert_eq!(
            ok().deny_capacity(0).build().unwrap_err(),
            ConfigError::ZeroDenyCapacity
        );
        let v = ok()
            .audience(vec!["b", "c"])
            .issuer(vec!["r2".to_string()])
            .build()
            .unwrap();
        assert_eq!(v.max_token_bytes(), 4096);
        assert_eq!(v.leeway(), DEFAULT_LEEWAY);
    }
}
