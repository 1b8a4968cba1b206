//! The Messages API's wire shapes: the request body built from a `ModelRequest`, and the answer
//! parsed back into a `ModelResponse`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::{
    Content, Message, ModelError, ModelRequest, ModelResponse, ProviderToolSearch, Role,
    StopReason, ToolSpec, Usage,
};
use crate::provider_http::quote;

#[derive(Serialize)]
pub(super) struct WireRequest<'a> {
    pub(super) model: &'a str,
    pub(super) max_tokens: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) system: Vec<WireSystem<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) tools: Vec<WireToolEntry<'a>>,
    pub(super) messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) stream: bool,
}

/// One entry of `tools`: a custom tool, or the tool search tool (a server tool).
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum WireToolEntry<'a> {
    Custom(WireTool<'a>),
    Search(WireSearchTool),
}

/// The tool search tool: `{"type": "tool_search_tool_bm25_20251119", "name":
/// "tool_search_tool_bm25"}` (or the regex variant).
#[derive(Serialize)]
pub(super) struct WireSearchTool {
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
    pub(super) name: &'static str,
}

impl WireSearchTool {
    pub(super) fn of(search: ProviderToolSearch) -> Self {
        match search {
            ProviderToolSearch::Bm25 | ProviderToolSearch::Hosted => Self {
                kind: "tool_search_tool_bm25_20251119",
                name: "tool_search_tool_bm25",
            },
            ProviderToolSearch::Regex => Self {
                kind: "tool_search_tool_regex_20251119",
                name: "tool_search_tool_regex",
            },
        }
    }
}

#[derive(Serialize)]
pub(super) struct CacheControl {
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
}

pub(super) const EPHEMERAL: CacheControl = CacheControl { kind: "ephemeral" };

#[derive(Serialize)]
pub(super) struct WireSystem<'a> {
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
    pub(super) text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
pub(super) struct WireTool<'a> {
    pub(super) name: &'a str,
    pub(super) description: &'a str,
    pub(super) input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) cache_control: Option<CacheControl>,
    /// Left out of the prompt until a tool search loads it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) defer_loading: bool,
}

#[derive(Serialize)]
pub(super) struct WireMessage<'a> {
    pub(super) role: Role,
    pub(super) content: Vec<WireBlock<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum WireBlock<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    ServerToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a Value,
    },
    ToolSearchToolResult {
        tool_use_id: &'a str,
        /// `{"type": "tool_search_tool_search_result", "tool_references": [{"type":
        /// "tool_reference", "tool_name"}]}`, or `{"type": "tool_search_tool_result_error",
        /// "error_code"}`.
        content: Value,
    },
}

/// The request body without a provider search (what the tests compare against).
#[cfg(test)]
pub(super) fn wire_request<'a>(
    model: &'a str,
    request: &'a ModelRequest,
    stream: bool,
) -> WireRequest<'a> {
    wire_request_with(model, request, stream, None)
}

/// The request body; with `search`, the tool search tool comes first and the request's
/// deferred tools last, marked `defer_loading` (never a breakpoint: they are not in the
/// prompt's prefix until a search loads them, and then inline where it did).
pub(super) fn wire_request_with<'a>(
    model: &'a str,
    request: &'a ModelRequest,
    stream: bool,
    search: Option<ProviderToolSearch>,
) -> WireRequest<'a> {
    let cache = || request.cache.then_some(EPHEMERAL);
    let system = if request.system.is_empty() {
        Vec::new()
    } else {
        vec![WireSystem {
            kind: "text",
            text: &request.system,
            cache_control: cache(),
        }]
    };
    let last = request.tools.len().saturating_sub(1);
    // After the first offer too, once tools have joined it: that prefix is unchanged since the
    // first call wrote it (at most three breakpoints in all; the API allows four).
    let stable = (request.stable_tools > 0 && request.stable_tools < request.tools.len())
        .then(|| request.stable_tools - 1);
    let search = search.filter(|_| !request.deferred_tools.is_empty());
    let mut tools: Vec<WireToolEntry<'a>> = Vec::new();
    if let Some(search) = search {
        tools.push(WireToolEntry::Search(WireSearchTool::of(search)));
    }
    tools.extend(
        request
            .tools
            .iter()
            .enumerate()
            .map(|(i, t): (usize, &ToolSpec)| {
                WireToolEntry::Custom(WireTool {
                    name: &t.name,
                    description: &t.description,
                    input_schema: &t.input_schema,
                    cache_control: if i == last || Some(i) == stable {
                        cache()
                    } else {
                        None
                    },
                    defer_loading: false,
                })
            }),
    );
    if search.is_some() {
        tools.extend(request.deferred_tools.iter().map(|t| {
            WireToolEntry::Custom(WireTool {
                name: &t.name,
                description: &t.description,
                input_schema: &t.input_schema,
                cache_control: None,
                defer_loading: true,
            })
        }));
    }
    WireRequest {
        model,
        max_tokens: request.max_tokens,
        system,
        tools,
        messages: request.messages.iter().map(wire_message).collect(),
        stream,
    }
}

