//! Errors that become responses, in one place (axum's error-handling example): [`ApiError`],
//! the one JSON error shape of every route but `/mcp`, and [`not_found`], the MCP error of a
//! tool, resource or prompt no server offers to this caller.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rmcp::ErrorData as McpError;
use serde_json::json;

/// One error shape for every non-MCP route.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(json!({"error": {"status": self.status.as_u16(), "message": self.message}})),
        )
            .into_response()
    }
}

/// The MCP error of a name no server offers, or that this caller may not see: hidden and
/// unknown answer the same.
pub(crate) fn not_found(what: &str, name: &str) -> McpError {
    McpError::invalid_params(format!("unknown {what}: {name}"), None)
}
