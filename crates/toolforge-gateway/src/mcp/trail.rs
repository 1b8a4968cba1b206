//! The gateway's trail: every `tools/call` through `/mcp` or `gateway --stdio` writes one trace
//! record, in the agent's schema and through the same writer (so the file's hash chain covers
//! both), with the caller's principal and what was decided before the call ran.

use std::time::Instant;

use rmcp::ErrorData as McpError;
use rmcp::model::CallToolResponse;
use toolforge_agent::trace::decision::Decision;
use toolforge_agent::trace::{ANONYMOUS, RecordKind, TraceRecord};

/// What a call came to, filled in as it goes.
#[derive(Debug, Default)]
pub(super) struct Trail {
    pub server: Option<String>,
    /// The server's own name of the tool, once routed.
    pub tool: Option<String>,
    pub rule: Option<String>,
    pub alternatives: Vec<String>,
    /// Whether the pool sent the call (it may have reached the server).
    pub executed: bool,
    pub attempts: u32,
    pub retry_reason: Option<String>,
    /// What was decided before the call ran (an allowed call's guard changes are in `guarded`).
    pub decision: Option<Decision>,
    /// What a content guard changed in an executed call (added to the decision).
    pub guarded: Vec<String>,
    /// Who called (`anonymous` without identity).
    pub principal: String,
    /// The policy that refused the call, when one did.
    pub policy: Option<String>,
}

/// The error text of a call's outcome, if it failed.
fn failure(outcome: &Result<CallToolResponse, McpError>) -> Option<String> {
    match outcome {
        Err(e) => Some(e.message.to_string()),
        Ok(CallToolResponse::Complete(r)) if r.is_error == Some(true) => Some(
            r.content
                .iter()
                .find_map(|c| c.as_text().map(|t| t.text.clone()))
                .unwrap_or_else(|| "the tool reported an error".to_owned()),
        ),
        Ok(CallToolResponse::Complete(_)) => None,
        Ok(_) => Some("the server needs input from the user; relayed to the client".to_owned()),
    }
}

/// The trace record of one gateway call named `name`, its arguments hashed as `arguments_hash`
/// (`toolforge_agent::trace::object_arguments_hash`).
#[allow(clippy::too_many_arguments)]
pub(super) fn record(
    session: u64,
    step: u32,
    name: &str,
    arguments_hash: String,
    started: Instant,
    trail: Trail,
    outcome: &Result<CallToolResponse, McpError>,
) -> TraceRecord {
    let error = failure(outcome);
    let attempt = trail.attempts.max(1);
    let decision = trail.decision.map(|d| match d {
        Decision::Allow { mut guarded } => {
            guarded.extend(trail.guarded);
            Decision::Allow { guarded }
        }
        other => other,
    });
    let decision = decision.map(|d| d.to_string());
    let success = matches!(outcome, Ok(CallToolResponse::Complete(r)) if r.is_error != Some(true));
    TraceRecord {
        server: trail.server,
        tool: trail.tool.unwrap_or_else(|| name.to_owned()),
        arguments_hash,
        latency_ms: (started.elapsed().as_secs_f64() * 10_000.0).round() / 10.0,
        success,
        executed: trail.executed,
        selection_rule: trail.rule,
        alternatives: trail.alternatives,
        attempt,
        retries: attempt - 1,
        retry_reason: trail.retry_reason,
        error,
        principal: if trail.principal.is_empty() {
            ANONYMOUS.to_owned()
        } else {
            trail.principal
        },
        policy: trail.policy,
        decision,
        ..TraceRecord::new(RecordKind::ToolCall, format!("mcp-{session}"), step)
    }
}
