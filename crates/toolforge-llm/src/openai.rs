//! The OpenAI-compatible Chat Completions provider (`POST {base}/chat/completions`), plain JSON
//! or streamed over SSE. One client serves OpenAI itself and the servers that copy its API (LM
//! Studio, Ollama, vLLM, Together, the Hugging Face router, ...): only the base URL and the key
//! differ, and local servers need no key at all.
//!
//! The provider-neutral types follow the Anthropic block shape, so messages are translated:
//! an assistant turn becomes one message whose text is `content` and whose tool calls are
//! `tool_calls` (arguments as a JSON *string*); every tool result becomes its own `tool`
//! message, sent before any text of the same user turn (the API wants the tool answers right
//! after the assistant message that asked for them). Chat Completions has no `is_error` flag,
//! so a failed tool result is sent as text that starts with `Error:`.
//!
//! [`ModelRequest::cache`] is ignored: OpenAI caches long prompt prefixes on its own and reports
//! the hits as `prompt_tokens_details.cached_tokens`, which becomes
//! [`Usage::cache_read_input_tokens`] (and is taken out of [`Usage::input_tokens`], which counts
//! only the uncached part).
//!
//! Models sometimes write tool arguments that are not a JSON object. Such a call is kept, with
//! the text under `{"_raw": "<the arguments>"}`, instead of failing the whole answer: the agent
//! validates every call against the tool's schema, rejects this one with a message that quotes
//! the schema, and the model gets a chance to correct itself.
//!
//! Retries follow the one policy of `toolforge-retry`: server errors (5xx) and network failures
//! are retried, 3 attempts with full-jitter waits from 500 ms, all within `timeout` of the
//! call's start; a rate limit (429) only when its `retry-after-ms` / `retry-after` fits that
//! deadline. The whole answer is assembled before it is returned, so a retry never duplicates
//! output the caller has already seen.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use eventsource_stream::{EventStreamError, Eventsource};
use futures::StreamExt;
use futures::future::BoxFuture;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use toolforge_retry::{Attempted, Decision, Failure as RetryFailure, RetryPolicy, SystemJitter};
use tracing::warn;

use crate::model::{
    Content, InputBound, Message, Model, ModelError, ModelRequest, ModelResponse, Role, StopReason,
    ToolSpec, Usage,
};

/// OpenAI's public endpoint, version path included (`/chat/completions` is appended), as in the
/// official SDKs' `OPENAI_BASE_URL`.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The model used when none is configured.
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";

const PROVIDER: &str = "openai";
const KEY_ENV: &str = "OPENAI_API_KEY";
const BASE_URL_ENV: &str = "OPENAI_BASE_URL";

/// The only host that is known to need a key; any other base URL may be a local server.
const OFFICIAL_HOST: &str = "api.openai.com";

/// Longest API error text quoted in an error message.
const MAX_QUOTED: usize = 300;

