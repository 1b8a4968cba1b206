//! The pool's credentials for a server with `"auth"`, one [`TokenSource`] per connection:
//!
//! - [`GrantSource`]: one principal's grant from the [`TokenStore`] (`"oauth"`), refreshed
//!   when it is about to expire or the server refuses it; none stored is "authorization
//!   required" (the caller gets a consent URL).
//! - [`ExchangeSource`]: one principal's token from a token exchange (`"token-exchange"`):
//!   the caller's own access token traded (RFC 8693) at the token endpoint for one meant for
//!   the server, kept in [`Exchanges`] until it expires (one exchange per principal and
//!   expiry, not one per call) and made again with the caller's latest token after that.
//! - [`ServiceSource`]: the gateway's own token from client credentials
//!   (`"client-credentials"`, and the lists of a `"token-exchange"` server), kept until it
//!   expires.
//!
//! A source serves one connection, and a connection serves one principal (or, for
//! [`ServiceSource`], everyone alike), so a token can only ever go out on its principal's
//! requests.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Mutex;

use super::endpoint::{self, Issued, Target, TokenEndpoint, now_secs};
use super::store::{Grant, TokenStore};
use super::token::{AccessToken, AuthFailure, AuthFuture, Challenge, Refusal, TokenSource};

/// A token this close to its expiry (seconds) is renewed before it is sent.
pub const RENEW_BEFORE_SECS: u64 = 30;

fn fresh(expires_at: Option<u64>) -> bool {
    expires_at.is_none_or(|at| at > now_secs() + RENEW_BEFORE_SECS)
}

fn store_failure(e: impl std::fmt::Display) -> AuthFailure {
    AuthFailure::Failed(e.to_string())
}

/// One principal's stored grant for one server.
pub struct GrantSource {
    server: String,
    principal: String,
    store: Arc<TokenStore>,
    http: reqwest::Client,
    held: Mutex<Option<Grant>>,
}

impl std::fmt::Debug for GrantSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrantSource")
            .field("server", &self.server)
            .field("principal", &self.principal)
            .finish_non_exhaustive()
    }
}

impl GrantSource {
    #[must_use]
    pub fn new(
        server: &str,
        principal: &str,
        store: Arc<TokenStore>,
        http: reqwest::Client,
    ) -> Self {
        Self {
            server: server.to_owned(),
            principal: principal.to_owned(),
            store,
            http,
            held: Mutex::new(None),
        }
    }

    /// The principal whose grant this is.
    #[must_use]
    pub fn principal(&self) -> &str {
        &self.principal
    }

    async fn load(&self) -> Result<Option<Grant>, AuthFailure> {
        self.store
            .load(&self.server, &self.principal)
            .await
            .map_err(store_failure)
    }

    /// Refreshes `grant` (it must have a refresh token) and keeps the result.
    async fn refresh(&self, grant: &Grant) -> Result<Grant, AuthFailure> {
        let Some(refresh) = grant.refresh_token.as_deref() else {
            return Err(AuthFailure::AuthorizationRequired);
        };
        let form = endpoint::refresh_form(&AccessToken::new(refresh), grant.resource.as_deref());
        let issued = match grant.endpoint.request(&self.http, form).await {
            Ok(issued) => issued,
            Err(AuthFailure::AuthorizationRequired) => {
                // The refresh token was revoked or expired: the grant is of no use any more.
                let _ = self.store.remove(&self.server, &self.principal).await;
                return Err(AuthFailure::AuthorizationRequired);
            }
            Err(e) => return Err(e),
        };
        let renewed = renewed(grant, issued);
        self.store
            .save(&self.server, &self.principal, &renewed)
            .await
            .map_err(store_failure)?;
        tracing::debug!(server = %self.server, principal = %self.principal, "upstream token refreshed");
        Ok(renewed)
    }

    async fn current(&self, held: &mut Option<Grant>) -> Result<Grant, AuthFailure> {
        if held.is_none() {
            *held = self.load().await?;
        }
        let Some(grant) = held.clone() else {
            return Err(AuthFailure::AuthorizationRequired);
        };
        if fresh(grant.expires_at) {
            return Ok(grant);
        }
        // Another replica (or process) may have refreshed it already.
        if let Some(stored) = self.load().await?
            && fresh(stored.expires_at)
        {
            *held = Some(stored.clone());
            return Ok(stored);
        }
        let renewed = self.refresh(&grant).await;
        *held = renewed.as_ref().ok().cloned();
        renewed
    }
}

/// `grant` with the tokens of a refresh.
fn renewed(grant: &Grant, issued: Issued) -> Grant {
    let mut next = grant.clone();
    next.access_token = issued.access_token.expose().to_owned();
    if let Some(r) = issued.refresh_token {
        next.refresh_token = Some(r.expose().to_owned());
    }
    next.expires_at = issued.expires_in.map(|s| now_secs() + s);
    if let Some(scope) = issued.scope {
        next.scopes = scope.split_whitespace().map(str::to_owned).collect();
    }
    next.obtained_at = now_secs();
    next
}

