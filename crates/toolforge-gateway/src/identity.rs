//! Who is calling: the bearer token of each HTTP request, checked against API keys
//! (`--api-keys FILE`: one `KEY PRINCIPAL` per line), JWTs signed by keys of a JWKS file
//! (`--jwt-jwks FILE`: RS256 or ES256; `iss`, `aud` and `exp` checked; the principal is `sub`),
//! and access tokens of trusted OAuth issuers (`--oauth-issuer`, [`crate::oauth`]).
//!
//! With identity on, a request without a valid token gets 401 with `WWW-Authenticate: Bearer`
//! (pointing at the protected-resource metadata when OAuth is on); a valid one carries its
//! [`Principal`] in the request's extensions, where visibility, policy, limits and traces read
//! it, and a JWT's caller its [`CallerToken`] (for upstream token exchange; an API key is never
//! handed on). With identity off every request is `anonymous`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use toolforge_policy::Principal;

/// The load balancer's probes: open to everyone, whatever the identity, `Host` or `Origin`,
/// because they tell nothing but the replica's state (no server names, tools or errors). A
/// Kubernetes probe names the pod's address in `Host`, and HAProxy's check sends no token.
pub const PROBE_PATHS: [&str; 2] = ["/livez", "/readyz"];
/// The consent pages (`crate::consent`), which check who opens them themselves.
pub const CONSENT_PATHS: [&str; 2] = ["/oauth/start", "/oauth/callback"];

/// A bearer token longer than this is refused unread.
const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// Why an identity file was refused (at start-up).
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("API keys file, line {line}: {problem}")]
    ApiKeys { line: usize, problem: String },
    #[error("JWKS file: {0}")]
    Jwks(String),
}

/// Why a request was not authenticated (its 401 says so).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("missing bearer token (send Authorization: Bearer <token>)")]
    Missing,
    #[error("invalid bearer token: {0}")]
    Invalid(String),
}

struct JwtKey {
    kid: Option<String>,
    algorithm: Algorithm,
    key: DecodingKey,
}

/// The JWT settings: the keys, and the issuer and audience every token must name.
struct Jwt {
    keys: Vec<JwtKey>,
    issuer: String,
    audience: String,
}

/// How requests are authenticated.
#[derive(Default)]
pub struct Identity {
    /// SHA-256 of each key -> its principal (keys are compared by digest, never kept).
    api_keys: HashMap<[u8; 32], Principal>,
    jwt: Option<Jwt>,
    oauth: Option<Arc<crate::oauth::OAuthResource>>,
}

/// The access token a request was authenticated with, when it was a JWT or an OAuth access
/// token (never an API key): what an upstream token exchange trades for the caller.
#[derive(Clone, Debug)]
pub struct CallerToken(pub toolforge_mcp::auth::AccessToken);

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("api_keys", &self.api_keys.len())
            .field("jwt_keys", &self.jwt.as_ref().map_or(0, |j| j.keys.len()))
            .finish()
    }
}

#[derive(Deserialize)]
struct Claims {
    sub: String,
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

impl Identity {
    /// True when some way to authenticate is configured.
    #[must_use]
    pub fn is_configured(&self) -> bool {
        !self.api_keys.is_empty() || self.jwt.is_some() || self.oauth.is_some()
    }

    /// Accepts the access tokens of an OAuth protected resource's issuers.
    #[must_use]
    pub fn with_oauth(mut self, oauth: Arc<crate::oauth::OAuthResource>) -> Self {
        self.oauth = Some(oauth);
        self
    }

    /// The OAuth protected resource, when OAuth is on.
    #[must_use]
    pub fn oauth(&self) -> Option<&Arc<crate::oauth::OAuthResource>> {
        self.oauth.as_ref()
    }

    /// Authenticates a request: API keys and the JWKS file first, then the OAuth issuers.
    ///
    /// # Errors
    /// Why the request is refused (the challenge depends on it).
    pub async fn authenticate_request(&self, headers: &HeaderMap) -> Result<Authenticated, Denied> {
        let fixed = self.authenticate(headers);
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_token)
            .filter(|t| t.len() <= MAX_TOKEN_BYTES);
        let is_jwt = token.is_some_and(|t| t.matches('.').count() == 2);
        let caller =
            |t: &str| is_jwt.then(|| CallerToken(toolforge_mcp::auth::AccessToken::new(t)));
        match (fixed, &self.oauth, token) {
            (Ok(principal), _, token) => Ok(Authenticated {
                principal,
                token: token.and_then(caller),
                grant: None,
            }),
            (Err(AuthError::Missing), _, _) | (Err(_), _, None) => Err(Denied::Missing),
            (Err(AuthError::Invalid(why)), None, Some(_)) => Err(Denied::Invalid(why)),
            (Err(AuthError::Invalid(_)), Some(oauth), Some(token)) => {
                match oauth.verify(token).await {
                    Ok(grant) => Ok(Authenticated {
                        principal: Principal::new(&grant.subject),
                        token: Some(CallerToken(toolforge_mcp::auth::AccessToken::new(token))),
                        grant: Some(grant),
                    }),
                    Err(crate::oauth::Refused::Invalid(why)) => Err(Denied::Invalid(why)),
                    Err(crate::oauth::Refused::InsufficientScope { missing }) => {
                        Err(Denied::InsufficientScope(missing))
                    }
                    Err(crate::oauth::Refused::Unavailable(why)) => Err(Denied::Unavailable(why)),
                }
            }
        }
    }

