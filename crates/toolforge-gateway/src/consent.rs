//! Consent to an upstream server's OAuth, in the browser, bound to the principal who asked.
//!
//! A call of a principal with no grant for an `"oauth"` server is answered with a consent
//! link ([`Consent::link`]): `/oauth/start?id=...`, good for [`LINK_TTL`], once, and for that
//! principal only. Opening it checks who opened it ("the user who opens the URL is the user
//! who asked"): with identity off everyone is `anonymous`; with identity on the request must
//! carry a bearer token of the same principal, else it is refused (a link forwarded to someone
//! else cannot bind their upstream account to the asker). It then runs the authorization-code
//! flow against the server's authorization server (discovery, registration, PKCE, `resource`;
//! `toolforge_mcp::auth::flow`), with `login_hint` set to the principal, and redirects there.
//! `/oauth/callback` finishes the flow (the `state` names it; `iss` is checked), keeps the
//! grant sealed per (server, principal), and tells the pool so the next call goes through.
//!
//! Both routes do their own identity checks, so the identity middleware lets them through
//! ([`crate::identity::CONSENT_PATHS`]). Bounded: at most [`MAX_LINKS`] links and [`MAX_FLOWS`] flows in flight.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use parking_lot::Mutex;
use serde::Deserialize;
use toolforge_mcp::Pool;
use toolforge_mcp::auth::{FlowRequest, Pending, UpstreamAuth};

use crate::identity::Identity;

/// How long a consent link is good for.
pub const LINK_TTL: Duration = Duration::from_secs(600);
/// How long a started flow waits for its callback.
pub const FLOW_TTL: Duration = Duration::from_secs(600);
/// Most consent links kept at once.
pub const MAX_LINKS: usize = 10_000;
/// Most flows waiting for their callback at once.
pub const MAX_FLOWS: usize = 1_000;

struct Link {
    server: String,
    principal: String,
    scope: Option<String>,
    made: Instant,
}

struct Flow {
    server: String,
    principal: String,
    pending: Pending,
    made: Instant,
}

/// Consent links and the flows they started.
pub struct Consent {
    /// The gateway's public base URL (`--public-url`, else the bind address), no trailing `/`.
    base: String,
    pool: Arc<Pool>,
    identity: Option<Arc<Identity>>,
    links: Mutex<HashMap<String, Link>>,
    flows: Mutex<HashMap<String, Flow>>,
}

impl std::fmt::Debug for Consent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consent")
            .field("base", &self.base)
            .field("links", &self.links.lock().len())
            .field("flows", &self.flows.lock().len())
            .finish_non_exhaustive()
    }
}

/// A consent link made for a principal's call.
#[derive(Debug, Clone)]
pub struct ConsentLink {
    pub id: String,
    pub url: String,
    pub message: String,
}

fn random_id() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

impl Consent {
    #[must_use]
    pub fn new(base: &str, pool: Arc<Pool>, identity: Option<Arc<Identity>>) -> Self {
        Self {
            base: base.trim_end_matches('/').to_owned(),
            pool,
            identity,
            links: Mutex::new(HashMap::new()),
            flows: Mutex::new(HashMap::new()),
        }
    }

    /// Where the authorization servers send users back.
    #[must_use]
    pub fn redirect_uri(&self) -> String {
        format!("{}/oauth/callback", self.base)
    }

    /// A link for `principal` to consent to `server` (with `scope`, for a step-up).
    #[must_use]
    pub fn link(&self, server: &str, principal: &str, scope: Option<&str>) -> ConsentLink {
        let id = random_id();
        {
            let mut links = self.links.lock();
            links.retain(|_, l| l.made.elapsed() < LINK_TTL);
            if links.len() >= MAX_LINKS
                && let Some(oldest) = links
                    .iter()
                    .min_by_key(|(_, l)| l.made)
                    .map(|(k, _)| k.clone())
            {
                links.remove(&oldest);
            }
            links.insert(
                id.clone(),
                Link {
                    server: server.to_owned(),
                    principal: principal.to_owned(),
                    scope: scope.map(str::to_owned),
                    made: Instant::now(),
                },
            );
        }
        ConsentLink {
            url: format!("{}/oauth/start?id={id}", self.base),
            message: format!(
                "Server \"{server}\" needs your authorization{}: open the link, sign in and \
                 approve, then call the tool again.",
                scope.map(|s| format!(" (scope {s})")).unwrap_or_default()
            ),
            id,
        }
    }

