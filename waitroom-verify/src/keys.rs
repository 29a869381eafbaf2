//! Keys: each pinned to one algorithm and named by a `kid`.
//!
//! - [`SigningKey`] is the room's private key. EdDSA (Ed25519) is the default; ES256 (P-256) and HS256 are
//!   options. It signs [`Claims`] with `kid` and `typ: JWT` in the header, exports its PKCS#8 PEM so one key
//!   file can be shared by several room instances, and gives its [`VerifyingKey`].
//! - [`VerifyingKey`] is what the verifier checks a signature with: a public key (EdDSA, ES256) or the shared
//!   secret (HS256). It loads from PEM or from a JWK.
//! - [`KeySet`] holds several verifying keys by `kid`, so keys rotate without downtime: publish the new key next to
//!   the old one, start signing with the new one, drop the old one once its tokens have expired. It reads and
//!   writes JWKS documents; HS256 secrets are never published.
//!
//! The algorithm belongs to the key, never to the token: a token whose header names another algorithm than its
//! key's is refused (so a public key can never be used as an HMAC secret).

use std::fmt;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use jsonwebtoken::{DecodingKey, EncodingKey};
use p256::elliptic_curve::Generate;
use p256::pkcs8::LineEnding;
use serde_json::{Value, json};

use crate::claims::Claims;
use crate::error::{KeyError, SignError};

/// The shortest HS256 secret accepted, in bytes.
pub const MIN_HS256_SECRET_BYTES: usize = 32;

/// The largest JWKS document read, in bytes.
pub const MAX_JWKS_BYTES: usize = 256 * 1024;

/// The signature algorithms waitroom tokens use. Each key is pinned to exactly one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Ed25519 signatures (the default).
    EdDSA,
    /// ECDSA on P-256 with SHA-256.
    ES256,
    /// HMAC-SHA-256 with a shared secret (signer and verifier hold the same secret; never published).
    HS256,
}

impl Algorithm {
    /// The JOSE name (`EdDSA`, `ES256`, `HS256`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::EdDSA => "EdDSA",
            Algorithm::ES256 => "ES256",
            Algorithm::HS256 => "HS256",
        }
    }

    /// The algorithm with this exact JOSE name, if supported.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "EdDSA" => Some(Algorithm::EdDSA),
            "ES256" => Some(Algorithm::ES256),
            "HS256" => Some(Algorithm::HS256),
            _ => None,
        }
    }

    /// Whether the key is a shared secret (HS256).
    #[must_use]
    pub fn is_symmetric(self) -> bool {
        matches!(self, Algorithm::HS256)
    }

    fn jwt(self) -> jsonwebtoken::Algorithm {
        match self {
            Algorithm::EdDSA => jsonwebtoken::Algorithm::EdDSA,
            Algorithm::ES256 => jsonwebtoken::Algorithm::ES256,
            Algorithm::HS256 => jsonwebtoken::Algorithm::HS256,
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn check_kid(kid: impl Into<String>) -> Result<String, KeyError> {
    let kid = kid.into();
    if kid.is_empty() || kid.len() > 128 || !kid.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Err(KeyError::BadKid(kid));
    }
    Ok(kid)
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

// ---------------------------------------------------------------------------------------------------------------
// Verifying keys
// ---------------------------------------------------------------------------------------------------------------

#[derive(Clone)]
enum Material {
    Ed25519(ed25519_dalek::VerifyingKey),
    Es256(p256::ecdsa::VerifyingKey),
    Hs256,
}

/// A key that checks signatures: a `kid`, the one algorithm it accepts, and the key material.
///
/// `Debug` shows the kid and algorithm only; an HS256 secret never appears.
#[derive(Clone)]
pub struct VerifyingKey {
    kid: String,
    alg: Algorithm,
    material: Material,
    decoding: DecodingKey,
}

impl fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifyingKey")
            .field("kid", &self.kid)
            .field("alg", &self.alg)
            .field(
                "material",
                &if self.alg.is_symmetric() {
                    "[redacted]"
                } else {
                    "[public]"
                },
            )
            .finish()
    }
}

impl VerifyingKey {
    fn ed25519(kid: String, key: ed25519_dalek::VerifyingKey) -> Self {
        VerifyingKey {
            kid,
            alg: Algorithm::EdDSA,
            decoding: DecodingKey::from_ed_der(key.as_bytes()),
            material: Material::Ed25519(key),
        }
    }

