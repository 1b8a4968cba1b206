//! Requests to an authorization server's token endpoint that need no user: a refresh
//! (RFC 6749 section 6), a token exchange (RFC 8693) and client credentials (RFC 6749 section
//! 4.4). Each is one form POST with the client's authentication, so they are written here
//! rather than through rmcp's `AuthorizationManager`, which wants discovered metadata and its
//! own credential store for each of them (and has no token exchange).
//!
//! The answer is bounded ([`MAX_ANSWER_BYTES`]); an error names the endpoint and the server's
//! `error`/`error_description`, never the tokens of the request.

use std::time::Duration;

use serde_json::Value;

use super::token::{AccessToken, AuthFailure};

/// Largest token endpoint answer read.
pub const MAX_ANSWER_BYTES: usize = 256 * 1024;
/// Longest one token request may take.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// How the client authenticates at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientAuth {
    /// HTTP Basic (`client_secret_basic`), the default with a secret.
    #[default]
    ClientSecretBasic,
    /// The secret in the form (`client_secret_post`).
    ClientSecretPost,
    /// A public client: `client_id` in the form, no secret.
    None,
}

/// A token endpoint and the client that calls it.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub struct TokenEndpoint {
    pub url: String,
    pub client_id: String,
    #[serde(default)]
    pub client_secret: Option<String>,
    #[serde(default)]
    pub auth: ClientAuth,
}

impl std::fmt::Debug for TokenEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenEndpoint")
            .field("url", &self.url)
            .field("client_id", &self.client_id)
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

/// A token endpoint's answer.
#[derive(Clone)]
pub struct Issued {
    pub access_token: AccessToken,
    pub refresh_token: Option<AccessToken>,
    /// Seconds it is valid for, when the server said.
    pub expires_in: Option<u64>,
    /// The scopes granted, when the server said.
    pub scope: Option<String>,
    /// RFC 8693's `issued_token_type`, when the server said.
    pub issued_token_type: Option<String>,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued")
            .field("expires_in", &self.expires_in)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// The pieces of a token request besides the client's authentication.
pub type Form<'a> = Vec<(&'a str, String)>;

impl TokenEndpoint {
    /// Posts `form` (with the client's authentication) and reads the answer.
    ///
    /// # Errors
    /// The endpoint could not be reached, refused (with its `error`), or answered something
    /// that is not a token response. [`AuthFailure::AuthorizationRequired`] for `invalid_grant`
    /// (a refresh token revoked or expired: the user must consent again).
    pub async fn request(
        &self,
        http: &reqwest::Client,
        mut form: Form<'_>,
    ) -> Result<Issued, AuthFailure> {
        let mut request = http
            .post(&self.url)
            .header(reqwest::header::ACCEPT, "application/json")
            .timeout(TIMEOUT);
        match (self.auth, &self.client_secret) {
            (ClientAuth::ClientSecretBasic, Some(secret)) => {
                // RFC 6749 section 2.3.1: both parts form-urlencoded before Basic.
                let enc =
                    |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
                request = request.basic_auth(enc(&self.client_id), Some(enc(secret)));
            }
            (ClientAuth::ClientSecretPost, Some(secret)) => {
                form.push(("client_id", self.client_id.clone()));
                form.push(("client_secret", secret.clone()));
            }
            _ => form.push(("client_id", self.client_id.clone())),
        }
        let body = {
            let mut s = form_urlencoded::Serializer::new(String::new());
            for (k, v) in &form {
                s.append_pair(k, v);
            }
            s.finish()
        };
        let response = request
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(body)
            .send()
            .await
            .map_err(|e| {
                AuthFailure::Failed(format!("token endpoint {}: {}", self.url, e.without_url()))
            })?;
        let status = response.status();
        let bytes = read_bounded(response)
            .await
            .map_err(|e| AuthFailure::Failed(format!("token endpoint {}: {e}", self.url)))?;
        let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if !status.is_success() {
            let error = answer.get("error").and_then(Value::as_str).unwrap_or("");
            if error == "invalid_grant" {
                return Err(AuthFailure::AuthorizationRequired);
            }
            let description = answer
                .get("error_description")
                .and_then(Value::as_str)
                .unwrap_or("");
            return Err(AuthFailure::Failed(format!(
                "token endpoint {} refused (HTTP {status}{}{})",
                self.url,
                if error.is_empty() {
                    String::new()
                } else {
                    format!(", {error}")
                },
                if description.is_empty() {
                    String::new()
                } else {
                    format!(": {description}")
                },
            )));
        }
        let text = |key: &str| answer.get(key).and_then(Value::as_str).map(str::to_owned);
        let access = text("access_token")
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                AuthFailure::Failed(format!(
                    "token endpoint {} answered without an access_token",
                    self.url
                ))
            })?;
        if let Some(kind) = text("token_type")
            && !kind.eq_ignore_ascii_case("bearer")
            && !kind.eq_ignore_ascii_case("n_a")
        {
            return Err(AuthFailure::Failed(format!(
                "token endpoint {} issued a {kind} token; only bearer tokens are supported",
                self.url
            )));
        }
        Ok(Issued {
            access_token: AccessToken::new(access),
            refresh_token: text("refresh_token").map(AccessToken::new),
            expires_in: answer.get("expires_in").and_then(|v| {
                v.as_u64()
                    .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            }),
            scope: text("scope"),
            issued_token_type: text("issued_token_type"),
        })
    }
}

