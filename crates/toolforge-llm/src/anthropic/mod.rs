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

use std::fmt;
use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource};
use futures::StreamExt;
use futures::future::BoxFuture;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER};
use serde::{Deserialize, Serialize};
use toolforge_retry::{Failure as RetryFailure, RetryPolicy};
use tracing::warn;

mod stream;
mod wire;

use stream::{Assembler, Flow, StreamEvent, StreamFailure};
use wire::{
    ApiErrorEnvelope, PROVIDER, WireMessage, WireSystem, WireToolEntry, bad_response,
    parse_response, wire_request_with,
};

use crate::model::{Model, ModelError, ModelRequest, ModelResponse, ProviderToolSearch};
use crate::provider_http::{Failure, error_chain, quote, transport_kind, with_retries};

/// Anthropic's public endpoint (`/v1/messages` is appended).
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// The model used when none is configured.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-6";

/// The `anthropic-version` header every request carries.
pub const API_VERSION: &str = "2023-06-01";

const KEY_ENV: &str = "ANTHROPIC_API_KEY";

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
    /// Anthropic's tool search tool (`ANTHROPIC_TOOL_SEARCH=bm25|regex`; off by default): the
    /// tools the agent's first offer leaves out are sent with `defer_loading` and the model
    /// searches them server-side, instead of through the agent's `search_tools`.
    pub tool_search: Option<ProviderToolSearch>,
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
            tool_search: None,
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
            .field("tool_search", &self.tool_search)
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
        let body = wire_request_with(
            &self.config.model,
            request,
            self.config.stream,
            self.config.tool_search,
        );
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

    fn tool_search(&self) -> Option<ProviderToolSearch> {
        self.config.tool_search
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
            let config = &self.config;
            with_retries(
                PROVIDER,
                config.max_attempts,
                config.retry_base,
                config.timeout,
                |limit| self.attempt(&body, limit),
            )
            .await
        })
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

// ---- token counting ----

impl AnthropicModel {
    /// `POST /v1/messages/count_tokens`: the input tokens `request` would be billed.
    async fn count_tokens(&self, request: &ModelRequest) -> Result<u64, ModelError> {
        let url = format!(
            "{}/v1/messages/count_tokens",
            self.config.base_url.trim_end_matches('/')
        );
        let full = wire_request_with(&self.config.model, request, false, self.config.tool_search);
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
    tools: Vec<WireToolEntry<'a>>,
    messages: Vec<WireMessage<'a>>,
}

#[derive(Deserialize)]
struct WireCount {
    input_tokens: u64,
}

#[cfg(test)]
mod tests;