    fn es256(kid: String, key: p256::ecdsa::VerifyingKey) -> Self {
        let point = key.to_sec1_point(false);
        VerifyingKey {
            kid,
            alg: Algorithm::ES256,
            decoding: DecodingKey::from_ec_der(point.as_bytes()),
            material: Material::Es256(key),
        }
    }

    /// An Ed25519 verifying key from PEM: an SPKI public key (`BEGIN PUBLIC KEY`) or, for convenience, a PKCS#8
    /// private key whose public half is taken.
    ///
    /// # Errors
    /// [`KeyError::BadKid`] or [`KeyError::Pem`] when the text is neither.
    pub fn from_ed25519_pem(kid: impl Into<String>, pem: &str) -> Result<Self, KeyError> {
        let kid = check_kid(kid)?;
        let key = ed25519_dalek::VerifyingKey::from_public_key_pem(pem)
            .or_else(|_| ed25519_dalek::SigningKey::from_pkcs8_pem(pem).map(|k| k.verifying_key()))
            .map_err(|_| KeyError::Pem("Ed25519"))?;
        Ok(Self::ed25519(kid, key))
    }

    /// A P-256 (ES256) verifying key from PEM: SPKI public key or PKCS#8 private key.
    ///
    /// # Errors
    /// [`KeyError::BadKid`] or [`KeyError::Pem`].
    pub fn from_es256_pem(kid: impl Into<String>, pem: &str) -> Result<Self, KeyError> {
        let kid = check_kid(kid)?;
        let key = p256::ecdsa::VerifyingKey::from_public_key_pem(pem)
            .or_else(|_| p256::ecdsa::SigningKey::from_pkcs8_pem(pem).map(|k| *k.verifying_key()))
            .map_err(|_| KeyError::Pem("P-256"))?;
        Ok(Self::es256(kid, key))
    }

    /// A verifying key from PEM of either supported curve (Ed25519 tried first, then P-256).
    ///
    /// # Errors
    /// [`KeyError::BadKid`] or [`KeyError::Pem`].
    pub fn from_pem(kid: impl Into<String>, pem: &str) -> Result<Self, KeyError> {
        let kid = check_kid(kid)?;
        Self::from_ed25519_pem(kid.clone(), pem)
            .or_else(|_| Self::from_es256_pem(kid, pem))
            .map_err(|_| KeyError::Pem("Ed25519 or P-256"))
    }

    /// An HS256 key: the secret shared with the signing room. It is never published in a JWKS.
    ///
    /// # Errors
    /// [`KeyError::ShortSecret`] below [`MIN_HS256_SECRET_BYTES`]; [`KeyError::BadKid`].
    pub fn hs256(kid: impl Into<String>, secret: impl AsRef<[u8]>) -> Result<Self, KeyError> {
        let kid = check_kid(kid)?;
        let secret = secret.as_ref();
        if secret.len() < MIN_HS256_SECRET_BYTES {
            return Err(KeyError::ShortSecret(secret.len()));
        }
        let decoding = DecodingKey::from_secret(secret).map_err(|_| KeyError::ShortSecret(0))?;
        Ok(VerifyingKey {
            kid,
            alg: Algorithm::HS256,
            material: Material::Hs256,
            decoding,
        })
    }

