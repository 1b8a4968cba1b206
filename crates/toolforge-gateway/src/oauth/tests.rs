//! The protected resource against a loopback issuer: discovery, keys, rotation, audience.
//!
//! The issuer is a small axum app on 127.0.0.1 publishing RFC 8414 metadata and a JWKS whose
//! keys a test can swap (rotation); tokens are ES256 JWTs signed with keys made here (ring).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use parking_lot::Mutex;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};

use super::*;

const RESOURCE: &str = "https://gw.example.com/mcp";

struct Signer {
    kid: String,
    key: EncodingKey,
    jwk: Value,
}

fn signer(kid: &str) -> Signer {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let pair =
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
    let point = pair.public_key().as_ref();
    Signer {
        kid: kid.to_owned(),
        key: EncodingKey::from_ec_der(pkcs8.as_ref()),
        jwk: json!({
            "kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "alg": "ES256",
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        }),
    }
}

/// A loopback issuer: its URL, the keys it publishes, and how often its JWKS was read.
struct LoopbackIssuer {
    url: String,
    keys: Arc<Mutex<Vec<Value>>>,
    jwks_reads: Arc<AtomicUsize>,
}

async fn issuer(keys: Vec<Value>) -> LoopbackIssuer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let keys = Arc::new(Mutex::new(keys));
    let jwks_reads = Arc::new(AtomicUsize::new(0));
    let metadata = json!({
        "issuer": url,
        "authorization_endpoint": format!("{url}/authorize"),
        "token_endpoint": format!("{url}/token"),
        "jwks_uri": format!("{url}/jwks"),
    });
    let served_keys = keys.clone();
    let reads = jwks_reads.clone();
    let app = axum::Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            axum::routing::get(move || {
                let metadata = metadata.clone();
                async move { axum::Json(metadata) }
            }),
        )
        .route(
            "/jwks",
            axum::routing::get(move || {
                reads.fetch_add(1, Ordering::SeqCst);
                let keys = served_keys.lock().clone();
                async move { axum::Json(json!({ "keys": keys })) }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    LoopbackIssuer {
        url,
        keys,
        jwks_reads,
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .try_into()
        .unwrap()
}

fn token(signer: &Signer, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(signer.kid.clone());
    jsonwebtoken::encode(&header, claims, &signer.key).unwrap()
}

async fn resource(issuer: &LoopbackIssuer, required_scopes: &[&str]) -> Arc<OAuthResource> {
    // As the binary does at start (reqwest is built without a TLS provider of its own).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let settings = ResourceSettings {
        resource: RESOURCE.to_owned(),
        issuers: vec![issuer.url.clone()],
        required_scopes: required_scopes.iter().map(|s| (*s).to_owned()).collect(),
        claims: vec!["email".to_owned()],
        ..ResourceSettings::default()
    };
    let resource = Arc::new(OAuthResource::new(settings, http_client().unwrap()).unwrap());
    let stop = tokio_util::sync::CancellationToken::new();
    resource
        .start(std::time::Duration::from_secs(10), stop.clone())
        .await;
    stop.cancel();
    resource
}

fn claims(issuer: &LoopbackIssuer, changes: &Value) -> Value {
    let mut c = json!({
        "iss": issuer.url, "sub": "alice", "aud": RESOURCE,
        "exp": now() + 600, "scope": "mcp:tools email", "email": "alice@example.com",
    });
    for (k, v) in changes.as_object().unwrap() {
        if v.is_null() {
            c.as_object_mut().unwrap().remove(k);
        } else {
            c[k] = v.clone();
        }
    }
    c
}

#[tokio::test]
async fn a_token_of_a_discovered_issuer_names_its_principal_scopes_and_claims() {
    let key = signer("k1");
    let idp = issuer(vec![key.jwk.clone()]).await;
    let resource = resource(&idp, &[]).await;
    let grant = resource
        .verify(&token(&key, &claims(&idp, &json!({}))))
        .await
        .unwrap();
    assert_eq!(grant.subject, "alice");
    assert_eq!(grant.issuer, idp.url);
    assert_eq!(grant.scopes, ["mcp:tools", "email"]);
    assert_eq!(grant.claims.get("email"), Some(&json!("alice@example.com")));
    // An audience list naming the resource among others is accepted too.
    let listed = claims(&idp, &json!({"aud": ["other", RESOURCE]}));
    assert!(resource.verify(&token(&key, &listed)).await.is_ok());
}

#[tokio::test]
async fn audience_time_issuer_and_signature_are_refused() {
    let key = signer("k1");
    let idp = issuer(vec![key.jwk.clone()]).await;
    let resource = resource(&idp, &[]).await;
    let impostor = signer("k1");
    for (changes, signed_by, says) in [
        (
            json!({"aud": "https://other.example.com/mcp"}),
            &key,
            "audience",
        ),
        (json!({"exp": now() - 3600}), &key, "expired"),
        (json!({"nbf": now() + 3600}), &key, "not valid yet"),
        (
            json!({"iss": "https://elsewhere.example"}),
            &key,
            "not one this gateway trusts",
        ),
        (json!({"sub": null}), &key, "sub"),
        (json!({}), &impostor, "signature"),
    ] {
        let refused = resource
            .verify(&token(signed_by, &claims(&idp, &changes)))
            .await
            .unwrap_err();
        let Refused::Invalid(why) = &refused else {
            panic!("{changes}: {refused:?}");
        };
        assert!(why.contains(says), "{changes}: {why}");
    }
    assert!(matches!(
        resource.verify("not-a-jwt").await,
        Err(Refused::Invalid(_))
    ));
}

#[tokio::test]
async fn a_rotated_key_is_used_without_a_restart_and_unknown_keys_refetch_at_most_once_a_minute() {
    let old = signer("k1");
    let idp = issuer(vec![old.jwk.clone()]).await;
    let resource = resource(&idp, &[]).await;
    let reads_at_start = idp.jwks_reads.load(Ordering::SeqCst);
    // The identity provider rotates: a new key, the old one gone.
    let new = signer("k2");
    *idp.keys.lock() = vec![new.jwk.clone()];
    let grant = resource
        .verify(&token(&new, &claims(&idp, &json!({}))))
        .await
        .unwrap();
    assert_eq!(grant.subject, "alice");
    assert_eq!(idp.jwks_reads.load(Ordering::SeqCst), reads_at_start + 1);
    // A token naming a key nobody published does not make the gateway fetch again at once.
    let stranger = signer("k3");
    assert!(
        resource
            .verify(&token(&stranger, &claims(&idp, &json!({}))))
            .await
            .is_err()
    );
    assert_eq!(idp.jwks_reads.load(Ordering::SeqCst), reads_at_start + 1);
    // The old key is no longer accepted.
    assert!(
        resource
            .verify(&token(&old, &claims(&idp, &json!({}))))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn a_missing_required_scope_is_a_shortfall_naming_it() {
    let key = signer("k1");
    let idp = issuer(vec![key.jwk.clone()]).await;
    let resource = resource(&idp, &["mcp:tools", "mcp:admin"]).await;
    let refused = resource
        .verify(&token(&key, &claims(&idp, &json!({}))))
        .await
        .unwrap_err();
    assert_eq!(
        refused,
        Refused::InsufficientScope {
            missing: vec!["mcp:admin".to_owned()]
        }
    );
}