impl TokenSource for GrantSource {
    fn token(&self) -> AuthFuture<'_, Result<Option<AccessToken>, AuthFailure>> {
        Box::pin(async move {
            let mut held = self.held.lock().await;
            let grant = self.current(&mut held).await?;
            Ok(Some(AccessToken::new(grant.access_token)))
        })
    }

    fn refused<'a>(
        &'a self,
        challenge: &'a Challenge,
    ) -> AuthFuture<'a, Result<Option<AccessToken>, AuthFailure>> {
        Box::pin(async move {
            if challenge.refusal == Refusal::InsufficientScope {
                // More scope needs the user's consent again: the caller is asked.
                return Ok(None);
            }
            let mut held = self.held.lock().await;
            let sent = challenge.sent.as_ref().map(AccessToken::expose);
            // A grant stored since (another replica's refresh, a new consent) is tried first.
            if let Some(stored) = self.load().await?
                && Some(stored.access_token.as_str()) != sent
            {
                *held = Some(stored.clone());
                return Ok(Some(AccessToken::new(stored.access_token)));
            }
            let Some(grant) = held.clone().or(self.load().await?) else {
                return Err(AuthFailure::AuthorizationRequired);
            };
            let renewed = self.refresh(&grant).await?;
            *held = Some(renewed.clone());
            Ok(Some(AccessToken::new(renewed.access_token)))
        })
    }
}

/// The gateway's own token by client credentials, for one server.
pub struct ServiceSource {
    endpoint: TokenEndpoint,
    target: Target,
    http: reqwest::Client,
    held: Mutex<Option<(AccessToken, Option<u64>)>>,
}

impl std::fmt::Debug for ServiceSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceSource")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl ServiceSource {
    #[must_use]
    pub fn new(endpoint: TokenEndpoint, target: Target, http: reqwest::Client) -> Self {
        Self {
            endpoint,
            target,
            http,
            held: Mutex::new(None),
        }
    }

    async fn obtain(&self) -> Result<(AccessToken, Option<u64>), AuthFailure> {
        let issued = self
            .endpoint
            .request(&self.http, endpoint::client_credentials_form(&self.target))
            .await
            .map_err(|e| match e {
                AuthFailure::AuthorizationRequired => AuthFailure::Failed(format!(
                    "token endpoint {} refused the client credentials",
                    self.endpoint.url
                )),
                other => other,
            })?;
        Ok((
            issued.access_token,
            issued.expires_in.map(|s| now_secs() + s),
        ))
    }
}

impl TokenSource for ServiceSource {
    fn token(&self) -> AuthFuture<'_, Result<Option<AccessToken>, AuthFailure>> {
        Box::pin(async move {
            let mut held = self.held.lock().await;
            if let Some((token, expires_at)) = held.as_ref()
                && fresh(*expires_at)
            {
                return Ok(Some(token.clone()));
            }
            let obtained = self.obtain().await?;
            let token = obtained.0.clone();
            *held = Some(obtained);
            Ok(Some(token))
        })
    }

    fn refused<'a>(
        &'a self,
        challenge: &'a Challenge,
    ) -> AuthFuture<'a, Result<Option<AccessToken>, AuthFailure>> {
        Box::pin(async move {
            if challenge.refusal == Refusal::InsufficientScope {
                return Ok(None);
            }
            let mut held = self.held.lock().await;
            if let Some((token, _)) = held.as_ref()
                && Some(token) != challenge.sent.as_ref()
            {
                return Ok(Some(token.clone()));
            }
            let obtained = self.obtain().await?;
            let token = obtained.0.clone();
            *held = Some(obtained);
            Ok(Some(token))
        })
    }
}

/// Most principals whose exchanged tokens are kept; past it, expired entries go first, then
/// the least recently used.
pub const MAX_EXCHANGES: usize = 10_000;

struct Exchanged {
    /// The caller's latest access token (what the next exchange trades).
    subject: AccessToken,
    token: Option<(AccessToken, Option<u64>)>,
    used: u64,
}

/// The exchanged tokens of one server, per principal.
#[derive(Default)]
pub struct Exchanges {
    entries: parking_lot::Mutex<HashMap<String, Exchanged>>,
    clock: AtomicU64,
    /// How many exchanges were made (tests and `/health` read it).
    pub made: AtomicU64,
}

impl std::fmt::Debug for Exchanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchanges")
            .field("principals", &self.entries.lock().len())
            .field("made", &self.made.load(Ordering::Relaxed))
            .finish()
    }
}