    /// A verifying key from a JWK (RFC 7517) given as a JSON value.
    ///
    /// Accepted: `{"kty":"OKP","crv":"Ed25519","x":..}` (EdDSA), `{"kty":"EC","crv":"P-256","x":..,"y":..}`
    /// (ES256), `{"kty":"oct","k":..}` (HS256). `kid` is required. When present, `alg` must match the key type
    /// and `use` must be `sig`. An OKP or EC JWK that carries a private `d` is refused, because a document holding
    /// it should never have been published.
    ///
    /// # Errors
    /// [`KeyError::Jwk`], [`KeyError::Unsupported`], [`KeyError::PrivateMaterial`], [`KeyError::BadKid`],
    /// [`KeyError::ShortSecret`].
    pub fn from_jwk(jwk: &Value) -> Result<Self, KeyError> {
        let obj = jwk
            .as_object()
            .ok_or_else(|| KeyError::Jwk("not a JSON object".into()))?;
        let text = |name: &str| -> Result<Option<&str>, KeyError> {
            match obj.get(name) {
                None => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.as_str())),
                Some(_) => Err(KeyError::Jwk(format!("`{name}` is not a string"))),
            }
        };
        let need = |name: &str| -> Result<&str, KeyError> {
            text(name)?.ok_or_else(|| KeyError::Jwk(format!("missing `{name}`")))
        };
        let bytes = |name: &str, len: Option<usize>| -> Result<Vec<u8>, KeyError> {
            let raw = URL_SAFE_NO_PAD
                .decode(need(name)?)
                .map_err(|_| KeyError::Jwk(format!("`{name}` is not base64url")))?;
            match len {
                Some(len) if raw.len() != len => Err(KeyError::Jwk(format!(
                    "`{name}` must be {len} bytes, got {}",
                    raw.len()
                ))),
                _ => Ok(raw),
            }
        };
        let kid = check_kid(need("kid")?)?;
        if let Some(u) = text("use")?
            && u != "sig"
        {
            return Err(KeyError::Unsupported(format!(
                "key `{kid}` has use {u:?}, not \"sig\""
            )));
        }
        let expect_alg = |want: Algorithm| -> Result<(), KeyError> {
            match text("alg")? {
                None => Ok(()),
                Some(a) if a == want.as_str() => Ok(()),
                Some(a) => Err(KeyError::Unsupported(format!(
                    "key `{kid}` has alg {a:?}, expected {want}"
                ))),
            }
        };
        let kty = need("kty")?;
        if kty != "oct" && obj.contains_key("d") {
            return Err(KeyError::PrivateMaterial(kid));
        }
        match kty {
            "OKP" => {
                let crv = need("crv")?;
                if crv != "Ed25519" {
                    return Err(KeyError::Unsupported(format!("OKP curve {crv:?}")));
                }
                expect_alg(Algorithm::EdDSA)?;
                let x: [u8; 32] = bytes("x", Some(32))?.try_into().expect("length checked");
                let key = ed25519_dalek::VerifyingKey::from_bytes(&x)
                    .map_err(|_| KeyError::Jwk("`x` is not an Ed25519 point".into()))?;
                Ok(Self::ed25519(kid, key))
            }
            "EC" => {
                let crv = need("crv")?;
                if crv != "P-256" {
                    return Err(KeyError::Unsupported(format!("EC curve {crv:?}")));
                }
                expect_alg(Algorithm::ES256)?;
                let mut point = Vec::with_capacity(65);
                point.push(0x04);
                point.extend_from_slice(&bytes("x", Some(32))?);
                point.extend_from_slice(&bytes("y", Some(32))?);
                let key = p256::ecdsa::VerifyingKey::from_sec1_bytes(&point)
                    .map_err(|_| KeyError::Jwk("`x`,`y` is not a P-256 point".into()))?;
                Ok(Self::es256(kid, key))
            }
            "oct" => {
                expect_alg(Algorithm::HS256)?;
                let secret = bytes("k", None)?;
                Self::hs256(kid, secret)
            }
            other => Err(KeyError::Unsupported(format!("key type {other:?}"))),
        }
    }

    /// [`from_jwk`](Self::from_jwk) from JSON text.
    ///
    /// # Errors
    /// As [`from_jwk`](Self::from_jwk), and [`KeyError::NotJson`] when the text is not JSON.
    pub fn from_jwk_str(jwk: &str) -> Result<Self, KeyError> {
        let v: Value =
            serde_json::from_str(jwk).map_err(|e| KeyError::NotJson("JWK", Arc::new(e)))?;
        Self::from_jwk(&v)
    }

    /// The key id.
    #[must_use]
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The one algorithm this key verifies.
    #[must_use]
    pub fn algorithm(&self) -> Algorithm {
        self.alg
    }

    /// Whether the key may be published (EdDSA and ES256 public keys; never an HS256 secret).
    #[must_use]
    pub fn is_public(&self) -> bool {
        !self.alg.is_symmetric()
    }

    /// The public JWK (with `kid`, `alg` and `use: sig`), or `None` for an HS256 secret.
    #[must_use]
    pub fn to_jwk(&self) -> Option<Value> {
        match &self.material {
            Material::Ed25519(k) => Some(json!({
                "kty": "OKP", "crv": "Ed25519", "x": b64(k.as_bytes()),
                "kid": self.kid, "alg": "EdDSA", "use": "sig",
            })),
            Material::Es256(k) => {
                let point = k.to_sec1_point(false);
                let raw = point.as_bytes();
                Some(json!({
                    "kty": "EC", "crv": "P-256", "x": b64(&raw[1..33]), "y": b64(&raw[33..65]),
                    "kid": self.kid, "alg": "ES256", "use": "sig",
                }))
            }
            Material::Hs256 => None,
        }
    }

    /// The public key as SPKI PEM (`BEGIN PUBLIC KEY`), or `None` for an HS256 secret.
    #[must_use]
    pub fn to_pem(&self) -> Option<String> {
        match &self.material {
            Material::Ed25519(k) => k.to_public_key_pem(LineEnding::LF).ok(),
            Material::Es256(k) => k.to_public_key_pem(LineEnding::LF).ok(),
            Material::Hs256 => None,
        }
    }

    /// Checks `signature_b64` (base64url) over `message` with this key and its pinned algorithm.
    pub(crate) fn verify_signature(&self, message: &[u8], signature_b64: &str) -> bool {
        jsonwebtoken::crypto::verify(signature_b64, message, &self.decoding, self.alg.jwt())
            .unwrap_or(false)
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Signing keys
// ---------------------------------------------------------------------------------------------------------------

enum Secret {
    Ed25519(ed25519_dalek::SigningKey),
    Es256(p256::ecdsa::SigningKey),
    Hs256,
}

/// The room's signing key: a `kid`, its algorithm and private material.
///
/// `Debug` shows the kid and algorithm only.
pub struct SigningKey {
    secret: Secret,
    encoding: EncodingKey,
    /// The base64url header `{"typ":"JWT","alg":..,"kid":..}`, the same for every token this key signs.
    header_b64: String,
    verifying: VerifyingKey,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("kid", &self.verifying.kid)
            .field("alg", &self.verifying.alg)
            .field("secret", &"[redacted]")
            .finish()
    }
}

