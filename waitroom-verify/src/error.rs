//! Why a token was refused, and what can go wrong while configuring, loading keys or signing.
//!
//! A [`Refusal`] is not an error of the service: the layer turns it into a response (a redirect to the line or a
//! 401 problem body). Its [`code`](Refusal::code) is a stable snake_case name, fit for metric labels and for the
//! `reason` member of the JSON problem body.

/// Why a request's admission token was refused. Every refusal the verifier can make has its own variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// No token at all: neither the token cookie nor `Authorization: Bearer`.
    #[error("no admission token")]
    Missing,
    /// A token but no usable session id (no session cookie, no `X-Waitroom-Session`, or one of the wrong shape).
    #[error("no session to bind the token to")]
    NoSession,
    /// The token is not a compact JWS of three base64url segments with JSON header and claims.
    #[error("malformed token")]
    Malformed,
    /// The token is longer than the configured maximum.
    #[error("token too large")]
    TooLarge,
    /// The header says `alg: none` (in any letter case).
    #[error("unsigned token (alg none)")]
    AlgorithmNone,
    /// The header's `alg` is not the algorithm pinned to the key its `kid` names.
    #[error("algorithm does not match the key")]
    AlgorithmMismatch,
    /// The header names no `kid`.
    #[error("token names no key id")]
    MissingKid,
    /// The header's `kid` is not in the verifier's key set.
    #[error("unknown key id")]
    UnknownKid,
    /// The header names a key or a key URL (`jku`, `x5u`, `jwk`, `x5c`) or critical extensions (`crit`), which
    /// are never trusted.
    #[error("forbidden header parameter `{0}`")]
    ForbiddenHeader(&'static str),
    /// The signature does not verify with the named key.
    #[error("bad signature")]
    BadSignature,
    /// A required claim (`iss`, `aud` or `exp`) is absent.
    #[error("missing claim `{0}`")]
    MissingClaim(&'static str),
    /// `exp` (plus leeway) has passed.
    #[error("token expired")]
    Expired,
    /// `nbf` (minus leeway) is still ahead.
    #[error("token not yet valid")]
    NotYetValid,
    /// `exp` lies further ahead than the verifier's maximum token lifetime allows.
    #[error("token lives longer than allowed")]
    LifetimeTooLong,
    /// `iss` is not an accepted issuer.
    #[error("wrong issuer")]
    WrongIssuer,
    /// `aud` is not an accepted audience (on-sale).
    #[error("wrong audience")]
    WrongAudience,
    /// `sub` is absent or empty.
    #[error("token names no subject")]
    MissingSubject,
    /// `sub` is not the session the request carries.
    #[error("token belongs to another session")]
    SessionMismatch,
    /// The session has finished (its order went through); its tokens are no longer accepted here.
    #[error("session finished")]
    Finished,
}

impl Refusal {
    /// A stable snake_case name for the refusal: metric label and `reason` in problem bodies.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::Missing => "missing_token",
            Refusal::NoSession => "missing_session",
            Refusal::Malformed => "malformed",
            Refusal::TooLarge => "too_large",
            Refusal::AlgorithmNone => "alg_none",
            Refusal::AlgorithmMismatch => "alg_mismatch",
            Refusal::MissingKid => "missing_kid",
            Refusal::UnknownKid => "unknown_kid",
            Refusal::ForbiddenHeader(_) => "forbidden_header",
            Refusal::BadSignature => "bad_signature",
            Refusal::MissingClaim(_) => "missing_claim",
            Refusal::Expired => "expired",
            Refusal::NotYetValid => "not_yet_valid",
            Refusal::LifetimeTooLong => "lifetime_too_long",
            Refusal::WrongIssuer => "wrong_issuer",
            Refusal::WrongAudience => "wrong_audience",
            Refusal::MissingSubject => "missing_subject",
            Refusal::SessionMismatch => "session_mismatch",
            Refusal::Finished => "finished",
        }
    }

    /// A short human title for problem bodies.
    #[must_use]
    pub fn title(&self) -> &'static str {
        match self {
            Refusal::Missing => "Admission token required",
            Refusal::NoSession => "Session required",
            Refusal::Finished => "Session finished",
            Refusal::Expired => "Admission token expired",
            Refusal::SessionMismatch => "Admission token belongs to another session",
            _ => "Invalid admission token",
        }
    }

    /// Every refusal, one of each kind (with a representative parameter), for tests and metric pre-registration.
    #[must_use]
    pub fn all() -> &'static [Refusal] {
        &[
            Refusal::Missing,
            Refusal::NoSession,
            Refusal::Malformed,
            Refusal::TooLarge,
            Refusal::AlgorithmNone,
            Refusal::AlgorithmMismatch,
            Refusal::MissingKid,
            Refusal::UnknownKid,
            Refusal::ForbiddenHeader("jku"),
            Refusal::BadSignature,
            Refusal::MissingClaim("exp"),
            Refusal::Expired,
            Refusal::NotYetValid,
            Refusal::LifetimeTooLong,
            Refusal::WrongIssuer,
            Refusal::WrongAudience,
            Refusal::MissingSubject,
            Refusal::SessionMismatch,
            Refusal::Finished,
        ]
    }
}

