//! The MCP client pool: connects to every configured server (stdio child processes and
//! Streamable HTTP) through rmcp, keeps them supervised, merges their catalogs, routes calls with
//! the retry policy and caches catalogs.
//!
//! rmcp client types never leave this crate: callers speak toolforge's own types.
