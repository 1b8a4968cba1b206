//! The trace records a run writes: one per tool call, one per search, and one per model call
//! that no tool call or search carries the cost of (see `crate::trace` for the schema and the
//! writer).

use serde_json::Value;
use toolforge_llm::ModelResponse;

use super::result::{SearchStep, short};
use super::{Agent, RunRequest, Step};
use crate::trace::{RecordKind, SearchRecord, TraceRecord, arguments_hash};

/// Longest search query a trace record keeps, in characters.
const TRACED_QUERY_CHARS: usize = 256;

impl Agent {
    /// Writes one trace record: queued, or (fail-closed) written before the run goes on.
    /// `false` when a fail-closed write failed.
    pub(super) async fn trace(&self, record: TraceRecord) -> bool {
        if self.config.trace_fail_closed {
            self.traces.emit_confirmed(record).await
        } else {
            self.traces.emit(record);
            true
        }
    }

    pub(super) fn model_call_record(
        &self,
        session_id: &str,
        step: u32,
        response: &ModelResponse,
        cost: f64,
        request: &RunRequest,
    ) -> TraceRecord {
        TraceRecord {
            success: true,
            dry_run: request.dry_run,
            tokens_in: response.usage.total_input(),
            tokens_out: response.usage.output_tokens,
            cost_usd: trace_cost(cost),
            principal: request.principal.to_string(),
            ..TraceRecord::new(RecordKind::ModelCall, session_id, step)
        }
    }

    pub(super) fn tool_call_record(
        &self,
        session_id: &str,
        principal: &toolforge_policy::Principal,
        step: &Step,
    ) -> TraceRecord {
        let attempt = step.attempts.max(1);
        TraceRecord {
            server: step.server.clone(),
            tool: step
                .server_tool
                .clone()
                .unwrap_or_else(|| step.tool.clone()),
            arguments_hash: arguments_hash(&step.arguments),
            // Never a secret in the file, whatever the guards do to the call itself.
            arguments: self.config.trace_verbose.then(|| {
                let mut arguments = step.arguments.clone();
                toolforge_guard::redact_value(&mut arguments);
                arguments
            }),
            latency_ms: (step.latency_ms * 10.0).round() / 10.0,
            success: step.success,
            executed: step.executed,
            dry_run: step.dry_run,
            tokens_in: step.tokens_in,
            tokens_out: step.tokens_out,
            cost_usd: trace_cost(step.cost_usd),
            selection_rule: step.selection_rule.clone(),
            alternatives: step.alternatives.clone(),
            attempt,
            retries: attempt - 1,
            retry_reason: step.retry_reason.clone(),
            error: step.error.clone(),
            corrective_retry: step.corrective_retry,
            principal: principal.to_string(),
            policy: step.policy.clone(),
            ..TraceRecord::new(RecordKind::ToolCall, session_id, step.step)
        }
    }
}

impl Agent {
    /// The record of one search: what it looked for (secrets redacted, shortened), what it
    /// found and what joined the offer (`found` and `added` as `server/tool`), and its share of
    /// the model call's cost.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn search_record(
        &self,
        session_id: &str,
        request: &RunRequest,
        tool: &str,
        input: &Value,
        search: &SearchStep,
        limit: usize,
        (found, added): (Vec<String>, Vec<String>),
    ) -> TraceRecord {
        let mut query = short(&search.query, TRACED_QUERY_CHARS);
        toolforge_guard::redact_string(&mut query);
        TraceRecord {
            tool: tool.to_owned(),
            arguments_hash: arguments_hash(input),
            arguments: self.config.trace_verbose.then(|| input.clone()),
            success: search.error.is_none(),
            dry_run: request.dry_run,
            tokens_in: search.tokens_in,
            tokens_out: search.tokens_out,
            cost_usd: trace_cost(search.cost_usd),
            error: search.error.clone(),
            principal: request.principal.to_string(),
            search: Some(SearchRecord {
                by: search.by,
                query,
                limit,
                found,
                added,
            }),
            ..TraceRecord::new(RecordKind::ToolSearch, session_id, search.step)
        }
    }
}

/// Dollars as traced: to the nano-dollar, so the trace sums to the responses' `cost_usd` to far
/// below a cent over any number of records, without float noise in the file.
fn trace_cost(usd: f64) -> f64 {
    (usd * 1e9).round() / 1e9
}
