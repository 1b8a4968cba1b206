//! Opaque access tokens, checked by token introspection (RFC 7662) at the issuer's
//! `introspection_endpoint` (or the one configured), the gateway authenticating as a client
//! (HTTP Basic). Answers are kept for a short while ([`KEEP`], never past the token's `exp`),
//! keyed by the token's SHA-256 (the token itself is not kept), at most [`MAX_KEPT`] of them,
//! so a client's every request is not a round trip to the identity provider.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// How long an introspection answer is used.
pub const KEEP: Duration = Duration::from_secs(30);
/// Most answers kept.
pub const MAX_KEPT: usize = 10_000;

/// How the gateway authenticates to the introspection endpoint.
#[derive(Clone)]
pub struct IntrospectionClient {
    pub endpoint: Option<String>,
    pub client_id: String,
    pub client_secret: String,
}

impl std::fmt::Debug for IntrospectionClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IntrospectionClient")
            .field("endpoint", &self.endpoint)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

/// Introspection, with its short memory.
pub struct Introspector {
    pub client: IntrospectionClient,
    kept: Mutex<HashMap<[u8; 32], (Instant, Value)>>,
}

impl Introspector {
    #[must_use]
    pub fn new(client: IntrospectionClient) -> Self {
        Self {
            client,
            kept: Mutex::new(HashMap::new()),
        }
    }

    /// The introspection answer for `token` (an object with `active`), from memory or from
    /// `endpoint`.
    ///
    /// # Errors
    /// The endpoint could not be reached or did not answer an introspection document.
    pub async fn introspect(
        &self,
        http: &reqwest::Client,
        endpoint: &str,
        token: &str,
    ) -> Result<Value, String> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some((at, answer)) = self.kept.lock().get(&digest)
            && at.elapsed() < KEEP
        {
            return Ok(answer.clone());
        }
        let form = form_urlencoded::Serializer::new(String::new())
            .append_pair("token", token)
            .append_pair("token_type_hint", "access_token")
            .finish();
        let response = http
            .post(endpoint)
            .basic_auth(&self.client.client_id, Some(&self.client.client_secret))
            .header(reqwest::header::ACCEPT, "application/json")
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(form)
            .timeout(super::issuer::FETCH_TIMEOUT)
            .send()
            .await
            .map_err(|e| format!("introspection at {endpoint}: {}", without_url(&e)))?;
        if !response.status().is_success() {
            return Err(format!(
                "introspection at {endpoint} answered HTTP {}",
                response.status()
            ));
        }
        let bytes = response
            .bytes()
            .await
            .map_err(|e| format!("introspection at {endpoint}: {}", without_url(&e)))?;
        if bytes.len() > super::issuer::MAX_DOCUMENT_BYTES {
            return Err(format!("introspection at {endpoint}: answer too large"));
        }
        let answer: Value = serde_json::from_slice(&bytes)
            .map_err(|_| format!("introspection at {endpoint} did not answer JSON"))?;
        if !answer.is_object() {
            return Err(format!(
                "introspection at {endpoint} did not answer an object"
            ));
        }
        let mut kept = self.kept.lock();
        if kept.len() >= MAX_KEPT {
            kept.retain(|_, (at, _)| at.elapsed() < KEEP);
            if kept.len() >= MAX_KEPT {
                kept.clear();
            }
        }
        kept.insert(digest, (Instant::now(), answer.clone()));
        Ok(answer)
    }
}

/// A reqwest error without its URL (a token never travels in one here, but the form is kept
/// out of messages all the same).
fn without_url(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    if let Some(url) = e.url() {
        text = text.replace(url.as_str(), "");
    }
    text
}
