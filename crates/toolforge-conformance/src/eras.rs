//! The fixture as a dual-era server: each scenario's tool answers on either protocol era, the
//! way that era asks the client for input.
//!
//! - On a handshake-era session (`initialize`, 2025-11-25 and earlier), a tool that needs the
//!   user's input asks mid-call: a `sampling/createMessage`, `elicitation/create` or
//!   `roots/list` request on the call's own stream. The MRTR tools (`mrtr`) are driven here
//!   round by round: each `input_required` round's requests are asked of the client, and the
//!   answers fed back, as a 2026-07-28 client's retry would.
//! - On 2026-07-28, where a server may not ask mid-call, the handshake-era input tools
//!   (`test_sampling`, `test_elicitation`, `test_elicitation_sep1034_defaults`,
//!   `test_elicitation_sep1330_enums`) answer `input_required` with the one request they need,
//!   and complete from the client's retry. A client that did not declare the capability a tool
//!   needs is refused with -32021.
//!
//! So a gateway in front of the fixture can be checked in both directions of its era bridge by
//! either suite revision: whatever era the gateway speaks to the fixture, the client's era
//! decides how it is asked.

use rmcp::model::{
    CallToolResult, ClientCapabilities, ClientResult, ContentBlock, InputRequest, InputRequests,
    InputRequiredResult, InputResponses, ServerRequest,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};

use crate::catalog::{self, wire};

/// Rounds a handshake-era session drives an MRTR tool through before giving up.
pub(crate) const MAX_ROUNDS: usize = 8;

/// Whether the request comes from a 2026-07-28 (or later) client: it reads `input_required`
/// and may not be asked mid-call.
pub(crate) fn is_modern(ctx: &RequestContext<RoleServer>) -> bool {
    let version = ctx.meta.protocol_version().or_else(|| {
        ctx.peer
            .peer_info()
            .map(|info| info.protocol_version.clone())
    });
    version.is_some_and(|v| !v.has_initialize())
}

/// Asks a handshake-era client each of `requests` on the call's own stream; its answers, keyed
/// as the requests were.
///
/// # Errors
/// The client refused or failed one of them, or answered with another kind of result.
pub(crate) async fn ask_peer(
    ctx: &RequestContext<RoleServer>,
    requests: InputRequests,
) -> Result<InputResponses, McpError> {
    let mut responses = InputResponses::new();
    for (key, request) in requests {
        let request = match request {
            InputRequest::CreateMessage(r) => ServerRequest::CreateMessageRequest(r),
            InputRequest::Elicitation(r) => ServerRequest::ElicitRequest(r),
            InputRequest::ListRoots(r) => ServerRequest::ListRootsRequest(r),
            other => {
                return Err(McpError::internal_error(
                    format!("fixture bug: an input request it cannot ask: {other:?}"),
                    None,
                ));
            }
        };
        let answer = ctx.peer.send_request(request).await.map_err(|e| {
            McpError::internal_error(format!("asking the client failed: {e}"), None)
        })?;
        let value = match answer {
            ClientResult::CreateMessageResult(r) => serde_json::to_value(r),
            ClientResult::ElicitResult(r) => serde_json::to_value(r),
            ClientResult::ListRootsResult(r) => serde_json::to_value(r),
            _ => {
                return Err(McpError::internal_error(
                    "the client answered with another kind of result",
                    None,
                ));
            }
        }
        .map_err(|e| McpError::internal_error(format!("encoding an answer: {e}"), None))?;
        responses.insert(key, value);
    }
    Ok(responses)
}

/// The input a handshake-era input tool needs on 2026-07-28, under the key its retry answers.
pub(crate) enum Needs {
    /// `test_sampling`: a sampling request for `prompt`.
    Sampling { prompt: String },
    /// The elicitation tools: a form with `message` and `schema`.
    Elicitation { message: String, schema: Value },
}

const SAMPLING_KEY: &str = "sampling";
const ELICITATION_KEY: &str = "elicitation";

impl Needs {
    /// What the tool `name` needs, given its arguments; `None` for other tools.
    pub(crate) fn of(
        name: &str,
        arguments: Option<&serde_json::Map<String, Value>>,
    ) -> Option<Self> {
        let arg = |key: &str| {
            arguments
                .and_then(|a| a.get(key))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Some(match name {
            "test_sampling" => Self::Sampling {
                prompt: arg("prompt"),
            },
            "test_elicitation" => Self::Elicitation {
                message: arg("message"),
                schema: catalog::user_schema(),
            },
            "test_elicitation_sep1034_defaults" => Self::Elicitation {
                message: "Please review and update the form fields with defaults".to_owned(),
                schema: catalog::sep1034_schema(),
            },
            "test_elicitation_sep1330_enums" => Self::Elicitation {
                message: "Please select options from the enum fields".to_owned(),
                schema: catalog::sep1330_schema(),
            },
            _ => return None,
        })
    }

    /// The capability the client must have declared, as `-32021` names it.
    fn capability(&self) -> Value {
        match self {
            Self::Sampling { .. } => json!({"sampling": {}}),
            Self::Elicitation { .. } => json!({"elicitation": {}}),
        }
    }

    fn declared(&self, caps: Option<&ClientCapabilities>) -> bool {
        match self {
            Self::Sampling { .. } => caps.is_some_and(|c| c.sampling.is_some()),
            Self::Elicitation { .. } => caps.is_some_and(|c| c.elicitation.is_some()),
        }
    }

    /// One 2026-07-28 round: the result from the client's answer, or `input_required` asking it.
    pub(crate) fn round(
        self,
        responses: Option<&InputResponses>,
        caps: Option<&ClientCapabilities>,
    ) -> Result<Result<CallToolResult, InputRequiredResult>, McpError> {
        if !self.declared(caps) {
            return Err(McpError::missing_required_client_capability(wire(
                "capabilities",
                self.capability(),
            )?));
        }
        let (key, request) = match &self {
            Self::Sampling { prompt } => (
                SAMPLING_KEY,
                json!({"method": "sampling/createMessage", "params": {
                    "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                    "maxTokens": 100}}),
            ),
            Self::Elicitation { message, schema } => (
                ELICITATION_KEY,
                json!({"method": "elicitation/create", "params": {
                    "mode": "form", "message": message, "requestedSchema": schema}}),
            ),
        };
        if let Some(answer) = responses.and_then(|r| r.get(key)) {
            return Ok(Ok(match self {
                Self::Sampling { .. } => sampled(answer),
                Self::Elicitation { .. } => elicited(answer),
            }));
        }
        let mut asked = InputRequests::new();
        asked.insert(key.to_owned(), wire("input request", request)?);
        Ok(Err(InputRequiredResult::new(Some(asked), None)))
    }
}

/// `test_sampling`'s result from the client's sampling answer, on either era.
pub(crate) fn sampled(answer: &Value) -> CallToolResult {
    let said = answer
        .pointer("/content/text")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| {
            answer
                .get("content")
                .cloned()
                .unwrap_or_default()
                .to_string()
        });
    CallToolResult::success(vec![ContentBlock::text(format!("LLM response: {said}"))])
}

/// The elicitation tools' result from the client's answer, on either era.
pub(crate) fn elicited(answer: &Value) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(format!(
        "Elicitation completed: action={}, content={}",
        answer
            .get("action")
            .and_then(Value::as_str)
            .unwrap_or("unknown"),
        answer.get("content").cloned().unwrap_or(Value::Null)
    ))])
}
