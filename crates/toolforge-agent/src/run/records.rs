//! The trace records a run writes: one per tool call, and one per model call that no tool call
//! carries the cost of (see `crate::trace` for the schema and the writer).

use toolforge_llm::ModelResponse;

use super::{Agent, RunRequest, Step};
use crate::trace::{RecordKind, SCHEMA_VERSION, TraceRecord, arguments_hash, timestamp_now};

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
            schema_version: SCHEMA_VERSION.to_owned(),
            kind: RecordKind::ModelCall,
            timestamp: timestamp_now(),
            session_id: session_id.to_owned(),
            step,
            server: None,
            tool: String::new(),
            arguments_hash: String::new(),
            arguments: None,
            latency_ms: 0.0,
            success: true,
            executed: false,
            dry_run: request.dry_run,
            tokens_in: response.usage.total_input(),
            tokens_out: response.usage.output_tokens,
            cost_usd: trace_cost(cost),
            selection_rule: None,
            alternatives: Vec::new(),
            attempt: 1,
            retries: 0,
            retry_reason: None,
            error: None,
            corrective_retry: false,
            principal: request.principal.to_string(),
            policy: None,
            decision: None,
            prev_hash: None,
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
            schema_version: SCHEMA_VERSION.to_owned(),
            kind: RecordKind::ToolCall,
            timestamp: timestamp_now(),
            session_id: session_id.to_owned(),
            step: step.step,
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
            decision: None,
            prev_hash: None,
        }
    }
}

/// Dollars as traced: to the nano-dollar, so the trace sums to the responses' `cost_usd` to far
/// below a cent over any number of records, without float noise in the file.
fn trace_cost(usd: f64) -> f64 {
    (usd * 1e9).round() / 1e9
}
