//! API keys and JWTs (ES256 keys made here with ring) accepted and refused for each reason.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{EncodingKey, Header};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::json;

use super::*;

fn bearer(token: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        header::AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
    );
    h
}

#[test]
fn api_keys_map_to_their_principals() {
    let id = Identity::default()
        .with_api_keys("# team keys\nalice-key-0123456789 alice\n\nbot-key-0123456789abc ci-bot\n")
        .unwrap();
    assert_eq!(
        id.authenticate(&bearer("alice-key-0123456789")).unwrap(),
        Principal::new("alice")
    );
    assert_eq!(
        id.authenticate(&bearer("bot-key-0123456789abc")).unwrap(),
        Principal::new("ci-bot")
    );
    assert!(matches!(
        id.authenticate(&bearer("alice-key-012345678")),
        Err(AuthError::Invalid(_))
    ));
    assert_eq!(id.authenticate(&HeaderMap::new()), Err(AuthError::Missing));
}

#[test]
fn bad_key_files_are_refused_with_the_line() {
    for (text, says) in [
        ("alice-key-0123456789\n", "line 1"),
        (
            "ok-key-0123456789abc a\nshort b\n",
            "line 2: the key is shorter",
        ),
        (
            "k-0123456789abcdef a\nk-0123456789abcdef b\n",
            "listed twice",
        ),
        ("# nothing\n", "no keys"),
    ] {
        let err = Identity::default()
            .with_api_keys(text)
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{text}: {err}");
    }
}

struct Signer {
    key: EncodingKey,
    jwks: String,
}

