//! The authorization-code flow of the MCP authorization spec, on rmcp's `auth` module:
//! discovery from the server's 401 (RFC 9728 protected-resource metadata, then RFC 8414 or
//! OpenID discovery, the issuer checked against the well-known URL it came from), client
//! registration (pre-registered `clientId`/`clientSecret`, a Client ID Metadata Document URL
//! when the authorization server supports it, else dynamic registration, RFC 7591), PKCE S256,
//! the RFC 8707 `resource` on every request, the token endpoint's authentication method, and
//! the RFC 9207 `iss` of the authorization response compared as a string.
//!
//! rmcp does all of that; this module only gives it the shape toolforge needs: a flow begun in
//! one place ([`begin`]: the URL to send a user to) and finished in another ([`Pending::finish`]:
//! the redirect's `code`, `state` and `iss`), and [`follow`] for a client with no user, which
//! reads the code from the authorization endpoint's redirect itself.

use oauth2::TokenResponse as _;
use rmcp::transport::auth::{
    AuthError, AuthorizationCallback, AuthorizationManager, AuthorizationMetadata,
    AuthorizationRequest, AuthorizationSession,
};

use super::endpoint::{ClientAuth, TokenEndpoint, now_secs};
use super::grant::Grant;
use super::token::{AccessToken, AuthFailure};

/// Who the client is to an authorization server.
#[derive(Clone, Default)]
pub struct ClientIdentity {
    /// A client id registered out of band (`clientId`); registration is then skipped.
    pub client_id: Option<String>,
    /// Its secret (`clientSecret`), for a confidential client.
    pub client_secret: Option<String>,
    /// The HTTPS URL of this client's Client ID Metadata Document, used as its client id where
    /// the authorization server says `client_id_metadata_document_supported`.
    pub client_metadata_url: Option<String>,
    /// The name given in dynamic registration.
    pub client_name: String,
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| ".."))
            .field("client_metadata_url", &self.client_metadata_url)
            .field("client_name", &self.client_name)
            .finish()
    }
}

/// What a flow asks for.
#[derive(Debug, Clone)]
pub struct FlowRequest<'a> {
    /// The MCP server's URL (the protected resource).
    pub resource: &'a str,
    /// The `WWW-Authenticate` of the server's refusal, when there was one: discovery starts
    /// from its `resource_metadata`, and its `scope` is asked for.
    pub challenge: Option<&'a str>,
    /// Scopes to ask for; empty: the spec's choice (the challenge's, else the resource's
    /// `scopes_supported`, else none).
    pub scopes: Vec<String>,
    /// Where the authorization server sends the user back.
    pub redirect_uri: &'a str,
}

/// A flow begun: the URL the user opens, and the state that finishes it.
pub struct Pending {
    session: AuthorizationSession,
    context: Context,
}

/// What a finished flow needs to turn its tokens into a [`Grant`].
#[derive(Clone)]
struct Context {
    metadata: AuthorizationMetadata,
    client_secret: Option<String>,
    client_id: Option<String>,
    resource: String,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending").finish_non_exhaustive()
    }
}

/// A finished flow: rmcp's manager holding the grant (it refreshes it when it nears expiry).
pub struct Authorized {
    manager: AuthorizationManager,
    context: Context,
}

impl std::fmt::Debug for Authorized {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorized").finish_non_exhaustive()
    }
}

/// An rmcp error as a failure for people: what went wrong, never a token (rmcp's messages
/// name endpoints, issuers and statuses).
pub(crate) fn failed(what: &str, e: &AuthError) -> AuthFailure {
    match e {
        AuthError::AuthorizationRequired => AuthFailure::AuthorizationRequired,
        other => {
            let mut text = other.to_string();
            let mut cause = std::error::Error::source(other);
            while let Some(c) = cause {
                let more = c.to_string();
                if !text.contains(&more) {
                    text = format!("{text}: {more}");
                }
                cause = c.source();
            }
            AuthFailure::Failed(format!("{what}: {text}"))
        }
    }
}