    /// Adds the API keys of a keys file: one `KEY PRINCIPAL` per line; blank lines and lines
    /// starting with `#` are skipped.
    pub fn with_api_keys(mut self, text: &str) -> Result<Self, IdentityError> {
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let problem = |problem: &str| IdentityError::ApiKeys {
                line: i + 1,
                problem: problem.to_owned(),
            };
            let mut words = line.split_whitespace();
            let (Some(key), Some(principal), None) = (words.next(), words.next(), words.next())
            else {
                return Err(problem("expected `KEY PRINCIPAL` (two words)"));
            };
            if key.len() < 16 {
                return Err(problem("the key is shorter than 16 characters"));
            }
            if self
                .api_keys
                .insert(digest(key), Principal::new(principal))
                .is_some()
            {
                return Err(problem("the key is listed twice"));
            }
        }
        if self.api_keys.is_empty() {
            return Err(IdentityError::ApiKeys {
                line: 0,
                problem: "the file lists no keys".to_owned(),
            });
        }
        Ok(self)
    }

    /// Accepts JWTs signed by the keys of a JWKS document (RSA keys for RS256, P-256 keys
    /// for ES256) that name `issuer` (`iss`) and `audience` (`aud`) and have not expired.
    pub fn with_jwks(
        mut self,
        jwks: &str,
        issuer: &str,
        audience: &str,
    ) -> Result<Self, IdentityError> {
        let set: JwkSet = serde_json::from_str(jwks)
            .map_err(|e| IdentityError::Jwks(format!("not a JWKS document ({e})")))?;
        let mut keys = Vec::new();
        for (i, jwk) in set.keys.iter().enumerate() {
            let algorithm = match &jwk.algorithm {
                AlgorithmParameters::RSA(_) => Algorithm::RS256,
                AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => {
                    Algorithm::ES256
                }
                _ => {
                    return Err(IdentityError::Jwks(format!(
                        "key {}: only RSA (RS256) and P-256 (ES256) keys are supported",
                        i + 1
                    )));
                }
            };
            let key = DecodingKey::from_jwk(jwk)
                .map_err(|e| IdentityError::Jwks(format!("key {}: {e}", i + 1)))?;
            keys.push(JwtKey {
                kid: jwk.common.key_id.clone(),
                algorithm,
                key,
            });
        }
        if keys.is_empty() {
            return Err(IdentityError::Jwks("the document has no keys".to_owned()));
        }
        if issuer.is_empty() || audience.is_empty() {
            return Err(IdentityError::Jwks(
                "--jwt-issuer and --jwt-audience are required with --jwt-jwks".to_owned(),
            ));
        }
        self.jwt = Some(Jwt {
            keys,
            issuer: issuer.to_owned(),
            audience: audience.to_owned(),
        });
        Ok(self)
    }

    /// The principal of a request with these headers.
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, AuthError> {
        let value = headers
            .get(header::AUTHORIZATION)
            .ok_or(AuthError::Missing)?;
        if value.len() > MAX_TOKEN_BYTES {
            return Err(AuthError::Invalid("the token is too long".to_owned()));
        }
        let value = value
            .to_str()
            .map_err(|_| AuthError::Invalid("the header is not text".to_owned()))?;
        let token = bearer_token(value).ok_or(AuthError::Missing)?;
        if let Some(principal) = self.api_keys.get(&digest(token)) {
            return Ok(principal.clone());
        }
        match &self.jwt {
            Some(jwt) if token.matches('.').count() == 2 => jwt.verify(token),
            _ => Err(AuthError::Invalid("unknown key".to_owned())),
        }
    }
}

/// A request authenticated.
#[derive(Debug, Clone)]
pub struct Authenticated {
    pub principal: Principal,
    /// The JWT or OAuth access token it came with (not an API key).
    pub token: Option<CallerToken>,
    /// What an OAuth access token granted (scopes, chosen claims).
    pub grant: Option<crate::oauth::TokenGrant>,
}