impl SigningKey {
    fn assemble(secret: Secret, encoding: EncodingKey, verifying: VerifyingKey) -> Self {
        let mut header = jsonwebtoken::Header::new(verifying.alg.jwt());
        header.kid = Some(verifying.kid.clone());
        let header_json = serde_json::to_vec(&header).expect("a JWT header always serializes");
        SigningKey {
            secret,
            encoding,
            header_b64: b64(&header_json),
            verifying,
        }
    }

    fn from_ed25519(kid: String, key: ed25519_dalek::SigningKey) -> Result<Self, KeyError> {
        let der = key.to_pkcs8_der().map_err(|_| KeyError::Pem("Ed25519"))?;
        let verifying = VerifyingKey::ed25519(kid, key.verifying_key());
        Ok(Self::assemble(
            Secret::Ed25519(key),
            EncodingKey::from_ed_der(der.as_bytes()),
            verifying,
        ))
    }

    fn from_p256(kid: String, key: p256::ecdsa::SigningKey) -> Result<Self, KeyError> {
        let der = key.to_pkcs8_der().map_err(|_| KeyError::Pem("P-256"))?;
        let verifying = VerifyingKey::es256(kid, *key.verifying_key());
        Ok(Self::assemble(
            Secret::Es256(key),
            EncodingKey::from_ec_der(der.as_bytes()),
            verifying,
        ))
    }

    /// A fresh random Ed25519 key (the default algorithm).
    ///
    /// # Errors
    /// [`KeyError::BadKid`].
    pub fn generate_ed25519(kid: impl Into<String>) -> Result<Self, KeyError> {
        let kid = check_kid(kid)?;
        Self::from_ed25519(kid, ed25519_dalek::SigningKey::generate(&mut rand::rng()))
    }

    /// A fresh random P-256 key for ES256.
    ///
    /// # Errors
    /// [`KeyError::BadKid`].
    pub fn generate_es256(kid: impl Into<String>) -> Result<Self, KeyError> {
        let kid = check_kid(kid)?;
        Self::from_p256(
            kid,
            p256::ecdsa::SigningKey::generate_from_rng(&mut rand::rng()),
        )
    }

    /// An Ed25519 key from PKCS#8 PEM (`BEGIN PRIVATE KEY`), e.g. written by [`to_pem`](Self::to_pem) or
    /// `openssl genpkey -algorithm ed25519`.
    ///
    /// # Errors
    /// [`KeyError::BadKid`] or [`KeyError::Pem`].
    pub fn from_ed25519_pem(kid: impl Into<String>, pem: &str) -> Result<Self, KeyError> {
        let kid = check_kid(kid)?;
        let key =
            ed25519_dalek::SigningKey::from_pkcs8_pem(pem).map_err(|_| KeyError::Pem("Ed25519"))?;
        Self::from_ed25519(kid, key)
    }

