//! The gateway as an OAuth 2.1 protected resource (the MCP authorization spec, 2025-11-25 and
//! 2026-07-28): clients discover where to get a token from the gateway itself and present
//! access tokens meant for it.
//!
//! - `metadata`: the protected-resource metadata document (RFC 9728) at
//!   `/.well-known/oauth-protected-resource/mcp` (and without the suffix), and the
//!   `WWW-Authenticate` challenges that point at it.
//! - `issuer`: each trusted authorization server's metadata and signing keys, refreshed in the
//!   background and when a token names an unknown key.
//! - `introspect`: opaque tokens, by RFC 7662 introspection.
//!
//! A token is accepted when it is a JWT signed by a key of its issuer (one of those
//! configured) whose `aud` names this resource (RFC 8707; or one of the extra audiences
//! configured), with `exp` in the future and `nbf` (when present) in the past, a `sub` (the
//! principal) and every required scope; or, with introspection on, an opaque token the issuer
//! says is `active`, checked the same way. What was written here rather than taken from a
//! crate: discovery and key refresh (jsonwebtoken checks signatures and claims; nothing
//! maintained does the refresh policy the spec's rotation needs), and introspection (one form
//! POST).

pub mod introspect;
pub mod issuer;
pub mod metadata;

use std::sync::Arc;

use jsonwebtoken::Validation;
use serde_json::{Map, Value};

pub use introspect::IntrospectionClient;
use introspect::Introspector;
pub use issuer::Issuer;

/// Seconds of clock skew allowed on `exp` and `nbf`.
pub const LEEWAY_SECS: u64 = 60;
/// Most claims a token may hand to policies.
pub const MAX_CLAIMS: usize = 32;

/// How the gateway is configured as a protected resource.
#[derive(Debug, Clone, Default)]
pub struct ResourceSettings {
    /// The gateway's canonical MCP URL (`--oauth-resource`): what tokens' `aud` must name.
    pub resource: String,
    /// The trusted issuers (`--oauth-issuer`), exactly as their tokens' `iss`.
    pub issuers: Vec<String>,
    /// Other audiences accepted (for identity providers that put a fixed API id in `aud`).
    pub audiences: Vec<String>,
    /// Scopes every token must carry (`--oauth-scope`); a shortfall is a 403
    /// `insufficient_scope` naming them.
    pub required_scopes: Vec<String>,
    /// Scopes advertised in the metadata (the required ones, plus these).
    pub scopes_supported: Vec<String>,
    /// Claims handed to policies (`context.claims`), by name.
    pub claims: Vec<String>,
    /// Opaque tokens are introspected with these client credentials.
    pub introspection: Option<IntrospectionClient>,
    /// A name for the metadata's `resource_name`.
    pub resource_name: Option<String>,
}

/// A token accepted: who, with what scopes and which claims.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TokenGrant {
    pub subject: String,
    pub issuer: String,
    pub scopes: Vec<String>,
    pub claims: Map<String, Value>,
}

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Not valid (signature, issuer, audience, time, subject): 401 `invalid_token`.
    Invalid(String),
    /// Valid, but without a required scope: 403 `insufficient_scope`.
    InsufficientScope { missing: Vec<String> },
    /// The identity provider could not be asked (keys or introspection unreachable): 503.
    Unavailable(String),
}

/// The protected resource: its settings, its issuers' keys and introspection.
pub struct OAuthResource {
    pub settings: ResourceSettings,
    issuers: Vec<Arc<Issuer>>,
    introspector: Option<Introspector>,
    http: reqwest::Client,
}

impl std::fmt::Debug for OAuthResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthResource")
            .field("resource", &self.settings.resource)
            .field("issuers", &self.issuers)
            .finish_non_exhaustive()
    }
}

/// The HTTP client for identity providers: no redirects (metadata and keys are read where they
/// are published), a bounded time per request.
///
/// # Errors
/// The client cannot be built (no TLS provider installed).
pub fn http_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(issuer::FETCH_TIMEOUT)
        .build()
        .map_err(|e| format!("HTTP client: {e}"))
}