/// Why a request was not authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// No bearer token: 401.
    Missing,
    /// A token that is not valid: 401 `invalid_token`.
    Invalid(String),
    /// A valid token without these required scopes: 403 `insufficient_scope`.
    InsufficientScope(Vec<String>),
    /// The identity provider could not be asked: 503.
    Unavailable(String),
}

/// The token of an `Authorization: Bearer <token>` value. The scheme is case-insensitive
/// (RFC 9110, section 11.1): `Bearer`, `bearer` and `BEARER` are one scheme.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    Some(token.trim()).filter(|t| !t.is_empty())
}

impl Jwt {
    fn verify(&self, token: &str) -> Result<Principal, AuthError> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| AuthError::Invalid(format!("malformed JWT ({e})")))?;
        let candidates = self.keys.iter().filter(|k| {
            k.algorithm == header.alg
                && (header.kid.is_none() || k.kid.is_none() || k.kid == header.kid)
        });
        let mut last = AuthError::Invalid(format!(
            "no key of the JWKS verifies a {:?} token with this key id",
            header.alg
        ));
        for candidate in candidates {
            let mut validation = Validation::new(candidate.algorithm);
            validation.set_issuer(&[&self.issuer]);
            validation.set_audience(&[&self.audience]);
            validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
            // A token not valid yet is refused as an expired one is (RFC 7519, section 4.1.5).
            validation.validate_nbf = true;
            match jsonwebtoken::decode::<Claims>(token, &candidate.key, &validation) {
                Ok(data) if !data.claims.sub.is_empty() => {
                    return Ok(Principal::new(&data.claims.sub));
                }
                Ok(_) => return Err(AuthError::Invalid("the JWT's sub is empty".to_owned())),
                Err(e) => last = AuthError::Invalid(crate::jwt_problem::jwt_problem(&e)),
            }
        }
        Err(last)
    }
}

/// Middleware: authenticates every request (a 401 with `WWW-Authenticate: Bearer` when it
/// fails) and puts its [`Principal`] in the request's extensions.
pub async fn authenticate(
    State(identity): State<Arc<Identity>>,
    mut req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path();
    if path == "/openapi.json"
        || PROBE_PATHS.contains(&path)
        || path.starts_with(crate::oauth::metadata::WELL_KNOWN)
        || CONSENT_PATHS.contains(&path)
    {
        return next.run(req).await;
    }
    let console = path == "/ui" || path.starts_with("/ui/");
    match identity.authenticate_request(req.headers()).await {
        Ok(authenticated) => {
            req.extensions_mut().insert(authenticated.principal.clone());
            if let Some(token) = authenticated.token.clone() {
                req.extensions_mut().insert(token);
            }
            req.extensions_mut().insert(authenticated);
            next.run(req).await
        }
        Err(denied) => {
            let mut response = refusal(&identity, &denied);
            if console {
                crate::console::headers::set_secure_headers(response.headers_mut());
            }
            response
        }
    }
}

fn refusal(identity: &Identity, denied: &Denied) -> Response {
    use crate::oauth::metadata::{Challenge, challenge};
    let oauth = identity.oauth();
    let (status, message, header) = match denied {
        Denied::Missing => (
            StatusCode::UNAUTHORIZED,
            AuthError::Missing.to_string(),
            oauth.map_or_else(
                || HeaderValue::from_static("Bearer realm=\"toolforge\""),
                |o| challenge(o, Challenge::Missing),
            ),
        ),
        Denied::Invalid(why) => (
            StatusCode::UNAUTHORIZED,
            AuthError::Invalid(why.clone()).to_string(),
            oauth.map_or_else(
                || HeaderValue::from_static("Bearer realm=\"toolforge\", error=\"invalid_token\""),
                |o| challenge(o, Challenge::Invalid(why)),
            ),
        ),
        Denied::InsufficientScope(missing) => (
            StatusCode::FORBIDDEN,
            format!("the token lacks the scope {}", missing.join(" ")),
            oauth.map_or_else(
                || HeaderValue::from_static("Bearer error=\"insufficient_scope\""),
                |o| challenge(o, Challenge::InsufficientScope(missing)),
            ),
        ),
        Denied::Unavailable(why) => {
            let mut response = crate::error::ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("tokens cannot be checked right now: {why}"),
            )
            .into_response();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            return response;
        }
    };
    let mut response = crate::error::ApiError::new(status, message).into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, header);
    response
}

/// The principal an HTTP request was authenticated as (`anonymous` when identity is off).
#[must_use]
pub fn principal_of(extensions: &http::Extensions) -> Principal {
    extensions.get::<Principal>().cloned().unwrap_or_default()
}

#[cfg(test)]
mod tests;
