//! The agent's trace spans: `agent run` (one request to the agent), `selection` (the offer
//! of tools to the model, and each call's route) and `model call` (provider, model, tokens,
//! cost). `tracing` spans under the target
//! the binary exports ([`SPAN_TARGET`]); disabled, and free, when no exporter is configured.
//! Attributes are bounded: names, counts and rules, never prompts, arguments or answers.

use toolforge_llm::Usage;
use toolforge_mcp::trace_context::SPAN_TARGET;
use toolforge_select::ToolId;
use tracing::Span;
use tracing::field::Empty;

use crate::run::result::RunResult;

/// The `agent run` span of one request to the agent (`/chat`, `toolforge chat`): the parent of
/// its selections, model calls and backend calls.
pub(crate) fn run(dry_run: bool) -> Span {
    tracing::info_span!(
        target: SPAN_TARGET,
        "agent run",
        otel.status_code = Empty,
        toolforge.dry_run = dry_run,
        toolforge.steps = Empty,
        toolforge.halted = Empty,
        toolforge.halt_reason = Empty,
        toolforge.cost_usd = Empty,
    )
}

/// How a run ended: tool calls made, whether it halted and why, what it cost.
pub(crate) fn record_run(span: &Span, result: &RunResult) {
    span.record("toolforge.steps", int(result.steps.len() as u64));
    span.record("toolforge.halted", result.halted);
    if let Some(reason) = result.halt_reason {
        span.record("toolforge.halt_reason", reason.as_str());
    }
    span.record("toolforge.cost_usd", result.cost_usd);
    if result.error.is_some() {
        span.record("otel.status_code", "error");
    }
}

/// The `selection` span of the tools offered to the model.
pub(crate) fn offer() -> Span {
    tracing::info_span!(
        target: SPAN_TARGET,
        "selection",
        toolforge.selection.operation = "offer",
        toolforge.selection.offered = Empty,
        toolforge.selection.left_out = Empty,
    )
}

/// How many tools the offer gave the model, and how many it left out.
pub(crate) fn record_offer(span: &Span, offered: usize, left_out: usize) {
    span.record("toolforge.selection.offered", int(offered as u64));
    span.record("toolforge.selection.left_out", int(left_out as u64));
}

/// The `selection` span of routing one tool call (the model's, or a client's through the
/// gateway): which server runs it; [`record_route`] fills it in.
pub fn route() -> Span {
    tracing::info_span!(
        target: SPAN_TARGET,
        "selection",
        toolforge.selection.operation = "route",
        toolforge.server = Empty,
        toolforge.tool = Empty,
        toolforge.selection.rule = Empty,
    )
}

/// Where a call went and by which rule (`None`: no tool has the name the model used).
pub fn record_route(span: &Span, chosen: Option<(&ToolId, &str)>) {
    match chosen {
        Some((id, rule)) => {
            span.record("toolforge.server", id.server.as_str());
            span.record("toolforge.tool", id.name.as_str());
            span.record("toolforge.selection.rule", rule);
        }
        None => {
            span.record("toolforge.selection.rule", "none");
        }
    }
}

/// The `model call` span of one request to `provider`'s `model`.
pub(crate) fn model_call(provider: &'static str, model: &str) -> Span {
    tracing::info_span!(
        target: SPAN_TARGET,
        "model call",
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.system = provider,
        gen_ai.request.model = model,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read_input_tokens = Empty,
        gen_ai.usage.cache_creation_input_tokens = Empty,
        toolforge.cost_usd = Empty,
    )
}

/// A model call's usage (every input token, however billed, in `input_tokens`) and cost.
pub(crate) fn record_model_call(span: &Span, usage: &Usage, cost_usd: f64) {
    span.record("gen_ai.usage.input_tokens", int(usage.total_input()));
    span.record("gen_ai.usage.output_tokens", int(usage.output_tokens));
    span.record(
        "gen_ai.usage.cache_read_input_tokens",
        int(usage.cache_read_input_tokens),
    );
    span.record(
        "gen_ai.usage.cache_creation_input_tokens",
        int(usage.cache_creation_input_tokens),
    );
    span.record("toolforge.cost_usd", cost_usd);
}

/// A model call that failed.
pub(crate) fn record_model_error(span: &Span) {
    span.record("otel.status_code", "error");
}

/// A count as OTel's integer attribute (the exporter writes unsigned values as text).
fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
