//! The Chat Completions's wire shapes: the request body built from a `ModelRequest`, and the answer
//! parsed back into a `ModelResponse`.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::model::{
    Content, Message, ModelError, ModelRequest, ModelResponse, Role, StopReason, ToolSpec, Usage,
};
use crate::provider_http::quote;

#[derive(Serialize)]
pub(super) struct WireRequest<'a> {
    pub(super) model: &'a str,
    pub(super) max_tokens: u32,
    pub(super) messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) stream_options: Option<StreamOptions>,
}

/// Without `include_usage` a stream reports no usage at all.
#[derive(Serialize)]
pub(super) struct StreamOptions {
    pub(super) include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub(super) enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: Cow<'a, str>,
    },
    Assistant {
        /// `null` when the turn is only tool calls.
        content: Option<Cow<'a, str>>,
        /// Left out when empty: some compatible servers reject `"tool_calls": []`.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: Cow<'a, str>,
    },
}

#[derive(Serialize)]
pub(super) struct WireToolCall<'a> {
    pub(super) id: &'a str,
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
    pub(super) function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
pub(super) struct WireFunctionCall<'a> {
    pub(super) name: &'a str,
    /// The input as JSON text: the API takes arguments as a string, not an object.
    pub(super) arguments: String,
}

#[derive(Serialize)]
pub(super) struct WireTool<'a> {
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
    pub(super) function: WireFunction<'a>,
}

#[derive(Serialize)]
pub(super) struct WireFunction<'a> {
    pub(super) name: &'a str,
    pub(super) description: &'a str,
    pub(super) parameters: &'a Value,
}

pub(super) fn wire_request<'a>(
    model: &'a str,
    request: &'a ModelRequest,
    stream: bool,
) -> WireRequest<'a> {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        messages.push(WireMessage::System {
            content: &request.system,
        });
    }
    for message in &request.messages {
        push_messages(message, &mut messages);
    }
    let tools = request
        .tools
        .iter()
        .map(|t: &ToolSpec| WireTool {
            kind: "function",
            function: WireFunction {
                name: &t.name,
                description: &t.description,
                parameters: &t.input_schema,
            },
        })
        .collect();
    WireRequest {
        model,
        max_tokens: request.max_tokens,
        messages,
        tools,
        stream,
        stream_options: stream.then_some(StreamOptions {
            include_usage: true,
        }),
    }
}

/// Translates one neutral message into the one or more messages Chat Completions wants.
pub(super) fn push_messages<'a>(message: &'a Message, out: &mut Vec<WireMessage<'a>>) {
    let mut texts: Vec<&str> = Vec::new();
    match message.role {
        Role::User => {
            let mut tool_results = 0;
            for block in &message.content {
                match block {
                    Content::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    } => {
                        tool_results += 1;
                        out.push(WireMessage::Tool {
                            tool_call_id: tool_use_id,
                            content: tool_result_text(content, *is_error),
                        });
                    }
                    Content::Text { text } if !text.is_empty() => texts.push(text),
                    // A user turn cannot ask for a tool call; empty text carries nothing; a
                    // provider's own search is Anthropic's and is never sent here.
                    Content::Text { .. }
                    | Content::ToolUse { .. }
                    | Content::ProviderSearch { .. }
                    | Content::ProviderSearchResult { .. } => {}
                }
            }
            // A turn of only tool results needs no user message; any other turn keeps one, even
            // empty, so the conversation still alternates.
            if !texts.is_empty() || tool_results == 0 {
                out.push(WireMessage::User {
                    content: join(&texts),
                });
            }
        }
        Role::Assistant => {
            let mut tool_calls = Vec::new();
            for block in &message.content {
                match block {
                    Content::Text { text } if !text.is_empty() => texts.push(text),
                    Content::ToolUse { id, name, input } => tool_calls.push(WireToolCall {
                        id,
                        kind: "function",
                        function: WireFunctionCall {
                            name,
                            arguments: input.to_string(),
                        },
                    }),
                    // Tool results belong to user turns.
                    Content::Text { .. }
                    | Content::ToolResult { .. }
                    | Content::ProviderSearch { .. }
                    | Content::ProviderSearchResult { .. } => {}
                }
            }
            // `content: null` is only valid next to tool calls; a bare turn sends "".
            let content = if texts.is_empty() && !tool_calls.is_empty() {
                None
            } else {
                Some(join(&texts))
            };
            out.push(WireMessage::Assistant {
                content,
                tool_calls,
            });
        }
    }
}

pub(super) fn join<'a>(texts: &[&'a str]) -> Cow<'a, str> {
    match texts {
        [] => Cow::Borrowed(""),
        [one] => Cow::Borrowed(one),
        many => Cow::Owned(many.join("\n\n")),
    }
}

