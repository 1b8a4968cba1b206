//! The MCP client pool: connects to every server of `mcp.servers.json` (stdio children and
//! Streamable HTTP), keeps each connection supervised, merges what they offer into a
//! [`toolforge_select::Catalog`], and executes calls with the retry policy.
//!
//! It never reads the environment or files itself (the binary passes config text and a variable
//! lookup), and rmcp's client types stay inside: callers see the pool, MCP model types and the
//! catalog.

pub mod cache;
pub mod config;
pub mod pool;
pub mod relay;

pub use cache::{CatalogCache, MemoryStore, RedisStore, SqliteStore};
pub use config::{ConfigError, PoolConfig, Protocol, ServerConfig, Transport};
pub use pool::{
    CallContext, CallError, CallFailure, CallOutcome, FirstAttempts, Pool, PoolOptions,
    ServerHealth, ServerState,
};
pub use relay::{Caller, ElicitationFallback, PoolEvent};