/// Reads at most [`MAX_ANSWER_BYTES`] of a response.
async fn read_bounded(mut response: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| e.without_url().to_string())?
    {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(format!("answer larger than {MAX_ANSWER_BYTES} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// RFC 8693's token type of an access token.
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// The form of a refresh.
#[must_use]
pub fn refresh_form<'a>(refresh_token: &AccessToken, resource: Option<&str>) -> Form<'a> {
    let mut form = vec![
        ("grant_type", "refresh_token".to_owned()),
        ("refresh_token", refresh_token.expose().to_owned()),
    ];
    if let Some(resource) = resource {
        form.push(("resource", resource.to_owned()));
    }
    form
}

/// What a token exchange or a client-credentials grant asks for.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Target {
    /// `audience` (RFC 8693): the logical name of the server the token is for.
    #[serde(default)]
    pub audience: Option<String>,
    /// `resource` (RFC 8707): the server's URL.
    #[serde(default)]
    pub resource: Option<String>,
    /// `scope`, space-separated.
    #[serde(default)]
    pub scope: Option<String>,
}

impl Target {
    fn extend(&self, form: &mut Form<'_>) {
        if let Some(a) = &self.audience {
            form.push(("audience", a.clone()));
        }
        if let Some(r) = &self.resource {
            form.push(("resource", r.clone()));
        }
        if let Some(s) = &self.scope {
            form.push(("scope", s.clone()));
        }
    }
}

/// The form of a token exchange (RFC 8693): the caller's access token for one meant for
/// `target`.
#[must_use]
pub fn exchange_form<'a>(subject: &AccessToken, target: &Target) -> Form<'a> {
    let mut form = vec![
        (
            "grant_type",
            "urn:ietf:params:oauth:grant-type:token-exchange".to_owned(),
        ),
        ("subject_token", subject.expose().to_owned()),
        ("subject_token_type", ACCESS_TOKEN_TYPE.to_owned()),
        ("requested_token_type", ACCESS_TOKEN_TYPE.to_owned()),
    ];
    target.extend(&mut form);
    form
}

/// The form of a client-credentials grant.
#[must_use]
pub fn client_credentials_form<'a>(target: &Target) -> Form<'a> {
    let mut form = vec![("grant_type", "client_credentials".to_owned())];
    target.extend(&mut form);
    form
}

/// Seconds since the epoch.
#[must_use]
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
