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
//!
//! # Where things live
//! - `mod.rs` (this file): the limits and defaults, [`Verifier`] itself (its shared state, the deny calls, key
//!   replacement, the accessors).
//! - `builder.rs`: [`VerifierBuilder`] and [`Accepted`], the settings and their checks.
//! - `check.rs`: the checks above, in order, and the cache's use on each path (`verify*`, the [`Verified`]
//!   markers).
//! - `cache.rs`: the verified-token cache and the deny list, two bounded concurrent maps.
//! - `tests.rs`: the unit tests.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::clock::SharedClock;
use crate::error::ConfigError;
use crate::keys::KeySet;
#[cfg(doc)]
use crate::{error::Refusal, verified::Verified};

mod builder;
mod cache;
mod check;
#[cfg(test)]
mod tests;

pub use builder::{Accepted, VerifierBuilder};
use cache::{DenyList, TokenCache};

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
    /// Woken when a token names a `kid` the key set lacks (a [`JwksSource`](crate::jwks::JwksSource) watching
    /// this verifier fetches the keys again). Touched on that refusal only, never on an accepted token.
    #[cfg(feature = "jwks")]
    unknown_kid: tokio::sync::Notify,
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
            .field("cache", &i.cache.as_ref().map(TokenCache::len))
            .field("denied", &i.deny.len())
            .finish_non_exhaustive()
    }
}

impl Verifier {
    /// A builder with secure defaults; keys, issuer and audience are required.
    pub fn builder() -> VerifierBuilder {
        VerifierBuilder::default()
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
            cache.clear();
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

    /// Woken when a token names a `kid` the current key set lacks (the JWKS source's cue to fetch again).
    #[cfg(feature = "jwks")]
    pub(crate) fn unknown_kid(&self) -> &tokio::sync::Notify {
        &self.inner.unknown_kid
    }

    /// The token size limit.
    #[must_use]
    pub fn max_token_bytes(&self) -> usize {
        self.inner.max_token_bytes
    }
}
