//! One chat completion against the server the router picks, always streamed (the seed's
//! internal `complete_stream`, which is not an MCP tool).
//!
//! The Python server passes text chunks plus two string sentinels (`__TOOL_CALLS__:` and
//! `__LATENCY_MS__:`) down its stream. Here they are typed events ([`StreamEvent`]): text
//! deltas as they arrive, then the assembled tool calls, then the latency. `complete` keeps the
//! text only; `react_step` reads all three. Nothing of this reaches the MCP wire as a sentinel.
//!
//! Why not `toolforge_llm::openai`: the agent's provider takes neutral messages and has no
//! temperature, seed, penalty or `response_format`, while these tools pass OpenAI messages
//! through untouched and must measure latency and see tool-call deltas.

use std::collections::{BTreeMap, VecDeque};
use std::pin::Pin;
use std::time::Instant;

use eventsource_stream::{EventStreamError, Eventsource as _};
use futures::{Stream, StreamExt as _};
use serde_json::{Value, json};

use crate::adapter::{AdapterKind, Composite, Slot};
use crate::error::{EvalError, describe, quote};

/// A request as the caller gave it; the messages and tools are OpenAI-shaped and passed through.
#[derive(Debug, Clone, Default)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<Value>,
    pub temperature: f64,
    pub max_tokens: u32,
    /// OpenAI tool definitions; bare function objects are wrapped as `{"type": "function"}`.
    pub tools: Option<Vec<Value>>,
    pub seed: Option<i64>,
    pub repeat_penalty: Option<f64>,
    /// Passed to the server as is, never interpreted.
    pub response_format: Option<Value>,
}

impl ChatRequest {
    fn body(&self, kind: AdapterKind) -> Value {
        let mut body = json!({
            "model": self.model,
            "messages": self.messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "stream": true,
        });
        if let Some(tools) = self.tools.as_ref().filter(|t| !t.is_empty()) {
            body["tools"] = Value::Array(tools.iter().map(normalize_tool).collect());
        }
        if let Some(seed) = self.seed {
            body["seed"] = seed.into();
        }
        if let Some(p) = self.repeat_penalty {
            body[kind.repeat_penalty_field()] = p.into();
        }
        if let Some(f) = &self.response_format {
            body["response_format"] = f.clone();
        }
        body
    }
}

/// `{"name", "parameters", ...}` → `{"type": "function", "function": {...}}`; tools already in
/// that shape pass unchanged.
fn normalize_tool(tool: &Value) -> Value {
    if tool.get("type").and_then(Value::as_str) == Some("function")
        && tool.get("function").is_some()
    {
        tool.clone()
    } else {
        json!({"type": "function", "function": tool})
    }
}

/// A tool call as the model sent it: the arguments are still text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawToolCall {
    pub name: String,
    pub arguments: String,
}

/// What the stream yields.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// A piece of the answer's text.
    Text(String),
    /// Every tool call of the answer, assembled (sent once, after the last text).
    ToolCalls(Vec<RawToolCall>),
    /// Milliseconds from sending the request to the end of the answer (always last).
    Latency(f64),
}

/// A whole answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Completion {
    pub text: String,
    pub tool_calls: Vec<RawToolCall>,
    pub latency_ms: f64,
}

type SseStream = Pin<
    Box<
        dyn Stream<Item = Result<eventsource_stream::Event, EventStreamError<reqwest::Error>>>
            + Send,
    >,
>;

#[derive(Debug, Default)]
struct PartialCall {
    name: String,
    arguments: String,
}

/// An answer being streamed; holds its server slot until dropped.
pub struct ChatStream {
    source: Option<SseStream>,
    calls: BTreeMap<u64, PartialCall>,
    queue: VecDeque<StreamEvent>,
    saw_finish: bool,
    started: Instant,
    url: String,
    _slot: Slot,
}

impl std::fmt::Debug for ChatStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatStream")
            .field("url", &self.url)
            .finish()
    }
}

