//! The HTTP face of toolforge: the gateway's MCP server at `/mcp` (and over stdio), the
//! catalog and health endpoints, and the agent's chat API.
//!
//! axum lives here and nowhere else.