/// A tool message's text. Chat Completions has no `is_error` flag, so a failure says so in the
/// text unless it already does.
pub(super) fn tool_result_text(content: &str, is_error: bool) -> Cow<'_, str> {
    let says_error = content
        .trim_start()
        .get(..5)
        .is_some_and(|head| head.eq_ignore_ascii_case("error"));
    if is_error && !says_error {
        Cow::Owned(format!("Error: {content}"))
    } else {
        Cow::Borrowed(content)
    }
}

// ---- response wire types ----

#[derive(Deserialize)]
pub(super) struct WireResponse {
    #[serde(default)]
    pub(super) choices: Vec<WireChoice>,
    pub(super) usage: Option<WireUsage>,
    pub(super) model: Option<String>,
    /// Some proxies answer 200 with an error body.
    pub(super) error: Option<Value>,
}

#[derive(Deserialize)]
pub(super) struct WireChoice {
    pub(super) message: WireAnswerMessage,
    pub(super) finish_reason: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct WireAnswerMessage {
    pub(super) content: Option<WireText>,
    /// Set instead of `content` when the model declines (structured outputs).
    pub(super) refusal: Option<String>,
    pub(super) tool_calls: Option<Vec<WireAnswerToolCall>>,
}

/// `content` is a string on OpenAI; a few compatible servers send content parts.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum WireText {
    Text(String),
    Parts(Vec<WirePart>),
}

#[derive(Deserialize)]
pub(super) struct WirePart {
    pub(super) text: Option<String>,
}

impl WireText {
    pub(super) fn into_string(self) -> String {
        match self {
            Self::Text(text) => text,
            Self::Parts(parts) => parts.into_iter().filter_map(|p| p.text).collect(),
        }
    }
}

#[derive(Deserialize)]
pub(super) struct WireAnswerToolCall {
    pub(super) id: Option<String>,
    pub(super) function: WireAnswerFunction,
}

#[derive(Deserialize)]
pub(super) struct WireAnswerFunction {
    #[serde(default)]
    pub(super) name: String,
    /// A JSON string on OpenAI; some compatible servers send the object itself.
    pub(super) arguments: Option<Value>,
}

/// Usage as sent; every field may be absent or `null`.
#[derive(Deserialize)]
pub(super) struct WireUsage {
    pub(super) prompt_tokens: Option<u64>,
    pub(super) completion_tokens: Option<u64>,
    pub(super) prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Deserialize)]
pub(super) struct PromptTokensDetails {
    pub(super) cached_tokens: Option<u64>,
}

impl WireUsage {
    /// Cached prompt tokens are billed at the cache-read price, so they move out of
    /// `input_tokens` (OpenAI's `prompt_tokens` includes them).
    pub(super) fn to_usage(&self) -> Usage {
        let prompt = self.prompt_tokens.unwrap_or(0);
        let cached = self
            .prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens)
            .unwrap_or(0)
            .min(prompt);
        Usage {
            input_tokens: prompt - cached,
            output_tokens: self.completion_tokens.unwrap_or(0),
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: cached,
        }
    }

    pub(super) fn is_reported(&self) -> bool {
        self.prompt_tokens.is_some() || self.completion_tokens.is_some()
    }
}

/// Maps `finish_reason`. Ollama and some vLLM versions say `stop` next to tool calls; the
/// calls are what the caller must act on, so that counts as [`StopReason::ToolUse`].
pub(super) fn stop_reason(reason: Option<&str>, has_tool_calls: bool) -> StopReason {
    match reason {
        // `function_call` is the legacy name some servers still send.
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        Some("stop") if has_tool_calls => StopReason::ToolUse,
        Some("stop") => StopReason::EndTurn,
        Some("length") => StopReason::MaxTokens,
        _ => StopReason::Other,
    }
}

/// Tool-call arguments as the input object the agent validates (see the module docs for
/// `_raw`). No arguments at all mean `{}`.
pub(super) fn arguments_input(arguments: Option<Value>) -> Value {
    match arguments {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::String(text)) => arguments_from_text(text),
        Some(object @ Value::Object(_)) => object,
        Some(other) => raw_arguments(other.to_string()),
    }
}

/// Parses arguments sent as text; anything but a JSON object is kept under `_raw`.
pub(super) fn arguments_from_text(text: String) -> Value {
    if text.trim().is_empty() {
        return Value::Object(Map::new());
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(object @ Value::Object(_)) => object,
        _ => raw_arguments(text),
    }
}

pub(super) fn raw_arguments(text: String) -> Value {
    let mut map = Map::new();
    map.insert("_raw".to_owned(), Value::String(text));
    Value::Object(map)
}

/// An id for a tool call the server sent without one (some local servers), unique in the turn.
pub(super) fn fallback_call_id(position: usize) -> String {
    format!("call_{position}")
}