/// Sends `request` to a server that lists its model (waiting for a free slot) and returns the
/// answer as a stream of events.
///
/// # Errors
/// No server for the model, the connection fails, or the server answers 4xx/5xx.
pub async fn stream(composite: &Composite, request: &ChatRequest) -> Result<ChatStream, EvalError> {
    let slot = composite.acquire(&request.model).await?;
    let server = slot.server();
    let url = server.endpoint("chat/completions");
    let body = request.body(server.kind());
    let mut req = composite.http().post(&url).json(&body);
    if let Some(key) = server.api_key() {
        req = req.bearer_auth(key);
    }
    let started = Instant::now();
    let resp = req.send().await.map_err(|e| EvalError::Transport {
        url: url.clone(),
        message: describe(&e),
    })?;
    let status = resp.status();
    if !status.is_success() {
        let text = resp.text().await.unwrap_or_default();
        return Err(EvalError::HttpStatus {
            status: status.as_u16(),
            url,
            message: quote(&text),
        });
    }
    let is_sse = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let mut stream = ChatStream {
        source: None,
        calls: BTreeMap::new(),
        queue: VecDeque::new(),
        saw_finish: false,
        started,
        url,
        _slot: slot,
    };
    if is_sse {
        stream.source = Some(Box::pin(resp.bytes_stream().eventsource()));
    } else {
        // A JSON answer although a stream was asked for (some proxies ignore `stream`).
        let text = resp.text().await.map_err(|e| EvalError::Transport {
            url: stream.url.clone(),
            message: describe(&e),
        })?;
        stream.read_whole(&text)?;
    }
    Ok(stream)
}

impl ChatStream {
    /// The next event; `None` after [`StreamEvent::Latency`].
    pub async fn next_event(&mut self) -> Option<Result<StreamEvent, EvalError>> {
        loop {
            if let Some(e) = self.queue.pop_front() {
                return Some(Ok(e));
            }
            let source = self.source.as_mut()?;
            match source.next().await {
                None => {
                    if !self.saw_finish {
                        self.source = None;
                        return Some(Err(EvalError::Transport {
                            url: self.url.clone(),
                            message: "the stream ended before the answer was complete".into(),
                        }));
                    }
                    self.finish();
                }
                Some(Err(EventStreamError::Transport(e))) => {
                    self.source = None;
                    return Some(Err(EvalError::Transport {
                        url: self.url.clone(),
                        message: describe(&e),
                    }));
                }
                Some(Err(e)) => {
                    self.source = None;
                    return Some(Err(self.bad(format!("invalid SSE: {e}"))));
                }
                Some(Ok(event)) => {
                    let data = event.data.trim();
                    if data.is_empty() {
                        continue;
                    }
                    if data == "[DONE]" {
                        self.finish();
                        continue;
                    }
                    if let Err(e) = self.apply_chunk(data) {
                        self.source = None;
                        return Some(Err(e));
                    }
                }
            }
        }
    }

    /// Reads the whole answer.
    ///
    /// # Errors
    /// As [`ChatStream::next_event`].
    pub async fn collect(mut self) -> Result<Completion, EvalError> {
        let mut out = Completion::default();
        while let Some(event) = self.next_event().await {
            match event? {
                StreamEvent::Text(t) => out.text.push_str(&t),
                StreamEvent::ToolCalls(c) => out.tool_calls = c,
                StreamEvent::Latency(ms) => out.latency_ms = ms,
            }
        }
        Ok(out)
    }

    fn bad(&self, message: String) -> EvalError {
        EvalError::BadResponse {
            url: self.url.clone(),
            message,
        }
    }