    /// A P-256 key from PKCS#8 PEM (`openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`).
    ///
    /// # Errors
    /// [`KeyError::BadKid`] or [`KeyError::Pem`].
    pub fn from_es256_pem(kid: impl Into<String>, pem: &str) -> Result<Self, KeyError> {
        let kid = check_kid(kid)?;
        let key =
            p256::ecdsa::SigningKey::from_pkcs8_pem(pem).map_err(|_| KeyError::Pem("P-256"))?;
        Self::from_p256(kid, key)
    }

    /// A private key from PKCS#8 PEM of either supported curve (Ed25519 tried first).
    ///
    /// # Errors
    /// [`KeyError::BadKid`] or [`KeyError::Pem`].
    pub fn from_pem(kid: impl Into<String>, pem: &str) -> Result<Self, KeyError> {
        let kid = check_kid(kid)?;
        Self::from_ed25519_pem(kid.clone(), pem)
            .or_else(|_| Self::from_es256_pem(kid, pem))
            .map_err(|_| KeyError::Pem("Ed25519 or P-256"))
    }

    /// An HS256 key from a shared secret of at least [`MIN_HS256_SECRET_BYTES`] bytes. The verifier must hold
    /// the same secret ([`verifying_key`](Self::verifying_key) gives it); it is never published in a JWKS.
    ///
    /// # Errors
    /// [`KeyError::ShortSecret`] or [`KeyError::BadKid`].
    pub fn hs256(kid: impl Into<String>, secret: impl AsRef<[u8]>) -> Result<Self, KeyError> {
        let verifying = VerifyingKey::hs256(kid, secret.as_ref())?;
        Ok(Self::assemble(
            Secret::Hs256,
            EncodingKey::from_secret(secret.as_ref()).map_err(|_| KeyError::ShortSecret(0))?,
            verifying,
        ))
    }

    /// The key id put in every token's header.
    #[must_use]
    pub fn kid(&self) -> &str {
        &self.verifying.kid
    }

    /// The key's algorithm.
    #[must_use]
    pub fn algorithm(&self) -> Algorithm {
        self.verifying.alg
    }

    /// The key that verifies this key's tokens: the public key (EdDSA, ES256) or the same secret (HS256, usable
    /// by a verifier but excluded from [`KeySet::jwks`]).
    #[must_use]
    pub fn verifying_key(&self) -> VerifyingKey {
        self.verifying.clone()
    }

    /// The private key as PKCS#8 PEM, to give the same key file to several room instances; `None` for HS256
    /// (keep the secret itself). Treat the result as a secret.
    #[must_use]
    pub fn to_pem(&self) -> Option<String> {
        let pem = match &self.secret {
            Secret::Ed25519(k) => k.to_pkcs8_pem(LineEnding::LF).ok()?,
            Secret::Es256(k) => k.to_pkcs8_pem(LineEnding::LF).ok()?,
            Secret::Hs256 => return None,
        };
        Some(pem.as_str().to_owned())
    }