impl Exchanges {
    /// Notes `principal`'s current access token (each call brings the caller's).
    pub fn note_subject(&self, principal: &str, subject: &AccessToken) {
        let used = self.clock.fetch_add(1, Ordering::Relaxed);
        let mut entries = self.entries.lock();
        if let Some(entry) = entries.get_mut(principal) {
            if entry.subject != *subject {
                entry.subject = subject.clone();
            }
            entry.used = used;
            return;
        }
        if entries.len() >= MAX_EXCHANGES {
            entries.retain(|_, e| e.token.as_ref().is_some_and(|(_, at)| fresh(*at)));
            if entries.len() >= MAX_EXCHANGES
                && let Some(oldest) = entries
                    .iter()
                    .min_by_key(|(_, e)| e.used)
                    .map(|(k, _)| k.clone())
            {
                entries.remove(&oldest);
            }
        }
        entries.insert(
            principal.to_owned(),
            Exchanged {
                subject: subject.clone(),
                token: None,
                used,
            },
        );
    }

    fn cached(&self, principal: &str) -> Option<AccessToken> {
        let entries = self.entries.lock();
        let (token, at) = entries.get(principal)?.token.as_ref()?;
        fresh(*at).then(|| token.clone())
    }

    fn subject(&self, principal: &str) -> Option<AccessToken> {
        self.entries
            .lock()
            .get(principal)
            .map(|e| e.subject.clone())
    }

    fn keep(&self, principal: &str, token: AccessToken, expires_at: Option<u64>) {
        if let Some(entry) = self.entries.lock().get_mut(principal) {
            entry.token = Some((token, expires_at));
        }
    }

    fn drop_token(&self, principal: &str) {
        if let Some(entry) = self.entries.lock().get_mut(principal) {
            entry.token = None;
        }
    }
}

/// One principal's exchanged token for one server.
pub struct ExchangeSource {
    principal: String,
    endpoint: TokenEndpoint,
    target: Target,
    http: reqwest::Client,
    exchanges: Arc<Exchanges>,
    one_at_a_time: Mutex<()>,
}

impl std::fmt::Debug for ExchangeSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExchangeSource")
            .field("principal", &self.principal)
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl ExchangeSource {
    #[must_use]
    pub fn new(
        principal: &str,
        endpoint: TokenEndpoint,
        target: Target,
        http: reqwest::Client,
        exchanges: Arc<Exchanges>,
    ) -> Self {
        Self {
            principal: principal.to_owned(),
            endpoint,
            target,
            http,
            exchanges,
            one_at_a_time: Mutex::new(()),
        }
    }

    async fn exchange(&self) -> Result<AccessToken, AuthFailure> {
        let Some(subject) = self.exchanges.subject(&self.principal) else {
            return Err(AuthFailure::Failed(
                "no access token of the caller to exchange (the gateway's identity must be \
                 OAuth or JWT for a \"token-exchange\" server)"
                    .to_owned(),
            ));
        };
        let issued = self
            .endpoint
            .request(&self.http, endpoint::exchange_form(&subject, &self.target))
            .await
            .map_err(|e| match e {
                AuthFailure::AuthorizationRequired => AuthFailure::Failed(format!(
                    "token endpoint {} refused to exchange the caller's token (invalid_grant: \
                     expired, or not meant for this exchange)",
                    self.endpoint.url
                )),
                other => other,
            })?;
        self.exchanges.made.fetch_add(1, Ordering::Relaxed);
        let expires_at = issued.expires_in.map(|s| now_secs() + s);
        self.exchanges
            .keep(&self.principal, issued.access_token.clone(), expires_at);
        tracing::debug!(principal = %self.principal, "caller's token exchanged");
        Ok(issued.access_token)
    }
}

impl TokenSource for ExchangeSource {
    fn token(&self) -> AuthFuture<'_, Result<Option<AccessToken>, AuthFailure>> {
        Box::pin(async move {
            if let Some(token) = self.exchanges.cached(&self.principal) {
                return Ok(Some(token));
            }
            let _one = self.one_at_a_time.lock().await;
            if let Some(token) = self.exchanges.cached(&self.principal) {
                return Ok(Some(token));
            }
            self.exchange().await.map(Some)
        })
    }

    fn refused<'a>(
        &'a self,
        challenge: &'a Challenge,
    ) -> AuthFuture<'a, Result<Option<AccessToken>, AuthFailure>> {
        Box::pin(async move {
            if challenge.refusal == Refusal::InsufficientScope {
                return Ok(None);
            }
            let _one = self.one_at_a_time.lock().await;
            if let Some(token) = self.exchanges.cached(&self.principal)
                && Some(&token) != challenge.sent.as_ref()
            {
                return Ok(Some(token));
            }
            self.exchanges.drop_token(&self.principal);
            self.exchange().await.map(Some)
        })
    }
}
