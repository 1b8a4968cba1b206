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

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use eventsource_stream::{EventStreamError, Eventsource};
use futures::StreamExt;
use futures::future::BoxFuture;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER};
use toolforge_retry::{Failure as RetryFailure, RetryPolicy};
use tracing::warn;

mod responses;
mod stream;
mod wire;

use stream::{Assembler, WireChunk};
use wire::{Answer, ErrorBody, PROVIDER, bad_response, parse_response, wire_request};

use crate::model::{
    InputBound, Model, ModelError, ModelRequest, ModelResponse, ProviderToolSearch,
};
use crate::provider_http::{Failure, error_chain, quote, transport_kind, with_retries};

/// OpenAI's public endpoint, version path included (`/chat/completions` is appended), as in the
/// official SDKs' `OPENAI_BASE_URL`.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The model used when none is configured.
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";

const KEY_ENV: &str = "OPENAI_API_KEY";
const BASE_URL_ENV: &str = "OPENAI_BASE_URL";

/// The only host that is known to need a key; any other base URL may be a local server.
const OFFICIAL_HOST: &str = "api.openai.com";

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
    /// OpenAI's hosted tool search (`OPENAI_TOOL_SEARCH=on`; off by default): every call goes
    /// to the Responses API (`{base}/responses`, plain JSON, `stream` ignored), the tools the
    /// agent's first offer leaves out sent with `defer_loading` after a `tool_search` tool the
    /// server runs (see the `responses` module).
    pub tool_search: bool,
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
            tool_search: false,
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
            .field("tool_search", &self.tool_search)
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
        let url = if config.tool_search {
            format!("{base}/responses")
        } else {
            format!("{base}/chat/completions")
        };
        Ok(Self {
            config,
            client,
            url,
            warned_no_usage: Arc::new(AtomicBool::new(false)),
        })
    }

    /// The request body, serialised once and re-sent as is on every attempt.
    fn encode(&self, request: &ModelRequest) -> Result<Vec<u8>, ModelError> {
        let body = if self.config.tool_search {
            serde_json::to_vec(&responses::responses_request(&self.config.model, request))
        } else {
            serde_json::to_vec(&wire_request(
                &self.config.model,
                request,
                self.config.stream,
            ))
        };
        body.map_err(|e| ModelError::Transport {
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
        if !self.streams() {
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
        if self.config.tool_search {
            return responses::parse_responses(&text, &self.config.model).map_err(Failure::fatal);
        }
        parse_response(&text, &self.config.model).map_err(Failure::fatal)
    }

    /// True when calls ask for a stream (never with the hosted tool search).
    fn streams(&self) -> bool {
        self.config.stream && !self.config.tool_search
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

    fn tool_search(&self) -> Option<ProviderToolSearch> {
        self.config
            .tool_search
            .then_some(ProviderToolSearch::Hosted)
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
            let config = &self.config;
            let answer = with_retries(
                PROVIDER,
                config.max_attempts,
                config.retry_base,
                config.timeout,
                |limit| self.attempt(&body, limit),
            )
            .await?;
            if !answer.has_usage {
                self.note_missing_usage();
            }
            Ok(answer.response)
        })
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

#[cfg(test)]
mod tests;
