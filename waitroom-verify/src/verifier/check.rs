//! The checks of the module docs, in order, and how each `verify*` path uses the cache.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

use super::cache::CacheEntry;
use super::{FORBIDDEN_HEADER_PARAMS, MAX_HEADER_BYTES, Verifier};
use crate::claims::{Claims, RawClaims};
use crate::error::Refusal;
use crate::keys::KeySet;
use crate::verified::Verified;

impl Verifier {
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
        let Some(key) = keys.get(kid) else {
            // A rotation this verifier has not seen yet, or a stranger's token: a key source may look again.
            #[cfg(feature = "jwks")]
            inner.unknown_kid.notify_one();
            return Err(Refusal::UnknownKid);
        };
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
}