    /// Who opened a consent link: the principal of its bearer token (with identity on), or
    /// `anonymous` (identity off). `Err` says why it cannot be told.
    async fn opener(&self, headers: &HeaderMap) -> Result<String, String> {
        let Some(identity) = &self.identity else {
            return Ok(toolforge_policy::Principal::anonymous().to_string());
        };
        match identity.authenticate_request(headers).await {
            Ok(a) => Ok(a.principal.to_string()),
            Err(_) => Err(
                "this gateway checks who opens a consent link, and this request carries no \
                 valid bearer token: open it from the client you called the tool with (signed \
                 in to the gateway)"
                    .to_owned(),
            ),
        }
    }

    async fn start(&self, id: &str, headers: &HeaderMap) -> Response {
        let link = {
            let mut links = self.links.lock();
            match links.get(id) {
                Some(l) if l.made.elapsed() < LINK_TTL => {}
                _ => {
                    links.remove(id);
                    return page(
                        StatusCode::NOT_FOUND,
                        "This consent link has expired or was already used. Call the tool again for a new one.",
                    );
                }
            }
            // Checked before it is spent: a stranger's attempt does not use it up.
            links
                .get(id)
                .map(|l| (l.server.clone(), l.principal.clone(), l.scope.clone()))
        };
        let Some((server, principal, scope)) = link else {
            return page(StatusCode::NOT_FOUND, "Unknown consent link.");
        };
        match self.opener(headers).await {
            Ok(opener) if opener == principal => {}
            Ok(_) => {
                return page(
                    StatusCode::FORBIDDEN,
                    "This consent link was made for another user. Call the tool yourself for a link of your own.",
                );
            }
            Err(why) => return page(StatusCode::UNAUTHORIZED, &why),
        }
        self.links.lock().remove(id);
        let Some(cfg) = self.pool.server_config(&server) else {
            return page(
                StatusCode::NOT_FOUND,
                "That server is no longer configured.",
            );
        };
        let (Some(UpstreamAuth::OAuth(settings)), toolforge_mcp::Transport::Http { url, .. }) =
            (&cfg.auth, &cfg.transport)
        else {
            return page(StatusCode::BAD_REQUEST, "That server does not use OAuth.");
        };
        let mut scopes = settings.scopes.clone();
        for s in scope.as_deref().unwrap_or_default().split_whitespace() {
            if !scopes.iter().any(|x| x == s) {
                scopes.push(s.to_owned());
            }
        }
        let redirect_uri = self.redirect_uri();
        let request = FlowRequest {
            resource: url,
            challenge: None,
            scopes,
            redirect_uri: &redirect_uri,
        };
        let pending = match toolforge_mcp::auth::flow::begin(request, &settings.identity).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(server = %server, "consent could not start: {e}");
                return page(
                    StatusCode::BAD_GATEWAY,
                    &format!("The server's authorization could not start: {e}"),
                );
            }
        };
        let Some(state) = pending.state() else {
            return page(
                StatusCode::BAD_GATEWAY,
                "The authorization URL has no state.",
            );
        };
        let target = with_login_hint(pending.url(), &principal);
        {
            let mut flows = self.flows.lock();
            flows.retain(|_, f| f.made.elapsed() < FLOW_TTL);
            if flows.len() >= MAX_FLOWS {
                return page(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Too many sign-ins are in progress; try again in a few minutes.",
                );
            }
            flows.insert(
                state,
                Flow {
                    server,
                    principal,
                    pending,
                    made: Instant::now(),
                },
            );
        }
        Redirect::to(&target).into_response()
    }

    async fn callback(&self, query: CallbackQuery) -> Response {
        let Some(state) = query.state.as_deref() else {
            return page(StatusCode::BAD_REQUEST, "The callback has no state.");
        };
        let flow = self.flows.lock().remove(state);
        let Some(flow) = flow.filter(|f| f.made.elapsed() < FLOW_TTL) else {
            return page(
                StatusCode::NOT_FOUND,
                "This sign-in is unknown or has expired. Call the tool again for a new link.",
            );
        };
        if let Some(error) = &query.error {
            return page(
                StatusCode::FORBIDDEN,
                &format!(
                    "The authorization server refused: {error}{}",
                    query
                        .error_description
                        .as_deref()
                        .map(|d| format!(" ({d})"))
                        .unwrap_or_default()
                ),
            );
        }
        let Some(code) = query.code.as_deref() else {
            return page(StatusCode::BAD_REQUEST, "The callback has no code.");
        };
        let authorized = match flow.pending.finish(code, state, query.iss.as_deref()).await {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(server = %flow.server, "consent failed: {e}");
                return page(StatusCode::BAD_GATEWAY, &format!("The sign-in failed: {e}"));
            }
        };
        let saved = async {
            let grant = authorized.grant().await.map_err(|e| e.to_string())?;
            let credentials = self
                .pool
                .credentials()
                .ok_or_else(|| "no server uses OAuth".to_owned())?;
            credentials
                .store()
                .save(&flow.server, &flow.principal, &grant)
                .await
                .map_err(|e| e.to_string())
        };
        if let Err(e) = saved.await {
            tracing::warn!(server = %flow.server, "the grant could not be kept: {e}");
            return page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "The grant could not be kept.",
            );
        }
        self.pool.grant_changed(&flow.server, &flow.principal);
        tracing::info!(server = %flow.server, principal = %flow.principal, "upstream authorization granted");
        page(
            StatusCode::OK,
            &format!(
                "Authorized: toolforge may now call \"{}\" for you. You can close this window and call the tool again.",
                flow.server
            ),
        )
    }
}

