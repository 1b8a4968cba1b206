//! The built-in `toolkit` MCP server (`toolforge server toolkit`): read-only SQL with negotiated
//! pagination over a bundled sample database, an exchange-rate REST client and its mock API,
//! sandboxed Python, and file resources with explicit handles, over stdio or Streamable HTTP.
//!
//! It depends on no other toolforge crate (the rest of toolforge reaches it over MCP only). It
//! never writes to the database it serves and never reads the environment: the binary passes
//! a typed [`server::ToolkitConfig`].
//!
//! - [`server`]: the rmcp tool router, MCP resources, stdio and HTTP serving.
//! - [`sql`]: `sql_query` and its read-only guards.
//! - [`seed`]: the deterministic sample database.
//! - [`rest`]: `rest_exchange_rate` and the mock exchange-rate API.
//! - [`sandbox`]: `run_python` in an isolated CPython child.
//! - [`resources`]: the resource set and its handles (per session).
//! - [`budget`]: the global `run_python` budget (runs at once, memory reserved).

pub mod budget;
pub mod landlock;
pub mod resources;
pub mod rest;
pub mod sandbox;
pub mod seed;
pub mod server;
pub mod sql;