/// Discovers the server's authorization server, registers (or uses the identity given), and
/// builds the authorization URL with PKCE and `resource`.
///
/// # Errors
/// Discovery found no usable metadata (or metadata whose `issuer` or `resource` does not
/// match), registration was refused, or the server cannot do PKCE S256.
pub async fn begin(
    request: FlowRequest<'_>,
    identity: &ClientIdentity,
) -> Result<Pending, AuthFailure> {
    let mut manager = AuthorizationManager::new(request.resource)
        .await
        .map_err(|e| failed("OAuth client", &e))?;
    let resolution = manager
        .resolve_metadata_from_challenge(request.challenge)
        .await
        .map_err(|e| failed("authorization server discovery", &e))?;
    if !resolution.source.is_discovered() {
        return Err(AuthFailure::Failed(format!(
            "{} publishes no OAuth metadata (no protected-resource or authorization-server \
             metadata was found)",
            request.resource
        )));
    }
    let context = Context {
        metadata: resolution.metadata.clone(),
        client_secret: identity.client_secret.clone(),
        client_id: identity.client_id.clone(),
        resource: request.resource.to_owned(),
    };
    manager.set_metadata(resolution.metadata);
    let mut auth = AuthorizationRequest::new(request.redirect_uri)
        .with_client_name(identity.client_name.clone())
        .with_initial_scope_selection();
    if !request.scopes.is_empty() {
        auth = auth.with_scopes(request.scopes.clone());
    }
    if let Some(id) = &identity.client_id {
        auth = auth.with_preregistered_client(id.clone());
        if let Some(secret) = &identity.client_secret {
            auth = auth.with_client_secret(secret.clone());
        }
    }
    if let Some(url) = &identity.client_metadata_url {
        auth = auth.with_client_metadata_url(url.clone());
    }
    let session = AuthorizationSession::new(manager, auth)
        .await
        .map_err(|(_, e)| failed("client registration", &e))?;
    Ok(Pending { session, context })
}

impl Pending {
    /// The authorization URL to send the user to.
    #[must_use]
    pub fn url(&self) -> &str {
        self.session.get_authorization_url()
    }

    /// The `state` of the authorization URL, which its redirect carries back.
    #[must_use]
    pub fn state(&self) -> Option<String> {
        reqwest::Url::parse(self.url()).ok().and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k == "state")
                .map(|(_, v)| v.into_owned())
        })
    }

    /// Finishes the flow with the authorization response: `code`, `state`, and the `iss` of
    /// the redirect when it had one (compared with the discovered issuer, as a string).
    ///
    /// # Errors
    /// A foreign `state`, a wrong or missing required `iss`, or a refused code exchange.
    pub async fn finish(
        self,
        code: &str,
        state: &str,
        issuer: Option<&str>,
    ) -> Result<Authorized, AuthFailure> {
        self.session
            .handle_callback_with_issuer(code, state, issuer)
            .await
            .map_err(|e| failed("authorization", &e))?;
        Ok(Authorized {
            manager: self.session.auth_manager,
            context: self.context,
        })
    }

    /// Finishes the flow with the URL the authorization server redirected to.
    ///
    /// # Errors
    /// As [`Pending::finish`]; also a redirect without `code` or `state` (an `error=`
    /// redirect says why).
    pub async fn finish_with_redirect(self, location: &str) -> Result<Authorized, AuthFailure> {
        if let Some(error) = reqwest::Url::parse(location).ok().and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k == "error")
                .map(|(_, v)| v.into_owned())
        }) {
            return Err(AuthFailure::Failed(format!(
                "the authorization server refused: {error}"
            )));
        }
        let callback = AuthorizationCallback::from_redirect_url(location)
            .map_err(|e| failed("authorization response", &e))?;
        self.finish(
            &callback.code,
            &callback.csrf_token,
            callback.issuer.as_deref(),
        )
        .await
    }
}

