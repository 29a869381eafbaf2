//! The admission token's claims: one definition, signed by the room and checked by the verifier.
//!
//! | claim     | meaning                                                   |
//! |-----------|-----------------------------------------------------------|
//! | `iss`     | the room that issued the token                            |
//! | `aud`     | the on-sale (event) the token admits to                   |
//! | `sub`     | the session id; the request's session cookie must name it |
//! | `iat`     | issued at (seconds since the Unix epoch)                  |
//! | `nbf`     | not before (seconds)                                      |
//! | `exp`     | expires at (seconds)                                      |
//! | `jti`     | a random token id                                         |
//! | `max_qty` | optional purchase limit (seats per order)                 |
//! | others    | application claims, kept in [`Claims::extra`]            |

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Deserializer, Serialize};

use crate::error::{Refusal, SignError};

/// Claim names the token contract reserves; an application claim in [`Claims::extra`] may not reuse them.
pub const REGISTERED_CLAIMS: &[&str] =
    &["iss", "aud", "sub", "iat", "nbf", "exp", "jti", "max_qty"];

/// The claims of an admission token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claims {
    /// The issuing room.
    pub iss: String,
    /// The on-sale (event) id.
    pub aud: String,
    /// The session id the token is bound to.
    pub sub: String,
    /// Issued at, seconds since the Unix epoch.
    pub iat: u64,
    /// Not before, seconds since the Unix epoch.
    pub nbf: u64,
    /// Expiry, seconds since the Unix epoch.
    pub exp: u64,
    /// Random token id.
    pub jti: String,
    /// Purchase limit (seats per order), if the room sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_qty: Option<u32>,
    /// Application claims beyond the registered ones.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl Claims {
    /// Claims for a token issued now (`now_secs`, from the room's clock) that lives for `lifetime`:
    /// `iat = nbf = now_secs`, `exp = now_secs + lifetime`, a fresh random `jti`, no purchase limit.
    #[must_use]
    pub fn new(
        iss: impl Into<String>,
        aud: impl Into<String>,
        sub: impl Into<String>,
        now_secs: u64,
        lifetime: Duration,
    ) -> Self {
        Claims {
            iss: iss.into(),
            aud: aud.into(),
            sub: sub.into(),
            iat: now_secs,
            nbf: now_secs,
            exp: now_secs.saturating_add(lifetime.as_secs()),
            jti: new_jti(),
            max_qty: None,
            extra: serde_json::Map::new(),
        }
    }

    /// Sets the purchase limit.
    #[must_use]
    pub fn with_max_qty(mut self, max_qty: u32) -> Self {
        self.max_qty = Some(max_qty);
        self
    }

    /// Adds an application claim. Names in [`REGISTERED_CLAIMS`] are refused when signing.
    #[must_use]
    pub fn with_extra(
        mut self,
        name: impl Into<String>,
        value: impl Into<serde_json::Value>,
    ) -> Self {
        self.extra.insert(name.into(), value.into());
        self
    }

    /// Checks that no application claim reuses a registered name.
    ///
    /// # Errors
    /// [`SignError::ReservedClaim`] naming the first colliding claim.
    pub fn check_extra(&self) -> Result<(), SignError> {
        match self
            .extra
            .keys()
            .find(|k| REGISTERED_CLAIMS.contains(&k.as_str()))
        {
            Some(k) => Err(SignError::ReservedClaim(k.clone())),
            None => Ok(()),
        }
    }
}

/// A fresh random token id: 128 bits, base64url.
#[must_use]
pub fn new_jti() -> String {
    let bytes: [u8; 16] = rand::random();
    URL_SAFE_NO_PAD.encode(bytes)
}

/// `aud` may be a string or an array of strings (RFC 7519 4.1.3).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

/// What the verifier reads from a token's payload before deciding: every registered claim optional, so that an
/// absent one gets its own refusal instead of a generic parse failure.
#[derive(Debug, Deserialize)]
pub(crate) struct RawClaims {
    iss: Option<String>,
    #[serde(default, deserialize_with = "aud_opt")]
    aud: Option<OneOrMany>,
    sub: Option<String>,
    iat: Option<u64>,
    nbf: Option<u64>,
    exp: Option<u64>,
    jti: Option<String>,
    max_qty: Option<u32>,
    #[serde(flatten)]
    extra: serde_json::Map<String, serde_json::Value>,
}

fn aud_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<OneOrMany>, D::Error> {
    Option::<OneOrMany>::deserialize(d)
}