    /// Signs `claims` into a compact JWT whose header is `{"typ":"JWT","alg":<alg>,"kid":<kid>}`.
    ///
    /// # Errors
    /// [`SignError::ReservedClaim`] when an application claim reuses a registered name; [`SignError::Crypto`]
    /// if the backend fails.
    pub fn sign(&self, claims: &Claims) -> Result<String, SignError> {
        claims.check_extra()?;
        let payload = serde_json::to_vec(claims).map_err(|e| SignError::Serialize(Arc::new(e)))?;
        let mut token = String::with_capacity(self.header_b64.len() + payload.len() * 4 / 3 + 100);
        token.push_str(&self.header_b64);
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(&payload, &mut token);
        let signature = match &self.secret {
            // Ed25519 is deterministic: signing with the parsed key gives the bytes jsonwebtoken would,
            // without re-reading the PKCS#8 document on every token (tested byte for byte).
            Secret::Ed25519(key) => {
                use ed25519_dalek::Signer;
                b64(&key.sign(token.as_bytes()).to_bytes())
            }
            Secret::Es256(_) | Secret::Hs256 => jsonwebtoken::crypto::sign(
                token.as_bytes(),
                &self.encoding,
                self.verifying.alg.jwt(),
            )
            .map_err(SignError::Crypto)?,
        };
        token.push('.');
        token.push_str(&signature);
        Ok(token)
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Key sets
// ---------------------------------------------------------------------------------------------------------------

/// Several verifying keys, selected by `kid`. Insertion order is kept (and used for JWKS output).
#[derive(Debug, Clone, Default)]
pub struct KeySet {
    keys: Vec<VerifyingKey>,
}

impl KeySet {
    /// An empty set.
    #[must_use]
    pub fn new() -> Self {
        KeySet::default()
    }

    /// Adds a key.
    ///
    /// # Errors
    /// [`KeyError::DuplicateKid`] if the set already has that kid.
    pub fn insert(&mut self, key: VerifyingKey) -> Result<(), KeyError> {
        if self.get(key.kid()).is_some() {
            return Err(KeyError::DuplicateKid(key.kid.clone()));
        }
        self.keys.push(key);
        Ok(())
    }

    /// The set plus `key`.
    ///
    /// # Errors
    /// [`KeyError::DuplicateKid`].
    pub fn with(mut self, key: VerifyingKey) -> Result<Self, KeyError> {
        self.insert(key)?;
        Ok(self)
    }

    /// A set of these keys.
    ///
    /// # Errors
    /// [`KeyError::DuplicateKid`].
    pub fn from_keys(keys: impl IntoIterator<Item = VerifyingKey>) -> Result<Self, KeyError> {
        keys.into_iter().try_fold(KeySet::new(), KeySet::with)
    }

    /// Removes the key with this kid, returning it.
    pub fn remove(&mut self, kid: &str) -> Option<VerifyingKey> {
        let at = self.keys.iter().position(|k| k.kid == kid)?;
        Some(self.keys.remove(at))
    }

    /// The key with this kid.
    #[must_use]
    pub fn get(&self, kid: &str) -> Option<&VerifyingKey> {
        self.keys.iter().find(|k| k.kid == kid)
    }

    /// The key ids, in insertion order.
    pub fn kids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|k| k.kid.as_str())
    }

    /// How many keys.
    #[must_use]
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the set is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// A set from a JWKS document (`{"keys":[..]}`) as a JSON value. Each key is read as in
    /// [`VerifyingKey::from_jwk`]; one bad key fails the whole document (a verifier silently missing a key would
    /// refuse good tokens later, which is harder to see).
    ///
    /// # Errors
    /// [`KeyError::Jwks`], or the first key's [`KeyError`].
    pub fn from_jwks(jwks: &Value) -> Result<Self, KeyError> {
        let keys = jwks
            .get("keys")
            .and_then(Value::as_array)
            .ok_or_else(|| KeyError::Jwks("expected an object with a `keys` array".into()))?;
        keys.iter()
            .map(VerifyingKey::from_jwk)
            .try_fold(KeySet::new(), |set, key| set.with(key?))
    }

    /// A set from JWKS text (at most [`MAX_JWKS_BYTES`]).
    ///
    /// # Errors
    /// [`KeyError::Jwks`] for oversized text, [`KeyError::NotJson`] for non-JSON text; otherwise as [`from_jwks`](Self::from_jwks).
    pub fn from_jwks_json(jwks: &str) -> Result<Self, KeyError> {
        if jwks.len() > MAX_JWKS_BYTES {
            return Err(KeyError::Jwks(format!(
                "document larger than {MAX_JWKS_BYTES} bytes"
            )));
        }
        let v: Value = serde_json::from_str(jwks)
            .map_err(|e| KeyError::NotJson("JWKS document", Arc::new(e)))?;
        Self::from_jwks(&v)
    }

    /// The JWKS document of the public keys (HS256 secrets are left out).
    #[must_use]
    pub fn jwks(&self) -> Value {
        json!({ "keys": self.keys.iter().filter_map(VerifyingKey::to_jwk).collect::<Vec<_>>() })
    }

    /// [`jwks`](Self::jwks) as JSON text, to serve at e.g. `/.well-known/jwks.json`.
    #[must_use]
    pub fn to_jwks_json(&self) -> String {
        self.jwks().to_string()
    }
}

impl From<VerifyingKey> for KeySet {
    fn from(key: VerifyingKey) -> Self {
        KeySet { keys: vec![key] }
    }
}

impl From<&SigningKey> for KeySet {
    fn from(key: &SigningKey) -> Self {
        KeySet::from(key.verifying_key())
    }
}

#[cfg(test)]
mod tests;
