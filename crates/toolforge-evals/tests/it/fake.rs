//! A scripted OpenAI-compatible server on loopback: `/v1/models`, `/v1/chat/completions`
//! (streamed SSE with text and tool-call deltas, or plain JSON) and `/v1/embeddings` (the
//! hashing embedder, answered in reverse order so clients must match by `index`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Streamed text (split into a few deltas).
    Text(String),
    /// Text, then tool calls `(name, arguments text)`, each call's arguments split in two deltas.
    Tools {
        text: String,
        calls: Vec<(String, String)>,
    },
    /// An error status with a JSON error body.
    Status(u16, String),
    /// A non-streamed JSON completion with this text.
    Whole(String),
    /// Wait, then answer.
    Delay(Duration, Box<Reply>),
    /// A stream cut off before its end.
    Cut,
}

impl Reply {
    pub fn text(s: &str) -> Self {
        Self::Text(s.to_owned())
    }

    pub fn tools(text: &str, calls: &[(&str, &str)]) -> Self {
        Self::Tools {
            text: text.to_owned(),
            calls: calls
                .iter()
                .map(|(n, a)| ((*n).to_owned(), (*a).to_owned()))
                .collect(),
        }
    }

    pub fn delay(ms: u64, inner: Reply) -> Self {
        Self::Delay(Duration::from_millis(ms), Box::new(inner))
    }
}

/// What the fake knows and saw.
#[derive(Default)]
pub struct FakeState {
    pub models: Mutex<Vec<String>>,
    /// Answer `/v1/models` with this status instead.
    pub models_status: Mutex<Option<u16>>,
    /// Answer `/v1/models` as a bare array (Together's shape).
    pub bare_models: Mutex<bool>,
    pub replies: Mutex<VecDeque<Reply>>,
    /// Chat request bodies, in arrival order.
    pub requests: Mutex<Vec<Value>>,
    /// Authorization headers of chat requests.
    pub auth: Mutex<Vec<Option<String>>>,
    pub embed_requests: Mutex<Vec<Value>>,
    pub models_calls: AtomicUsize,
    in_flight: Mutex<Vec<String>>,
    pub max_in_flight: AtomicUsize,
    /// Largest number of distinct models in flight at once.
    pub max_models_in_flight: AtomicUsize,
}

/// A running fake; stops when dropped.
pub struct Fake {
    pub url: String,
    pub state: Arc<FakeState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Fake {
    pub async fn start(models: &[&str]) -> Self {
        let state = Arc::new(FakeState::default());
        *state.models.lock().unwrap() = models.iter().map(|m| (*m).to_owned()).collect();
        let app = axum::Router::new()
            .route("/v1/models", get(list_models))
            .route("/v1/chat/completions", post(chat))
            .route("/v1/embeddings", post(embeddings))
            .with_state(Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url, state, task }
    }

    /// Queues answers for the next chat requests.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.state.replies.lock().unwrap().extend(replies);
    }

    pub fn requests(&self) -> Vec<Value> {
        self.state.requests.lock().unwrap().clone()
    }

    pub fn last_request(&self) -> Value {
        self.requests().last().cloned().expect("a chat request")
    }
}

async fn list_models(State(state): State<Arc<FakeState>>) -> Response {
    state.models_calls.fetch_add(1, Ordering::SeqCst);
    if let Some(status) = *state.models_status.lock().unwrap() {
        return (
            StatusCode::from_u16(status).unwrap(),
            Json(json!({"error": {"message": "models unavailable"}})),
        )
            .into_response();
    }
    let data: Vec<Value> = state
        .models
        .lock()
        .unwrap()
        .iter()
        .map(|m| json!({"id": m, "object": "model", "owned_by": "fake"}))
        .collect();
    if *state.bare_models.lock().unwrap() {
        return Json(Value::Array(data)).into_response();
    }
    Json(json!({"object": "list", "data": data})).into_response()
}

