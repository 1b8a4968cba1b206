//! What a run returns (`Step`, `RunResult`, the streamed `RunEvent`s) and how its final text is
//! read (`parse_answer`) or, when halted, summed up.

use serde::Serialize;
use serde_json::{Value, json};
use toolforge_llm::Usage;

use crate::backend::ToolOutput;
use crate::halt::HaltReason;
use crate::trace::Searcher;

/// One tool call of a run.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Step {
    /// The model turn that asked for it (1-based).
    pub step: u32,
    /// The name the model called.
    pub tool: String,
    /// The server that ran it (or would have, in a dry run); `null` for an unknown tool.
    pub server: Option<String>,
    /// The server's own name of the tool.
    pub server_tool: Option<String>,
    pub arguments: Value,
    /// The selector's rule that chose the server (`null` for an unknown tool).
    #[schemars(extend("enum" = ["explicit-mention", "argument-type", "session-recency", "cosine-similarity", "priority-order", "single-candidate", null]))]
    pub selection_rule: Option<String>,
    pub alternatives: Vec<String>,
    pub executed: bool,
    pub dry_run: bool,
    pub success: bool,
    pub error: Option<String>,
    pub corrective_retry: bool,
    pub latency_ms: f64,
    /// Attempts the pool made (retries are transient failures only).
    pub attempts: u32,
    pub retry_reason: Option<String>,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub cost_usd: f64,
    /// The result, shortened.
    pub result_summary: String,
    /// The structured result (or the text result parsed as JSON, or `{"text": ...}`).
    pub raw_result: Value,
    /// The ids of the policies that decided this call (only in the trace record).
    #[serde(skip)]
    pub policy: Option<String>,
}

/// One search for tools beyond the first offer.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct SearchStep {
    /// The model turn that asked for it (1-based).
    pub step: u32,
    /// `agent` (the model called `search_tools`) or `provider` (the provider's own search).
    pub by: Searcher,
    pub query: String,
    /// What matched, best first, by model-facing name.
    pub found: Vec<String>,
    /// Of those, what joined the offer (from the next model call on).
    pub added: Vec<String>,
    /// Why the search was refused (bad arguments), if it was.
    pub error: Option<String>,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub cost_usd: f64,
}

/// What a run returns (the `/chat` response body).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "ChatResponse")]
pub struct RunResult {
    /// Also in every trace record of this run.
    pub session_id: String,
    /// The final answer in plain words (partial output when halted).
    pub response: String,
    /// `key_facts` from the model's JSON answer (`{}` when it gave none).
    pub key_facts: Value,
    pub steps: Vec<Step>,
    pub cost_usd: f64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub usage: Usage,
    pub model_calls: u32,
    pub halted: bool,
    pub halt_reason: Option<HaltReason>,
    pub error: Option<String>,
    pub dry_run: bool,
    pub model: String,
    pub ceiling_usd: f64,
    /// Every tool this request could see, by exposed name, in catalog order.
    pub available_tools: Vec<String>,
    /// The tools the first model call was sent (the broker's choice, pins, and the search tool
    /// when it left tools out), by model-facing name.
    pub offered_tools: Vec<String>,
    /// Why those tools.
    pub broker_rationale: String,
    /// Searches for tools beyond the first offer, in order (left out when there were none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub searches: Vec<SearchStep>,
}

/// Progress of a run, for streaming.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", content = "data")]
pub enum RunEvent {
    #[serde(rename = "session.start")]
    SessionStart {
        session_id: String,
        dry_run: bool,
        offered_tools: Vec<String>,
    },
    #[serde(rename = "tool.result")]
    ToolResult(Box<Step>),
    #[serde(rename = "final.response")]
    Final(Box<RunResult>),
}

/// The model's final text as answer and key facts: a JSON object `{"answer", "key_facts"}`
/// anywhere in the text, else the whole text.
#[must_use]
pub fn parse_answer(text: &str) -> (String, Value) {
    let trimmed = text.trim();
    let candidates = [
        Some(trimmed),
        trimmed
            .find('{')
            .zip(trimmed.rfind('}'))
            .filter(|(a, b)| a < b)
            .map(|(a, b)| &trimmed[a..=b]),
    ];
    for c in candidates.into_iter().flatten() {
        if let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(c)
            && let Some(answer) = obj.get("answer").and_then(Value::as_str)
        {
            let facts = match obj.get("key_facts") {
                Some(Value::Object(m)) => Value::Object(m.clone()),
                _ => json!({}),
            };
            return (answer.to_owned(), facts);
        }
    }
    (trimmed.to_owned(), json!({}))
}

/// A text cut to `max` characters, with an ellipsis when cut.
pub(super) fn short(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let cut: String = text.chars().take(max).collect();
        format!("{cut}…")
    }
}

/// A tool's result as JSON: its structured result, else its text parsed as a JSON object or
/// array, else `{"text": ...}`.
pub(super) fn raw_result(out: &ToolOutput) -> Value {
    if let Some(v) = &out.structured {
        return v.clone();
    }
    serde_json::from_str::<Value>(&out.text)
        .ok()
        .filter(|v| v.is_object() || v.is_array())
        .unwrap_or_else(|| json!({"text": out.text}))
}

/// The answer of a halted run: what succeeded before it stopped.
pub(super) fn partial_output(result: &RunResult) -> String {
    let done: Vec<String> = result
        .steps
        .iter()
        .filter(|s| s.success)
        .map(|s| format!("{} ({})", s.tool, short(&s.result_summary, 120)))
        .collect();
    let why = result.halt_reason.map_or("halted", HaltReason::as_str);
    if done.is_empty() {
        format!("Halted ({why}) before any tool call succeeded.")
    } else {
        format!("Halted ({why}). Completed so far: {}", done.join("; "))
    }
}

/// Halts `result` because the trace cannot be written (fail-closed mode).
pub(super) fn halt_on_trace(result: &mut RunResult) {
    result.halted = true;
    result.halt_reason = Some(HaltReason::TraceUnavailable);
    result.error = Some(
        "the trace file cannot be written (is the disk full?), and TRACE_FAIL_CLOSED is on.".into(),
    );
}