impl OAuthResource {
    /// The resource, its issuers not fetched yet ([`OAuthResource::start`] fetches them).
    ///
    /// # Errors
    /// No issuer, or a resource that is not an absolute http(s) URL without a fragment.
    pub fn new(settings: ResourceSettings, http: reqwest::Client) -> Result<Self, String> {
        if settings.issuers.is_empty() {
            return Err("--oauth-issuer is required for OAuth".to_owned());
        }
        let resource = reqwest::Url::parse(&settings.resource)
            .map_err(|e| format!("--oauth-resource {}: {e}", settings.resource))?;
        if !matches!(resource.scheme(), "http" | "https") || resource.fragment().is_some() {
            return Err(format!(
                "--oauth-resource {} must be an http(s) URL without a fragment",
                settings.resource
            ));
        }
        for issuer in &settings.issuers {
            reqwest::Url::parse(issuer).map_err(|e| format!("--oauth-issuer {issuer}: {e}"))?;
        }
        let issuers = settings
            .issuers
            .iter()
            .map(|i| Arc::new(Issuer::new(i, http.clone())))
            .collect();
        let introspector = settings.introspection.clone().map(Introspector::new);
        Ok(Self {
            settings,
            issuers,
            introspector,
            http,
        })
    }

    /// Fetches every issuer's metadata and keys (waiting at most `wait` for them), and keeps
    /// them fresh in the background until `stop`.
    pub async fn start(
        self: &Arc<Self>,
        wait: std::time::Duration,
        stop: tokio_util::sync::CancellationToken,
    ) {
        let first = futures::future::join_all(self.issuers.iter().map(|i| i.refresh()));
        match tokio::time::timeout(wait, first).await {
            Ok(results) => {
                for (issuer, result) in self.issuers.iter().zip(results) {
                    match result {
                        Ok(()) => {
                            tracing::info!(issuer = %issuer.issuer, keys = issuer.keys().len(), "OAuth issuer ready")
                        }
                        Err(e) => {
                            tracing::warn!(issuer = %issuer.issuer, "OAuth issuer not reachable yet (retrying): {e}")
                        }
                    }
                }
            }
            Err(_) => tracing::warn!(
                "OAuth issuers did not answer within {wait:?}; retrying in the background"
            ),
        }
        for issuer in &self.issuers {
            tokio::spawn(issuer.clone().keep_fresh(stop.clone()));
        }
    }

    /// The issuers, as configured.
    #[must_use]
    pub fn issuers(&self) -> &[Arc<Issuer>] {
        &self.issuers
    }

