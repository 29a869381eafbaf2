use super::*;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;

use crate::claims::Claims;
use crate::clock::ManualClock;
use crate::error::Refusal;
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
        0x9d, 0x61, 0xb1, 0x9d, 0xef, 0xfd, 0x5a, 0x60, 0xba, 0x84, 0x4a, 0xf4, 0x92, 0xec, 0x2c,
        0xc4, 0x44, 0x49, 0xc5, 0x69, 0x7b, 0x32, 0x69, 0x19, 0x70, 0x3b, 0xac, 0x03, 0x1c, 0xae,
        0x7f, 0x60,
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
    assert_eq!(v.inner.deny.len(), 1);
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
    let len = || v.inner.cache.as_ref().unwrap().len();
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

proptest::proptest! {
    /// Arbitrary bytes (as text) into the token parser: no panic, and a typed refusal with its stable code,
    /// never a pass; the same for a real token with one byte changed or cut short.
    #[test]
    fn arbitrary_token_bytes_are_refused_with_a_code(
        bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600),
        dots in proptest::collection::vec(0usize..600, 0..4),
        at in 0usize..400,
        with in proptest::num::u8::ANY,
    ) {
        let f = fixture();
        let mut text: Vec<u8> = bytes;
        for d in dots {
            if d < text.len() {
                text[d] = b'.';
            }
        }
        let token = String::from_utf8_lossy(&text).into_owned();
        match f.verifier.verify(&token) {
            Err(r) => proptest::prop_assert!(!r.code().is_empty()),
            Ok(c) => proptest::prop_assert!(false, "arbitrary bytes passed: {c:?}"),
        }
        proptest::prop_assert!(f.verifier.verify_for_session(&token, SID).is_err());
        // A real token, one byte changed (or cut there).
        let real = f.key.sign(&claims()).unwrap();
        let mut b = real.clone().into_bytes();
        let i = at % b.len();
        if b[i] != with {
            b[i] = with;
            let changed = String::from_utf8_lossy(&b).into_owned();
            proptest::prop_assert!(f.verifier.verify(&changed).is_err(), "{changed}");
        }
        proptest::prop_assert!(f.verifier.verify(&real[..i]).is_err());
    }
}