pub(super) fn wire_message(message: &Message) -> WireMessage<'_> {
    // The API rejects empty text blocks; a model's empty text next to a tool call is dropped
    // rather than echoed back into a 400.
    let has_other = message
        .content
        .iter()
        .any(|c| !matches!(c, Content::Text { text } if text.is_empty()));
    let content = message
        .content
        .iter()
        .filter(|c| !(has_other && matches!(c, Content::Text { text } if text.is_empty())))
        .map(|c| match c {
            Content::Text { text } => WireBlock::Text { text },
            Content::ToolUse { id, name, input } => WireBlock::ToolUse { id, name, input },
            Content::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => WireBlock::ToolResult {
                tool_use_id,
                content,
                is_error: *is_error,
            },
            Content::ProviderSearch { id, name, input } => {
                WireBlock::ServerToolUse { id, name, input }
            }
            Content::ProviderSearchResult {
                tool_use_id,
                tool_names,
                error,
            } => WireBlock::ToolSearchToolResult {
                tool_use_id,
                content: search_result_content(tool_names, error.as_deref()),
            },
        })
        .collect();
    WireMessage {
        role: message.role,
        content,
    }
}

// ---- response wire types ----

#[derive(Deserialize)]
pub(super) struct ApiErrorEnvelope {
    pub(super) error: ApiError,
}

#[derive(Deserialize)]
pub(super) struct ApiError {
    #[serde(rename = "type")]
    pub(super) kind: Option<String>,
    pub(super) message: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct WireResponse {
    #[serde(default)]
    pub(super) content: Vec<WireContent>,
    pub(super) stop_reason: Option<String>,
    #[serde(default)]
    pub(super) usage: WireUsage,
    #[serde(default)]
    pub(super) model: String,
}

/// A tool search result's `content` as the API writes it.
pub(super) fn search_result_content(tool_names: &[String], error: Option<&str>) -> Value {
    match error {
        Some(code) => {
            serde_json::json!({"type": "tool_search_tool_result_error", "error_code": code})
        }
        None => serde_json::json!({
            "type": "tool_search_tool_search_result",
            "tool_references": tool_names
                .iter()
                .map(|n| serde_json::json!({"type": "tool_reference", "tool_name": n}))
                .collect::<Vec<_>>(),
        }),
    }
}

/// A `tool_search_tool_result`'s content read back: the names it loaded, or its error code.
pub(super) fn read_search_result(content: &Value) -> (Vec<String>, Option<String>) {
    match content.get("type").and_then(Value::as_str) {
        Some("tool_search_tool_search_result") => {
            let names = content
                .get("tool_references")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|r| r.get("tool_name").and_then(Value::as_str))
                .map(str::to_owned)
                .collect();
            (names, None)
        }
        _ => {
            let code = content
                .get("error_code")
                .and_then(Value::as_str)
                .unwrap_or("unreadable tool search result");
            (Vec::new(), Some(code.to_owned()))
        }
    }
}

/// A content block of an answer; kinds the agent does not use (thinking, other server tools)
/// are skipped.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(super) enum WireContent {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ServerToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    ToolSearchToolResult {
        tool_use_id: String,
        content: Value,
    },
    #[serde(other)]
    Other,
}

/// A server tool call is kept only when it is the tool search's (other server tools are not
/// offered, so their calls cannot come).
pub(super) fn is_search_tool(name: &str) -> bool {
    name.starts_with("tool_search_tool_")
}

/// Usage as sent; every field may be absent or `null`.
#[derive(Deserialize, Default)]
pub(super) struct WireUsage {
    pub(super) input_tokens: Option<u64>,
    pub(super) output_tokens: Option<u64>,
    pub(super) cache_creation_input_tokens: Option<u64>,
    pub(super) cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// Overwrites the fields present: `message_delta` counts are cumulative, not increments.
    pub(super) fn apply_to(&self, usage: &mut Usage) {
        let fields = [
            (self.input_tokens, &mut usage.input_tokens),
            (self.output_tokens, &mut usage.output_tokens),
            (
                self.cache_creation_input_tokens,
                &mut usage.cache_creation_input_tokens,
            ),
            (
                self.cache_read_input_tokens,
                &mut usage.cache_read_input_tokens,
            ),
        ];
        for (value, slot) in fields {
            if let Some(value) = value {
                *slot = value;
            }
        }
    }
}

pub(super) fn stop_reason(reason: Option<&str>) -> StopReason {
    match reason {
        Some("end_turn") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        Some("pause_turn") => StopReason::PauseTurn,
        _ => StopReason::Other,
    }
}

pub(super) fn parse_response(
    body: &str,
    requested_model: &str,
) -> Result<ModelResponse, ModelError> {
    let wire: WireResponse = serde_json::from_str(body)
        .map_err(|e| bad_response(format!("{e}; body starts {:?}", quote(body))))?;
    let content = wire
        .content
        .into_iter()
        .filter_map(|c| match c {
            WireContent::Text { text } => Some(Content::Text { text }),
            WireContent::ToolUse { id, name, input } => Some(Content::ToolUse { id, name, input }),
            WireContent::ServerToolUse { id, name, input } => {
                is_search_tool(&name).then_some(Content::ProviderSearch { id, name, input })
            }
            WireContent::ToolSearchToolResult {
                tool_use_id,
                content,
            } => {
                let (tool_names, error) = read_search_result(&content);
                Some(Content::ProviderSearchResult {
                    tool_use_id,
                    tool_names,
                    error,
                })
            }
            WireContent::Other => None,
        })
        .collect();
    let mut usage = Usage::default();
    wire.usage.apply_to(&mut usage);
    Ok(ModelResponse {
        content,
        stop_reason: stop_reason(wire.stop_reason.as_deref()),
        usage,
        model: if wire.model.is_empty() {
            requested_model.to_owned()
        } else {
            wire.model
        },
    })
}

pub(super) const PROVIDER: &str = "anthropic";

pub(super) fn bad_response(message: String) -> ModelError {
    ModelError::BadResponse {
        provider: PROVIDER,
        message,
    }
}
