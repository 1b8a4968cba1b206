//! OpenAI's hosted tool search (`OPENAI_TOOL_SEARCH=on`), which only the Responses API has
//! (`POST {base}/responses`, plain JSON): the request's tools as `function` tools, the deferred
//! ones with `defer_loading: true`, after a `{"type": "tool_search"}` tool the server runs.
//!
//! The conversation goes as input items: a user turn's text as a user message, its tool results
//! as `function_call_output`s; an assistant turn's text as an assistant message, its calls as
//! `function_call`s (arguments a JSON string), and the searches it ran as the
//! `tool_search_call` / `tool_search_output` items they came as (the output's `tools` rebuilt
//! from the deferred definitions by name, so the loaded tools stay where the search put them
//! and the prefix before it is unchanged). The system prompt is `instructions`.
//!
//! An answer's `output` items map back the same way; `usage.input_tokens_details.cached_tokens`
//! becomes [`Usage::cache_read_input_tokens`] as on Chat Completions. A deferred function's
//! name and description are in the prompt from the first call (only its parameters wait for a
//! search), and whatever a search loads is billed as input from then on: the cost guard's bound
//! counts every deferred definition whole ([`crate::model::deferred_load_bound`]).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::wire::{Answer, ErrorBody, arguments_input, bad_response, fallback_call_id};
use crate::model::{
    Content, Message, ModelError, ModelRequest, ModelResponse, Role, StopReason, ToolSpec, Usage,
};
use crate::provider_http::quote;

/// The name the agent's records give the hosted search (its tool has none of its own).
pub(super) const SEARCH_TOOL: &str = "tool_search";

#[derive(Serialize)]
pub(super) struct ResponsesRequest<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    instructions: &'a str,
    input: Vec<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Value>,
    max_output_tokens: u32,
}

/// A `function` tool as the Responses API takes it (flat: no `function` wrapper).
fn function_tool(tool: &ToolSpec, deferred: bool) -> Value {
    let mut t = json!({
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.input_schema,
    });
    if deferred {
        t["defer_loading"] = Value::Bool(true);
    }
    t
}

/// The request body: `tool_search` first when there are deferred tools, then the offer, then
/// the deferred tools.
pub(super) fn responses_request<'a>(
    model: &'a str,
    request: &'a ModelRequest,
) -> ResponsesRequest<'a> {
    let mut tools = Vec::new();
    if !request.deferred_tools.is_empty() {
        tools.push(json!({"type": "tool_search"}));
    }
    tools.extend(request.tools.iter().map(|t| function_tool(t, false)));
    tools.extend(
        request
            .deferred_tools
            .iter()
            .map(|t| function_tool(t, true)),
    );
    let mut input = Vec::new();
    for message in &request.messages {
        push_items(message, &request.deferred_tools, &mut input);
    }
    ResponsesRequest {
        model,
        instructions: &request.system,
        input,
        tools,
        max_output_tokens: request.max_tokens,
    }
}

/// One message as input items, in the order of its content.
fn push_items(message: &Message, deferred: &[ToolSpec], out: &mut Vec<Value>) {
    let role = match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    for content in &message.content {
        match content {
            Content::Text { text } if !text.is_empty() => {
                out.push(json!({"role": role, "content": text}));
            }
            Content::Text { .. } => {}
            Content::ToolUse { id, name, input } => out.push(json!({
                "type": "function_call",
                "call_id": id,
                "name": name,
                "arguments": input.to_string(),
            })),
            Content::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                // The Responses API has no error flag either.
                let output = if *is_error {
                    format!("Error: {content}")
                } else {
                    content.clone()
                };
                out.push(json!({
                    "type": "function_call_output",
                    "call_id": tool_use_id,
                    "output": output,
                }));
            }
            Content::ProviderSearch { id, input, .. } => out.push(json!({
                "type": "tool_search_call",
                "id": id,
                "execution": "server",
                "arguments": input,
                "status": "completed",
            })),
            Content::ProviderSearchResult { tool_names, .. } => {
                let tools: Vec<Value> = tool_names
                    .iter()
                    .filter_map(|n| deferred.iter().find(|t| &t.name == n))
                    .map(|t| function_tool(t, true))
                    .collect();
                out.push(json!({
                    "type": "tool_search_output",
                    "execution": "server",
                    "status": "completed",
                    "tools": tools,
                }));
            }
        }
    }
}

#[derive(Deserialize)]
struct WireResponse {
    #[serde(default)]
    output: Vec<Value>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    incomplete_details: Option<IncompleteDetails>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct IncompleteDetails {
    reason: Option<String>,
}

#[derive(Deserialize)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    input_tokens_details: Option<InputTokensDetails>,
}

