//! The MCP server fixture that the official conformance suite's server scenarios call by name
//! (`test_simple_text`, `test://static-text`, `test_prompt_with_arguments`, ...).
//!
//! It exists to prove that toolforge's MCP plumbing (and the gateway in front of it) is
//! faithful; it is not a product feature. It never touches the network beyond the listener it
//! is handed, never reads files or the environment, and keeps nothing between sessions but the
//! tasks they started (in memory, for their TTL).
//!
//! - [`Fixture`]: the `ServerHandler` with the suite's fixed catalog (see `catalog`), for both
//!   protocol eras: `initialize` sessions (2025-11-25 and earlier) and 2026-07-28 requests
//!   (MRTR tools in `mrtr`, `subscriptions/listen` in `listen`), and the Skills extension
//!   (SEP-2640) with two embedded skills (`skills`), and the Tasks extension (SEP-2663) with
//!   the tools its scenarios call (`tasks`).
//! - [`serve_stdio`]: serve one session on stdin/stdout.
//! - [`http_service`] / [`router`]: Streamable HTTP at `/mcp`, with Host/Origin validation
//!   against DNS rebinding; [`serve_http`] runs it on a listener.

mod catalog;
mod eras;
mod fixture;
mod http;
mod listen;
mod mrtr;
mod skills;
mod tasks;

pub use fixture::Fixture;
pub use http::{HttpOptions, http_service, router, serve_http};

/// Serves one fixture session over stdin/stdout until the client closes stdin.
pub async fn serve_stdio() -> anyhow::Result<()> {
    use rmcp::ServiceExt as _;
    let running = Fixture::new()
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| anyhow::anyhow!("conformance fixture: stdio handshake failed: {e}"))?;
    running.waiting().await.map_err(|e| {
        anyhow::anyhow!("conformance fixture: stdio session ended with an error: {e}")
    })?;
    Ok(())
}
