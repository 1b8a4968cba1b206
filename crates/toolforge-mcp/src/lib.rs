//! The MCP client pool: connects to every server of `mcp.servers.json` (stdio children,
//! Streamable HTTP, and the legacy HTTP+SSE transport, `legacy_sse`), keeps each connection
//! supervised, merges what they offer into a
//! [`toolforge_select::Catalog`], and executes calls with the retry policy of
//! `toolforge-retry` (at most once, unless the tool is idempotent).
//!
//! It never reads the environment or files itself (the binary passes config text and a variable
//! lookup), and rmcp's client types stay inside: callers see the pool, MCP model types and the
//! catalog.
//!
//! Modules, leaves first: `auth` (OAuth 2.1 client: tokens, the authorization-code flow,
//! the HTTP client that sends tokens), `upstream` (one server's state), `options`, `legacy_sse`
//! (the 2024-11-05 transport as an rmcp transport, which rmcp lacks), `connect`, `listed_tool` (a tool held small, its schema as text), `lists`,
//! `catalog`, `pins` (pinned tools, quarantine), `call` (the call path), `trace_context` (W3C
//! trace context into each backend call's `_meta`), `supervise`, `events`, `relay` and `asks`
//! (what a backend asks during a call, for that call's client), `listen`
//! (`subscriptions/listen` on 2026-07-28 backends),
//! and `pool` (the public face).

pub mod asks;
pub mod auth;
pub mod cache;
mod cache_error;
mod call;
mod catalog;
pub mod config;
mod connect;
mod events;
mod guard;
#[cfg(test)]
mod http_call_tests;
mod isolation;
pub mod legacy_sse;
mod listed_tool;
mod listen;
mod lists;
mod on_behalf;
mod options;
pub mod pins;
pub mod pool;
pub mod relay;
mod stdio_scheduling;
mod supervise;
#[cfg(test)]
mod testing;
#[cfg(test)]
mod testing_http;
pub mod trace_context;
mod upstream;

pub use asks::{Ask, Asks};
pub use cache::{CatalogCache, MemoryStore, RedisStore, SqliteStore};
pub use config::{ConfigError, Isolation, PoolConfig, Protocol, ServerConfig, Transport};
pub use listed_tool::ListedTool;
pub use on_behalf::OnBehalf;
pub use options::BackendProxy;
pub use pins::{Approval, PinRow, PinStore, Pinning, Quarantined};
pub use pool::{
    CallContext, CallError, CallFailure, CallOutcome, FirstAttempts, Pool, PoolOptions,
    ServerHealth, ServerState,
};
pub use relay::{Caller, ElicitationFallback, PoolEvent};
pub use toolforge_retry::GiveUp;
