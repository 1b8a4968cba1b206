//! The pool's credentials, server by server: which [`TokenSource`] each connection gets.
//!
//! - The shared connection (the one that reads a server's lists, which every principal sees):
//!   `"client-credentials"` and `"token-exchange"` servers with the gateway's own client
//!   credentials; `"oauth"` servers with the grant of `listAs`, else of the first principal (by
//!   name) that has one ([`ListSource`]).
//! - A principal's own connection (tool calls, reads and prompts of `"oauth"` and
//!   `"token-exchange"` servers): that principal's grant, or its exchanged token.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::Mutex;

use super::config::UpstreamAuth;
use super::source::{ExchangeSource, Exchanges, GrantSource, ServiceSource};
use super::store::TokenStore;
use super::token::{AccessToken, AuthFailure, AuthFuture, Challenge, Credentials, TokenSource};
use crate::config::ServerConfig;

/// The HTTP client for authorization servers: no redirects (a token request is never sent on),
/// bounded in time.
///
/// # Errors
/// The client cannot be built.
pub fn http_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(super::endpoint::TIMEOUT)
        .build()
        .map_err(|e| format!("HTTP client: {e}"))
}

/// Every server's credentials.
pub struct PoolCredentials {
    store: Arc<TokenStore>,
    http: reqwest::Client,
    exchanges: HashMap<String, Arc<Exchanges>>,
}

impl std::fmt::Debug for PoolCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolCredentials")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl PoolCredentials {
    #[must_use]
    pub fn new(store: Arc<TokenStore>, http: reqwest::Client, servers: &[ServerConfig]) -> Self {
        let exchanges = servers
            .iter()
            .filter(|s| matches!(s.auth, Some(UpstreamAuth::TokenExchange(_))))
            .map(|s| (s.name.clone(), Arc::new(Exchanges::default())))
            .collect();
        Self {
            store,
            http,
            exchanges,
        }
    }

    /// The store of grants.
    #[must_use]
    pub fn store(&self) -> &Arc<TokenStore> {
        &self.store
    }

    /// The exchanged tokens of `server` (a `"token-exchange"` server).
    #[must_use]
    pub fn exchanges(&self, server: &str) -> Option<&Arc<Exchanges>> {
        self.exchanges.get(server)
    }

    /// The shared connection's credentials for `cfg` (none without `"auth"`).
    #[must_use]
    pub fn shared(&self, cfg: &ServerConfig) -> Option<Credentials> {
        let credentials: Credentials = match cfg.auth.as_ref()? {
            UpstreamAuth::OAuth(o) => Arc::new(ListSource {
                server: cfg.name.clone(),
                list_as: o.list_as.clone(),
                store: self.store.clone(),
                http: self.http.clone(),
                current: Mutex::new(None),
            }),
            UpstreamAuth::TokenExchange(s) | UpstreamAuth::ClientCredentials(s) => Arc::new(
                ServiceSource::new(s.endpoint.clone(), s.target.clone(), self.http.clone()),
            ),
        };
        Some(credentials)
    }

    /// `principal`'s credentials for `cfg`, a server with per-principal `"auth"`.
    #[must_use]
    pub fn for_principal(&self, cfg: &ServerConfig, principal: &str) -> Option<Credentials> {
        match cfg.auth.as_ref()? {
            UpstreamAuth::OAuth(_) => Some(Arc::new(GrantSource::new(
                &cfg.name,
                principal,
                self.store.clone(),
                self.http.clone(),
            ))),
            UpstreamAuth::TokenExchange(s) => Some(Arc::new(ExchangeSource::new(
                principal,
                s.endpoint.clone(),
                s.target.clone(),
                self.http.clone(),
                self.exchanges.get(&cfg.name)?.clone(),
            ))),
            UpstreamAuth::ClientCredentials(_) => None,
        }
    }

    /// Before a call of `principal` to `cfg`: whether it can be made at all, and the caller's
    /// token noted for an exchange.
    ///
    /// # Errors
    /// [`AuthFailure::AuthorizationRequired`]: an `"oauth"` server and no grant of this
    /// principal; [`AuthFailure::Failed`]: a `"token-exchange"` server and no token of the
    /// caller to exchange.
    pub async fn ready(
        &self,
        cfg: &ServerConfig,
        principal: &str,
        token: Option<&AccessToken>,
    ) -> Result<(), AuthFailure> {
        match &cfg.auth {
            Some(UpstreamAuth::OAuth(_)) => match self.store.load(&cfg.name, principal).await {
                Ok(Some(_)) => Ok(()),
                Ok(None) => Err(AuthFailure::AuthorizationRequired),
                Err(e) => Err(AuthFailure::Failed(e.to_string())),
            },
            Some(UpstreamAuth::TokenExchange(_)) => {
                let Some(exchanges) = self.exchanges.get(&cfg.name) else {
                    return Ok(());
                };
                match token {
                    Some(token) => {
                        exchanges.note_subject(principal, token);
                        Ok(())
                    }
                    None => Err(AuthFailure::Failed(
                        "this server trades the caller's own access token for one of its own \
                         (token exchange), and this request came without one (an API key, or \
                         identity off): sign in to the gateway with OAuth or a JWT"
                            .to_owned(),
                    )),
                }
            }
            _ => Ok(()),
        }
    }
}

/// The grant that reads an `"oauth"` server's lists: `listAs`'s, else the first principal's
/// (by name) that has one, looked up again while there is none or it is refused.
struct ListSource {
    server: String,
    list_as: Option<String>,
    store: Arc<TokenStore>,
    http: reqwest::Client,
    current: Mutex<Option<Arc<GrantSource>>>,
}

impl ListSource {
    async fn source(&self, again: bool) -> Result<Option<Arc<GrantSource>>, AuthFailure> {
        let mut current = self.current.lock().await;
        if !again && let Some(source) = current.as_ref() {
            return Ok(Some(source.clone()));
        }
        let principal = match &self.list_as {
            Some(p) => Some(p.clone()),
            None => self
                .store
                .list(Some(&self.server))
                .await
                .map_err(|e| AuthFailure::Failed(e.to_string()))?
                .into_iter()
                .map(|(_, p)| p)
                .next(),
        };
        *current = principal.map(|p| {
            Arc::new(GrantSource::new(
                &self.server,
                &p,
                self.store.clone(),
                self.http.clone(),
            ))
        });
        Ok(current.clone())
    }
}

impl TokenSource for ListSource {
    fn token(&self) -> AuthFuture<'_, Result<Option<AccessToken>, AuthFailure>> {
        Box::pin(async move {
            let Some(source) = self.source(false).await? else {
                return Err(AuthFailure::AuthorizationRequired);
            };
            match source.token().await {
                Err(AuthFailure::AuthorizationRequired) if self.list_as.is_none() => {
                    let Some(other) = self.source(true).await? else {
                        return Err(AuthFailure::AuthorizationRequired);
                    };
                    other.token().await
                }
                result => result,
            }
        })
    }

    fn refused<'a>(
        &'a self,
        challenge: &'a Challenge,
    ) -> AuthFuture<'a, Result<Option<AccessToken>, AuthFailure>> {
        Box::pin(async move {
            let Some(source) = self.source(false).await? else {
                return Err(AuthFailure::AuthorizationRequired);
            };
            source.refused(challenge).await
        })
    }
}