    fn finish(&mut self) {
        self.source = None;
        let calls: Vec<RawToolCall> = std::mem::take(&mut self.calls)
            .into_values()
            // A call without a name is no call (some servers send empty trailing deltas).
            .filter(|c| !c.name.is_empty())
            .map(|c| RawToolCall {
                name: c.name,
                arguments: c.arguments,
            })
            .collect();
        if !calls.is_empty() {
            self.queue.push_back(StreamEvent::ToolCalls(calls));
        }
        let ms = self.started.elapsed().as_secs_f64() * 1000.0;
        self.queue
            .push_back(StreamEvent::Latency((ms * 10.0).round() / 10.0));
    }

    fn apply_chunk(&mut self, data: &str) -> Result<(), EvalError> {
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| self.bad(format!("stream chunk is not JSON ({e}): {}", quote(data))))?;
        if let Some(error) = chunk.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_owned);
            return Err(self.bad(format!("error in the stream: {message}")));
        }
        let Some(choice) = chunk.pointer("/choices/0") else {
            return Ok(()); // usage-only or keep-alive chunks
        };
        if choice.get("finish_reason").is_some_and(|f| !f.is_null()) {
            self.saw_finish = true;
        }
        let Some(delta) = choice.get("delta").or_else(|| choice.get("message")) else {
            return Ok(());
        };
        if let Some(text) = delta.get("content").and_then(Value::as_str)
            && !text.is_empty()
        {
            self.queue.push_back(StreamEvent::Text(text.to_owned()));
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for (pos, call) in calls.iter().enumerate() {
                let index = call
                    .get("index")
                    .and_then(Value::as_u64)
                    .unwrap_or(pos as u64);
                let entry = self.calls.entry(index).or_default();
                let function = call.get("function").unwrap_or(&Value::Null);
                if let Some(name) = function.get("name").and_then(Value::as_str)
                    && !name.is_empty()
                {
                    name.clone_into(&mut entry.name);
                }
                match function.get("arguments") {
                    Some(Value::String(piece)) => entry.arguments.push_str(piece),
                    Some(Value::Null) | None => {}
                    // A few servers send the arguments as an object.
                    Some(other) => entry.arguments.push_str(&other.to_string()),
                }
            }
        }
        Ok(())
    }

    /// A non-streamed answer: the whole message at once.
    fn read_whole(&mut self, text: &str) -> Result<(), EvalError> {
        let body: Value = serde_json::from_str(text)
            .map_err(|e| self.bad(format!("answer is not JSON ({e}): {}", quote(text))))?;
        let Some(message) = body.pointer("/choices/0/message") else {
            return Err(self.bad(format!("answer has no choices[0].message: {}", quote(text))));
        };
        self.saw_finish = true;
        let wrapped = json!({"choices": [{"delta": message, "finish_reason": "stop"}]});
        self.apply_chunk(&wrapped.to_string())?;
        self.finish();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_passes_options_through_and_wraps_bare_tools() {
        let req = ChatRequest {
            model: "m".into(),
            messages: vec![json!({"role": "user", "content": "hi"})],
            temperature: 0.5,
            max_tokens: 9,
            tools: Some(vec![
                json!({"name": "f", "parameters": {"type": "object"}}),
                json!({"type": "function", "function": {"name": "g"}}),
            ]),
            seed: Some(7),
            repeat_penalty: Some(1.1),
            response_format: Some(json!({"type": "json_object"})),
        };
        let b = req.body(AdapterKind::LmStudio);
        assert_eq!(b["tools"][0]["function"]["name"], "f");
        assert_eq!(b["tools"][1]["function"]["name"], "g");
        assert_eq!(b["seed"], 7);
        assert_eq!(b["repeat_penalty"], 1.1);
        assert_eq!(b["response_format"]["type"], "json_object");
        assert_eq!(b["stream"], true);
        let b = req.body(AdapterKind::Together);
        assert_eq!(b["repetition_penalty"], 1.1);
        assert!(b.get("repeat_penalty").is_none());
        let bare = ChatRequest::default().body(AdapterKind::LmStudio);
        assert!(bare.get("tools").is_none() && bare.get("seed").is_none());
    }
}