/// Typed config for [`OpenAiModel`] (the binary fills it from flags and env, e.g.
/// `OPENAI_API_KEY` and `OPENAI_BASE_URL`).
#[derive(Clone)]
pub struct OpenAiConfig {
    /// `OPENAI_API_KEY`. Local servers (Ollama, LM Studio, vLLM) need none; an empty key counts
    /// as none.
    pub api_key: Option<String>,
    /// Base URL including the version path, e.g. [`DEFAULT_BASE_URL`] or
    /// `http://127.0.0.1:11434/v1`; a trailing slash is fine.
    pub base_url: String,
    pub model: String,
    /// Ask for an SSE stream (`"stream": true`, with usage in the last chunk) instead of one
    /// JSON body.
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

impl Default for OpenAiConfig {
    /// No key, [`DEFAULT_BASE_URL`], [`DEFAULT_MODEL`], no streaming, 3 attempts
    /// with retries from 500 ms, 120 s timeout.
    fn default() -> Self {
        Self {
            api_key: None,
            base_url: DEFAULT_BASE_URL.to_owned(),
            model: DEFAULT_MODEL.to_owned(),
            stream: false,
            max_attempts: RetryPolicy::default().max_attempts,
            retry_base: RetryPolicy::default().base,
            timeout: Duration::from_secs(120),
        }
    }
}

impl fmt::Debug for OpenAiConfig {
    // Hand-written so the key never reaches a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("stream", &self.stream)
            .field("max_attempts", &self.max_attempts)
            .field("retry_base", &self.retry_base)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// A [`Model`] backed by an OpenAI-compatible Chat Completions API.
#[derive(Debug, Clone)]
pub struct OpenAiModel {
    config: OpenAiConfig,
    client: reqwest::Client,
    url: String,
    /// Set once a response without `usage` has been logged, so a local server that never
    /// reports usage produces one warning, not one per call.
    warned_no_usage: Arc<AtomicBool>,
}

impl OpenAiModel {
    /// Builds the client. Fails with [`ModelError::MissingKey`] when the base URL is OpenAI's
    /// own and no key is set, and with [`ModelError::Transport`] when the base URL is not a URL,
    /// the key cannot go in a header, or the HTTP client cannot be created.
    pub fn new(config: OpenAiConfig) -> Result<Self, ModelError> {
        crate::openai_tokens::warm(&config.model);
        let base = config.base_url.trim_end_matches('/');
        let not_a_url = |why: String| ModelError::Transport {
            provider: PROVIDER,
            message: format!(
                "the base URL {base:?} is not an http(s) URL ({why}); check {BASE_URL_ENV}, \
                 e.g. {DEFAULT_BASE_URL} or http://127.0.0.1:11434/v1"
            ),
        };
        let parsed = reqwest::Url::parse(base).map_err(|e| not_a_url(e.to_string()))?;
        // `localhost:1234` parses, with `localhost` as its scheme.
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(not_a_url(format!("scheme {:?}", parsed.scheme())));
        }
        let key = config
            .api_key
            .as_deref()
            .map(str::trim)
            .filter(|k| !k.is_empty());
        let mut headers = HeaderMap::new();
        match key {
            Some(key) => {
                let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                    ModelError::Transport {
                        provider: PROVIDER,
                        message: format!(
                            "the API key contains characters an HTTP header cannot carry; \
                                 check {KEY_ENV}"
                        ),
                    }
                })?;
                value.set_sensitive(true);
                headers.insert(AUTHORIZATION, value);
            }
            None if parsed.host_str() == Some(OFFICIAL_HOST) => {
                return Err(ModelError::MissingKey {
                    provider: PROVIDER,
                    env: KEY_ENV,
                });
            }
            // A local or self-hosted server: no Authorization header at all.
            None => {}
        }
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(config.timeout)
            .read_timeout(config.timeout)
            .build()
            .map_err(|e| ModelError::Transport {
                provider: PROVIDER,
                message: format!("cannot build the HTTP client: {}", error_chain(&e)),
            })?;
        let url = format!("{base}/chat/completions");
        Ok(Self {
            config,
            client,
            url,
            warned_no_usage: Arc::new(AtomicBool::new(false)),
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
    async fn attempt(&self, body: &[u8], limit: Duration) -> Result<Answer, Failure> {
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
            let error = ErrorBody::parse(&text);
            return Err(self.classify(status, &error, retry_after));
        }
        let is_sse = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if is_sse {
            return self.read_stream(resp).await;
        }
        // A JSON body even when a stream was asked for (some servers and proxies ignore
        // `stream`): parse it as such.
        let text = resp.text().await.map_err(|e| self.transport(&e))?;
        parse_response(&text, &self.config.model).map_err(Failure::fatal)
    }

    async fn read_stream(&self, resp: reqwest::Response) -> Result<Answer, Failure> {
        let mut events = resp.bytes_stream().eventsource();
        let mut assembler = Assembler::new(&self.config.model);
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(event) => event,
                Err(EventStreamError::Transport(e)) => return Err(self.transport(&e)),
                Err(e) => return Err(Failure::fatal(bad_response(format!("invalid SSE: {e}")))),
            };
            let data = event.data.trim();
            if data.is_empty() {
                continue;
            }
            if data == "[DONE]" {
                return Ok(assembler.finish());
            }
            let chunk: WireChunk = serde_json::from_str(data).map_err(|e| {
                Failure::fatal(bad_response(format!(
                    "stream chunk: {e}; data starts {:?}",
                    quote(data)
                )))
            })?;
            if let Some(error) = chunk.error {
                let error = ErrorBody::from_value(&error);
                return Err(self.classify(error.status_hint(), &error, None));
            }
            assembler.apply(chunk);
        }
        // Some servers close the stream without `[DONE]`; an answer that got as far as its
        // finish reason is complete (at most the usage chunk is missing).
        if assembler.finish_reason.is_some() {
            return Ok(assembler.finish());
        }
        // Cut before the end: the answer is incomplete, try again.
        Err(Failure {
            error: ModelError::Transport {
                provider: PROVIDER,
                message: format!("{}: the stream ended before [DONE]", self.url),
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

    fn classify(&self, status: u16, error: &ErrorBody, retry_after: Option<Duration>) -> Failure {
        let message = error.describe();
        match status {
            401 | 403 => Failure::fatal(ModelError::Auth {
                provider: PROVIDER,
                status,
                message: format!("{message} (check {KEY_ENV})"),
            }),
            // An exhausted quota is a 429 too, but waiting does not refill it.
            429 if error.code.as_deref() == Some("insufficient_quota") => {
                Failure::fatal(ModelError::Overloaded {
                    provider: PROVIDER,
                    status,
                    attempts: 1,
                    message: format!("{message} (check the plan and billing of the account)"),
                })
            }
            429 => Failure {
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
            500..=599 => Failure {
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
                    "{message} (check the model id {:?} and the base URL {:?}, which must \
                     include the version path, e.g. /v1)",
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

    /// Logs, once per model, that the server reports no usage (cost accounting then sees 0).
    fn note_missing_usage(&self) {
        if !self.warned_no_usage.swap(true, Ordering::Relaxed) {
            warn!(
                provider = PROVIDER,
                base_url = %self.config.base_url,
                model = %self.config.model,
                "The server reported no token usage; counting 0 tokens for its answers."
            );
        }
    }
}

impl Model for OpenAiModel {
    fn provider(&self) -> &'static str {
        PROVIDER
    }

    fn model(&self) -> &str {
        &self.config.model
    }

    /// Counted with the model family's own tokenizer when it is shipped
    /// ([`crate::openai_tokens`]), else the byte bound.
    fn input_bound<'a>(&'a self, request: &'a ModelRequest) -> BoxFuture<'a, InputBound> {
        let bound = match crate::openai_tokens::count(&self.config.model, request) {
            Some(counted) => crate::model::counted_bound(request, counted),
            None => InputBound::upper(request),
        };
        Box::pin(std::future::ready(bound))
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
                    Ok(answer) => {
                        if !answer.has_usage {
                            self.note_missing_usage();
                        }
                        return Ok(answer.response);
                    }
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

/// A parsed answer, and whether the server reported usage at all.
struct Answer {
    response: ModelResponse,
    has_usage: bool,
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

/// The wait the server asks for: `retry-after-ms` (OpenAI's precise form, preferred, as the
/// official SDKs do) or `retry-after` in seconds. HTTP dates are not parsed: a 429 is then not retried.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| -> Option<f64> {
        let value: f64 = headers.get(name)?.to_str().ok()?.trim().parse().ok()?;
        (value.is_finite() && value >= 0.0).then_some(value)
    };
    if let Some(ms) = number("retry-after-ms") {
        return Duration::try_from_secs_f64(ms / 1000.0).ok();
    }
    Duration::try_from_secs_f64(number(RETRY_AFTER.as_str())?).ok()
}

/// An API error as the servers send it: OpenAI's `{"error": {"message", "type", "code"}}`, or
/// what compatible servers send instead (`{"error": "..."}`, FastAPI's `{"detail": ...}`,
/// vLLM's flat `{"object": "error", "message", "type", "code": 400}`).
#[derive(Debug, Default)]
struct ErrorBody {
    message: String,
    kind: Option<String>,
    /// A textual code such as `model_not_found` or `insufficient_quota`.
    code: Option<String>,
    /// A numeric code, which compatible servers use for the HTTP status.
    status: Option<u16>,
}

impl ErrorBody {
    fn parse(body: &str) -> Self {
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
    fn from_value(value: &Value) -> Self {
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
    fn describe(&self) -> String {
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
    fn status_hint(&self) -> u16 {
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

// ---- request wire types ----

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

/// Without `include_usage` a stream reports no usage at all.
#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
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
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    /// The input as JSON text: the API takes arguments as a string, not an object.
    arguments: String,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

fn wire_request<'a>(model: &'a str, request: &'a ModelRequest, stream: bool) -> WireRequest<'a> {
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
fn push_messages<'a>(message: &'a Message, out: &mut Vec<WireMessage<'a>>) {
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
                    // A user turn cannot ask for a tool call; empty text carries nothing.
                    Content::Text { .. } | Content::ToolUse { .. } => {}
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
                    Content::Text { .. } | Content::ToolResult { .. } => {}
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

fn join<'a>(texts: &[&'a str]) -> Cow<'a, str> {
    match texts {
        [] => Cow::Borrowed(""),
        [one] => Cow::Borrowed(one),
        many => Cow::Owned(many.join("\n\n")),
    }
}

/// A tool message's text. Chat Completions has no `is_error` flag, so a failure says so in the
/// text unless it already does.
fn tool_result_text(content: &str, is_error: bool) -> Cow<'_, str> {
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
struct WireResponse {
    #[serde(default)]
    choices: Vec<WireChoice>,
    usage: Option<WireUsage>,
    model: Option<String>,
    /// Some proxies answer 200 with an error body.
    error: Option<Value>,
}

#[derive(Deserialize)]
struct WireChoice {
    message: WireAnswerMessage,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireAnswerMessage {
    content: Option<WireText>,
    /// Set instead of `content` when the model declines (structured outputs).
    refusal: Option<String>,
    tool_calls: Option<Vec<WireAnswerToolCall>>,
}

/// `content` is a string on OpenAI; a few compatible servers send content parts.
#[derive(Deserialize)]
#[serde(untagged)]
enum WireText {
    Text(String),
    Parts(Vec<WirePart>),
}

#[derive(Deserialize)]
struct WirePart {
    text: Option<String>,
}

impl WireText {
    fn into_string(self) -> String {
        match self {
            Self::Text(text) => text,
            Self::Parts(parts) => parts.into_iter().filter_map(|p| p.text).collect(),
        }
    }
}

#[derive(Deserialize)]
struct WireAnswerToolCall {
    id: Option<String>,
    function: WireAnswerFunction,
}

#[derive(Deserialize)]
struct WireAnswerFunction {
    #[serde(default)]
    name: String,
    /// A JSON string on OpenAI; some compatible servers send the object itself.
    arguments: Option<Value>,
}

/// Usage as sent; every field may be absent or `null`.
#[derive(Deserialize)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Deserialize)]
struct PromptTokensDetails {
    cached_tokens: Option<u64>,
}

impl WireUsage {
    /// Cached prompt tokens are billed at the cache-read price, so they move out of
    /// `input_tokens` (OpenAI's `prompt_tokens` includes them).
    fn to_usage(&self) -> Usage {
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

    fn is_reported(&self) -> bool {
        self.prompt_tokens.is_some() || self.completion_tokens.is_some()
    }
}

/// Maps `finish_reason`. Ollama and some vLLM versions say `stop` next to tool calls; the
/// calls are what the caller must act on, so that counts as [`StopReason::ToolUse`].
fn stop_reason(reason: Option<&str>, has_tool_calls: bool) -> StopReason {
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
fn arguments_input(arguments: Option<Value>) -> Value {
    match arguments {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::String(text)) => arguments_from_text(text),
        Some(object @ Value::Object(_)) => object,
        Some(other) => raw_arguments(other.to_string()),
    }
}

/// Parses arguments sent as text; anything but a JSON object is kept under `_raw`.
fn arguments_from_text(text: String) -> Value {
    if text.trim().is_empty() {
        return Value::Object(Map::new());
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(object @ Value::Object(_)) => object,
        _ => raw_arguments(text),
    }
}

fn raw_arguments(text: String) -> Value {
    let mut map = Map::new();
    map.insert("_raw".to_owned(), Value::String(text));
    Value::Object(map)
}

/// An id for a tool call the server sent without one (some local servers), unique in the turn.
fn fallback_call_id(position: usize) -> String {
    format!("call_{position}")
}

fn parse_response(body: &str, requested_model: &str) -> Result<Answer, ModelError> {
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

// ---- streaming ----

/// One `data:` chunk of a stream.
#[derive(Deserialize)]
struct WireChunk {
    /// Empty in the final usage chunk.
    choices: Option<Vec<ChunkChoice>>,
    usage: Option<WireUsage>,
    model: Option<String>,
    /// An error reported mid-stream (the HTTP status was already 200).
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    index: Option<u32>,
    delta: Option<ChunkDelta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChunkDelta {
    content: Option<String>,
    refusal: Option<String>,
    tool_calls: Option<Vec<ChunkToolCall>>,
}

/// A piece of a tool call: `id` and `name` come in its first piece, `arguments` in pieces.
#[derive(Deserialize)]
struct ChunkToolCall {
    index: Option<usize>,
    id: Option<String>,
    function: Option<ChunkFunction>,
}

#[derive(Deserialize)]
struct ChunkFunction {
    name: Option<String>,
    arguments: Option<Value>,
}

/// A tool call while its pieces stream in.
#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Folds stream chunks into a [`ModelResponse`].
struct Assembler {
    model: String,
    text: String,
    refusal: String,
    calls: BTreeMap<usize, PartialCall>,
    finish_reason: Option<String>,
    usage: Option<WireUsage>,
}

impl Assembler {
    fn new(requested_model: &str) -> Self {
        Self {
            model: requested_model.to_owned(),
            text: String::new(),
            refusal: String::new(),
            calls: BTreeMap::new(),
            finish_reason: None,
            usage: None,
        }
    }

    fn apply(&mut self, chunk: WireChunk) {
        if let Some(model) = chunk.model.filter(|m| !m.is_empty()) {
            self.model = model;
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage);
        }
        // One completion was asked for (no `n`), so only choice 0 is read.
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.is_some_and(|i| i != 0) {
                continue;
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
            let Some(delta) = choice.delta else { continue };
            if let Some(text) = delta.content {
                self.text.push_str(&text);
            }
            if let Some(refusal) = delta.refusal {
                self.refusal.push_str(&refusal);
            }
            for (position, piece) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
                // Servers that send every call whole may leave out `index`: the position in
                // the list stands in.
                let call = self
                    .calls
                    .entry(piece.index.unwrap_or(position))
                    .or_default();
                // `id` and `name` are whole values sent once; servers that repeat them in
                // later pieces must not double them.
                if let Some(id) = piece.id.filter(|id| !id.is_empty())
                    && call.id.is_empty()
                {
                    call.id = id;
                }
                let Some(function) = piece.function else {
                    continue;
                };
                if let Some(name) = function.name.filter(|n| !n.is_empty())
                    && call.name.is_empty()
                {
                    call.name = name;
                }
                match function.arguments {
                    Some(Value::String(more)) => call.arguments.push_str(&more),
                    None | Some(Value::Null) => {}
                    Some(other) => call.arguments.push_str(&other.to_string()),
                }
            }
        }
    }

    fn finish(self) -> Answer {
        let mut content = Vec::with_capacity(self.calls.len() + 1);
        let text = if self.text.is_empty() {
            self.refusal
        } else {
            self.text
        };
        if !text.is_empty() {
            content.push(Content::Text { text });
        }
        let has_tool_calls = !self.calls.is_empty();
        for (position, call) in self.calls.into_values().enumerate() {
            content.push(Content::ToolUse {
                id: if call.id.is_empty() {
                    fallback_call_id(position)
                } else {
                    call.id
                },
                name: call.name,
                input: arguments_from_text(call.arguments),
            });
        }
        let has_usage = self.usage.as_ref().is_some_and(WireUsage::is_reported);
        Answer {
            response: ModelResponse {
                content,
                stop_reason: stop_reason(self.finish_reason.as_deref(), has_tool_calls),
                usage: self
                    .usage
                    .as_ref()
                    .map(WireUsage::to_usage)
                    .unwrap_or_default(),
                model: self.model,
            },
            has_usage,
        }
    }
}

#[cfg(test)]
mod tests {

    use serde_json::{Value, json};
    use wiremock::matchers::{header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;

    fn config(server: &MockServer) -> OpenAiConfig {
        let _ = rustls::crypto::ring::default_provider().install_default();
        OpenAiConfig {
            api_key: Some("sk-test".into()),
            // A trailing slash must not produce `//chat/completions`.
            base_url: format!("{}/v1/", server.uri()),
            retry_base: Duration::from_millis(5),
            ..OpenAiConfig::default()
        }
    }

    fn model(config: OpenAiConfig) -> OpenAiModel {
        OpenAiModel::new(config).unwrap()
    }

    #[tokio::test]
    async fn input_bound_is_counted_for_the_shipped_tokenizer_families_only() {
        let server = MockServer::start().await;
        let req = request();
        let byte_bound = InputBound::upper(&req);
        let counted = model(OpenAiConfig {
            model: "gpt-4o-mini".into(),
            ..config(&server)
        })
        .input_bound(&req)
        .await;
        assert_eq!(counted.source, crate::model::BoundSource::Counted);
        let exact = crate::openai_tokens::count("gpt-4o-mini", &req).unwrap();
        assert!(exact <= counted.tokens && counted.tokens < byte_bound.tokens);
        let other = model(OpenAiConfig {
            model: "llama-3.1-8b-instruct".into(),
            ..config(&server)
        })
        .input_bound(&req)
        .await;
        assert_eq!(other, byte_bound, "no tokenizer shipped: the byte bound");
        // Nothing was sent to count.
        assert!(server.received_requests().await.unwrap().is_empty());
    }

    fn weather_tool() -> ToolSpec {
        ToolSpec {
            name: "get_weather".into(),
            description: "Get the current weather in a given location".into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "location": {"type": "string", "description": "The city and country"},
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

    fn request() -> ModelRequest {
        ModelRequest {
            system: "You are a terse assistant.".into(),
            tools: vec![weather_tool(), time_tool()],
            messages: vec![Message::user("What is the weather in Paris and Tokyo?")],
            max_tokens: 1024,
            // Ignored: OpenAI caches on its own.
            cache: true,
        }
    }

    /// A real `chat.completion` asking for two parallel tool calls, with cached prompt tokens.
    fn tool_calls_answer() -> Value {
        json!({
            "id": "chatcmpl-BcQ8ko2nz9B7CRvV0uVbcowidHpQU",
            "object": "chat.completion",
            "created": 1748496646,
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [{
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": null,
                    "tool_calls": [
                        {
                            "id": "call_qOfTGgDrItLORNfC6VwUbyLL",
                            "type": "function",
                            "function": {
                                "name": "get_weather",
                                "arguments": "{\"location\": \"Paris, France\", \"unit\": \"celsius\"}"
                            }
                        },
                        {
                            "id": "call_7dV3ZL2jC8bYyQk4nF1mRpXe",
                            "type": "function",
                            "function": {
                                "name": "get_weather",
                                "arguments": "{\"location\":\"Tokyo, Japan\"}"
                            }
                        }
                    ],
                    "refusal": null,
                    "annotations": []
                },
                "logprobs": null,
                "finish_reason": "tool_calls"
            }],
            "usage": {
                "prompt_tokens": 1290,
                "completion_tokens": 52,
                "total_tokens": 1342,
                "prompt_tokens_details": {"cached_tokens": 1152, "audio_tokens": 0},
                "completion_tokens_details": {
                    "reasoning_tokens": 0,
                    "audio_tokens": 0,
                    "accepted_prediction_tokens": 0,
                    "rejected_prediction_tokens": 0
                }
            },
            "service_tier": "default",
            "system_fingerprint": "fp_34a54ae93c"
        })
    }

    /// A real plain-text `chat.completion`; `prompt_tokens_details` is null, as vLLM sends it.
    fn stop_answer(text: &str) -> Value {
        json!({
            "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
            "object": "chat.completion",
            "created": 1741570283,
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": null, "annotations": []},
                "logprobs": null,
                "finish_reason": "stop"
            }],
            "usage": {
                "prompt_tokens": 310,
                "completion_tokens": 9,
                "total_tokens": 319,
                "prompt_tokens_details": null
            },
            "service_tier": "default",
            "system_fingerprint": "fp_06737a9306"
        })
    }

    fn rate_limit_body() -> Value {
        json!({"error": {
            "message": "Rate limit reached for gpt-4o-mini in organization org-abc on tokens per min (TPM): Limit 200000, Used 199843, Requested 1290. Please try again in 339ms.",
            "type": "tokens",
            "param": null,
            "code": "rate_limit_exceeded"
        }})
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

    #[tokio::test]
    async fn tool_calls_request_shape_and_parsed_answer() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .and(header("authorization", "Bearer sk-test"))
            .and(header("content-type", "application/json"))
            .respond_with(ResponseTemplate::new(200).set_body_json(tool_calls_answer()))
            .expect(1)
            .mount(&server)
            .await;
        let m = model(config(&server));
        let r = m.complete(&request()).await.unwrap();

        let body = &bodies(&server).await[0];
        let expected = json!({
            "model": "gpt-4o-mini",
            "max_tokens": 1024,
            "messages": [
                {"role": "system", "content": "You are a terse assistant."},
                {"role": "user", "content": "What is the weather in Paris and Tokyo?"}
            ],
            "tools": [
                {"type": "function", "function": {
                    "name": "get_weather",
                    "description": "Get the current weather in a given location",
                    "parameters": weather_tool().input_schema
                }},
                {"type": "function", "function": {
                    "name": "get_time",
                    "description": "Get the current time in a given time zone",
                    "parameters": time_tool().input_schema
                }}
            ]
        });
        // Exact: no `stream`, no cache fields, nothing else.
        assert_eq!(body, &expected);

        assert_eq!(m.provider(), "openai");
        assert_eq!(m.model(), "gpt-4o-mini");
        assert_eq!(r.model, "gpt-4o-mini-2024-07-18");
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        assert_eq!(
            r.content,
            vec![
                Content::ToolUse {
                    id: "call_qOfTGgDrItLORNfC6VwUbyLL".into(),
                    name: "get_weather".into(),
                    input: json!({"location": "Paris, France", "unit": "celsius"}),
                },
                Content::ToolUse {
                    id: "call_7dV3ZL2jC8bYyQk4nF1mRpXe".into(),
                    name: "get_weather".into(),
                    input: json!({"location": "Tokyo, Japan"}),
                },
            ]
        );
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 138,
                output_tokens: 52,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 1152,
            }
        );
        assert!(!m.warned_no_usage.load(Ordering::Relaxed));
    }

    #[tokio::test]
    async fn conversation_with_tool_calls_and_results_is_serialised() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(stop_answer("Paris 18°C, Tokyo 24°C.")),
            )
            .expect(1)
            .mount(&server)
            .await;
        let mut req = request();
        req.system = String::new();
        req.messages.extend([
            Message {
                role: Role::Assistant,
                content: vec![
                    Content::text("Let me check both."),
                    Content::ToolUse {
                        id: "call_1".into(),
                        name: "get_weather".into(),
                        input: json!({"location": "Paris, France", "unit": "celsius"}),
                    },
                    Content::ToolUse {
                        id: "call_2".into(),
                        name: "get_weather".into(),
                        input: json!({"location": "Tokyo, Japan"}),
                    },
                ],
            },
            Message {
                role: Role::User,
                content: vec![
                    Content::ToolResult {
                        tool_use_id: "call_1".into(),
                        content: "{\"temp\": 18}".into(),
                        is_error: false,
                    },
                    Content::ToolResult {
                        tool_use_id: "call_2".into(),
                        content: "upstream timed out".into(),
                        is_error: true,
                    },
                    Content::text("Use Celsius for both."),
                ],
            },
            Message {
                role: Role::Assistant,
                content: vec![Content::ToolUse {
                    id: "call_3".into(),
                    name: "get_weather".into(),
                    input: json!({"location": "Tokyo, Japan", "unit": "celsius"}),
                }],
            },
            Message {
                role: Role::User,
                content: vec![Content::ToolResult {
                    tool_use_id: "call_3".into(),
                    content: "Error: already failed once".into(),
                    is_error: true,
                }],
            },
        ]);
        let r = model(config(&server)).complete(&req).await.unwrap();

        let body = &bodies(&server).await[0];
        let expected = json!([
            {"role": "user", "content": "What is the weather in Paris and Tokyo?"},
            {
                "role": "assistant",
                "content": "Let me check both.",
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {
                        "name": "get_weather",
                        "arguments": "{\"location\":\"Paris, France\",\"unit\":\"celsius\"}"
                    }},
                    {"id": "call_2", "type": "function", "function": {
                        "name": "get_weather",
                        "arguments": "{\"location\":\"Tokyo, Japan\"}"
                    }}
                ]
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 18}"},
            {"role": "tool", "tool_call_id": "call_2", "content": "Error: upstream timed out"},
            {"role": "user", "content": "Use Celsius for both."},
            {
                "role": "assistant",
                "content": null,
                "tool_calls": [{"id": "call_3", "type": "function", "function": {
                    "name": "get_weather",
                    "arguments": "{\"location\":\"Tokyo, Japan\",\"unit\":\"celsius\"}"
                }}]
            },
            {"role": "tool", "tool_call_id": "call_3", "content": "Error: already failed once"}
        ]);
        // No system message when the prompt is empty.
        assert_eq!(body["messages"], expected);
        // The arguments are strings holding JSON, not objects.
        let args = body.pointer("/messages/1/tool_calls/0/function/arguments");
        let parsed: Value = serde_json::from_str(args.and_then(Value::as_str).unwrap()).unwrap();
        assert_eq!(parsed["location"], "Paris, France");

        assert_eq!(r.content, vec![Content::text("Paris 18°C, Tokyo 24°C.")]);
        assert_eq!(r.stop_reason, StopReason::EndTurn);
        // `prompt_tokens_details: null` means nothing was cached.
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 310,
                output_tokens: 9,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 0,
            }
        );
    }

    /// A real stream: a role chunk, text deltas, two tool calls whose arguments arrive in
    /// pieces, the finish chunk, the usage chunk (`choices: []`) and `[DONE]`.
    const TOOL_CALLS_STREAM: &str = concat!(
        r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        "\n\n",
        r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[{"index":0,"delta":{"content":"Checking"},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        "\n\n",
        r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[{"index":0,"delta":{"content":" both cities."},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        "\n\n",
        r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_PieqNSej6kM9hgYbcQdbZSaC","type":"function","function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        "\n\n",
        r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"lo"}}]},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        "\n\n",
        r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"cation\": \"Par"}}]},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        "\n\n",
        r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"is, France\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        "\n\n",
        r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_Bb8kHV3JLnsUHYlULwr2SgOe","type":"function","function":{"name":"get_time","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        "\n\n",
        r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"timezone\""}}]},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        "\n\n",
        r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":": \"Asia/Tokyo\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        "\n\n",
        r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}"#,
        "\n\n",
        r#"data: {"id":"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_34a54ae93c","choices":[],"usage":{"prompt_tokens":1290,"completion_tokens":61,"total_tokens":1351,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}"#,
        "\n\n",
        "data: [DONE]\n\n",
    );

    #[tokio::test]
    async fn streaming_assembles_text_tool_call_pieces_and_usage() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .and(header("authorization", "Bearer sk-test"))
            .respond_with(
                ResponseTemplate::new(200).set_body_raw(TOOL_CALLS_STREAM, "text/event-stream"),
            )
            .expect(1)
            .mount(&server)
            .await;
        let mut c = config(&server);
        c.stream = true;
        let r = model(c).complete(&request()).await.unwrap();

        let body = &bodies(&server).await[0];
        assert_eq!(body["stream"], json!(true));
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(body["model"], json!("gpt-4o-mini"));

        assert_eq!(
            r.content,
            vec![
                Content::text("Checking both cities."),
                Content::ToolUse {
                    id: "call_PieqNSej6kM9hgYbcQdbZSaC".into(),
                    name: "get_weather".into(),
                    input: json!({"location": "Paris, France"}),
                },
                Content::ToolUse {
                    id: "call_Bb8kHV3JLnsUHYlULwr2SgOe".into(),
                    name: "get_time".into(),
                    input: json!({"timezone": "Asia/Tokyo"}),
                },
            ]
        );
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        assert_eq!(r.model, "gpt-4o-mini-2024-07-18");
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 266,
                output_tokens: 61,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 1024,
            }
        );
    }

    #[tokio::test]
    async fn stream_cut_before_finish_is_retried_then_a_transport_error() {
        let server = MockServer::start().await;
        let cut = TOOL_CALLS_STREAM
            .split("data: {\"id\":\"chatcmpl-C2cpJcw8mRi3Q4aeH3Mw9UMoCm5Eb\",\"object\":\"chat.completion.chunk\",\"created\":1754668089,\"model\":\"gpt-4o-mini-2024-07-18\",\"service_tier\":\"default\",\"system_fingerprint\":\"fp_34a54ae93c\",\"choices\":[{\"index\":0,\"delta\":{},")
            .next()
            .unwrap()
            .to_owned();
        assert!(cut.len() < TOOL_CALLS_STREAM.len());
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_raw(cut, "text/event-stream"))
            .mount(&server)
            .await;
        let mut c = config(&server);
        c.stream = true;
        c.max_attempts = 2;
        let err = model(c).complete(&request()).await.unwrap_err();
        assert!(
            matches!(&err, ModelError::Transport { provider: "openai", message }
                if message.contains("[DONE]") && message.contains("after 2 attempts")),
            "{err}"
        );
        assert_eq!(bodies(&server).await.len(), 2);
    }

    #[tokio::test]
    async fn stream_without_done_after_finish_reason_is_complete() {
        let server = MockServer::start().await;
        let no_done = TOOL_CALLS_STREAM.replace("data: [DONE]\n\n", "");
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_raw(no_done, "text/event-stream"))
            .expect(1)
            .mount(&server)
            .await;
        let mut c = config(&server);
        c.stream = true;
        let r = model(c).complete(&request()).await.unwrap();
        assert_eq!(r.tool_uses().len(), 2);
        assert_eq!(r.usage.cache_read_input_tokens, 1024);
    }

    #[tokio::test]
    async fn streamed_rate_limit_error_without_retry_after_is_not_retried() {
        let server = MockServer::start().await;
        let sse = concat!(
            r#"data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1754668089,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}"#,
            "\n\n",
            r#"data: {"error":{"message":"Rate limit reached for gpt-4o-mini","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#,
            "\n\n",
        );
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream"))
            .mount(&server)
            .await;
        let mut c = config(&server);
        c.stream = true;
        c.max_attempts = 2;
        let err = model(c).complete(&request()).await.unwrap_err();
        match err {
            ModelError::Overloaded {
                provider,
                status,
                attempts,
                message,
            } => {
                assert_eq!((provider, status, attempts), ("openai", 429, 1));
                assert!(message.contains("Rate limit reached"), "{message}");
            }
            other => panic!("expected Overloaded, got {other}"),
        }
        assert_eq!(bodies(&server).await.len(), 1);
    }

    #[tokio::test]
    async fn stream_asked_but_json_answered_is_parsed() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(stop_answer("Hi.")))
            .expect(1)
            .mount(&server)
            .await;
        let mut c = config(&server);
        c.stream = true;
        let r = model(c).complete(&request()).await.unwrap();
        assert_eq!(r.text(), "Hi.");
        assert_eq!(r.stop_reason, StopReason::EndTurn);
    }

    #[tokio::test]
    async fn rate_limited_with_retry_after_then_success() {
        let server = MockServer::start().await;
        // Mocks of equal priority are tried in mount order; the first answers once.
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(429)
                    .insert_header("retry-after", "0")
                    .set_body_json(rate_limit_body()),
            )
            .up_to_n_times(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(stop_answer("Done.")))
            .mount(&server)
            .await;
        let r = model(config(&server)).complete(&request()).await.unwrap();
        assert_eq!(r.text(), "Done.");
        let sent = bodies(&server).await;
        assert_eq!(sent.len(), 2);
        // The retry sends the same body.
        assert_eq!(sent[0], sent[1]);
    }

    #[tokio::test]
    async fn retry_after_ms_is_preferred_and_a_wait_past_the_deadline_is_not_made() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(429)
                    .insert_header("retry-after", "30")
                    .insert_header("retry-after-ms", "2")
                    .set_body_json(rate_limit_body()),
            )
            .up_to_n_times(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "30"))
            .mount(&server)
            .await;
        // 2 ms fits a 10 s deadline, 30 s does not.
        let mut c = config(&server);
        c.timeout = Duration::from_secs(10);
        let err = model(c).complete(&request()).await.unwrap_err();
        assert!(
            matches!(
                err,
                ModelError::Overloaded {
                    status: 429,
                    attempts: 2,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(bodies(&server).await.len(), 2);
    }

    #[tokio::test]
    async fn rate_limited_without_retry_after_is_not_retried() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(429).set_body_json(rate_limit_body()))
            .mount(&server)
            .await;
        let mut c = config(&server);
        c.max_attempts = 3;
        let err = model(c).complete(&request()).await.unwrap_err();
        match &err {
            ModelError::Overloaded {
                provider,
                status,
                attempts,
                message,
            } => {
                assert_eq!((*provider, *status, *attempts), ("openai", 429, 1));
                assert!(message.contains("Rate limit reached"), "{message}");
            }
            other => panic!("expected Overloaded, got {other}"),
        }
        assert_eq!(bodies(&server).await.len(), 1);
    }

    #[tokio::test]
    async fn server_errors_are_retried_and_reported() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(500).set_body_json(json!({"error": {
                "message": "The server had an error while processing your request. Sorry about that!",
                "type": "server_error", "param": null, "code": null
            }})))
            .mount(&server)
            .await;
        let mut c = config(&server);
        c.max_attempts = 2;
        let err = model(c).complete(&request()).await.unwrap_err();
        assert!(
            matches!(&err, ModelError::Http { status: 500, message, .. }
                if message.contains("had an error") && message.contains("after 2 attempts")),
            "{err}"
        );
        assert_eq!(bodies(&server).await.len(), 2);
    }

    #[tokio::test]
    async fn client_errors_are_not_retried() {
        // (status, body, check)
        /// Whether the error is the one expected.
        type Check = fn(&ModelError) -> bool;
        let cases: [(u16, Value, Check); 4] = [
            (
                400,
                json!({"error": {
                    "message": "Invalid schema for function 'get_weather': In context=(), 'required' is required to be supplied and to be an array including every key in properties.",
                    "type": "invalid_request_error",
                    "param": "tools[0].function.parameters",
                    "code": "invalid_function_parameters"
                }}),
                |e| {
                    matches!(e, ModelError::Http { provider: "openai", status: 400, message }
                        if message.contains("Invalid schema for function 'get_weather'")
                            && message.contains("invalid_function_parameters"))
                },
            ),
            (
                401,
                json!({"error": {
                    "message": "Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.",
                    "type": "invalid_request_error",
                    "param": null,
                    "code": "invalid_api_key"
                }}),
                |e| {
                    matches!(e, ModelError::Auth { provider: "openai", status: 401, message }
                        if message.contains("Incorrect API key") && message.contains("OPENAI_API_KEY"))
                },
            ),
            (
                404,
                json!({"error": {
                    "message": "The model `gpt-4o-mini` does not exist or you do not have access to it.",
                    "type": "invalid_request_error",
                    "param": null,
                    "code": "model_not_found"
                }}),
                |e| {
                    matches!(e, ModelError::Http { status: 404, message, .. }
                        if message.contains("does not exist") && message.contains("base URL"))
                },
            ),
            (
                429,
                json!({"error": {
                    "message": "You exceeded your current quota, please check your plan and billing details.",
                    "type": "insufficient_quota",
                    "param": null,
                    "code": "insufficient_quota"
                }}),
                |e| {
                    matches!(e, ModelError::Overloaded { status: 429, attempts: 1, message, .. }
                        if message.contains("exceeded your current quota"))
                },
            ),
        ];
        for (status, body, check) in cases {
            let server = MockServer::start().await;
            Mock::given(method("POST"))
                .respond_with(ResponseTemplate::new(status).set_body_json(body))
                .expect(1)
                .mount(&server)
                .await;
            let err = model(config(&server))
                .complete(&request())
                .await
                .unwrap_err();
            assert!(check(&err), "{status}: {err}");
            server.verify().await;
        }
    }

    #[tokio::test]
    async fn local_server_without_key_gets_no_authorization_header() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(ResponseTemplate::new(200).set_body_json(stop_answer("Hello.")))
            .expect(2)
            .mount(&server)
            .await;
        for key in [None, Some(String::new())] {
            let mut c = config(&server);
            c.api_key = key;
            let m = model(c);
            assert_eq!(m.complete(&request()).await.unwrap().text(), "Hello.");
        }
        let reqs = server.received_requests().await.unwrap();
        assert_eq!(reqs.len(), 2);
        assert!(
            reqs.iter()
                .all(|r| !r.headers.contains_key("authorization"))
        );
    }

    #[test]
    fn missing_key_only_for_the_official_url() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        for (base_url, key) in [
            (DEFAULT_BASE_URL, None),
            ("https://api.openai.com/v1/", Some("  ")),
            ("https://api.openai.com", Some("")),
        ] {
            let err = OpenAiModel::new(OpenAiConfig {
                base_url: base_url.into(),
                api_key: key.map(str::to_owned),
                ..OpenAiConfig::default()
            })
            .unwrap_err();
            assert!(
                matches!(
                    err,
                    ModelError::MissingKey {
                        provider: "openai",
                        env: "OPENAI_API_KEY"
                    }
                ),
                "{base_url}: {err}"
            );
        }
        for (base_url, key) in [
            (DEFAULT_BASE_URL, Some("sk-x")),
            ("http://127.0.0.1:11434/v1", None),
            ("https://router.huggingface.co/v1", None),
        ] {
            let m = OpenAiModel::new(OpenAiConfig {
                base_url: base_url.into(),
                api_key: key.map(str::to_owned),
                ..OpenAiConfig::default()
            });
            assert!(m.is_ok(), "{base_url}");
        }
        let err = OpenAiModel::new(OpenAiConfig {
            base_url: "localhost:1234".into(),
            ..OpenAiConfig::default()
        })
        .unwrap_err();
        assert!(
            matches!(&err, ModelError::Transport { message, .. } if message.contains("OPENAI_BASE_URL")),
            "{err}"
        );
    }

    #[tokio::test]
    async fn unparseable_arguments_are_kept_raw() {
        let server = MockServer::start().await;
        let call = |id: &str, arguments: &str| json!({"id": id, "type": "function", "function": {"name": "get_weather", "arguments": arguments}});
        let mut answer = tool_calls_answer();
        answer["choices"][0]["message"]["tool_calls"] = json!([
            call("call_a", "{'location': 'Paris'}"),
            call("call_b", "{\"location\": \"Par"),
            call("call_c", "[\"Paris\"]"),
            call("call_d", ""),
        ]);
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer))
            .expect(1)
            .mount(&server)
            .await;
        let r = model(config(&server)).complete(&request()).await.unwrap();
        let inputs: Vec<&Value> = r.tool_uses().into_iter().map(|(_, _, i)| i).collect();
        assert_eq!(
            inputs,
            [
                &json!({"_raw": "{'location': 'Paris'}"}),
                &json!({"_raw": "{\"location\": \"Par"}),
                &json!({"_raw": "[\"Paris\"]"}),
                &json!({}),
            ]
        );
        assert_eq!(r.stop_reason, StopReason::ToolUse);
    }

    #[tokio::test]
    async fn local_server_quirks_are_tolerated() {
        let server = MockServer::start().await;
        // Ollama/vLLM style: no usage, `stop` next to a tool call, no call id, arguments as an
        // object, content parts instead of a string.
        let answer = json!({
            "id": "chatcmpl-417",
            "object": "chat.completion",
            "created": 1754668089,
            "model": "qwen2.5:7b",
            "system_fingerprint": "fp_ollama",
            "choices": [{
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "Looking it up."}],
                    "tool_calls": [{
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": {"location": "Paris"}}
                    }]
                },
                "finish_reason": "stop"
            }]
        });
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(answer))
            .expect(1)
            .mount(&server)
            .await;
        let m = model(config(&server));
        let r = m.complete(&request()).await.unwrap();
        assert_eq!(
            r.content,
            vec![
                Content::text("Looking it up."),
                Content::ToolUse {
                    id: "call_0".into(),
                    name: "get_weather".into(),
                    input: json!({"location": "Paris"}),
                },
            ]
        );
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        assert_eq!(r.usage, Usage::default());
        assert_eq!(r.model, "qwen2.5:7b");
        assert!(m.warned_no_usage.load(Ordering::Relaxed));
    }

    #[tokio::test]
    async fn unreadable_answers_are_bad_responses() {
        for (body, content_type, quoted) in [
            ("<html>gateway</html>", "text/html", "gateway"),
            (
                r#"{"error":{"message":"context window exceeded","type":"invalid_request_error"}}"#,
                "application/json",
                "context window exceeded",
            ),
            (
                r#"{"object":"chat.completion","choices":[]}"#,
                "application/json",
                "no choices",
            ),
        ] {
            let server = MockServer::start().await;
            Mock::given(method("POST"))
                .respond_with(ResponseTemplate::new(200).set_body_raw(body, content_type))
                .expect(1)
                .mount(&server)
                .await;
            let err = model(config(&server))
                .complete(&request())
                .await
                .unwrap_err();
            assert!(
                matches!(&err, ModelError::BadResponse { provider: "openai", message } if message.contains(quoted)),
                "{body}: {err}"
            );
        }
    }

    #[tokio::test]
    async fn dead_server_is_a_transport_error_after_retries() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let m = model(OpenAiConfig {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            max_attempts: 2,
            retry_base: Duration::from_millis(5),
            ..OpenAiConfig::default()
        });
        let err = m.complete(&request()).await.unwrap_err();
        assert!(
            matches!(&err, ModelError::Transport { provider: "openai", message }
                if message.contains("/v1/chat/completions") && message.contains("after 2 attempts")),
            "{err}"
        );
    }

    #[test]
    fn defaults_and_redacted_debug() {
        let c = OpenAiConfig {
            api_key: Some("sk-secret".into()),
            ..OpenAiConfig::default()
        };
        assert_eq!(c.base_url, "https://api.openai.com/v1");
        assert_eq!(c.model, "gpt-4o-mini");
        assert!(!c.stream);
        assert_eq!(c.max_attempts, 3);
        assert_eq!(c.retry_base, Duration::from_millis(500));
        assert_eq!(c.timeout, Duration::from_secs(120));
        let debug = format!("{c:?}");
        assert!(
            !debug.contains("sk-secret") && debug.contains("<redacted>"),
            "{debug}"
        );
        assert_eq!(OpenAiConfig::default().api_key, None);
    }

    #[test]
    fn retry_after_prefers_milliseconds() {
        let check = |pairs: &[(&'static str, &str)], expected: Option<Duration>| {
            let mut h = HeaderMap::new();
            for (name, value) in pairs {
                h.insert(*name, HeaderValue::from_str(value).unwrap());
            }
            assert_eq!(retry_after(&h), expected, "{pairs:?}");
        };
        check(&[("retry-after", "0")], Some(Duration::ZERO));
        check(&[("retry-after", "7")], Some(Duration::from_secs(7)));
        check(&[("retry-after", "1.5")], Some(Duration::from_millis(1500)));
        check(
            &[("retry-after-ms", "339")],
            Some(Duration::from_millis(339)),
        );
        check(
            &[("retry-after", "1"), ("retry-after-ms", "339")],
            Some(Duration::from_millis(339)),
        );
        check(
            &[("retry-after", "2"), ("retry-after-ms", "soon")],
            Some(Duration::from_secs(2)),
        );
        check(&[("retry-after", "-1")], None);
        check(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")], None);
        check(&[], None);
    }

    #[test]
    fn stop_reasons_map() {
        let check = |s: Option<&str>, calls: bool, expected| {
            assert_eq!(stop_reason(s, calls), expected, "{s:?} {calls}");
        };
        check(Some("stop"), false, StopReason::EndTurn);
        check(Some("stop"), true, StopReason::ToolUse);
        check(Some("tool_calls"), true, StopReason::ToolUse);
        check(Some("function_call"), true, StopReason::ToolUse);
        check(Some("length"), false, StopReason::MaxTokens);
        check(Some("length"), true, StopReason::MaxTokens);
        check(Some("content_filter"), false, StopReason::Other);
        check(None, false, StopReason::Other);
    }

    #[test]
    fn error_bodies_of_compatible_servers_are_read() {
        let check = |body: &str, message: &str, status: u16| {
            let e = ErrorBody::parse(body);
            assert_eq!(e.describe(), message, "{body}");
            assert_eq!(e.status_hint(), status, "{body}");
        };
        check(
            r#"{"error":{"message":"Bad key","type":"invalid_request_error","code":"invalid_api_key"}}"#,
            "Bad key (code: invalid_api_key)",
            401,
        );
        // vLLM: flat, numeric code.
        check(
            r#"{"object":"error","message":"max_tokens is too large","type":"BadRequestError","param":null,"code":400}"#,
            "max_tokens is too large",
            400,
        );
        // Ollama's native shape and FastAPI's.
        check(
            r#"{"error":"model \"llama9\" not found"}"#,
            "model \"llama9\" not found",
            500,
        );
        check(r#"{"detail":"Not Found"}"#, "Not Found", 500);
        check("Bad Gateway", "Bad Gateway", 500);
        check("", "(empty body)", 500);
        // Long messages are cut.
        let long = format!(r#"{{"error":{{"message":"{}"}}}}"#, "x".repeat(1000));
        assert_eq!(ErrorBody::parse(&long).describe().len(), MAX_QUOTED);
    }
}
