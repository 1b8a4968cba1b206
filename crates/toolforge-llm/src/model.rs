//! The one model trait every provider implements, and the provider-neutral conversation types.
//!
//! The agent builds a [`ModelRequest`] (system prompt, tool list, messages, `max_tokens`) and gets
//! back a [`ModelResponse`] (content blocks, stop reason, [`Usage`]). The types follow the
//! Anthropic Messages shape (content blocks with `tool_use` / `tool_result`), which maps onto
//! OpenAI chat completions without loss for what the agent needs.

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool as a model sees it. `name` already matches `^[a-zA-Z0-9_-]{1,64}$`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

/// One block of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    Text {
        text: String,
    },
    /// The model asks for a tool call.
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    /// The result of a tool call, sent back in a user message.
    ToolResult {
        tool_use_id: String,
        content: String,
        #[serde(default)]
        is_error: bool,
    },
    /// A search the provider ran itself over the request's deferred tools (Anthropic's
    /// `server_tool_use` of its tool search tool), kept in the conversation as it came.
    ProviderSearch {
        id: String,
        name: String,
        input: Value,
    },
    /// What that search loaded (Anthropic's `tool_search_tool_result`): the deferred tools it
    /// found, by name, or its error code.
    ProviderSearchResult {
        tool_use_id: String,
        tool_names: Vec<String>,
        #[serde(default)]
        error: Option<String>,
    },
}

/// A provider's own search over deferred tool definitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderToolSearch {
    /// The model searches with natural-language queries, ranked by BM25.
    Bm25,
    /// The model searches with regular expressions.
    Regex,
    /// The provider picks how (OpenAI's hosted `tool_search`); Anthropic takes it as BM25.
    Hosted,
}

impl Content {
    #[must_use]
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: Vec<Content>,
}

impl Message {
    /// A user message with one text block.
    #[must_use]
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: vec![Content::text(text)],
        }
    }
}

/// What the agent asks a model.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelRequest {
    pub system: String,
    /// Tools in a stable order (the cached prompt prefix depends on it).
    pub tools: Vec<ToolSpec>,
    pub messages: Vec<Message>,
    /// Upper bound on output tokens; the cost guard clamps it before every call.
    pub max_tokens: u32,
    /// Place prompt-cache breakpoints after the tools and after the system prompt (providers
    /// that cache implicitly ignore it).
    pub cache: bool,
    /// The first `stable_tools` tools are the same, in the same order, on every call of a run
    /// (the first offer); the tools after them joined later (found by a search). A provider
    /// that places breakpoints keeps one after them too, so the prefix the first call cached
    /// is still read once tools have joined. 0 (or all the tools): nothing joined.
    pub stable_tools: usize,
    /// Tools for the provider's own tool search to find ([`Model::tool_search`]): sent deferred
    /// (not in the prompt, billed only once a search loads them). Empty for other providers.
    pub deferred_tools: Vec<ToolSpec>,
}

/// Token usage of one response, as the provider billed it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Usage {
    /// Input tokens billed at the uncached price.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens written to the prompt cache (billed at the cache-write price).
    pub cache_creation_input_tokens: u64,
    /// Input tokens read from the prompt cache (billed at the cache-read price).
    pub cache_read_input_tokens: u64,
}

impl Usage {
    /// Every input token, however billed.
    #[must_use]
    pub fn total_input(&self) -> u64 {
        self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens
    }

    /// Adds `other` to `self`.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_creation_input_tokens += other.cache_creation_input_tokens;
        self.cache_read_input_tokens += other.cache_read_input_tokens;
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    /// The provider paused a long turn of its own tools (Anthropic's `pause_turn`): send the
    /// answer back as it is to let it go on.
    PauseTurn,
    Other,
}

/// A model's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelResponse {
    pub content: Vec<Content>,
    pub stop_reason: StopReason,
    pub usage: Usage,
    /// The model that answered, as the provider reports it.
    pub model: String,
}

