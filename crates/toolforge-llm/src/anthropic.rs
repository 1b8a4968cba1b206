//! The Anthropic Messages API provider (`POST /v1/messages`), plain JSON or streamed over SSE.
//!
//! The provider-neutral types in [`crate::model`] already follow the Messages shape, so the wire
//! types here are thin borrowed mirrors of them; nothing is translated except what the API
//! insists on (`system` as a block array so it can carry `cache_control`, `is_error` left out
//! when false).
//!
//! Prompt caching uses two explicit breakpoints when [`ModelRequest::cache`] is set: one on the
//! last tool (caches the tool list) and one on the system block (caches tools + system). The
//! messages are never marked: they change every turn, and a breakpoint there would pay the
//! cache-write price for a prefix that is never read back.
//!
//! Before a call the cost guard may ask for the request's input tokens: they are counted by
//! `POST /v1/messages/count_tokens` (free of charge) on the same body without `max_tokens`, and
//! padded by [`crate::model::counted_bound`]'s small margin. A count that fails falls back to
//! the byte bound ([`crate::model::input_token_upper_bound`]); it is never retried.
//!
//! Streaming assembles the same [`ModelResponse`] as the plain call. It exists because a long
//! generation over a plain request can sit silent for minutes and be cut by proxies; with SSE
//! the API sends `ping`s, so [`AnthropicConfig::timeout`] can bound the silence between chunks
//! rather than the whole generation.
//!
//! Retries follow the one policy of `toolforge-retry`: overload (529, an `overloaded_error`
//! event mid-stream), 5xx gateway errors and network failures are retried, 3 attempts with
//! full-jitter waits from 500 ms, all within `timeout` of the call's start; a rate limit (429)
//! only when its `retry-after` fits that deadline. The whole response is assembled before it
//! is returned, so a retry can never duplicate output the caller has already seen.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use eventsource_stream::{EventStreamError, Eventsource};
use futures::StreamExt;
use futures::future::BoxFuture;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolforge_retry::{Attempted, Decision, Failure as RetryFailure, RetryPolicy, SystemJitter};
use tracing::warn;

use crate::model::{
    Content, Message, Model, ModelError, ModelRequest, ModelResponse, Role, StopReason, ToolSpec,
    Usage,
};

/// Anthropic's public endpoint (`/v1/messages` is appended).
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// The model used when none is configured.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-6";

/// The `anthropic-version` header every request carries.
pub const API_VERSION: &str = "2023-06-01";

const PROVIDER: &str = "anthropic";
const KEY_ENV: &str = "ANTHROPIC_API_KEY";

/// Longest API error text quoted in an error message.
const MAX_QUOTED: usize = 300;

/// Typed config for [`AnthropicModel`] (the binary fills it from flags and env, e.g.
/// `ANTHROPIC_API_KEY` and `ANTHROPIC_BASE_URL`).
#[derive(Clone)]
pub struct AnthropicConfig {
    pub api_key: String,
    /// Base URL without the version path, e.g. [`DEFAULT_BASE_URL`]; a trailing slash is fine.
    pub base_url: String,
    pub model: String,
    /// Ask for an SSE stream (`"stream": true`) instead of one JSON body.
    pub stream: bool,
    /// Attempts in all (the first call included) for retryable failures; 0 counts as 1.
    pub max_attempts: u32,
    /// The retry policy's backoff base (full jitter, doubling); every wait, and every attempt
    /// of a plain call, ends within `timeout` of the call's start.
    pub retry_base: Duration,
    /// Connect timeout and longest silence while reading; for plain (non-streamed) calls also
    /// the bound on the whole call.
    pub timeout: Duration,
}

impl Default for AnthropicConfig {
    /// Everything but the key: [`DEFAULT_BASE_URL`], [`DEFAULT_MODEL`], no streaming, 3
    /// attempts with retries from 500 ms, 120 s timeout.
    fn default() -> Self {
        Self {
            api_key: String::new(),
            base_url: DEFAULT_BASE_URL.to_owned(),
            model: DEFAULT_MODEL.to_owned(),
            stream: false,
            max_attempts: RetryPolicy::default().max_attempts,
            retry_base: RetryPolicy::default().base,
            timeout: Duration::from_secs(120),
        }
    }
}

impl fmt::Debug for AnthropicConfig {
    // Hand-written so the key never reaches a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("api_key", &"<redacted>")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("stream", &self.stream)
            .field("max_attempts", &self.max_attempts)
            .field("retry_base", &self.retry_base)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// A [`Model`] backed by the Anthropic Messages API.
#[derive(Debug, Clone)]
pub struct AnthropicModel {
    config: AnthropicConfig,
    client: reqwest::Client,
    url: String,
}

impl AnthropicModel {
    /// Builds the client. Fails with [`ModelError::MissingKey`] when the key is empty, and with
    /// [`ModelError::Transport`] when the key cannot go in a header or the HTTP client cannot be
    /// created.
    pub fn new(config: AnthropicConfig) -> Result<Self, ModelError> {
        let key = config.api_key.trim();
        if key.is_empty() {
            return Err(ModelError::MissingKey {
                provider: PROVIDER,
                env: KEY_ENV,
            });
        }
        let mut key = HeaderValue::from_str(key).map_err(|_| ModelError::Transport {
            provider: PROVIDER,
            message: format!(
                "the API key contains characters an HTTP header cannot carry; check {KEY_ENV}"
            ),
        })?;
        key.set_sensitive(true);
        let mut headers = HeaderMap::new();
        headers.insert("x-api-key", key);
        headers.insert("anthropic-version", HeaderValue::from_static(API_VERSION));
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(config.timeout)
            .read_timeout(config.timeout)
            .build()
            .map_err(|e| ModelError::Transport {
                provider: PROVIDER,
                message: format!("cannot build the HTTP client: {}", error_chain(&e)),
            })?;
        let url = format!("{}/v1/messages", config.base_url.trim_end_matches('/'));
        Ok(Self {
            config,
            client,
            url,
        })
    }