/// A configuration a verifier or layer cannot run with. The message says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The key set is empty.
    #[error("no verifying keys: give the verifier at least one key (`.keys(KeySet)`)")]
    NoKeys,
    /// No issuer was given.
    #[error("no accepted issuer: set `.issuer(\"<room name>\")` (the room's `iss`)")]
    NoIssuer,
    /// No audience was given.
    #[error("no accepted audience: set `.audience(\"<on-sale id>\")` (the room's `aud`)")]
    NoAudience,
    /// An issuer or audience is the empty string.
    #[error("empty {0}: issuers and audiences must be non-empty strings")]
    EmptyName(&'static str),
    /// The token size limit is out of range.
    #[error("max_token_bytes {0} is out of range: use 256..=65536")]
    TokenLimit(usize),
    /// The leeway is unreasonably large.
    #[error("leeway of {0:?} is too large: use at most 5 minutes")]
    LeewayTooLarge(std::time::Duration),
    /// The maximum token lifetime is zero.
    #[error("max_token_lifetime must be at least one second")]
    ZeroLifetime,
    /// The deny list would forget a finished session while one of its tokens could still be valid.
    #[error(
        "deny_ttl {given:?} is shorter than max_token_lifetime + 2 x leeway ({needed:?}): a finished session's \
         token could outlive its deny entry"
    )]
    DenyTtlTooShort {
        /// What was configured.
        given: std::time::Duration,
        /// The least that is safe.
        needed: std::time::Duration,
    },
    /// The deny list has no room.
    #[error("deny_capacity must be at least 1")]
    ZeroDenyCapacity,
    /// The join URL cannot be put in a `Location` header.
    #[error(
        "join_url {0:?} must be a path starting with '/' or an http(s) URL, without spaces or control characters"
    )]
    JoinUrl(String),
    /// A cookie name is not an RFC 6265 token.
    #[error("cookie name {0:?} is not a valid cookie name")]
    CookieName(String),
}

/// A key that could not be loaded.
///
/// Not `PartialEq`: [`NotJson`](Self::NotJson) keeps the parser's error as its source. Compare with `matches!`.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The PEM text is not a key of the expected kind.
    #[error("not a {0} key in PEM (PKCS#8 private or SPKI public)")]
    Pem(&'static str),
    /// The JWK is not JSON or lacks a member.
    #[error("bad JWK: {0}")]
    Jwk(String),
    /// The JWK's key type, curve or algorithm is not supported (EdDSA/Ed25519, ES256/P-256, HS256 only).
    #[error("unsupported JWK: {0}")]
    Unsupported(String),
    /// A public JWK carries private material (`d`). Publishing it would leak the signing key.
    #[error("JWK `{0}` carries private key material (`d`); publish public keys only")]
    PrivateMaterial(String),
    /// The JWKS is not a JSON object with a `keys` array, or is too large.
    #[error("bad JWKS document: {0}")]
    Jwks(String),
    /// The JWK or JWKS text is not JSON (`.0` says which: `"JWK"` or `"JWKS document"`).
    #[error("{0} is not JSON")]
    NotJson(&'static str, #[source] std::sync::Arc<serde_json::Error>),
    /// Two keys share a `kid`.
    #[error("duplicate kid {0:?}")]
    DuplicateKid(String),
    /// A key id is empty or too long (1..=128 characters).
    #[error("bad kid {0:?}: use 1..=128 printable ASCII characters")]
    BadKid(String),
    /// An HS256 secret is shorter than 32 bytes.
    #[error("HS256 secret too short ({0} bytes): use at least 32 random bytes")]
    ShortSecret(usize),
}

/// Signing failed.
///
/// Not `PartialEq`: [`Serialize`](Self::Serialize) keeps serde_json's error as its source. Compare with `matches!`.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SignError {
    /// An application claim in `extra` reuses a registered name (`iss`, `aud`, `sub`, ...).
    #[error("extra claim {0:?} collides with a registered claim")]
    ReservedClaim(String),
    /// The claims could not be serialized.
    #[error("claims could not be serialized")]
    Serialize(#[source] std::sync::Arc<serde_json::Error>),
    /// The cryptographic backend failed.
    #[error("signing failed")]
    Crypto(#[source] jsonwebtoken::errors::Error),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn codes_are_unique_snake_case() {
        let mut seen = HashSet::new();
        for r in Refusal::all() {
            let code = r.code();
            assert!(
                code.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "{code}"
            );
            assert!(seen.insert(code), "duplicate code {code}");
            assert!(!r.title().is_empty());
            assert!(!r.to_string().is_empty());
        }
    }

    #[test]
    fn config_errors_say_what_to_do() {
        assert!(ConfigError::NoIssuer.to_string().contains(".issuer("));
        assert!(
            ConfigError::TokenLimit(1)
                .to_string()
                .contains("256..=65536")
        );
    }
}
