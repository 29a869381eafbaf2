//! Admission tokens, issued and renewed by the room.
//!
//! A token is a JWT signed with the room's [`SigningKey`] (Ed25519 by default) whose claims are
//! [`waitroom_verify::Claims`]: `iss` (the room's issuer name), `aud` (the on-sale id), `sub` (the session id),
//! `iat`/`nbf`/`exp`, a random `jti`, and `max_qty` when the room sets a purchase limit. It lives for the room's
//! `idle_timeout`; the layer re-issues it on a protected request once more than half its life is gone, so an
//! active session keeps a valid token and an idle one lapses `idle_timeout` after its last request.
//!
//! The room checks tokens with its own [`Verifier`] (the same code the order service runs), so the deny list of
//! finished sessions lives there too.

use std::time::Duration;

use bytes::Bytes;
use waitroom_verify::{Claims, KeySet, Refusal, SharedClock, SigningKey, Verified, Verifier};

use crate::error::BuildError;

/// Clock skew the room's own verifier allows (several instances sharing a key may disagree slightly).
pub(crate) const ROOM_LEEWAY: Duration = Duration::from_secs(5);

/// The room's token issuer and checker.
pub(crate) struct Tokens {
    key: SigningKey,
    pub(crate) verifier: Verifier,
    issuer: String,
    audience: String,
    lifetime: Duration,
    max_qty: Option<u32>,
    jwks: Bytes,
    clock: SharedClock,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("key", &self.key)
            .field("issuer", &self.issuer)
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

impl Tokens {
    pub(crate) fn new(
        key: SigningKey,
        also_publish: Vec<waitroom_verify::VerifyingKey>,
        issuer: String,
        audience: String,
        lifetime: Duration,
        max_qty: Option<u32>,
        clock: SharedClock,
    ) -> Result<Self, BuildError> {
        let mut keys = KeySet::from(&key);
        for k in also_publish {
            keys.insert(k).map_err(|source| BuildError::Key {
                setting: "publish_key",
                source,
            })?;
        }
        let jwks = Bytes::from(keys.to_jwks_json());
        let verifier = Verifier::builder()
            .keys(keys)
            .issuer(issuer.clone())
            .audience(audience.clone())
            .leeway(ROOM_LEEWAY)
            .max_token_lifetime(lifetime)
            .clock(clock.clone())
            .build()
            .map_err(|source| BuildError::Verifier {
                setting: "signing_key",
                source,
            })?;
        Ok(Self {
            key,
            verifier,
            issuer,
            audience,
            lifetime,
            max_qty,
            jwks,
            clock,
        })
    }

    /// How long a token lives (the idle timeout).
    pub(crate) fn lifetime(&self) -> Duration {
        self.lifetime
    }

    /// The JWKS document of the public keys.
    pub(crate) fn jwks(&self) -> Bytes {
        self.jwks.clone()
    }

    /// A fresh token for `session`, valid from now for the lifetime.
    pub(crate) fn issue(&self, session: &str) -> Option<String> {
        let mut claims = Claims::new(
            self.issuer.clone(),
            self.audience.clone(),
            session,
            self.clock.now_secs(),
            self.lifetime,
        );
        claims.max_qty = self.max_qty;
        match self.key.sign(&claims) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::error!(error = %e, "could not sign an admission token");
                None
            }
        }
    }

    /// The first candidate that is a valid token for `session`, with its claims, as a [`Verified`] marker (a
    /// `VerifyLayer` further in, using this verifier, need not check it again); else why the first candidate was
    /// refused (`None`: no candidate at all).
    pub(crate) fn check(
        &self,
        candidates: &[&str],
        session: &str,
    ) -> Result<Verified, Option<Refusal>> {
        first_accepted(candidates, |t| {
            self.verifier.verify_for_session_vouched(t, session)
        })
    }

    /// [`check`](Self::check) with the session as its cookie value, whose HMAC `open` checks (returning the
    /// session id) only when a candidate comes with a value it has not passed with before
    /// ([`Verifier::verify_for_cookie_vouched`]): an admitted session's requests skip the HMAC.
    pub(crate) fn check_with_cookie<'c>(
        &self,
        candidates: &[&str],
        cookie: &'c str,
        open: impl Fn(&'c str) -> Option<&'c str>,
    ) -> Result<Verified, Option<Refusal>> {
        first_accepted(candidates, |t| {
            self.verifier.verify_for_cookie_vouched(t, cookie, &open)
        })
    }

    /// Whether more than half of the token's life was gone when it was checked.
    pub(crate) fn renewal_due(&self, verified: &Verified) -> bool {
        let claims = verified.claims();
        let now = verified.checked_at_ms() / 1000;
        let life = claims.exp.saturating_sub(claims.iat).max(1);
        now.saturating_sub(claims.iat).saturating_mul(2) > life
    }

    /// Refuses every token of `session` from now on (it finished).
    pub(crate) fn deny(&self, session: &str) {
        self.verifier.deny_session(session);
    }
}

/// The first candidate `check` accepts; else why the first was refused (`None`: no candidate at all).
fn first_accepted(
    candidates: &[&str],
    check: impl Fn(&str) -> Result<Verified, Refusal>,
) -> Result<Verified, Option<Refusal>> {
    let mut first = None;
    for &t in candidates {
        match check(t) {
            Ok(v) => return Ok(v),
            Err(r) => {
                first.get_or_insert(r);
            }
        }
    }
    Err(first)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use waitroom_verify::ManualClock;

    use super::*;

    const T0: u64 = 1_800_000_000_000;
    const SID: &str = "session-0123456789abcdef";

    fn tokens(clock: &ManualClock) -> Tokens {
        Tokens::new(
            SigningKey::generate_ed25519("room-key-1").unwrap(),
            Vec::new(),
            "waitroom".into(),
            "ev".into(),
            Duration::from_secs(60),
            None,
            Arc::new(clock.clone()),
        )
        .unwrap()
    }

    /// Renewal is due once more than half of a pass's life is gone, not at half exactly: a 60 s pass is renewed
    /// from its 31st second on (the layer's test checks that it then is, over HTTP).
    #[test]
    fn renewal_is_due_once_more_than_half_the_life_is_gone() {
        let clock = ManualClock::new(T0);
        let t = tokens(&clock);
        let pass = t.issue(SID).unwrap();
        for (after, due) in [(0, false), (29, false), (30, false), (31, true), (59, true)] {
            clock.set_ms(T0 + after * 1000);
            let verified = t.check(&[pass.as_str()], SID).unwrap();
            assert_eq!(t.renewal_due(&verified), due, "{after} s into a 60 s pass");
        }
    }

    /// Debug names the issuer and the key's id, never the key.
    #[test]
    fn debug_shows_the_issuer_and_the_kid_only() {
        let t = tokens(&ManualClock::new(T0));
        let debug = format!("{t:?}");
        assert!(
            debug.starts_with("Tokens")
                && debug.contains("waitroom")
                && debug.contains("room-key-1"),
            "{debug}"
        );
        assert!(!debug.contains("PRIVATE"), "{debug}");
    }
}
