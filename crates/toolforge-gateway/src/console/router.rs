//! The console's routes under `/ui`, and the headers every `/ui` response carries.

use std::sync::Arc;

use axum::extract::{Path, Request};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use super::headers::set_secure_headers;
use super::streams::Streams;
use super::{Console, MAX_SPEND_READERS, SpendReport, api, assets};
use super::{governance, live};
use crate::error::ApiError;
use crate::mcp::Shared;

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
        live_streams: Arc::new(Streams::default()),
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
