//! The web console at `/ui`: read-only pages over the catalog, visibility, routing, the live
//! trace and the bill, served from the binary (HTML, CSS and JavaScript modules embedded with
//! `include_str!`; nothing is fetched from elsewhere, so it works offline).
//!
//! The pages draw from a JSON API under `/ui/api/` ([`api`], and [`live`] for the trace's
//! server-sent events). Every `/ui` response carries a Content-Security-Policy that allows only
//! this origin's scripts, styles and connections; the pages put data in the DOM as text, never
//! as markup. Only `GET` is routed: the console changes nothing.

mod api;
mod assets;
mod governance;
mod live;

use std::sync::Arc;

use axum::extract::{Path, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use crate::http::ApiError;
use crate::mcp::Shared;

/// The policy on every `/ui` response: this origin's scripts, styles, images and connections
/// only; no inline script, no framing, no forms.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// The daily spend as `toolforge cost-report --json` prints it, read from the agent's trace
/// file. The binary supplies it (the report's code lives with that command); `Err` is a message
/// for people (no trace file yet, an unreadable one).
#[derive(Clone)]
pub struct SpendReport(pub Arc<dyn Fn() -> Result<serde_json::Value, String> + Send + Sync>);

impl std::fmt::Debug for SpendReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SpendReport")
    }
}

/// What the console's routes share.
#[derive(Clone)]
pub(crate) struct Console {
    shared: Arc<Shared>,
    agent: Option<Arc<toolforge_agent::Agent>>,
    spend: Option<SpendReport>,
    /// Spend reports being read at once (each streams the whole trace file).
    spend_readers: Arc<tokio::sync::Semaphore>,
    /// Live trace streams open at once.
    live_streams: Arc<live::Streams>,
    /// Ends the live streams on shutdown.
    cancel: CancellationToken,
    /// Principals that may approve quarantined tools (none: the console is read-only).
    admins: Arc<[String]>,
    /// Requests are authenticated: who looks at the console decides what it shows.
    identity_on: bool,
}

/// Who is looking at the console. An operator (anyone when identity is off, else a
/// `--console-admin`) sees every tool, the bill, the quarantine and every principal's trace;
/// anyone else sees what their own principal may see, as the gateway would show it to them,
/// and only their own trace records.
#[derive(Debug, Clone)]
pub(crate) struct Viewer {
    pub principal: toolforge_policy::Principal,
    pub operator: bool,
}

impl Console {
    pub(crate) fn viewer(&self, extensions: &axum::http::Extensions) -> Viewer {
        let principal = crate::identity::principal_of(extensions);
        let operator = !self.identity_on || self.admins.iter().any(|a| a == principal.as_str());
        Viewer {
            principal,
            operator,
        }
    }
}

/// 403 for a page only operators may see.
pub(crate) fn operators_only(viewer: &Viewer, what: &str) -> Result<(), ApiError> {
    if viewer.operator {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        format!(
            "{what} is shown to operators only (\"{}\" is not one: the operator names them with \
             `serve --console-admin PRINCIPAL`)",
            viewer.principal
        ),
    ))
}

/// Spend reports read at once; more get 503.
pub const MAX_SPEND_READERS: usize = 2;

/// The console's routes, under `/ui`.
pub(crate) fn routes(
    shared: Arc<Shared>,
    agent: Option<Arc<toolforge_agent::Agent>>,
    spend: Option<SpendReport>,
    cancel: CancellationToken,
    admins: &[String],
    identity_on: bool,
) -> axum::Router {
    let console = Console {
        shared,
        agent,
        spend,
        spend_readers: Arc::new(tokio::sync::Semaphore::new(MAX_SPEND_READERS)),
        live_streams: Arc::new(live::Streams::default()),
        cancel,
        admins: admins.into(),
        identity_on,
    };
    axum::Router::new()
        .route("/ui", get(index))
        .route("/ui/", get(index))
        .route("/ui/assets/{name}", get(asset))
        .route("/ui/api/catalog", get(api::catalog))
        .route("/ui/api/visibility", get(api::visibility))
        .route("/ui/api/route", get(api::route))
        .route("/ui/api/spend", get(api::spend))
        .route("/ui/api/trace/stream", get(live::stream))
        .route("/ui/api/governance", get(governance::quarantine))
        .route(
            "/ui/api/governance/approve",
            axum::routing::post(governance::approve),
        )
        .route("/ui/{*rest}", get(unknown))
        .with_state(console)
        .layer(axum::middleware::from_fn(secure_headers))
}

async fn index() -> Response {
    assets::response("index.html").unwrap_or_else(|| StatusCode::NOT_FOUND.into_response())
}

async fn asset(Path(name): Path<String>) -> Response {
    assets::response(&name).unwrap_or_else(|| {
        ApiError::new(StatusCode::NOT_FOUND, "no such console file").into_response()
    })
}

async fn unknown(Path(rest): Path<String>) -> ApiError {
    let shown: String = rest.chars().take(100).collect();
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!("no console page or API at /ui/{shown}; open /ui/"),
    )
}

/// The policy and its companions on every `/ui` response.
async fn secure_headers(req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    set_secure_headers(response.headers_mut());
    response
}

/// Puts the console's policy and its companions on `headers`: on every `/ui` response, also
/// those answered before the console's routes (a 401 of identity).
pub(crate) fn set_secure_headers(headers: &mut axum::http::HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}
