//! Streamable HTTP for the fixture, mounted at `/mcp`.
//!
//! DNS-rebinding protection comes from rmcp's own `StreamableHttpServerConfig`: it already
//! rejects a `Host` outside its allow-list with 403, so this module only turns on its Origin
//! check too (a browser page on a foreign origin must not reach a loopback server).

use std::sync::Arc;

use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use tokio_util::sync::CancellationToken;

use crate::fixture::Fixture;

/// What the HTTP service accepts besides loopback.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// Extra `Host` values (host or host:port) to accept, e.g. when bound to a LAN address.
    pub extra_hosts: Vec<String>,
    /// Cancelled to end every open session (graceful shutdown).
    pub cancel: CancellationToken,
}

const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];
const LOOPBACK_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "http://127.0.0.1:*",
    "http://[::1]:*",
    "https://localhost:*",
    "https://127.0.0.1:*",
    "https://[::1]:*",
];

/// The fixture as a tower service speaking Streamable HTTP (sessions, SSE, priming events).
pub fn http_service(opts: HttpOptions) -> StreamableHttpService<Fixture, LocalSessionManager> {
    let hosts = LOOPBACK_HOSTS
        .iter()
        .map(|h| (*h).to_owned())
        .chain(opts.extra_hosts.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(LOOPBACK_ORIGINS)
        .enforce_origin_validation()
        .with_cancellation_token(opts.cancel.child_token());
    // One fixture for every session and stateless request: they share the requestState key
    // and the open subscriptions/listen streams.
    let fixture = Fixture::new();
    StreamableHttpService::new(
        move || Ok(fixture.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// An axum router with the fixture at `/mcp`.
pub fn router(opts: HttpOptions) -> axum::Router {
    axum::Router::new().nest_service("/mcp", http_service(opts))
}

/// Serves [`router`] on `listener` until `opts.cancel` is cancelled.
pub async fn serve_http(
    listener: tokio::net::TcpListener,
    opts: HttpOptions,
) -> anyhow::Result<()> {
    let cancel = opts.cancel.clone();
    axum::serve(
        // Replies go out in small writes (headers, then SSE events): without TCP_NODELAY the
        // kernel holds each later write ~40 ms for the client's delayed ACK.
        axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        }),
        router(opts),
    )
    .with_graceful_shutdown(async move { cancel.cancelled().await })
    .await
    .map_err(|e| anyhow::anyhow!("conformance fixture: HTTP server failed: {e}"))
}
