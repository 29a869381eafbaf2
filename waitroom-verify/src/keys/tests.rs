use super::*;
use std::time::Duration;

// RFC 8037, appendix A.1/A.2/A.4: an Ed25519 key and a JWS over "Example of Ed25519 signing".
const RFC8037_D: &str = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A";
const RFC8037_X: &str = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";
const RFC8037_INPUT: &str = "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc";
const RFC8037_SIG: &str =
    "hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg";

fn rfc8037_signing_key() -> SigningKey {
    let d: [u8; 32] = URL_SAFE_NO_PAD
        .decode(RFC8037_D)
        .unwrap()
        .try_into()
        .unwrap();
    SigningKey::from_ed25519("rfc8037".into(), ed25519_dalek::SigningKey::from_bytes(&d)).unwrap()
}

#[test]
fn rfc8037_vector_signs_and_verifies_byte_for_byte() {
    let key = rfc8037_signing_key();
    let jwk = key.verifying_key().to_jwk().unwrap();
    assert_eq!(jwk["x"], RFC8037_X);
    let sig = jsonwebtoken::crypto::sign(
        RFC8037_INPUT.as_bytes(),
        &key.encoding,
        jsonwebtoken::Algorithm::EdDSA,
    )
    .unwrap();
    assert_eq!(sig, RFC8037_SIG);
    let public =
        VerifyingKey::from_jwk(&json!({"kty":"OKP","crv":"Ed25519","x":RFC8037_X,"kid":"a"}))
            .unwrap();
    assert!(public.verify_signature(RFC8037_INPUT.as_bytes(), RFC8037_SIG));
    assert!(!public.verify_signature(b"eyJhbGciOiJFZERTQSJ9.eA", RFC8037_SIG));
}