fn signer(kid: &str) -> Signer {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let pair =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
    let point = pair.public_key().as_ref();
    let jwks = json!({"keys": [{
        "kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "alg": "ES256",
        "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
        "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
    }]})
    .to_string();
    Signer {
        key: EncodingKey::from_ec_der(pkcs8.as_ref()),
        jwks,
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn token(signer: &Signer, kid: &str, claims: &serde_json::Value) -> String {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, claims, &signer.key).unwrap()
}

#[test]
fn jwts_are_checked_for_signature_issuer_audience_and_expiry() {
    let s = signer("k1");
    let id = Identity::default()
        .with_jwks(&s.jwks, "https://idp.example", "toolforge")
        .unwrap();
    let good = json!({"sub": "alice", "iss": "https://idp.example", "aud": "toolforge", "exp": now() + 600});
    assert_eq!(
        id.authenticate(&bearer(&token(&s, "k1", &good))).unwrap(),
        Principal::new("alice")
    );
    let refused = |claims: serde_json::Value, says: &str| {
        let err = id
            .authenticate(&bearer(&token(&s, "k1", &claims)))
            .unwrap_err();
        assert!(err.to_string().contains(says), "{claims}: {err}");
    };
    refused(
        json!({"sub": "alice", "iss": "https://idp.example", "aud": "toolforge", "exp": now() - 3600}),
        "expired",
    );
    refused(
        json!({"sub": "alice", "iss": "https://evil.example", "aud": "toolforge", "exp": now() + 600}),
        "issuer",
    );
    refused(
        json!({"sub": "alice", "iss": "https://idp.example", "aud": "other", "exp": now() + 600}),
        "audience",
    );
    refused(
        json!({"sub": "alice", "iss": "https://idp.example", "aud": "toolforge"}),
        "exp",
    );
    // Signed by a key the JWKS does not hold.
    let stranger = signer("k1");
    let err = id
        .authenticate(&bearer(&token(&stranger, "k1", &good)))
        .unwrap_err();
    assert!(err.to_string().contains("signature"), "{err}");
}

#[test]
fn jwks_settings_are_required() {
    let s = signer("k1");
    let err = Identity::default()
        .with_jwks(&s.jwks, "", "toolforge")
        .unwrap_err();
    assert!(err.to_string().contains("--jwt-issuer"), "{err}");
    let err = Identity::default()
        .with_jwks(r#"{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}"#, "i", "a")
        .unwrap_err();
    assert!(err.to_string().contains("only RSA"), "{err}");
}

/// A 2048-bit RSA key made for this test only (PKCS#1 DER), and its modulus for the JWKS.
const RS256_KEY: &[u8] = include_bytes!("test_rs256_key.der");
const RS256_MODULUS: &str = "1Kq6Wdqwc0v_t_Mqwd3CGdn1BZRwahlNSZ_gIvSvMOqOAi4TxgIGMAcH-Z9J1zGt8JmlzhlrzZ9butwKONzmNvkOtvWFkxsELmzIIJPxl_NsUW-NcKuev4nPkaLXmmjxNHh6AvWh8NCgEGhxmYr_MMgNbxSYk26w_d56xukiZ6bxDTHUZW4yd-FXiQeSglAJq8QZJi-dxpPmCzVE8o09Q8qvL2Ai4v2UvlTCNbZrp15_c8xzIhUyJmWdPKqU8E1C14nEO1Tpw-r2ABQ9Cu4Lg2evgzNGfoRlge5QWrkWY9x79vaP_a1h7B5MI-5__66JY1jYYXANxGyjkgejZ3zAGw";

#[test]
fn rs256_tokens_are_checked_like_es256_ones() {
    let jwks = json!({"keys": [{
        "kty": "RSA", "kid": "r1", "use": "sig", "alg": "RS256", "n": RS256_MODULUS, "e": "AQAB",
    }]})
    .to_string();
    let id = Identity::default()
        .with_jwks(&jwks, "https://idp.example", "toolforge")
        .unwrap();
    let key = EncodingKey::from_rsa_der(RS256_KEY);
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("r1".to_owned());
    let sign = |claims: &serde_json::Value| jsonwebtoken::encode(&header, claims, &key).unwrap();
    let good =
        json!({"sub": "bob", "iss": "https://idp.example", "aud": "toolforge", "exp": now() + 600});
    assert_eq!(
        id.authenticate(&bearer(&sign(&good))).unwrap(),
        Principal::new("bob")
    );
    let expired = json!({"sub": "bob", "iss": "https://idp.example", "aud": "toolforge", "exp": now() - 3600});
    let err = id.authenticate(&bearer(&sign(&expired))).unwrap_err();
    assert!(err.to_string().contains("expired"), "{err}");
    // Another principal's claims under this token's signature: the signature no longer holds.
    let token = sign(&good);
    let mut parts: Vec<&str> = token.split('.').collect();
    let forged = URL_SAFE_NO_PAD.encode(
        json!({"sub": "mallory", "iss": "https://idp.example", "aud": "toolforge", "exp": now() + 600})
            .to_string(),
    );
    parts[1] = &forged;
    let err = id.authenticate(&bearer(&parts.join("."))).unwrap_err();
    assert!(err.to_string().contains("signature"), "{err}");
}

/// The regression: `nbf` was not checked, so a token minted for later worked at once.
#[test]
fn a_jwt_not_valid_yet_is_refused() {
    let s = signer("k1");
    let id = Identity::default()
        .with_jwks(&s.jwks, "https://idp.example", "toolforge")
        .unwrap();
    let claims = |nbf: i64| json!({"sub": "alice", "iss": "https://idp.example", "aud": "toolforge", "exp": now() + 7200, "nbf": nbf});
    let err = id
        .authenticate(&bearer(&token(&s, "k1", &claims(now() + 3600))))
        .unwrap_err();
    assert!(err.to_string().contains("not valid yet"), "{err}");
    assert_eq!(
        id.authenticate(&bearer(&token(&s, "k1", &claims(now() - 10))))
            .unwrap(),
        Principal::new("alice")
    );
}

/// The regression: `Authorization: BEARER …` was refused; the scheme is case-insensitive.
#[test]
fn the_bearer_scheme_is_case_insensitive() {
    let id = Identity::default()
        .with_api_keys("alice-key-0123456789 alice\n")
        .unwrap();
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!("{scheme} alice-key-0123456789")).unwrap(),
        );
        assert_eq!(
            id.authenticate(&h).unwrap(),
            Principal::new("alice"),
            "{scheme}"
        );
    }
    for value in [
        "Basic alice-key-0123456789",
        "Bearer",
        "Bearer   ",
        "Bearer",
    ] {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        assert_eq!(id.authenticate(&h), Err(AuthError::Missing), "{value}");
    }
}
