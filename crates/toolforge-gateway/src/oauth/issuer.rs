//! One trusted authorization server: its metadata (RFC 8414, else OpenID Connect discovery)
//! and its signing keys (the JWKS at `jwks_uri`), kept fresh without a restart.
//!
//! The keys are fetched at start, again every [`REFRESH`] in the background, and at once when
//! a token names a key id the set lacks (a rotation), at most once per [`UNKNOWN_KID_REFETCH`]:
//! a client sending made-up key ids cannot turn the gateway into a load on the identity
//! provider. Documents are bounded ([`MAX_DOCUMENT_BYTES`]) and each fetch takes at most
//! [`FETCH_TIMEOUT`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey};
use parking_lot::Mutex;
use serde_json::Value;

/// How often the keys are fetched again.
pub const REFRESH: Duration = Duration::from_secs(300);
/// Least time between two fetches caused by unknown key ids.
pub const UNKNOWN_KID_REFETCH: Duration = Duration::from_secs(60);
/// Largest metadata or JWKS document read.
pub const MAX_DOCUMENT_BYTES: usize = 512 * 1024;
/// Longest one fetch may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// One verification key of the set.
pub struct Key {
    pub kid: Option<String>,
    pub algorithm: Algorithm,
    pub key: DecodingKey,
}

/// What the authorization server's metadata says that the gateway uses.
#[derive(Debug, Clone, Default)]
pub struct Metadata {
    pub issuer: String,
    pub jwks_uri: Option<String>,
    pub introspection_endpoint: Option<String>,
}

/// A trusted issuer and its current keys.
pub struct Issuer {
    /// The issuer identifier, exactly as configured (and as tokens' `iss` must be).
    pub issuer: String,
    metadata: ArcSwap<Option<Metadata>>,
    keys: ArcSwap<Vec<Key>>,
    last_unknown_fetch: Mutex<Option<Instant>>,
    fetch_lock: tokio::sync::Mutex<()>,
    http: reqwest::Client,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer")
            .field("issuer", &self.issuer)
            .field("keys", &self.keys.load().len())
            .finish_non_exhaustive()
    }
}

/// The well-known URLs an issuer's metadata may be at, in the order tried: RFC 8414's (the
/// path inserted after `/.well-known/oauth-authorization-server`), then OpenID Connect's
/// (`/.well-known/openid-configuration` appended to the issuer, and inserted).
#[must_use]
pub fn discovery_urls(issuer: &str) -> Vec<String> {
    let Ok(url) = reqwest::Url::parse(issuer) else {
        return Vec::new();
    };
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
            format!("{origin}/.well-known/openid-configuration{path}"),
        ]
    }
}

/// A JWKS document's usable keys. Keys of other kinds (encryption keys, symmetric keys,
/// curves toolforge does not check) are skipped, not errors: an identity provider publishes
/// what it publishes.
#[must_use]
pub fn keys_of(set: &JwkSet) -> Vec<Key> {
    set.keys.iter().filter_map(key_of).collect()
}

fn key_of(jwk: &Jwk) -> Option<Key> {
    if jwk
        .common
        .public_key_use
        .as_ref()
        .is_some_and(|u| *u != jsonwebtoken::jwk::PublicKeyUse::Signature)
    {
        return None;
    }
    let named = jwk
        .common
        .key_algorithm
        .and_then(|a| a.to_string().parse::<Algorithm>().ok());
    let algorithm = match (&jwk.algorithm, named) {
        (
            AlgorithmParameters::RSA(_),
            Some(
                a @ (Algorithm::RS256
                | Algorithm::RS384
                | Algorithm::RS512
                | Algorithm::PS256
                | Algorithm::PS384
                | Algorithm::PS512),
            ),
        ) => a,
        (AlgorithmParameters::RSA(_), None) => Algorithm::RS256,
        (AlgorithmParameters::EllipticCurve(ec), _) if ec.curve == EllipticCurve::P256 => {
            Algorithm::ES256
        }
        (AlgorithmParameters::EllipticCurve(ec), _) if ec.curve == EllipticCurve::P384 => {
            Algorithm::ES384
        }
        (AlgorithmParameters::OctetKeyPair(_), _) => Algorithm::EdDSA,
        _ => return None,
    };
    let key = DecodingKey::from_jwk(jwk).ok()?;
    Some(Key {
        kid: jwk.common.key_id.clone(),
        algorithm,
        key,
    })
}

/// Reads a JSON document of at most [`MAX_DOCUMENT_BYTES`].
pub(crate) async fn fetch_json(http: &reqwest::Client, url: &str) -> Result<Value, String> {
    let mut response = http
        .get(url)
        .header(reqwest::header::ACCEPT, "application/json")
        .timeout(FETCH_TIMEOUT)
        .send()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("{url}: HTTP {}", response.status()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("{url}: {e}"))? {
        if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
            return Err(format!(
                "{url}: the document is larger than {MAX_DOCUMENT_BYTES} bytes"
            ));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|e| format!("{url}: not JSON ({e})"))
}

