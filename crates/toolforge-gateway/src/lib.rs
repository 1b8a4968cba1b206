//! The gateway: the pool re-exposed as one MCP server, over Streamable HTTP at `/mcp` and the
//! legacy HTTP+SSE transport at `/sse` (`legacy_sse`, beside `GET /tools` and `GET /health`)
//! and over stdio.
//!
//! It never starts servers itself (the pool does) and never reads the environment (the binary
//! passes options).

mod cache_hints;
pub mod chat;
pub mod consent;
pub mod console;
mod direct_calls;
pub mod drain;
pub mod error;
mod free_memory;
mod group_annotations;
pub mod http;
pub mod identity;
mod jwt_problem;
pub mod legacy_sse;
mod list_splice;
pub mod listen;
pub mod listener;
pub mod mcp;
mod mcp_guard;
pub mod mcp_sessions;
pub mod metrics;
pub mod mrtr;
pub mod oauth;
pub mod openapi;
pub mod parked;
mod resource_uri;
mod session_idle;
mod spans;
pub mod state_ledger;
mod subscriptions;
mod task_ids;
mod uri_template;
pub mod visible;

pub use console::SpendReport;
pub use drain::Drain;
pub use free_memory::ReleaseMemory;
pub use http::{HttpOptions, health, router, serve, tool_rows};
pub use listener::ConnectionLimits;
pub use mcp::{Gateway, Shared, ToolMode};
pub use mcp_sessions::SessionLimits;
pub use metrics::Metrics;
pub use visible::filtered::Filtered;
pub use visible::serve::{
    BuiltinHttpOptions, builtin_routes, serve_handler_http, serve_handler_stdio, serve_router,
};

/// Serves one gateway session over stdin/stdout until the client disconnects.
///
/// # Errors
/// The transport fails during initialization.
pub async fn serve_stdio(shared: std::sync::Arc<Shared>) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    let running = Gateway::new(shared)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| anyhow::anyhow!("stdio gateway: {e}"))?;
    let _ = running.waiting().await;
    Ok(())
}
