//! The built-in `toolkit` MCP server: read-only SQL with negotiated pagination, a REST
//! exchange-rate client (and the bundled mock REST API), sandboxed Python and resource handles.
//!
//! It depends on no other toolforge crate: the rest of toolforge reaches it over MCP only.