    /// The request body, serialised once and re-sent as is on every attempt.
    fn encode(&self, request: &ModelRequest) -> Result<Vec<u8>, ModelError> {
        let body = wire_request(&self.config.model, request, self.config.stream);
        serde_json::to_vec(&body).map_err(|e| ModelError::Transport {
            provider: PROVIDER,
            message: format!("cannot encode the request: {e}"),
        })
    }

    /// One HTTP exchange, classified into success, a failure worth retrying, or a final one.
    async fn attempt(&self, body: &[u8], limit: Duration) -> Result<ModelResponse, Failure> {
        let mut req = self
            .client
            .post(&self.url)
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_vec());
        if !self.config.stream {
            req = req.timeout(limit);
        }
        let resp = req.send().await.map_err(|e| self.transport(&e))?;
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            let retry_after = retry_after(resp.headers());
            // The status already says what failed; an unreadable error body only loses detail.
            let text = resp.text().await.unwrap_or_default();
            return Err(self.classify(status, api_message(&text), retry_after));
        }
        let is_sse = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if is_sse {
            return self.read_stream(resp).await;
        }
        // A JSON body even when a stream was asked for (some proxies buffer): parse it as such.
        let text = resp.text().await.map_err(|e| self.transport(&e))?;
        parse_response(&text, &self.config.model).map_err(Failure::fatal)
    }

    async fn read_stream(&self, resp: reqwest::Response) -> Result<ModelResponse, Failure> {
        let mut events = resp.bytes_stream().eventsource();
        let mut assembler = Assembler::new(&self.config.model);
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(event) => event,
                Err(EventStreamError::Transport(e)) => return Err(self.transport(&e)),
                Err(e) => return Err(Failure::fatal(bad_response(format!("invalid SSE: {e}")))),
            };
            if event.data.trim().is_empty() {
                continue;
            }
            let parsed: StreamEvent = serde_json::from_str(&event.data).map_err(|e| {
                Failure::fatal(bad_response(format!(
                    "SSE event {:?}: {e}; data starts {:?}",
                    event.event,
                    quote(&event.data)
                )))
            })?;
            match assembler.apply(parsed) {
                Ok(Flow::Continue) => {}
                Ok(Flow::Stop) => return assembler.finish().map_err(Failure::fatal),
                Err(StreamFailure::Api { kind, message }) => {
                    return Err(self.classify(stream_error_status(&kind), message, None));
                }
                Err(StreamFailure::Bad(e)) => return Err(Failure::fatal(e)),
            }
        }
        // The connection closed before `message_stop`: the answer is incomplete, try again.
        Err(Failure {
            error: ModelError::Transport {
                provider: PROVIDER,
                message: format!("{}: the stream ended before message_stop", self.url),
            },
            kind: RetryFailure::Network,
        })
    }

    fn transport(&self, e: &reqwest::Error) -> Failure {
        let hint = if e.is_timeout() {
            format!(" (timed out after {:?})", self.config.timeout)
        } else {
            String::new()
        };
        Failure {
            error: ModelError::Transport {
                provider: PROVIDER,
                message: format!("POST {}: {}{hint}", self.url, error_chain(e)),
            },
            kind: transport_kind(e),
        }
    }

    fn classify(&self, status: u16, message: String, retry_after: Option<Duration>) -> Failure {
        match status {
            401 | 403 => Failure::fatal(ModelError::Auth {
                provider: PROVIDER,
                status,
                message: format!("{message} (check {KEY_ENV})"),
            }),
            429 | 529 => Failure {
                error: ModelError::Overloaded {
                    provider: PROVIDER,
                    status,
                    attempts: 0,
                    message,
                },
                kind: RetryFailure::Status {
                    status,
                    retry_after,
                },
            },
            500 | 502 | 503 | 504 => Failure {
                error: ModelError::Http {
                    provider: PROVIDER,
                    status,
                    message,
                },
                kind: RetryFailure::Status {
                    status,
                    retry_after,
                },
            },
            404 => Failure::fatal(ModelError::Http {
                provider: PROVIDER,
                status,
                message: format!(
                    "{message} (check the model id {:?} and the base URL {:?})",
                    self.config.model, self.config.base_url
                ),
            }),
            _ => Failure::fatal(ModelError::Http {
                provider: PROVIDER,
                status,
                message,
            }),
        }
    }
}

impl Model for AnthropicModel {
    fn provider(&self) -> &'static str {
        PROVIDER
    }

    fn model(&self) -> &str {
        &self.config.model
    }

    fn input_bound<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, crate::model::InputBound> {
        Box::pin(async move {
            match self.count_tokens(request).await {
                Ok(counted) => crate::model::counted_bound(request, counted),
                Err(e) => {
                    warn!("counting input tokens failed ({e}); bounding them by bytes instead");
                    crate::model::InputBound::upper(request)
                }
            }
        })
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            let body = self.encode(request)?;
            let policy = RetryPolicy {
                max_attempts: self.config.max_attempts,
                base: self.config.retry_base,
            };
            // One deadline for every attempt and wait: `timeout` from the call's start.
            let deadline = Instant::now() + self.config.timeout;
            let mut attempt = 1;
            loop {
                let limit = deadline.saturating_duration_since(Instant::now());
                let Failure { error, kind } = match self.attempt(&body, limit).await {
                    Ok(response) => return Ok(response),
                    Err(failure) => failure,
                };
                let call = Attempted {
                    attempts: attempt,
                    idempotent: true, // a completion has no effect beyond its answer
                    now: Instant::now(),
                    deadline,
                };
                let wait = match policy.decide(kind, call, &mut SystemJitter) {
                    Decision::Retry { after } => after,
                    Decision::GiveUp(why) => {
                        tracing::debug!(provider = PROVIDER, attempt, "not retried: {why}");
                        return Err(gave_up(error, attempt));
                    }
                };
                warn!(
                    provider = PROVIDER,
                    attempt,
                    max_attempts = policy.max_attempts,
                    wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                    error = %error,
                    "Model call failed; retrying."
                );
                tokio::time::sleep(wait).await;
                attempt += 1;
            }
        })
    }
}