impl Issuer {
    /// An issuer not fetched yet.
    #[must_use]
    pub fn new(issuer: &str, http: reqwest::Client) -> Self {
        Self {
            issuer: issuer.to_owned(),
            metadata: ArcSwap::from_pointee(None),
            keys: ArcSwap::from_pointee(Vec::new()),
            last_unknown_fetch: Mutex::new(None),
            fetch_lock: tokio::sync::Mutex::new(()),
            http,
        }
    }

    /// The metadata, once discovered.
    #[must_use]
    pub fn metadata(&self) -> Option<Metadata> {
        (**self.metadata.load()).clone()
    }

    /// The current keys.
    #[must_use]
    pub fn keys(&self) -> Arc<Vec<Key>> {
        self.keys.load_full()
    }

    /// Discovers the metadata: the first well-known URL that answers a document whose
    /// `issuer` is exactly this issuer.
    async fn discover(&self) -> Result<Metadata, String> {
        let mut problems = Vec::new();
        for url in discovery_urls(&self.issuer) {
            let doc = match fetch_json(&self.http, &url).await {
                Ok(doc) => doc,
                Err(e) => {
                    problems.push(e);
                    continue;
                }
            };
            let named = doc
                .get("issuer")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if named != self.issuer {
                problems.push(format!(
                    "{url}: its issuer is {named:?}, not {:?}",
                    self.issuer
                ));
                continue;
            }
            let text = |key: &str| doc.get(key).and_then(Value::as_str).map(str::to_owned);
            return Ok(Metadata {
                issuer: self.issuer.clone(),
                jwks_uri: text("jwks_uri"),
                introspection_endpoint: text("introspection_endpoint"),
            });
        }
        Err(format!(
            "no metadata for issuer {}: {}",
            self.issuer,
            problems.join("; ")
        ))
    }

    /// Fetches the metadata (when not known yet) and the keys.
    ///
    /// # Errors
    /// Discovery failed, or the JWKS could not be read.
    pub async fn refresh(&self) -> Result<(), String> {
        let _one = self.fetch_lock.lock().await;
        let metadata = match self.metadata() {
            Some(m) => m,
            None => {
                let m = self.discover().await?;
                self.metadata.store(Arc::new(Some(m.clone())));
                m
            }
        };
        let Some(jwks_uri) = metadata.jwks_uri else {
            return Ok(()); // opaque tokens only (introspection)
        };
        let doc = fetch_json(&self.http, &jwks_uri).await?;
        let set: JwkSet =
            serde_json::from_value(doc).map_err(|e| format!("{jwks_uri}: not a JWKS ({e})"))?;
        let keys = keys_of(&set);
        if keys.is_empty() {
            return Err(format!("{jwks_uri}: no signing key toolforge can check"));
        }
        tracing::debug!(issuer = %self.issuer, keys = keys.len(), "signing keys fetched");
        self.keys.store(Arc::new(keys));
        Ok(())
    }

    /// A token named key id `kid`, which the set lacks: fetches the keys again, unless that
    /// was done less than [`UNKNOWN_KID_REFETCH`] ago. True when they were fetched.
    pub async fn refetch_for_unknown_kid(&self) -> bool {
        {
            let mut last = self.last_unknown_fetch.lock();
            if last.is_some_and(|at| at.elapsed() < UNKNOWN_KID_REFETCH) {
                return false;
            }
            *last = Some(Instant::now());
        }
        match self.refresh().await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(issuer = %self.issuer, "signing keys could not be fetched: {e}");
                false
            }
        }
    }

    /// Keeps the keys fresh until `stop`: every [`REFRESH`], and every 5 s while the first
    /// fetch has not succeeded.
    pub async fn keep_fresh(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        loop {
            let wait = if self.metadata().is_some() && !self.keys.load().is_empty() {
                REFRESH
            } else {
                Duration::from_secs(5)
            };
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
            if let Err(e) = self.refresh().await {
                tracing::warn!(issuer = %self.issuer, "signing keys could not be fetched: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_urls_follow_rfc_8414_then_openid() {
        assert_eq!(
            discovery_urls("https://id.example.com"),
            [
                "https://id.example.com/.well-known/oauth-authorization-server",
                "https://id.example.com/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            discovery_urls("https://id.example.com/tenant/a/"),
            [
                "https://id.example.com/.well-known/oauth-authorization-server/tenant/a",
                "https://id.example.com/tenant/a/.well-known/openid-configuration",
                "https://id.example.com/.well-known/openid-configuration/tenant/a"
            ]
        );
        assert!(discovery_urls("not a url").is_empty());
    }
}
