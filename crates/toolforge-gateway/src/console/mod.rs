//! The web console at `/ui`: read-only pages over the catalog, visibility, routing, the live
//! trace and the bill, served from the binary (HTML, CSS and JavaScript modules embedded with
//! `include_str!`; nothing is fetched from elsewhere, so it works offline).
//!
//! The pages draw from a JSON API under `/ui/api/` (`api`, and `live` for the trace's
//! server-sent events), routed by `router`. Every `/ui` response carries a Content-Security-Policy that allows only
//! this origin's scripts, styles and connections; the pages put data in the DOM as text, never
//! as markup. Only `GET` is routed: the console changes nothing.

mod api;
mod assets;
mod governance;
pub(crate) mod headers;
mod live;
pub(crate) mod router;
mod streams;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use axum::http::StatusCode;

use crate::error::ApiError;
use crate::mcp::Shared;
use streams::Streams;

pub use headers::CONTENT_SECURITY_POLICY;

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
    live_streams: Arc<Streams>,
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