/// What one attempt ended with, when it did not succeed: the error, and what it means to the
/// retry policy of `toolforge-retry`.
struct Failure {
    error: ModelError,
    kind: RetryFailure,
}

impl Failure {
    /// A failure that sending the same request again would not change.
    fn fatal(error: ModelError) -> Self {
        Self {
            error,
            kind: RetryFailure::Rejected,
        }
    }
}

/// A request that failed in transport: only a refused connection proves it never left.
fn transport_kind(e: &reqwest::Error) -> RetryFailure {
    if e.is_connect() {
        RetryFailure::NotSent
    } else if e.is_timeout() {
        RetryFailure::Timeout
    } else {
        RetryFailure::Network
    }
}

/// The error returned once the attempts are used up, saying how many there were.
fn gave_up(error: ModelError, attempts: u32) -> ModelError {
    match error {
        ModelError::Overloaded {
            provider,
            status,
            message,
            ..
        } => ModelError::Overloaded {
            provider,
            status,
            attempts,
            message,
        },
        ModelError::Http {
            provider,
            status,
            message,
        } if attempts > 1 => ModelError::Http {
            provider,
            status,
            message: format!("{message} (gave up after {attempts} attempts)"),
        },
        ModelError::Transport { provider, message } if attempts > 1 => ModelError::Transport {
            provider,
            message: format!("{message} (gave up after {attempts} attempts)"),
        },
        other => other,
    }
}

/// The `retry-after` header in seconds (Anthropic sends whole seconds; fractions are accepted).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = headers.get(RETRY_AFTER)?.to_str().ok()?;
    let secs: f64 = text.trim().parse().ok()?;
    Duration::try_from_secs_f64(secs).ok()
}

/// The status a mid-stream `error` event stands for, so it is classified like an HTTP error.
fn stream_error_status(kind: &str) -> u16 {
    match kind {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "billing_error" => 402,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "timeout_error" => 504,
        "overloaded_error" => 529,
        // `api_error` and anything new: an internal error, retried.
        _ => 500,
    }
}

/// The API's `{"type":"error","error":{"type","message"}}` as `type: message`, else the body.
fn api_message(body: &str) -> String {
    let parsed = serde_json::from_str::<ApiErrorEnvelope>(body).ok();
    let text = match parsed {
        Some(ApiErrorEnvelope { error }) => match (error.kind, error.message) {
            (Some(kind), Some(message)) => format!("{kind}: {message}"),
            (None, Some(message)) => message,
            (Some(kind), None) => kind,
            (None, None) => body.trim().to_owned(),
        },
        None => body.trim().to_owned(),
    };
    if text.is_empty() {
        return "(empty body)".to_owned();
    }
    quote(&text)
}

fn quote(text: &str) -> String {
    text.chars().take(MAX_QUOTED).collect()
}

fn bad_response(message: String) -> ModelError {
    ModelError::BadResponse {
        provider: PROVIDER,
        message,
    }
}

/// The error and its sources: reqwest's own text ("error sending request") hides the cause
/// ("connection refused") one level down.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

// ---- token counting ----

impl AnthropicModel {
    /// `POST /v1/messages/count_tokens`: the input tokens `request` would be billed.
    async fn count_tokens(&self, request: &ModelRequest) -> Result<u64, ModelError> {
        let url = format!(
            "{}/v1/messages/count_tokens",
            self.config.base_url.trim_end_matches('/')
        );
        let full = wire_request(&self.config.model, request, false);
        let body = WireCountRequest {
            model: full.model,
            system: full.system,
            tools: full.tools,
            messages: full.messages,
        };
        let failed = |message: String| ModelError::Transport {
            provider: PROVIDER,
            message: format!("POST {url}: {message}"),
        };
        let resp = self
            .client
            .post(&url)
            .json(&body)
            .timeout(self.config.timeout)
            .send()
            .await
            .map_err(|e| failed(error_chain(&e)))?;
        let status = resp.status().as_u16();
        let text = resp.text().await.map_err(|e| failed(error_chain(&e)))?;
        if !(200..300).contains(&status) {
            return Err(ModelError::Http {
                provider: PROVIDER,
                status,
                message: api_message(&text),
            });
        }
        let counted: WireCount = serde_json::from_str(&text).map_err(|e| {
            bad_response(format!(
                "the token count is not {{\"input_tokens\": <number>}} ({e}): {}",
                quote(&text)
            ))
        })?;
        Ok(counted.input_tokens)
    }
}

/// The body of `count_tokens`: a Messages request without `max_tokens` and `stream`.
#[derive(Serialize)]
struct WireCountRequest<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<WireSystem<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    messages: Vec<WireMessage<'a>>,
}

#[derive(Deserialize)]
struct WireCount {
    input_tokens: u64,
}

// ---- request wire types ----

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<WireSystem<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
}

#[derive(Serialize)]
struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
}

const EPHEMERAL: CacheControl = CacheControl { kind: "ephemeral" };

#[derive(Serialize)]
struct WireSystem<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: Role,
    content: Vec<WireBlock<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock<'a> {
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
}

fn wire_request<'a>(model: &'a str, request: &'a ModelRequest, stream: bool) -> WireRequest<'a> {
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
    let tools = request
        .tools
        .iter()
        .enumerate()
        .map(|(i, t): (usize, &ToolSpec)| WireTool {
            name: &t.name,
            description: &t.description,
            input_schema: &t.input_schema,
            cache_control: if i == last { cache() } else { None },
        })
        .collect();
    WireRequest {
        model,
        max_tokens: request.max_tokens,
        system,
        tools,
        messages: request.messages.iter().map(wire_message).collect(),
        stream,
    }
}

fn wire_message(message: &Message) -> WireMessage<'_> {
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
        })
        .collect();
    WireMessage {
        role: message.role,
        content,
    }
}

// ---- response wire types ----