/// `url` with OpenID Connect's `login_hint` (the principal), so the identity provider can
/// offer the right account.
fn with_login_hint(url: &str, principal: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) if !u.query_pairs().any(|(k, _)| k == "login_hint") => {
            u.query_pairs_mut().append_pair("login_hint", principal);
            u.to_string()
        }
        _ => url.to_owned(),
    }
}

fn page(status: StatusCode, text: &str) -> Response {
    let escaped = text
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    (
        status,
        [
            (header::CACHE_CONTROL, "no-store"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; style-src 'unsafe-inline'",
            ),
        ],
        Html(format!(
            "<!doctype html><meta charset=utf-8><title>toolforge</title>\
             <p style=\"font-family:sans-serif\">{escaped}</p>"
        )),
    )
        .into_response()
}

#[derive(Debug, Deserialize)]
struct StartQuery {
    id: String,
}

#[derive(Debug, Deserialize)]
struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    iss: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

async fn start_route(
    State(consent): State<Arc<Consent>>,
    headers: HeaderMap,
    Query(q): Query<StartQuery>,
) -> Response {
    consent.start(&q.id, &headers).await
}

async fn callback_route(
    State(consent): State<Arc<Consent>>,
    Query(q): Query<CallbackQuery>,
) -> Response {
    consent.callback(q).await
}

/// `/oauth/start` and `/oauth/callback`.
pub fn routes(consent: Arc<Consent>) -> axum::Router {
    axum::Router::new()
        .route("/oauth/start", axum::routing::get(start_route))
        .route("/oauth/callback", axum::routing::get(callback_route))
        .with_state(consent)
}