impl ModelResponse {
    /// The text blocks joined.
    #[must_use]
    pub fn text(&self) -> String {
        let parts: Vec<&str> = self
            .content
            .iter()
            .filter_map(|c| match c {
                Content::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        parts.join("")
    }

    /// The tool calls asked for, in order: `(id, name, input)`.
    #[must_use]
    pub fn tool_uses(&self) -> Vec<(&str, &str, &Value)> {
        self.content
            .iter()
            .filter_map(|c| match c {
                Content::ToolUse { id, name, input } => Some((id.as_str(), name.as_str(), input)),
                _ => None,
            })
            .collect()
    }
}

/// Why a model call failed.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{provider}: missing API key: set {env}")]
    MissingKey {
        provider: &'static str,
        env: &'static str,
    },
    #[error("{provider} rejected the credentials (HTTP {status}): {message}")]
    Auth {
        provider: &'static str,
        status: u16,
        message: String,
    },
    #[error(
        "{provider} is overloaded or rate limiting (HTTP {status}) after {attempts} attempts: {message}"
    )]
    Overloaded {
        provider: &'static str,
        status: u16,
        attempts: u32,
        message: String,
    },
    #[error("{provider} answered HTTP {status}: {message}")]
    Http {
        provider: &'static str,
        status: u16,
        message: String,
    },
    #[error("{provider} sent an unreadable answer: {message}")]
    BadResponse {
        provider: &'static str,
        message: String,
    },
    #[error("{provider}: request failed: {message}")]
    Transport {
        provider: &'static str,
        message: String,
    },
}

/// A model provider.
pub trait Model: Send + Sync {
    /// Provider name: `anthropic`, `openai` or `mock`.
    fn provider(&self) -> &'static str;

    /// The model id sent to the provider (and the key into the price table).
    fn model(&self) -> &str;

    /// Asks the model for its next turn.
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>>;

    /// The most input tokens `request` can be billed, found before the call: the cost guard
    /// sizes the call with it. The default is [`input_token_upper_bound`]; a provider that can
    /// count tokens overrides it with [`counted_bound`]. Never fails: a count that cannot be had
    /// falls back to the byte bound.
    fn input_bound<'a>(&'a self, request: &'a ModelRequest) -> BoxFuture<'a, InputBound> {
        Box::pin(std::future::ready(InputBound::upper(request)))
    }

    /// The provider's own tool search, when it runs one (opt-in per provider): the agent then
    /// sends the tools its first offer leaves out as [`ModelRequest::deferred_tools`] instead
    /// of offering its own search tool.
    fn tool_search(&self) -> Option<ProviderToolSearch> {
        None
    }
}

/// Input tokens the provider adds to every request beyond the text sent (role markers, the
/// tool-use system prompt, formatting): Anthropic documents 313–346 tokens of tool-use system
/// prompt for its current models; OpenAI a few tokens per message. Part of
/// [`input_token_upper_bound`].
pub const REQUEST_OVERHEAD_TOKENS: u64 = 1024;
/// Framing tokens per message, for [`input_token_upper_bound`].
pub const MESSAGE_OVERHEAD_TOKENS: u64 = 16;
/// Framing tokens per tool definition, for [`input_token_upper_bound`].
pub const TOOL_OVERHEAD_TOKENS: u64 = 32;

/// The most input tokens `request` can be billed, whatever the tokenizer: every byte of text a
/// token (a byte-level BPE token never covers less than one byte) plus
/// [`REQUEST_OVERHEAD_TOKENS`], [`MESSAGE_OVERHEAD_TOKENS`] per message and
/// [`TOOL_OVERHEAD_TOKENS`] per tool.
#[must_use]
pub fn input_token_upper_bound(request: &ModelRequest) -> u64 {
    let bytes = input_bytes(request) as u64;
    bytes
        + REQUEST_OVERHEAD_TOKENS
        + MESSAGE_OVERHEAD_TOKENS * request.messages.len() as u64
        + TOOL_OVERHEAD_TOKENS * request.tools.len() as u64
        + deferred_load_bound(request)
}