    /// Checks a bearer token.
    pub async fn verify(&self, token: &str) -> Result<TokenGrant, Refused> {
        let grant = if token.matches('.').count() == 2 {
            self.verify_jwt(token).await?
        } else if self.introspector.is_some() {
            self.verify_opaque(token).await?
        } else {
            return Err(Refused::Invalid("unknown key".to_owned()));
        };
        let missing: Vec<String> = self
            .settings
            .required_scopes
            .iter()
            .filter(|s| !grant.scopes.contains(s))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(Refused::InsufficientScope { missing });
        }
        Ok(grant)
    }

    fn audiences(&self) -> Vec<&str> {
        std::iter::once(self.settings.resource.as_str())
            .chain(self.settings.audiences.iter().map(String::as_str))
            .collect()
    }

    async fn verify_jwt(&self, token: &str) -> Result<TokenGrant, Refused> {
        let invalid = |m: String| Refused::Invalid(m);
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| invalid(format!("malformed JWT ({e})")))?;
        let claimed_issuer = unverified_issuer(token)
            .ok_or_else(|| invalid("the JWT has no iss claim".to_owned()))?;
        let Some(issuer) = self.issuers.iter().find(|i| i.issuer == claimed_issuer) else {
            return Err(invalid(
                "the JWT's issuer (iss) is not one this gateway trusts".to_owned(),
            ));
        };
        let mut keys = issuer.keys();
        let known = |keys: &[issuer::Key]| {
            keys.iter()
                .any(|k| header.kid.is_none() || k.kid.is_none() || k.kid == header.kid)
        };
        if !known(&keys) && issuer.refetch_for_unknown_kid().await {
            keys = issuer.keys();
        }
        if keys.is_empty() {
            return Err(Refused::Unavailable(format!(
                "the signing keys of {} could not be fetched yet",
                issuer.issuer
            )));
        }
        let mut last = invalid(format!(
            "no signing key of {} verifies a {:?} token with this key id",
            issuer.issuer, header.alg
        ));
        for key in keys.iter().filter(|k| {
            k.algorithm == header.alg
                && (header.kid.is_none() || k.kid.is_none() || k.kid == header.kid)
        }) {
            let mut validation = Validation::new(key.algorithm);
            validation.set_issuer(&[&issuer.issuer]);
            validation.set_audience(&self.audiences());
            validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
            validation.validate_nbf = true;
            validation.leeway = LEEWAY_SECS;
            match jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation) {
                Ok(data) => return self.grant(&issuer.issuer, &data.claims),
                Err(e) => last = invalid(crate::jwt_problem::jwt_problem(&e)),
            }
        }
        Err(last)
    }

    async fn verify_opaque(&self, token: &str) -> Result<TokenGrant, Refused> {
        let Some(introspector) = &self.introspector else {
            return Err(Refused::Invalid("unknown key".to_owned()));
        };
        let endpoint = match &introspector.client.endpoint {
            Some(e) => e.clone(),
            None => self
                .issuers
                .iter()
                .find_map(|i| i.metadata().and_then(|m| m.introspection_endpoint))
                .ok_or_else(|| {
                    Refused::Unavailable(
                        "no introspection endpoint is known yet (none configured, none in the \
                         issuer's metadata)"
                            .to_owned(),
                    )
                })?,
        };
        let answer = introspector
            .introspect(&self.http, &endpoint, token)
            .await
            .map_err(Refused::Unavailable)?;
        let claims = answer.as_object().cloned().unwrap_or_default();
        if claims.get("active") != Some(&Value::Bool(true)) {
            return Err(Refused::Invalid(
                "the token is not active (introspection)".to_owned(),
            ));
        }
        let now = now_secs();
        if let Some(exp) = claims.get("exp").and_then(Value::as_u64)
            && exp + LEEWAY_SECS < now
        {
            return Err(Refused::Invalid("the token has expired".to_owned()));
        }
        if let Some(nbf) = claims.get("nbf").and_then(Value::as_u64)
            && nbf > now + LEEWAY_SECS
        {
            return Err(Refused::Invalid(
                "the token is not valid yet (nbf)".to_owned(),
            ));
        }
        let issuer = match claims.get("iss").and_then(Value::as_str) {
            Some(iss) if self.issuers.iter().any(|i| i.issuer == iss) => iss.to_owned(),
            Some(_) => {
                return Err(Refused::Invalid(
                    "the token's issuer (iss) is not one this gateway trusts".to_owned(),
                ));
            }
            None => self.settings.issuers[0].clone(),
        };
        if let Some(aud) = claims.get("aud")
            && !audience_matches(aud, &self.audiences())
        {
            return Err(Refused::Invalid(
                "the token's audience (aud) is not this gateway".to_owned(),
            ));
        }
        self.grant(&issuer, &claims)
    }

    fn grant(&self, issuer: &str, claims: &Map<String, Value>) -> Result<TokenGrant, Refused> {
        let subject = claims
            .get("sub")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| Refused::Invalid("the token has no sub".to_owned()))?;
        let chosen = self
            .settings
            .claims
            .iter()
            .take(MAX_CLAIMS)
            .filter_map(|name| claims.get(name).map(|v| (name.clone(), v.clone())))
            .collect();
        Ok(TokenGrant {
            subject: subject.to_owned(),
            issuer: issuer.to_owned(),
            scopes: scopes_of(claims),
            claims: chosen,
        })
    }
}

/// The `iss` of a JWT before its signature is checked, only to pick the keys to check it with.
fn unverified_issuer(token: &str) -> Option<String> {
    use base64::Engine as _;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: Map<String, Value> = serde_json::from_slice(&bytes).ok()?;
    claims.get("iss")?.as_str().map(str::to_owned)
}

/// A token's scopes: `scope` (space-separated, RFC 9068 and RFC 8693) or `scp` (a list or a
/// string, as some providers write it).
#[must_use]
pub fn scopes_of(claims: &Map<String, Value>) -> Vec<String> {
    let from = |v: &Value| -> Vec<String> {
        match v {
            Value::String(s) => s.split_whitespace().map(str::to_owned).collect(),
            Value::Array(items) => items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        }
    };
    claims
        .get("scope")
        .or_else(|| claims.get("scp"))
        .map(from)
        .unwrap_or_default()
}

fn audience_matches(aud: &Value, accepted: &[&str]) -> bool {
    match aud {
        Value::String(s) => accepted.contains(&s.as_str()),
        Value::Array(items) => items
            .iter()
            .filter_map(Value::as_str)
            .any(|a| accepted.contains(&a)),
        _ => false,
    }
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests;