impl Authorized {
    /// The access token, refreshed first when it is expired or about to expire.
    ///
    /// # Errors
    /// [`AuthFailure::AuthorizationRequired`] when it expired and cannot be refreshed.
    pub async fn token(&self) -> Result<AccessToken, AuthFailure> {
        self.manager
            .get_access_token()
            .await
            .map(AccessToken::new)
            .map_err(|e| failed("access token", &e))
    }

    /// A token the server refused: refreshed now (once), when the grant has a refresh token.
    ///
    /// # Errors
    /// [`AuthFailure::AuthorizationRequired`] when there is nothing to refresh with or the
    /// refresh was rejected.
    pub async fn refresh(&self) -> Result<AccessToken, AuthFailure> {
        match self.manager.refresh_token().await {
            Ok(response) => Ok(AccessToken::new(response.access_token().secret().as_str())),
            Err(AuthError::AuthorizationRequired | AuthError::TokenRefreshRejected(_)) => {
                Err(AuthFailure::AuthorizationRequired)
            }
            Err(e) => Err(failed("token refresh", &e)),
        }
    }

    /// The scopes granted so far.
    pub async fn scopes(&self) -> Vec<String> {
        self.manager.get_current_scopes().await
    }

    /// The grant as the pool keeps it: the tokens, their expiry, and how to refresh them.
    ///
    /// # Errors
    /// The flow holds no token (it was not finished).
    pub async fn grant(&self) -> Result<Grant, AuthFailure> {
        let (client_id, token) = self
            .manager
            .get_credentials()
            .await
            .map_err(|e| failed("credentials", &e))?;
        let token = token.ok_or(AuthFailure::AuthorizationRequired)?;
        let metadata = &self.context.metadata;
        let client_secret = self
            .context
            .client_secret
            .clone()
            .filter(|_| self.context.client_id.as_deref() == Some(client_id.as_str()));
        let post_only = metadata
            .additional_fields
            .get("token_endpoint_auth_methods_supported")
            .and_then(serde_json::Value::as_array)
            .is_some_and(|methods| {
                let has = |m: &str| methods.iter().any(|v| v.as_str() == Some(m));
                has("client_secret_post") && !has("client_secret_basic")
            });
        let auth = match (&client_secret, post_only) {
            (None, _) => ClientAuth::None,
            (Some(_), true) => ClientAuth::ClientSecretPost,
            (Some(_), false) => ClientAuth::ClientSecretBasic,
        };
        let now = now_secs();
        Ok(Grant {
            access_token: token.access_token().secret().clone(),
            refresh_token: token.refresh_token().map(|r| r.secret().clone()),
            expires_at: token.expires_in().map(|d| now + d.as_secs()),
            scopes: self.scopes().await,
            issuer: metadata.issuer.clone(),
            endpoint: TokenEndpoint {
                url: metadata.token_endpoint.clone(),
                client_id,
                client_secret,
                auth,
            },
            resource: Some(self.context.resource.clone()),
            obtained_at: now,
        })
    }
}

/// For a client with no user: opens the authorization URL without following its redirect and
/// returns where it redirects to (the `code`, or the `error`). An authorization server that
/// wants a person (a login page) answers 200, which is an error here.
///
/// # Errors
/// The request failed, or the answer was not a redirect.
pub async fn follow(url: &str) -> Result<String, AuthFailure> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(|e| AuthFailure::Failed(format!("HTTP client: {e}")))?;
    let response = client
        .get(url)
        .send()
        .await
        .map_err(|e| AuthFailure::Failed(format!("authorization endpoint: {e}")))?;
    let status = response.status();
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    match location {
        Some(location) if status.is_redirection() => {
            // A relative Location is resolved against the authorization endpoint.
            Ok(reqwest::Url::parse(url)
                .and_then(|base| base.join(&location))
                .map_or(location, |u| u.to_string()))
        }
        _ => Err(AuthFailure::Failed(format!(
            "the authorization endpoint answered {status}, not a redirect: it wants a person \
             to sign in (run the flow in a browser instead)"
        ))),
    }
}