#[test]
fn rfc7515_hs256_vector_verifies() {
    // RFC 7515 appendix A.1.
    let k =
        "AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow";
    let key = VerifyingKey::from_jwk(&json!({"kty":"oct","k":k,"kid":"hmac"})).unwrap();
    let input = "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9.\
                 eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ";
    assert!(key.verify_signature(
        input.as_bytes(),
        "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    ));
    assert!(!key.verify_signature(
        input.as_bytes(),
        "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXj"
    ));
}

#[test]
fn signed_token_has_kid_and_typ_and_verifies_with_jsonwebtoken_decode() {
    for key in [
        SigningKey::generate_ed25519("ed").unwrap(),
        SigningKey::generate_es256("es").unwrap(),
        SigningKey::hs256("hs", [7u8; 32]).unwrap(),
    ] {
        let claims = Claims::new(
            "room",
            "sale",
            "session-0123456789",
            1_000,
            Duration::from_secs(60),
        );
        let token = key.sign(&claims).unwrap();
        let header = jsonwebtoken::decode_header(&token).unwrap();
        assert_eq!(header.kid.as_deref(), Some(key.kid()));
        assert_eq!(header.typ.as_deref(), Some("JWT"));
        let decoding = key.verifying_key().decoding;
        let mut validation = jsonwebtoken::Validation::new(key.algorithm().jwt());
        validation.validate_exp = false;
        validation.set_audience(&["sale"]);
        let data = jsonwebtoken::decode::<Claims>(&token, &decoding, &validation).unwrap();
        assert_eq!(data.claims, claims);
    }
}

#[test]
fn eddsa_signing_matches_jsonwebtoken_encode() {
    let key = rfc8037_signing_key();
    let claims = Claims::new(
        "room",
        "sale",
        "session-0123456789",
        1_000,
        Duration::from_secs(60),
    );
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
    header.kid = Some("rfc8037".into());
    let expected = jsonwebtoken::encode(&header, &claims, &key.encoding).unwrap();
    assert_eq!(key.sign(&claims).unwrap(), expected);
}

#[test]
fn pem_round_trips_and_several_instances_share_a_key() {
    for key in [
        SigningKey::generate_ed25519("a").unwrap(),
        SigningKey::generate_es256("a").unwrap(),
    ] {
        let pem = key.to_pem().unwrap();
        assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"));
        let again = SigningKey::from_pem("a", &pem).unwrap();
        assert_eq!(again.algorithm(), key.algorithm());
        assert_eq!(again.verifying_key().to_jwk(), key.verifying_key().to_jwk());
        let public_pem = key.verifying_key().to_pem().unwrap();
        let public = VerifyingKey::from_pem("a", &public_pem).unwrap();
        assert_eq!(public.to_jwk(), key.verifying_key().to_jwk());
        // A private PEM also yields the verifying key.
        assert_eq!(
            VerifyingKey::from_pem("a", &pem).unwrap().to_jwk(),
            public.to_jwk()
        );
    }
    assert!(
        SigningKey::hs256("h", [1u8; 32])
            .unwrap()
            .to_pem()
            .is_none()
    );
    assert!(matches!(
        VerifyingKey::from_ed25519_pem("a", "nope").unwrap_err(),
        KeyError::Pem("Ed25519")
    ));
    let es_pem = SigningKey::generate_es256("a").unwrap().to_pem().unwrap();
    assert!(SigningKey::from_ed25519_pem("a", &es_pem).is_err());
}

#[test]
fn jwks_publishes_public_keys_only_and_reads_back() {
    let ed = SigningKey::generate_ed25519("ed-2024").unwrap();
    let es = SigningKey::generate_es256("es-2024").unwrap();
    let hs = SigningKey::hs256("hs", [9u8; 40]).unwrap();
    let set =
        KeySet::from_keys([ed.verifying_key(), es.verifying_key(), hs.verifying_key()]).unwrap();
    assert_eq!(set.len(), 3);
    let text = set.to_jwks_json();
    assert!(!text.contains("\"oct\""));
    assert!(!text.contains("\"d\""));
    let back = KeySet::from_jwks_json(&text).unwrap();
    assert_eq!(back.kids().collect::<Vec<_>>(), ["ed-2024", "es-2024"]);
    assert_eq!(back.get("es-2024").unwrap().algorithm(), Algorithm::ES256);
    assert!(back.get("hs").is_none());
}

#[test]
fn bad_jwks_and_jwks_are_refused_with_reasons() {
    let x = RFC8037_X;
    let cases = [
        (json!({"kty":"OKP","crv":"Ed25519","x":x}), "missing `kid`"),
        (
            json!({"kty":"OKP","crv":"Ed448","x":x,"kid":"a"}),
            "unsupported",
        ),
        (
            json!({"kty":"OKP","crv":"Ed25519","x":x,"kid":"a","alg":"ES256"}),
            "expected EdDSA",
        ),
        (
            json!({"kty":"OKP","crv":"Ed25519","x":"AAAA","kid":"a"}),
            "32 bytes",
        ),
        (
            json!({"kty":"OKP","crv":"Ed25519","x":x,"kid":"a","use":"enc"}),
            "use",
        ),
        (
            json!({"kty":"OKP","crv":"Ed25519","x":x,"d":RFC8037_D,"kid":"a"}),
            "private",
        ),
        (
            json!({"kty":"RSA","n":"AQAB","e":"AQAB","kid":"a"}),
            "key type",
        ),
        (
            json!({"kty":"EC","crv":"P-256","x":x,"y":x,"kid":"a"}),
            "P-256 point",
        ),
        (json!({"kty":"oct","k":"c2hvcnQ","kid":"a"}), "too short"),
        (
            json!({"kty":"OKP","crv":"Ed25519","x":x,"kid":""}),
            "bad kid",
        ),
        (json!("nope"), "not a JSON object"),
    ];
    for (jwk, want) in cases {
        let err = VerifyingKey::from_jwk(&jwk).unwrap_err().to_string();
        assert!(err.contains(want), "{jwk}: {err}");
    }
    assert!(matches!(
        KeySet::from_jwks_json("[]"),
        Err(KeyError::Jwks(_))
    ));
    let not_json = KeySet::from_jwks_json("{").unwrap_err();
    assert!(matches!(not_json, KeyError::NotJson("JWKS document", _)));
    assert!(
        std::error::Error::source(&not_json).is_some(),
        "the parser's error is kept"
    );
    let dup = json!({"keys":[{"kty":"OKP","crv":"Ed25519","x":x,"kid":"a"},{"kty":"OKP","crv":"Ed25519","x":x,"kid":"a"}]});
    assert!(matches!(
        KeySet::from_jwks(&dup).unwrap_err(),
        KeyError::DuplicateKid(kid) if kid == "a"
    ));
    assert!(matches!(
        VerifyingKey::from_jwk_str("{").unwrap_err(),
        KeyError::NotJson("JWK", _)
    ));
    assert!(matches!(
        VerifyingKey::hs256("h", [0u8; 31]).unwrap_err(),
        KeyError::ShortSecret(31)
    ));
}

#[test]
fn debug_redacts_secrets() {
    let secret = [0x42u8; 32];
    let hs = SigningKey::hs256("hs", secret).unwrap();
    let ed = rfc8037_signing_key();
    for text in [
        format!("{hs:?}"),
        format!("{:?}", hs.verifying_key()),
        format!("{ed:?}"),
    ] {
        assert!(
            text.contains("redacted") || text.contains("public"),
            "{text}"
        );
        assert!(!text.contains("66, 66"), "{text}");
        assert!(!text.contains(RFC8037_D));
    }
    assert!(!format!("{ed:?}").contains("157"), "no seed bytes");
}

#[test]
fn key_set_insert_get_remove() {
    let a = SigningKey::generate_ed25519("a").unwrap();
    let mut set = KeySet::from(&a);
    assert!(matches!(
        set.insert(a.verifying_key()).unwrap_err(),
        KeyError::DuplicateKid(kid) if kid == "a"
    ));
    assert!(set.remove("a").is_some());
    assert!(set.is_empty());
    assert_eq!(Algorithm::from_name("EdDSA"), Some(Algorithm::EdDSA));
    assert_eq!(Algorithm::from_name("none"), None);
    assert_eq!(Algorithm::ES256.to_string(), "ES256");
}
