//! A call that needs the principal's consent to an upstream server first, answered in the
//! protocol: a URL elicitation pointing at the gateway's own consent page
//! ([`crate::consent`]).
//!
//! - A 2025-11-25 client that declared URL elicitation gets the JSON-RPC error `-32042`
//!   (`URLElicitationRequiredError`) with the link; it opens it for its user and calls again.
//! - A 2026-07-28 client that can elicit by URL gets `input_required` with an
//!   `elicitation/create` URL request and a sealed state; its retry runs the call afresh (the
//!   grant is there by then, or the same answer comes back).
//! - Any other client, and stdio (no consent page), gets a tool error that says what to open
//!   or run.

use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, ErrorCode, InputRequest, InputRequests,
    InputRequiredResult,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::json;

use super::Gateway;
use crate::mrtr;

/// The key of the consent request among a 2026-07-28 result's input requests.
pub const CONSENT_INPUT: &str = "toolforge-consent";
/// `URLElicitationRequiredError` (MCP 2025-11-25).
pub const URL_ELICITATION_REQUIRED: i32 = -32042;

/// Whether the client declared URL elicitation.
fn elicits_by_url(ctx: &RequestContext<RoleServer>) -> bool {
    let caps = ctx
        .client_capabilities()
        .or_else(|| ctx.peer.peer_info().map(|i| i.capabilities.clone()));
    caps.and_then(|c| c.elicitation)
        .is_some_and(|e| e.url.is_some())
}

/// The answer to a call of `target` (server, tool) whose `principal` must consent first.
pub(super) fn needed(
    gateway: &Gateway,
    ctx: &RequestContext<RoleServer>,
    key: &str,
    target: (&str, &str),
    principal: &str,
    scope: Option<&str>,
) -> Result<CallToolResponse, McpError> {
    let (server, tool) = target;
    let Some(consent) = gateway.shared.consent() else {
        return Ok(CallToolResponse::Complete(CallToolResult::error(vec![
            ContentBlock::text(format!(
                "toolforge: server \"{server}\" needs {principal}'s authorization first: run \
                 `toolforge auth login {server}` (as this principal), then call again"
            )),
        ])));
    };
    let link = consent.link(server, principal, scope);
    if !elicits_by_url(ctx) {
        return Ok(CallToolResponse::Complete(CallToolResult::error(vec![
            ContentBlock::text(format!("toolforge: {} Link: {}", link.message, link.url)),
        ])));
    }
    if mrtr::client_is_modern(ctx) {
        let request: InputRequest = serde_json::from_value(json!({
            "method": "elicitation/create",
            "params": {"mode": "url", "message": link.message, "url": link.url},
        }))
        .map_err(|e| McpError::internal_error(format!("consent request: {e}"), None))?;
        let mut requests = InputRequests::new();
        requests.insert(CONSENT_INPUT.to_owned(), request);
        let envelope = mrtr::Envelope {
            server: server.to_owned(),
            tool: tool.to_owned(),
            backend_state: None,
            caller: Some(principal.to_owned()),
            nonce: Some(uuid::Uuid::new_v4().simple().to_string()),
            parked: None,
        };
        let sealed = gateway.shared.seal().seal(key, &envelope);
        return Ok(CallToolResponse::InputRequired(InputRequiredResult::new(
            Some(requests),
            Some(sealed),
        )));
    }
    Err(McpError::new(
        ErrorCode(URL_ELICITATION_REQUIRED),
        link.message.clone(),
        Some(json!({"elicitations": [{
            "mode": "url",
            "elicitationId": link.id,
            "url": link.url,
            "message": link.message,
        }]})),
    ))
}
