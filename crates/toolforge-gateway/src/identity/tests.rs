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
