//! Credentials for a client with no user at hand (`toolforge client`, and the conformance
//! suite's scenarios against it): the first 401 runs the whole authorization-code flow, the
//! client following the authorization endpoint's redirect itself; a 401 on a token it holds
//! refreshes it, or runs the flow again; a 403 `insufficient_scope` runs it again for the
//! scopes held plus the ones asked for (step-up). At most [`MAX_FLOWS`] flows per client, so a
//! server that never accepts cannot keep it authorizing.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Mutex;

use super::flow::{self, Authorized, ClientIdentity, FlowRequest};
use super::token::{AccessToken, AuthFailure, AuthFuture, Challenge, Refusal, TokenSource};

/// Most authorization flows one headless client runs.
pub const MAX_FLOWS: usize = 3;

/// Where a headless client says it is redirected to; nothing listens there, the redirect is
/// read from the authorization endpoint's answer.
pub const HEADLESS_REDIRECT_URI: &str = "http://localhost/callback";

/// The credentials of a client with no user.
pub struct Headless {
    resource: String,
    identity: ClientIdentity,
    grant: Mutex<Option<Authorized>>,
    flows: AtomicUsize,
}

impl std::fmt::Debug for Headless {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Headless")
            .field("resource", &self.resource)
            .field("flows", &self.flows.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Headless {
    /// Credentials for the MCP server at `resource`, registering as `identity`.
    #[must_use]
    pub fn new(resource: &str, identity: ClientIdentity) -> Self {
        Self {
            resource: resource.to_owned(),
            identity,
            grant: Mutex::new(None),
            flows: AtomicUsize::new(0),
        }
    }

    /// How many authorization flows were run.
    #[must_use]
    pub fn flows(&self) -> usize {
        self.flows.load(Ordering::Relaxed)
    }

    async fn authorize(
        &self,
        challenge: &Challenge,
        scopes: Vec<String>,
    ) -> Result<Authorized, AuthFailure> {
        if self.flows.fetch_add(1, Ordering::Relaxed) >= MAX_FLOWS {
            return Err(AuthFailure::Failed(format!(
                "the server still refuses after {MAX_FLOWS} authorizations; giving up"
            )));
        }
        let request = FlowRequest {
            resource: &self.resource,
            challenge: Some(&challenge.www_authenticate),
            scopes,
            redirect_uri: HEADLESS_REDIRECT_URI,
        };
        let pending = flow::begin(request, &self.identity).await?;
        let location = flow::follow(pending.url()).await?;
        pending.finish_with_redirect(&location).await
    }
}

impl TokenSource for Headless {
    fn token(&self) -> AuthFuture<'_, Result<Option<AccessToken>, AuthFailure>> {
        Box::pin(async move {
            let grant = self.grant.lock().await;
            match grant.as_ref() {
                None => Ok(None),
                Some(authorized) => match authorized.token().await {
                    Ok(token) => Ok(Some(token)),
                    Err(AuthFailure::AuthorizationRequired) => Ok(None),
                    Err(e) => Err(e),
                },
            }
        })
    }

    fn refused<'a>(
        &'a self,
        challenge: &'a Challenge,
    ) -> AuthFuture<'a, Result<Option<AccessToken>, AuthFailure>> {
        Box::pin(async move {
            let mut grant = self.grant.lock().await;
            let scopes = match (challenge.refusal, grant.as_ref()) {
                (Refusal::Unauthorized, Some(held)) => {
                    // Another request may have renewed it meanwhile.
                    if let Ok(current) = held.token().await
                        && Some(&current) != challenge.sent.as_ref()
                    {
                        return Ok(Some(current));
                    }
                    if let Ok(fresh) = held.refresh().await
                        && Some(&fresh) != challenge.sent.as_ref()
                    {
                        return Ok(Some(fresh));
                    }
                    Vec::new()
                }
                (Refusal::Unauthorized, None) => Vec::new(),
                (Refusal::InsufficientScope, held) => {
                    // Step-up: what was granted, and what the server asks for now.
                    let mut scopes = match held {
                        Some(held) => held.scopes().await,
                        None => Vec::new(),
                    };
                    for scope in challenge.scope().unwrap_or_default().split_whitespace() {
                        if !scopes.iter().any(|s| s == scope) {
                            scopes.push(scope.to_owned());
                        }
                    }
                    scopes
                }
            };
            let authorized = self.authorize(challenge, scopes).await?;
            let token = authorized.token().await?;
            *grant = Some(authorized);
            Ok(Some(token))
        })
    }
}