#[derive(Deserialize)]
struct InputTokensDetails {
    cached_tokens: Option<u64>,
}

/// A string field of an item, empty when absent.
fn field<'a>(item: &'a Value, key: &str) -> &'a str {
    item.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// Reads an answer's `output` items: messages' `output_text` (and refusals) as text,
/// `function_call`s as tool uses, the hosted search's `tool_search_call` and
/// `tool_search_output` as a provider search and its result (an output answers the call with
/// its `call_id`, else the call before it). Other items (reasoning, ...) are skipped.
pub(super) fn parse_responses(body: &str, requested_model: &str) -> Result<Answer, ModelError> {
    let wire: WireResponse = serde_json::from_str(body)
        .map_err(|e| bad_response(format!("{e}; body starts {:?}", quote(body))))?;
    if wire.status.as_deref() == Some("failed") {
        let why = wire.error.as_ref().map_or_else(
            || format!("body starts {:?}", quote(body)),
            |e| ErrorBody::from_value(e).describe(),
        );
        return Err(bad_response(format!("the response failed: {why}")));
    }
    let mut content = Vec::new();
    // Calls by their `call_id` (or item id), for the outputs that answer them.
    let mut searches: Vec<(String, String)> = Vec::new();
    let mut calls = 0;
    for item in &wire.output {
        match field(item, "type") {
            "message" => {
                let parts = item.get("content").and_then(Value::as_array);
                let text: String = parts
                    .into_iter()
                    .flatten()
                    .filter_map(|p| match field(p, "type") {
                        "output_text" => Some(field(p, "text")),
                        "refusal" => Some(field(p, "refusal")),
                        _ => None,
                    })
                    .collect();
                if !text.is_empty() {
                    content.push(Content::Text { text });
                }
            }
            "function_call" => {
                let id = Some(field(item, "call_id"))
                    .filter(|id| !id.is_empty())
                    .map_or_else(|| fallback_call_id(calls), str::to_owned);
                calls += 1;
                content.push(Content::ToolUse {
                    id,
                    name: field(item, "name").to_owned(),
                    input: arguments_input(item.get("arguments").cloned()),
                });
            }
            "tool_search_call" => {
                let id = field(item, "id").to_owned();
                searches.push((field(item, "call_id").to_owned(), id.clone()));
                content.push(Content::ProviderSearch {
                    id,
                    name: SEARCH_TOOL.to_owned(),
                    input: item
                        .get("arguments")
                        .cloned()
                        .unwrap_or_else(|| Value::Object(Map::new())),
                });
            }
            "tool_search_output" => {
                let call_id = field(item, "call_id");
                let answered = searches
                    .iter()
                    .find(|(c, _)| !call_id.is_empty() && c == call_id)
                    .or(searches.last())
                    .map(|(_, id)| id.clone())
                    .unwrap_or_default();
                let tool_names = item
                    .get("tools")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|t| field(t, "type") == "function")
                    .map(|t| field(t, "name").to_owned())
                    .filter(|n| !n.is_empty())
                    .collect();
                let error = (field(item, "status") == "incomplete")
                    .then(|| "the search did not complete".to_owned());
                content.push(Content::ProviderSearchResult {
                    tool_use_id: answered,
                    tool_names,
                    error,
                });
            }
            _ => {}
        }
    }
    let has_usage = wire
        .usage
        .as_ref()
        .is_some_and(|u| u.input_tokens.is_some() || u.output_tokens.is_some());
    let usage = wire.usage.as_ref().map_or_else(Usage::default, |u| {
        let input = u.input_tokens.unwrap_or(0);
        let cached = u
            .input_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens)
            .unwrap_or(0)
            .min(input);
        Usage {
            input_tokens: input - cached,
            output_tokens: u.output_tokens.unwrap_or(0),
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: cached,
        }
    });
    let cut = wire
        .incomplete_details
        .as_ref()
        .and_then(|d| d.reason.as_deref())
        == Some("max_output_tokens");
    let stop_reason = if cut {
        StopReason::MaxTokens
    } else if calls > 0 {
        StopReason::ToolUse
    } else if wire.status.as_deref().is_none_or(|s| s == "completed") {
        StopReason::EndTurn
    } else {
        StopReason::Other
    };
    Ok(Answer {
        response: ModelResponse {
            content,
            stop_reason,
            usage,
            model: wire
                .model
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| requested_model.to_owned()),
        },
        has_usage,
    })
}