fn sse(chunks: &[Value], done: bool) -> Response {
    let mut body = String::new();
    for c in chunks {
        body.push_str(&format!("data: {c}\n\n"));
    }
    if done {
        body.push_str("data: [DONE]\n\n");
    }
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from(body))
        .unwrap()
}

fn delta(d: Value) -> Value {
    json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": d, "finish_reason": null}]})
}

fn finish(reason: &str) -> Value {
    json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

fn text_chunks(text: &str) -> Vec<Value> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = vec![delta(json!({"role": "assistant", "content": ""}))];
    for piece in chars.chunks(7) {
        out.push(delta(json!({"content": piece.iter().collect::<String>()})));
    }
    out
}

fn render(reply: Reply) -> Response {
    match reply {
        Reply::Text(t) => {
            let mut chunks = text_chunks(&t);
            chunks.push(finish("stop"));
            sse(&chunks, true)
        }
        Reply::Tools { text, calls } => {
            let mut chunks = text_chunks(&text);
            for (i, (name, args)) in calls.iter().enumerate() {
                let mid = args.len() / 2;
                let mid = (0..=mid).rev().find(|m| args.is_char_boundary(*m)).unwrap_or(0);
                chunks.push(delta(json!({"tool_calls": [{"index": i, "id": format!("srv_{i}"), "type": "function",
                    "function": {"name": name, "arguments": &args[..mid]}}]})));
                chunks.push(delta(json!({"tool_calls": [{"index": i, "function": {"arguments": &args[mid..]}}]})));
            }
            chunks.push(finish("tool_calls"));
            sse(&chunks, true)
        }
        Reply::Status(status, message) => (
            StatusCode::from_u16(status).unwrap(),
            Json(json!({"error": {"message": message, "type": "fake"}})),
        )
            .into_response(),
        Reply::Whole(t) => Json(json!({
            "id": "c", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}]
        }))
        .into_response(),
        Reply::Cut => sse(&text_chunks("partial"), false),
        Reply::Delay(_, inner) => render(*inner),
    }
}

async fn chat(
    State(state): State<Arc<FakeState>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    state.requests.lock().unwrap().push(body.clone());
    state.auth.lock().unwrap().push(
        headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    );
    let model = body["model"].as_str().unwrap_or_default().to_owned();
    {
        let mut flight = state.in_flight.lock().unwrap();
        flight.push(model.clone());
        state
            .max_in_flight
            .fetch_max(flight.len(), Ordering::SeqCst);
        let mut distinct = flight.clone();
        distinct.sort();
        distinct.dedup();
        state
            .max_models_in_flight
            .fetch_max(distinct.len(), Ordering::SeqCst);
    }
    let reply = state
        .replies
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or_else(|| {
            let last = body["messages"]
                .as_array()
                .and_then(|m| m.last())
                .and_then(|m| m["content"].as_str())
                .unwrap_or_default()
                .to_owned();
            Reply::Text(format!("echo: {last}"))
        });
    let mut r = &reply;
    while let Reply::Delay(d, inner) = r {
        tokio::time::sleep(*d).await;
        r = inner;
    }
    {
        let mut flight = state.in_flight.lock().unwrap();
        if let Some(pos) = flight.iter().position(|m| *m == model) {
            flight.remove(pos);
        }
    }
    render(reply)
}

async fn embeddings(State(state): State<Arc<FakeState>>, Json(body): Json<Value>) -> Response {
    state.embed_requests.lock().unwrap().push(body.clone());
    let model = body["model"].as_str().unwrap_or_default();
    if !state.models.lock().unwrap().iter().any(|m| m == model) {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({"error": {"message": format!("model {model} not found")}})),
        )
            .into_response();
    }
    let e = toolforge_llm::embed::HashingEmbedder::new(64);
    let inputs: Vec<String> = body["input"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let mut data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": e.embed_one(t)}))
        .collect();
    data.reverse();
    Json(json!({"object": "list", "data": data, "model": model})).into_response()
}