impl RawClaims {
    /// Turns the raw claims into [`Claims`], checking presence and the accepted issuers and audiences.
    /// `aud` arrays are accepted when one member is an accepted audience; that member becomes `Claims::aud`.
    pub(crate) fn into_claims(
        self,
        issuers: &[String],
        audiences: &[String],
    ) -> Result<Claims, Refusal> {
        let iss = self.iss.ok_or(Refusal::MissingClaim("iss"))?;
        let aud = self.aud.ok_or(Refusal::MissingClaim("aud"))?;
        let exp = self.exp.ok_or(Refusal::MissingClaim("exp"))?;
        if !issuers.contains(&iss) {
            return Err(Refusal::WrongIssuer);
        }
        let aud = match aud {
            OneOrMany::One(a) if audiences.contains(&a) => a,
            OneOrMany::Many(list) => list
                .into_iter()
                .find(|a| audiences.contains(a))
                .ok_or(Refusal::WrongAudience)?,
            OneOrMany::One(_) => return Err(Refusal::WrongAudience),
        };
        let sub = match self.sub {
            Some(s) if !s.is_empty() => s,
            _ => return Err(Refusal::MissingSubject),
        };
        let iat = self.iat.unwrap_or(0);
        Ok(Claims {
            iss,
            aud,
            sub,
            iat,
            nbf: self.nbf.unwrap_or(iat),
            exp,
            jti: self.jti.unwrap_or_default(),
            max_qty: self.max_qty,
            extra: self.extra,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn new_sets_times_and_random_jti() {
        let a = Claims::new("room", "sale", "s1", 1_000, Duration::from_secs(600));
        let b = Claims::new("room", "sale", "s1", 1_000, Duration::from_secs(600));
        assert_eq!((a.iat, a.nbf, a.exp), (1_000, 1_000, 1_600));
        assert_ne!(a.jti, b.jti);
        assert_eq!(a.jti.len(), 22);
    }

    #[test]
    fn serializes_in_contract_order_and_skips_absent_limit() {
        let mut c = Claims::new("room", "sale", "s1", 10, Duration::from_secs(5));
        c.jti = "j".into();
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"iss":"room","aud":"sale","sub":"s1","iat":10,"nbf":10,"exp":15,"jti":"j"}"#
        );
        let c = c.with_max_qty(4).with_extra("tier", "gold");
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["max_qty"], 4);
        assert_eq!(v["tier"], "gold");
        let back: Claims = serde_json::from_value(v).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn reserved_extra_claims_are_refused() {
        let c =
            Claims::new("room", "sale", "s1", 10, Duration::from_secs(5)).with_extra("sub", "x");
        assert!(matches!(c.check_extra(), Err(SignError::ReservedClaim(k)) if k == "sub"));
    }

    #[test]
    fn raw_claims_give_each_absence_its_reason() {
        let iss = names(&["room"]);
        let aud = names(&["sale"]);
        let parse = |v: serde_json::Value| {
            serde_json::from_value::<RawClaims>(v)
                .unwrap()
                .into_claims(&iss, &aud)
        };
        let full = json!({"iss":"room","aud":"sale","sub":"s","exp":5});
        assert!(parse(full.clone()).is_ok());
        for (drop, want) in [
            ("iss", Refusal::MissingClaim("iss")),
            ("aud", Refusal::MissingClaim("aud")),
            ("exp", Refusal::MissingClaim("exp")),
            ("sub", Refusal::MissingSubject),
        ] {
            let mut v = full.clone();
            v.as_object_mut().unwrap().remove(drop);
            assert_eq!(parse(v), Err(want), "without {drop}");
        }
        assert_eq!(
            parse(json!({"iss":"room","aud":"sale","sub":"","exp":5})),
            Err(Refusal::MissingSubject)
        );
        assert_eq!(
            parse(json!({"iss":"evil","aud":"sale","sub":"s","exp":5})),
            Err(Refusal::WrongIssuer)
        );
        assert_eq!(
            parse(json!({"iss":"room","aud":"other","sub":"s","exp":5})),
            Err(Refusal::WrongAudience)
        );
        let c = parse(json!({"iss":"room","aud":["x","sale"],"sub":"s","exp":5,"iat":2})).unwrap();
        assert_eq!((c.aud.as_str(), c.nbf), ("sale", 2));
        assert_eq!(
            parse(json!({"iss":"room","aud":["x"],"sub":"s","exp":5})),
            Err(Refusal::WrongAudience)
        );
    }
}
