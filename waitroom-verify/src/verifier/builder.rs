//! [`VerifierBuilder`]: the verifier's settings, their defaults and the checks `build` makes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use super::cache::{DenyList, TokenCache};
use super::{
    DEFAULT_CACHE_CAPACITY, DEFAULT_DENY_CAPACITY, DEFAULT_LEEWAY, DEFAULT_MAX_TOKEN_BYTES,
    DEFAULT_MAX_TOKEN_LIFETIME, Inner, NEXT_VERIFIER_ID, Verifier,
};
use crate::clock::{SharedClock, SystemClock};
use crate::error::ConfigError;
use crate::keys::KeySet;

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
        let cache = (self.cache_capacity > 0).then(|| TokenCache::new(self.cache_capacity));
        let deny = DenyList::new(self.deny_capacity);
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
                #[cfg(feature = "jwks")]
                unknown_kid: tokio::sync::Notify::new(),
            }),
        })
    }
}