/// The most input deferred tools can add to one call: a provider bills a deferred definition
/// wherever a search loaded it (each reference in the conversation), and a search in this
/// very call may load any of them (no provider documents how many one call may load), so every
/// deferred definition counts once more, with its framing. 0 without deferred tools.
#[must_use]
pub fn deferred_load_bound(request: &ModelRequest) -> u64 {
    if request.deferred_tools.is_empty() {
        return 0;
    }
    let size = |t: &ToolSpec| {
        (t.name.len() + t.description.len() + t.input_schema.to_string().len()) as u64
            + TOOL_OVERHEAD_TOKENS
    };
    let now: u64 = request.deferred_tools.iter().map(size).sum();
    let loaded: u64 = request
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|c| match c {
            Content::ProviderSearchResult { tool_names, .. } => Some(tool_names),
            _ => None,
        })
        .flatten()
        .filter_map(|name| request.deferred_tools.iter().find(|t| &t.name == name))
        .map(size)
        .sum();
    now + loaded
}

/// Bytes of the text a request sends: system prompt, tool definitions (schemas as JSON) and
/// every content block.
fn input_bytes(request: &ModelRequest) -> usize {
    let mut bytes = request.system.len();
    for t in &request.tools {
        bytes += t.name.len() + t.description.len() + t.input_schema.to_string().len();
    }
    for m in &request.messages {
        for c in &m.content {
            bytes += match c {
                Content::Text { text } => text.len(),
                Content::ToolUse { id, name, input } => {
                    id.len() + name.len() + input.to_string().len()
                }
                Content::ToolResult {
                    tool_use_id,
                    content,
                    ..
                } => tool_use_id.len() + content.len(),
                Content::ProviderSearch { id, name, input } => {
                    id.len() + name.len() + input.to_string().len()
                }
                Content::ProviderSearchResult {
                    tool_use_id,
                    tool_names,
                    error,
                } => {
                    tool_use_id.len()
                        + tool_names.iter().map(|n| n.len() + 32).sum::<usize>()
                        + error.as_ref().map_or(0, String::len)
                }
            };
        }
    }
    bytes
}

/// How a bound on a request's input tokens was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BoundSource {
    /// Counted by the provider or by the model family's own tokenizer (plus a small margin).
    Counted,
    /// [`input_token_upper_bound`]: no count was available.
    Bytes,
}

/// A bound on the input tokens one request can be billed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputBound {
    pub tokens: u64,
    pub source: BoundSource,
}

/// The margin added to a provider's count (Anthropic calls its count an estimate that may
/// differ by a small amount): 2 % plus 16 tokens, never above the byte bound unless the count
/// itself is: a provider that counts more tokens than the request has bytes will bill them, and
/// the larger figure bounds the call.
#[must_use]
pub fn counted_bound(request: &ModelRequest, counted: u64) -> InputBound {
    let upper = input_token_upper_bound(request);
    // A count is of the request as sent; what a search may load during the call comes on top.
    let padded = counted
        .saturating_add(counted / 50)
        .saturating_add(16)
        .saturating_add(deferred_load_bound(request));
    if counted > upper {
        return InputBound {
            tokens: padded,
            source: BoundSource::Counted,
        };
    }
    if padded >= upper {
        InputBound::upper(request)
    } else {
        InputBound {
            tokens: padded,
            source: BoundSource::Counted,
        }
    }
}

impl InputBound {
    /// [`input_token_upper_bound`] of `request`.
    #[must_use]
    pub fn upper(request: &ModelRequest) -> Self {
        Self {
            tokens: input_token_upper_bound(request),
            source: BoundSource::Bytes,
        }
    }
}

/// A typical count of the input tokens `request` costs: one token per three bytes of the
/// serialised system prompt, tools and messages, plus a fixed overhead per message and per tool.
/// Real tokenizers average about four bytes per token on English and JSON. The mock bills this;
/// the cost guard never relies on it (see [`input_token_upper_bound`]).
#[must_use]
pub fn estimate_input_tokens(request: &ModelRequest) -> u64 {
    let bytes = input_bytes(request);
    let overhead = 8 * request.messages.len() + 16 * request.tools.len() + 16;
    (bytes as u64).div_ceil(3) + overhead as u64
}
