//! [`Verified`]: a token one layer already checked, handed to the next layer in the same process.
//!
//! When the room layer and a [`VerifyLayer`](crate::VerifyLayer) run in one process around the same routes, both
//! would read and check the same credentials on every admitted request. The room layer checks them first: it reads
//! the session cookie (verifying its HMAC tag, which the verify crate alone cannot) and the token, and calls
//! [`Verifier::verify_for_session_vouched`](crate::Verifier::verify_for_session_vouched) (or its variant that checks
//! the cookie's tag once per token and remembers the value that passed), which returns a `Verified` only for a
//! valid token whose `sub` is that session. The room puts it in the request extensions, and the
//! [`VerifyService`](crate::VerifyService) takes it as the request's credentials instead of reading the cookies and
//! looking the token up again, but only when all of these hold (otherwise it reads the request and runs its full
//! check, as without the marker):
//! - the marker was made by **the same verifier** the layer uses (a clone of it: same keys, issuers, audiences,
//!   cache and deny list), and that verifier's key set has not been replaced since
//!   ([`Verifier::replace_keys`](crate::Verifier::replace_keys)). The issuer and audience were then checked by
//!   that verifier when it accepted the token.
//!
//! Then the checks that can change between two presentations of a token run as usual, by the verifier's clock:
//! expiry, not-yet-valid, lifetime and the deny list of finished sessions (skipped when nothing they read has
//! changed since the marker was made: the same second, and nobody denied since). The admission is the room's: the layer
//! and the room never disagree about a request (a request the room lets in with a valid token is not refused
//! further in because it also carries a stale `Authorization` header, say).
//!
//! A `Verified` can only be made by a successful check: it has no public constructor, and it never leaves the
//! process (it is not a header). It holds the token's claims, not the token; its `Debug` output shows the
//! session's fingerprint, not its id.

use std::fmt;
use std::sync::Arc;

use crate::claims::Claims;

/// A token that a [`Verifier`](crate::Verifier) accepted for a session, made by
/// [`Verifier::verify_for_session_vouched`](crate::Verifier::verify_for_session_vouched). See the
/// [module docs](self) for when a [`VerifyService`](crate::VerifyService) trusts it.
#[derive(Clone)]
pub struct Verified {
    pub(crate) claims: Arc<Claims>,
    /// Which verifier made it ([`Verifier`](crate::Verifier) id).
    pub(crate) verifier: u64,
    /// The key-set generation the token was accepted under.
    pub(crate) generation: u64,
    /// The verifier's clock reading (ms) when the check ran.
    pub(crate) checked_at_ms: u64,
    /// The verifier's deny-list epoch read before the check.
    pub(crate) deny_epoch: u64,
}

impl Verified {
    /// The verified claims.
    #[must_use]
    pub fn claims(&self) -> &Arc<Claims> {
        &self.claims
    }

    /// When the check ran, in milliseconds since the Unix epoch by the verifier's clock (so the layer that made
    /// the marker can reason about the token's age without reading the clock again).
    #[must_use]
    pub fn checked_at_ms(&self) -> u64 {
        self.checked_at_ms
    }
}

impl fmt::Debug for Verified {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Verified")
            .field("session", &crate::session::fingerprint(&self.claims.sub))
            .field("event", &self.claims.aud)
            .finish_non_exhaustive()
    }
}