pub(super) fn parse_response(body: &str, requested_model: &str) -> Result<Answer, ModelError> {
    let wire: WireResponse = serde_json::from_str(body)
        .map_err(|e| bad_response(format!("{e}; body starts {:?}", quote(body))))?;
    let Some(choice) = wire.choices.into_iter().next() else {
        let why = match &wire.error {
            Some(error) => ErrorBody::from_value(error).describe(),
            None => format!("body starts {:?}", quote(body)),
        };
        return Err(bad_response(format!("the answer has no choices: {why}")));
    };
    let message = choice.message;
    let mut content = Vec::new();
    let text = message
        .content
        .map(WireText::into_string)
        .unwrap_or_default();
    let text = if text.is_empty() {
        message.refusal.unwrap_or_default()
    } else {
        text
    };
    if !text.is_empty() {
        content.push(Content::Text { text });
    }
    let calls = message.tool_calls.unwrap_or_default();
    let has_tool_calls = !calls.is_empty();
    for (position, call) in calls.into_iter().enumerate() {
        content.push(Content::ToolUse {
            id: call
                .id
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| fallback_call_id(position)),
            name: call.function.name,
            input: arguments_input(call.function.arguments),
        });
    }
    let has_usage = wire.usage.as_ref().is_some_and(WireUsage::is_reported);
    Ok(Answer {
        response: ModelResponse {
            content,
            stop_reason: stop_reason(choice.finish_reason.as_deref(), has_tool_calls),
            usage: wire
                .usage
                .as_ref()
                .map(WireUsage::to_usage)
                .unwrap_or_default(),
            model: wire
                .model
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| requested_model.to_owned()),
        },
        has_usage,
    })
}

pub(super) const PROVIDER: &str = "openai";

/// A parsed answer, and whether the server reported usage at all.
pub(super) struct Answer {
    pub(super) response: ModelResponse,
    pub(super) has_usage: bool,
}

/// An API error as the servers send it: OpenAI's `{"error": {"message", "type", "code"}}`, or
/// what compatible servers send instead (`{"error": "..."}`, FastAPI's `{"detail": ...}`,
/// vLLM's flat `{"object": "error", "message", "type", "code": 400}`).
#[derive(Debug, Default)]
pub(super) struct ErrorBody {
    pub(super) message: String,
    pub(super) kind: Option<String>,
    /// A textual code such as `model_not_found` or `insufficient_quota`.
    pub(super) code: Option<String>,
    /// A numeric code, which compatible servers use for the HTTP status.
    pub(super) status: Option<u16>,
}

impl ErrorBody {
    pub(super) fn parse(body: &str) -> Self {
        let Ok(value) = serde_json::from_str::<Value>(body) else {
            return Self {
                message: body.trim().to_owned(),
                ..Self::default()
            };
        };
        let mut error = Self::from_value(value.get("error").unwrap_or(&value));
        if error.message.is_empty() {
            error.message = body.trim().to_owned();
        }
        error
    }

    /// Reads the error object itself (the value of `error`, or a flat body).
    pub(super) fn from_value(value: &Value) -> Self {
        let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
        match value {
            Value::String(s) => Self {
                message: s.clone(),
                ..Self::default()
            },
            Value::Object(_) => {
                let message = text("message")
                    .or_else(|| {
                        value.get("detail").map(|d| match d {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                    })
                    .unwrap_or_default();
                let (code, status) = match value.get("code") {
                    Some(Value::String(s)) => (Some(s.clone()), None),
                    Some(Value::Number(n)) => {
                        (None, n.as_u64().and_then(|n| u16::try_from(n).ok()))
                    }
                    _ => (None, None),
                };
                Self {
                    message,
                    kind: text("type"),
                    code,
                    status,
                }
            }
            other => Self {
                message: other.to_string(),
                ..Self::default()
            },
        }
    }

    /// The message for humans, with the textual code when there is one.
    pub(super) fn describe(&self) -> String {
        let message = self.message.trim();
        let text = match (&self.code, message.is_empty()) {
            (_, true) => self
                .kind
                .clone()
                .unwrap_or_else(|| "(empty body)".to_owned()),
            (Some(code), false) if !message.contains(code.as_str()) => {
                format!("{message} (code: {code})")
            }
            _ => message.to_owned(),
        };
        quote(&text)
    }

    /// The HTTP status an error sent inside a 200 stream stands for, so it is classified like
    /// an HTTP error; an unknown kind counts as a server error (retried).
    pub(super) fn status_hint(&self) -> u16 {
        if let Some(status) = self.status.filter(|s| (400..=599).contains(s)) {
            return status;
        }
        let names = [self.code.as_deref(), self.kind.as_deref()];
        let has = |needle: &str| names.iter().flatten().any(|n| n.contains(needle));
        if has("rate_limit") || has("insufficient_quota") {
            429
        } else if has("invalid_api_key") || has("authentication") {
            401
        } else if has("permission") {
            403
        } else if has("not_found") {
            404
        } else if has("invalid_request") || has("context_length") {
            400
        } else {
            500
        }
    }
}

pub(super) fn bad_response(message: String) -> ModelError {
    ModelError::BadResponse {
        provider: PROVIDER,
        message,
    }
}