#[derive(Deserialize)]
struct ApiErrorEnvelope {
    error: ApiError,
}

#[derive(Deserialize)]
struct ApiError {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<String>,
}

#[derive(Deserialize)]
struct WireResponse {
    #[serde(default)]
    content: Vec<WireContent>,
    stop_reason: Option<String>,
    #[serde(default)]
    usage: WireUsage,
    #[serde(default)]
    model: String,
}

/// A content block of an answer; kinds the agent does not use (thinking, server tools) are
/// skipped.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireContent {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    #[serde(other)]
    Other,
}

/// Usage as sent; every field may be absent or `null`.
#[derive(Deserialize, Default)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// Overwrites the fields present: `message_delta` counts are cumulative, not increments.
    fn apply_to(&self, usage: &mut Usage) {
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

fn stop_reason(reason: Option<&str>) -> StopReason {
    match reason {
        Some("end_turn") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        _ => StopReason::Other,
    }
}

fn parse_response(body: &str, requested_model: &str) -> Result<ModelResponse, ModelError> {
    let wire: WireResponse = serde_json::from_str(body)
        .map_err(|e| bad_response(format!("{e}; body starts {:?}", quote(body))))?;
    let content = wire
        .content
        .into_iter()
        .filter_map(|c| match c {
            WireContent::Text { text } => Some(Content::Text { text }),
            WireContent::ToolUse { id, name, input } => Some(Content::ToolUse { id, name, input }),
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

// ---- streaming ----

/// One SSE event's `data`, tagged by its `type` (the same name as the SSE `event:` line).
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StreamEvent {
    MessageStart {
        message: StreamStart,
    },
    ContentBlockStart {
        index: usize,
        content_block: StartBlock,
    },
    ContentBlockDelta {
        index: usize,
        delta: Delta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: MessageDelta,
        #[serde(default)]
        usage: WireUsage,
    },
    MessageStop,
    Ping,
    Error {
        error: ApiError,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct StreamStart {
    #[serde(default)]
    model: String,
    #[serde(default)]
    usage: WireUsage,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StartBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Delta {
    #[serde(rename = "text_delta")]
    Text { text: String },
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: String },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct MessageDelta {
    stop_reason: Option<String>,
}

/// A content block while it streams in.
enum Block {
    Text(String),
    /// The input JSON accumulates as text; it is parsed once the block stops.
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
    Finished(Content),
    /// A kind the agent does not use (thinking, ...): its deltas are dropped.
    Skipped,
}

enum Flow {
    Continue,
    Stop,
}

enum StreamFailure {
    /// An `error` event: `kind` is the API's error type.
    Api {
        kind: String,
        message: String,
    },
    Bad(ModelError),
}

/// Folds stream events into a [`ModelResponse`].
struct Assembler {
    model: String,
    usage: Usage,
    stop_reason: Option<String>,
    blocks: BTreeMap<usize, Block>,
}

impl Assembler {
    fn new(requested_model: &str) -> Self {
        Self {
            model: requested_model.to_owned(),
            usage: Usage::default(),
            stop_reason: None,
            blocks: BTreeMap::new(),
        }
    }

    fn apply(&mut self, event: StreamEvent) -> Result<Flow, StreamFailure> {
        match event {
            StreamEvent::MessageStart { message } => {
                if !message.model.is_empty() {
                    self.model = message.model;
                }
                message.usage.apply_to(&mut self.usage);
            }
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                let block = match content_block {
                    StartBlock::Text { text } => Block::Text(text),
                    StartBlock::ToolUse { id, name } => Block::ToolUse {
                        id,
                        name,
                        json: String::new(),
                    },
                    StartBlock::Other => Block::Skipped,
                };
                self.blocks.insert(index, block);
            }
            StreamEvent::ContentBlockDelta { index, delta } => {
                let block = self.blocks.get_mut(&index).ok_or_else(|| {
                    bad(format!(
                        "content_block_delta for block {index} before its start"
                    ))
                })?;
                match (block, delta) {
                    (Block::Text(text), Delta::Text { text: more }) => text.push_str(&more),
                    (Block::ToolUse { json, .. }, Delta::InputJson { partial_json }) => {
                        json.push_str(&partial_json);
                    }
                    (Block::Skipped, _) | (_, Delta::Other) => {}
                    (Block::Finished(_), _) => {
                        return Err(bad(format!(
                            "content_block_delta for stopped block {index}"
                        )));
                    }
                    _ => {
                        return Err(bad(format!(
                            "content_block_delta of the wrong kind for block {index}"
                        )));
                    }
                }
            }
            StreamEvent::ContentBlockStop { index } => {
                let block = self.blocks.remove(&index).ok_or_else(|| {
                    bad(format!(
                        "content_block_stop for block {index} before its start"
                    ))
                })?;
                self.blocks.insert(index, finish_block(block)?);
            }
            StreamEvent::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                usage.apply_to(&mut self.usage);
            }
            StreamEvent::MessageStop => return Ok(Flow::Stop),
            StreamEvent::Ping | StreamEvent::Unknown => {}
            StreamEvent::Error { error } => {
                return Err(StreamFailure::Api {
                    kind: error.kind.unwrap_or_default(),
                    message: quote(&error.message.unwrap_or_default()),
                });
            }
        }
        Ok(Flow::Continue)
    }

    fn finish(self) -> Result<ModelResponse, ModelError> {
        let mut content = Vec::with_capacity(self.blocks.len());
        for block in self.blocks.into_values() {
            match finish_block(block) {
                Ok(Block::Finished(c)) => content.push(c),
                Ok(_) => {}
                Err(StreamFailure::Bad(e)) => return Err(e),
                Err(StreamFailure::Api { message, .. }) => return Err(bad_response(message)),
            }
        }
        Ok(ModelResponse {
            content,
            stop_reason: stop_reason(self.stop_reason.as_deref()),
            usage: self.usage,
            model: self.model,
        })
    }
}

fn bad(message: String) -> StreamFailure {
    StreamFailure::Bad(bad_response(message))
}

/// Turns a streamed block into its final content; tool input JSON is parsed here (an empty
/// input streams as no text at all and means `{}`).
fn finish_block(block: Block) -> Result<Block, StreamFailure> {
    Ok(match block {
        Block::Text(text) => Block::Finished(Content::Text { text }),
        Block::ToolUse { id, name, json } => {
            let input = if json.trim().is_empty() {
                Value::Object(serde_json::Map::new())
            } else {
                serde_json::from_str(&json).map_err(|e| {
                    bad(format!(
                        "tool_use {id} ({name}) input is not JSON: {e}; it starts {:?}",
                        quote(&json)
                    ))
                })?
            };
            Block::Finished(Content::ToolUse { id, name, input })
        }
        other => other,
    })
}

#[cfg(test)]
mod tests {

    use serde_json::{Value, json};
    use wiremock::matchers::{header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;

    fn config(server: &MockServer) -> AnthropicConfig {
        let _ = rustls::crypto::ring::default_provider().install_default();
        AnthropicConfig {
            api_key: "sk-ant-test".into(),
            // A trailing slash must not produce `//v1/messages`.
            base_url: format!("{}/", server.uri()),
            retry_base: Duration::from_millis(5),
            ..AnthropicConfig::default()
        }
    }

    fn model(config: AnthropicConfig) -> AnthropicModel {
        AnthropicModel::new(config).unwrap()
    }

    fn weather_tool() -> ToolSpec {
        ToolSpec {
            name: "get_weather".into(),
            description: "Get the current weather in a given location".into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "location": {"type": "string", "description": "The city and state"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}
                },
                "required": ["location"]
            }),
        }
    }

    fn time_tool() -> ToolSpec {
        ToolSpec {
            name: "get_time".into(),
            description: "Get the current time in a given time zone".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"timezone": {"type": "string"}},
                "required": ["timezone"]
            }),
        }
    }

    fn request(cache: bool) -> ModelRequest {
        ModelRequest {
            system: "You are a terse assistant.".into(),
            tools: vec![weather_tool(), time_tool()],
            messages: vec![Message::user("What is the weather in Paris?")],
            max_tokens: 1024,
            cache,
        }
    }

    /// A real `POST /v1/messages` answer asking for one tool call, with cache usage.
    fn tool_use_answer() -> Value {
        json!({
            "id": "msg_01Aq9w938a90dw8q",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": [
                {"type": "text", "text": "I'll check the current weather in Paris."},
                {
                    "type": "tool_use",
                    "id": "toolu_01A09q90qw90lq917835lq9",
                    "name": "get_weather",
                    "input": {"location": "Paris, France", "unit": "celsius"}
                }
            ],
            "stop_reason": "tool_use",
            "stop_sequence": null,
            "usage": {
                "input_tokens": 21,
                "cache_creation_input_tokens": 1830,
                "cache_read_input_tokens": 0,
                "cache_creation": {"ephemeral_5m_input_tokens": 1830, "ephemeral_1h_input_tokens": 0},
                "output_tokens": 73,
                "service_tier": "standard"
            }
        })
    }

    fn end_turn_answer(text: &str) -> Value {
        json!({
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": null,
            "usage": {"input_tokens": 12, "output_tokens": 6}
        })
    }

    fn overloaded_body() -> Value {
        json!({
            "type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"},
            "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"
        })
    }

    async fn bodies(server: &MockServer) -> Vec<Value> {
        server
            .received_requests()
            .await
            .unwrap()
            .iter()
            .map(|r| r.body_json::<Value>().unwrap())
            .collect()
    }

    /// JSON pointers of every `cache_control` key in `v`.
    fn cache_controls(v: &Value, at: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                for (k, child) in map {
                    let here = format!("{at}/{k}");
                    if k == "cache_control" {
                        out.push(here.clone());
                    }
                    cache_controls(child, &here, out);
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    cache_controls(child, &format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }

    #[tokio::test]
    async fn tool_use_request_shape_cache_breakpoints_and_parsed_answer() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .and(header("x-api-key", "sk-ant-test"))
            .and(header("anthropic-version", "2023-06-01"))
            .and(header("content-type", "application/json"))
            .respond_with(ResponseTemplate::new(200).set_body_json(tool_use_answer()))
            .expect(1)
            .mount(&server)
            .await;
        let m = model(config(&server));
        let r = m.complete(&request(true)).await.unwrap();

        let body = &bodies(&server).await[0];
        let expected = json!({
            "model": "claude-sonnet-4-6",
            "max_tokens": 1024,
            "system": [{
                "type": "text",
                "text": "You are a terse assistant.",
                "cache_control": {"type": "ephemeral"}
            }],
            "tools": [
                {
                    "name": "get_weather",
                    "description": "Get the current weather in a given location",
                    "input_schema": weather_tool().input_schema
                },
                {
                    "name": "get_time",
                    "description": "Get the current time in a given time zone",
                    "input_schema": time_tool().input_schema,
                    "cache_control": {"type": "ephemeral"}
                }
            ],
            "messages": [{
                "role": "user",
                "content": [{"type": "text", "text": "What is the weather in Paris?"}]
            }]
        });
        assert_eq!(body, &expected);
        let mut marks = Vec::new();
        cache_controls(body, "", &mut marks);
        assert_eq!(marks, ["/system/0/cache_control", "/tools/1/cache_control"]);

        assert_eq!(m.provider(), "anthropic");
        assert_eq!(m.model(), "claude-sonnet-4-6");
        assert_eq!(r.model, "claude-sonnet-4-6");
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        assert_eq!(r.text(), "I'll check the current weather in Paris.");
        assert_eq!(
            r.content[1],
            Content::ToolUse {
                id: "toolu_01A09q90qw90lq917835lq9".into(),
                name: "get_weather".into(),
                input: json!({"location": "Paris, France", "unit": "celsius"}),
            }
        );
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 21,
                output_tokens: 73,
                cache_creation_input_tokens: 1830,
                cache_read_input_tokens: 0,
            }
        );
    }

    #[tokio::test]
    async fn tool_results_round_trip_and_unknown_blocks_are_skipped() {
        let server = MockServer::start().await;
        // A real answer with a thinking block first and the cache fields null or absent.
        let answer = json!({
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6-20260101",
            "content": [
                {"type": "thinking", "thinking": "The tool says 18 °C.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
                {"type": "text", "text": "It is 18 °C in Paris."}
            ],
            "stop_reason": "end_turn",
            "stop_sequence": null,
            "usage": {"input_tokens": 2095, "output_tokens": 12, "cache_creation_input_tokens": null}
        });
        Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer))
            .expect(1)
            .mount(&server)
            .await;
        let mut req = request(false);
        req.messages.push(Message {
            role: Role::Assistant,
            content: vec![
                Content::text(""),
                Content::ToolUse {
                    id: "toolu_01A09q90qw90lq917835lq9".into(),
                    name: "get_weather".into(),
                    input: json!({"location": "Paris, France"}),
                },
                Content::ToolUse {
                    id: "toolu_02".into(),
                    name: "get_time".into(),
                    input: json!({"timezone": "Europe/Paris"}),
                },
            ],
        });
        req.messages.push(Message {
            role: Role::User,
            content: vec![
                Content::ToolResult {
                    tool_use_id: "toolu_01A09q90qw90lq917835lq9".into(),
                    content: "18 °C, light rain".into(),
                    is_error: false,
                },
                Content::ToolResult {
                    tool_use_id: "toolu_02".into(),
                    content: "unknown time zone".into(),
                    is_error: true,
                },
            ],
        });
        let r = model(config(&server)).complete(&req).await.unwrap();

        let body = &bodies(&server).await[0];
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "What is the weather in Paris?"}]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather",
                     "input": {"location": "Paris, France"}},
                    {"type": "tool_use", "id": "toolu_02", "name": "get_time",
                     "input": {"timezone": "Europe/Paris"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
                     "content": "18 °C, light rain"},
                    {"type": "tool_result", "tool_use_id": "toolu_02",
                     "content": "unknown time zone", "is_error": true}
                ]}
            ])
        );
        assert_eq!(r.content, vec![Content::text("It is 18 °C in Paris.")]);
        assert_eq!(r.stop_reason, StopReason::EndTurn);
        assert_eq!(r.model, "claude-sonnet-4-6-20260101");
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 2095,
                output_tokens: 12,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 0,
            }
        );
    }

    /// The event sequence of Anthropic's "streaming request with tool use" example, plus a
    /// second tool call whose input streams as nothing, cache usage in `message_start`, and the
    /// blank lines and `ping` the API sends.
    const TOOL_USE_STREAM: &str = concat!(
        "event: message_start\n",
        r#"data: {"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-sonnet-4-6","stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":1830,"output_tokens":2},"content":[],"stop_reason":null}}"#,
        "\n\n",
        "event: content_block_start\n",
        r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        "\n\n",
        "event: ping\n",
        r#"data: {"type": "ping"}"#,
        "\n\n",
        "event: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Okay"}}"#,
        "\n\n",
        "event: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":","}}"#,
        "\n\n",
        "event: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" let's check the weather for San Francisco, CA:"}}"#,
        "\n\n",
        "event: content_block_stop\n",
        r#"data: {"type":"content_block_stop","index":0}"#,
        "\n\n",
        "event: content_block_start\n",
        r#"data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}"#,
        "\n\n",
        "event: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}"#,
        "\n\n",
        "event: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\":"}}"#,
        "\n\n",
        "event: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" \"San"}}"#,
        "\n\n",
        "event: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" Francisc"}}"#,
        "\n\n",
        "event: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"o,"}}"#,
        "\n\n",
        "event: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" CA\""}}"#,
        "\n\n",
        "event: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":", "}}"#,
        "\n\n",
        "event: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"unit\": \"fah"}}"#,
        "\n\n",
        "event: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"renheit\"}"}}"#,
        "\n\n",
        "event: content_block_stop\n",
        r#"data: {"type":"content_block_stop","index":1}"#,
        "\n\n",
        "event: content_block_start\n",
        r#"data: {"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01NRLabsLyVHZPKxbKvkfSMn","name":"get_time","input":{}}}"#,
        "\n\n",
        "event: content_block_delta\n",
        r#"data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}"#,
        "\n\n",
        "event: content_block_stop\n",
        r#"data: {"type":"content_block_stop","index":2}"#,
        "\n\n",
        "event: message_delta\n",
        r#"data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}"#,
        "\n\n",
        "event: message_stop\n",
        r#"data: {"type":"message_stop"}"#,
        "\n\n",
    );

    #[tokio::test]
    async fn streaming_assembles_text_tool_calls_and_usage() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .and(header("x-api-key", "sk-ant-test"))
            .and(header("anthropic-version", "2023-06-01"))
            .respond_with(
                ResponseTemplate::new(200).set_body_raw(TOOL_USE_STREAM, "text/event-stream"),
            )
            .expect(1)
            .mount(&server)
            .await;
        let mut c = config(&server);
        c.stream = true;
        let r = model(c).complete(&request(true)).await.unwrap();

        let body = &bodies(&server).await[0];
        assert_eq!(body["stream"], json!(true));
        assert_eq!(body["model"], json!("claude-sonnet-4-6"));

        assert_eq!(
            r.content,
            vec![
                Content::text("Okay, let's check the weather for San Francisco, CA:"),
                Content::ToolUse {
                    id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
                    name: "get_weather".into(),
                    input: json!({"location": "San Francisco, CA", "unit": "fahrenheit"}),
                },
                Content::ToolUse {
                    id: "toolu_01NRLabsLyVHZPKxbKvkfSMn".into(),
                    name: "get_time".into(),
                    input: json!({}),
                },
            ]
        );
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        assert_eq!(r.model, "claude-sonnet-4-6");
        // output_tokens is cumulative in message_delta: 89, not 2 + 89.
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 472,
                output_tokens: 89,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 1830,
            }
        );
    }

    #[tokio::test]
    async fn streamed_overloaded_error_is_retried_then_reported() {
        let server = MockServer::start().await;
        let sse = concat!(
            "event: message_start\n",
            r#"data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-6","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1},"content":[],"stop_reason":null}}"#,
            "\n\n",
            "event: error\n",
            r#"data: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#,
            "\n\n",
        );
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream"))
            .mount(&server)
            .await;
        let mut c = config(&server);
        c.stream = true;
        c.max_attempts = 2;
        let err = model(c).complete(&request(false)).await.unwrap_err();
        match err {
            ModelError::Overloaded {
                provider,
                status,
                attempts,
                message,
            } => {
                assert_eq!((provider, status, attempts), ("anthropic", 529, 2));
                assert!(message.contains("Overloaded"), "{message}");
            }
            other => panic!("expected Overloaded, got {other}"),
        }
        assert_eq!(bodies(&server).await.len(), 2);
    }

    #[tokio::test]
    async fn stream_cut_before_message_stop_is_a_transport_error() {
        let server = MockServer::start().await;
        let cut = TOOL_USE_STREAM
            .split("event: message_delta")
            .next()
            .unwrap()
            .to_owned();
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_raw(cut, "text/event-stream"))
            .mount(&server)
            .await;
        let mut c = config(&server);
        c.stream = true;
        c.max_attempts = 1;
        let err = model(c).complete(&request(false)).await.unwrap_err();
        assert!(
            matches!(&err, ModelError::Transport { message, .. } if message.contains("message_stop")),
            "{err}"
        );
    }

    #[tokio::test]
    async fn overloaded_then_rate_limited_then_success() {
        let server = MockServer::start().await;
        // Mocks of equal priority are tried in mount order; each of the first two answers once.
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(529).set_body_json(overloaded_body()))
            .up_to_n_times(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(429)
                    .insert_header("retry-after", "0")
                    .set_body_json(json!({
                        "type": "error",
                        "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your per-minute rate limit"}
                    })),
            )
            .up_to_n_times(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(end_turn_answer("Done.")))
            .mount(&server)
            .await;
        let r = model(config(&server))
            .complete(&request(false))
            .await
            .unwrap();
        assert_eq!(r.text(), "Done.");
        let seen = bodies(&server).await;
        assert_eq!(seen.len(), 3);
        // Every attempt sends the same body.
        assert!(seen.iter().all(|b| b == &seen[0]));
    }

    #[tokio::test]
    async fn rate_limits_are_retried_only_when_retry_after_fits_the_deadline() {
        let server = MockServer::start().await;
        // An hour's wait does not fit a 120 s deadline; no Retry-After gives nothing to honour.
        for retry_after in [Some("3600"), None] {
            let mut answer = ResponseTemplate::new(429).set_body_json(overloaded_body());
            if let Some(wait) = retry_after {
                answer = answer.insert_header("retry-after", wait);
            }
            server.reset().await;
            Mock::given(method("POST"))
                .respond_with(answer)
                .mount(&server)
                .await;
            let err = model(config(&server))
                .complete(&request(false))
                .await
                .unwrap_err();
            assert!(
                matches!(
                    err,
                    ModelError::Overloaded {
                        status: 429,
                        attempts: 1,
                        ..
                    }
                ),
                "{retry_after:?}: {err}"
            );
            assert_eq!(bodies(&server).await.len(), 1, "{retry_after:?}");
        }
    }

    #[tokio::test]
    async fn server_errors_are_retried() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(500).set_body_json(json!({
                "type": "error",
                "error": {"type": "api_error", "message": "Internal server error"}
            })))
            .up_to_n_times(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(end_turn_answer("ok")))
            .mount(&server)
            .await;
        let r = model(config(&server))
            .complete(&request(false))
            .await
            .unwrap();
        assert_eq!(r.text(), "ok");
        assert_eq!(bodies(&server).await.len(), 2);
    }

    #[tokio::test]
    async fn overloaded_forever_gives_up_after_max_attempts() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(529).set_body_json(overloaded_body()))
            .mount(&server)
            .await;
        let mut c = config(&server);
        c.max_attempts = 3;
        let err = model(c).complete(&request(false)).await.unwrap_err();
        match &err {
            ModelError::Overloaded {
                provider,
                status,
                attempts,
                message,
            } => {
                assert_eq!((*provider, *status, *attempts), ("anthropic", 529, 3));
                assert_eq!(message, "overloaded_error: Overloaded");
            }
            other => panic!("expected Overloaded, got {other}"),
        }
        assert!(err.to_string().contains("after 3 attempts"), "{err}");
        assert_eq!(bodies(&server).await.len(), 3);
    }

    #[tokio::test]
    async fn client_errors_are_not_retried() {
        // (status, body, check)
        type Check = fn(&ModelError) -> bool;
        let cases: [(u16, Value, Check); 3] = [
            (
                401,
                json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
                |e| {
                    matches!(e, ModelError::Auth { provider: "anthropic", status: 401, message }
                        if message.contains("invalid x-api-key") && message.contains("ANTHROPIC_API_KEY"))
                },
            ),
            (
                400,
                json!({"type": "error", "error": {"type": "invalid_request_error",
                    "message": "max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4-6"}}),
                |e| {
                    matches!(e, ModelError::Http { provider: "anthropic", status: 400, message }
                        if message == "invalid_request_error: max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4-6")
                },
            ),
            (
                404,
                json!({"type": "error", "error": {"type": "not_found_error", "message": "model: claude-nope"}}),
                |e| {
                    matches!(e, ModelError::Http { status: 404, message, .. }
                        if message.contains("model: claude-nope") && message.contains("check the model id"))
                },
            ),
        ];
        for (status, body, check) in cases {
            let server = MockServer::start().await;
            Mock::given(method("POST"))
                .respond_with(ResponseTemplate::new(status).set_body_json(body))
                .mount(&server)
                .await;
            let err = model(config(&server))
                .complete(&request(false))
                .await
                .unwrap_err();
            assert!(check(&err), "{status}: {err:?}");
            assert_eq!(bodies(&server).await.len(), 1, "{status} was retried");
        }
    }

    #[tokio::test]
    async fn no_cache_control_without_cache_and_no_stream_flag() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(end_turn_answer("ok")))
            .mount(&server)
            .await;
        model(config(&server))
            .complete(&request(false))
            .await
            .unwrap();
        let body = &bodies(&server).await[0];
        let mut marks = Vec::new();
        cache_controls(body, "", &mut marks);
        assert!(marks.is_empty(), "{marks:?}");
        assert!(body.get("stream").is_none());
        assert_eq!(
            body["system"][0]["text"],
            json!("You are a terse assistant.")
        );
        assert_eq!(body["tools"].as_array().unwrap().len(), 2);
    }

    #[tokio::test]
    async fn empty_system_and_tools_are_omitted() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(end_turn_answer("ok")))
            .mount(&server)
            .await;
        let req = ModelRequest {
            messages: vec![Message::user("hi")],
            max_tokens: 16,
            cache: true,
            ..ModelRequest::default()
        };
        model(config(&server)).complete(&req).await.unwrap();
        assert_eq!(
            bodies(&server).await[0],
            json!({
                "model": "claude-sonnet-4-6",
                "max_tokens": 16,
                "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
            })
        );
    }

    #[tokio::test]
    async fn unreadable_answer_is_a_bad_response() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(200).set_body_raw("<html>gateway</html>", "text/html"),
            )
            .mount(&server)
            .await;
        let err = model(config(&server))
            .complete(&request(false))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ModelError::BadResponse { provider: "anthropic", message } if message.contains("gateway")),
            "{err}"
        );
        assert_eq!(bodies(&server).await.len(), 1);
    }

    #[tokio::test]
    async fn dead_server_is_a_transport_error_after_retries() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let m = model(AnthropicConfig {
            api_key: "k".into(),
            base_url: format!("http://127.0.0.1:{port}"),
            max_attempts: 2,
            retry_base: Duration::from_millis(1),
            ..AnthropicConfig::default()
        });
        let err = m.complete(&request(false)).await.unwrap_err();
        assert!(
            matches!(&err, ModelError::Transport { provider: "anthropic", message }
                if message.contains("/v1/messages") && message.contains("after 2 attempts")),
            "{err}"
        );
    }

    #[test]
    fn missing_key_is_reported_with_its_variable() {
        for key in ["", "   "] {
            let err = AnthropicModel::new(AnthropicConfig {
                api_key: key.into(),
                ..AnthropicConfig::default()
            })
            .unwrap_err();
            assert!(matches!(
                err,
                ModelError::MissingKey {
                    provider: "anthropic",
                    env: "ANTHROPIC_API_KEY"
                }
            ));
        }
    }

    #[test]
    fn defaults_and_redacted_debug() {
        let c = AnthropicConfig {
            api_key: "sk-ant-secret".into(),
            ..AnthropicConfig::default()
        };
        assert_eq!(c.base_url, DEFAULT_BASE_URL);
        assert_eq!(c.model, DEFAULT_MODEL);
        assert!(!c.stream);
        assert_eq!(c.max_attempts, 3);
        assert_eq!(c.retry_base, Duration::from_millis(500));
        assert_eq!(c.timeout, Duration::from_secs(120));
        assert!(!format!("{c:?}").contains("sk-ant-secret"));
    }

    #[test]
    fn retry_after_parses_seconds_only() {
        let check = |value: &str, expected: Option<Duration>| {
            let mut h = HeaderMap::new();
            h.insert(RETRY_AFTER, HeaderValue::from_str(value).unwrap());
            assert_eq!(retry_after(&h), expected, "{value}");
        };
        check("0", Some(Duration::ZERO));
        check("7", Some(Duration::from_secs(7)));
        check("1.5", Some(Duration::from_millis(1500)));
        check("-1", None);
        check("Wed, 21 Oct 2015 07:28:00 GMT", None);
        assert_eq!(retry_after(&HeaderMap::new()), None);
    }

    #[test]
    fn stop_reasons_map() {
        let check = |s: Option<&str>, expected| assert_eq!(stop_reason(s), expected, "{s:?}");
        check(Some("end_turn"), StopReason::EndTurn);
        check(Some("tool_use"), StopReason::ToolUse);
        check(Some("max_tokens"), StopReason::MaxTokens);
        check(Some("stop_sequence"), StopReason::Other);
        check(Some("refusal"), StopReason::Other);
        check(None, StopReason::Other);
    }

    #[tokio::test]
    async fn input_bound_is_counted_by_count_tokens_else_bounded_by_bytes() {
        use crate::model::{BoundSource, InputBound, counted_bound};
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/messages/count_tokens"))
            .and(header("x-api-key", "sk-ant-test"))
            .and(header("anthropic-version", API_VERSION))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"input_tokens": 412})))
            .expect(1)
            .mount(&server)
            .await;
        let req = request(true);
        let bound = model(config(&server)).input_bound(&req).await;
        assert_eq!(bound, counted_bound(&req, 412));
        assert_eq!(bound.source, BoundSource::Counted);
        assert!(bound.tokens >= 412);
        let sent = &bodies(&server).await[0];
        assert_eq!(sent["model"], "claude-sonnet-4-6");
        assert!(sent.get("max_tokens").is_none(), "{sent}");
        assert!(sent.get("stream").is_none(), "{sent}");
        assert_eq!(sent["tools"].as_array().unwrap().len(), req.tools.len());
        assert_eq!(sent["messages"][0]["role"], "user");
        assert_eq!(sent["system"][0]["text"], req.system.as_str());

        // No count (the endpoint answers 404 here): every input byte a token, never an error.
        let bare = MockServer::start().await;
        let bound = model(config(&bare)).input_bound(&req).await;
        assert_eq!(bound, InputBound::upper(&req));
        assert_eq!(bound.source, BoundSource::Bytes);
    }
}
