//! Test fixture: a hand-written Streamable HTTP backend (sessions, JSON and event-stream
//! answers, an expiring session, a connection that breaks mid-answer) and an [`Upstream`]
//! connected to it the way the pool connects to HTTP servers.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use futures::StreamExt as _;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::options::PoolOptions;
use crate::relay::{ElicitationFallback, PoolEvent, Relay};
use crate::upstream::{ServerState, Upstream};

/// How the backend answers `tools/call`.
#[derive(Clone, Copy)]
pub(crate) enum CallReply {
    /// The result as the POST's JSON body.
    Json,
    /// An event stream: `notifications/tools/list_changed`, then the result.
    ListChangedFirst,
    /// An event stream: an `elicitation/create` request (id `e1`), then, once the client has
    /// posted its answer, the result.
    ElicitFirst,
    /// An event stream: `notifications/tools/list_changed`, then nothing until the client
    /// closes it.
    ListChangedThenNothing,
    /// The first call: 404, the session forgotten (not run); then as [`Self::Json`].
    ExpireFirst,
    /// Run, then the connection breaks before the answer is complete.
    Break,
}

/// What the backend saw.
#[derive(Default)]
pub(crate) struct Seen {
    pub initializes: u32,
    /// `tools/call`s run (a 404 for an expired session runs nothing).
    pub calls: u32,
    /// `_meta` of each `tools/call` run.
    pub call_meta: Vec<Value>,
    /// Answers the client posted to the backend's own requests.
    pub answers: Vec<Value>,
    /// Event streams the client closed before their end.
    pub streams_dropped: u32,
}

struct Backend {
    reply: CallReply,
    seen: Mutex<Seen>,
    session: Mutex<Option<String>>,
    /// The waiting `ElicitFirst` call, told the client's answer.
    answer_waiter: Mutex<Option<oneshot::Sender<()>>>,
}

/// A backend answering `tools/call` by `reply`, on a loopback port: its URL and what it saw.
pub(crate) async fn http_backend(reply: CallReply) -> (String, Arc<BackendSeen>) {
    let backend = Arc::new(Backend {
        reply,
        seen: Mutex::new(Seen::default()),
        session: Mutex::new(None),
        answer_waiter: Mutex::new(None),
    });
    let app = axum::Router::new()
        .route("/mcp", any(handle))
        .with_state(backend.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, Arc::new(BackendSeen(backend)))
}

/// A view of what the backend saw.
pub(crate) struct BackendSeen(Arc<Backend>);

impl BackendSeen {
    pub fn get<T>(&self, read: impl FnOnce(&Seen) -> T) -> T {
        read(&self.0.seen.lock())
    }
}

async fn handle(
    State(backend): State<Arc<Backend>>,
    method: axum::http::Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if method == axum::http::Method::GET {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    if method != axum::http::Method::POST {
        return StatusCode::OK.into_response();
    }
    let message: Value = serde_json::from_slice(&body).unwrap_or_default();
    let Some(name) = message["method"].as_str() else {
        // The client's answer to one of our requests.
        backend.seen.lock().answers.push(message);
        if let Some(waiter) = backend.answer_waiter.lock().take() {
            let _ = waiter.send(());
        }
        return StatusCode::ACCEPTED.into_response();
    };
    if name == "initialize" {
        let session = {
            let mut seen = backend.seen.lock();
            seen.initializes += 1;
            format!("s{}", seen.initializes)
        };
        *backend.session.lock() = Some(session.clone());
        let result = json!({
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "fake-http", "version": "0"}});
        let mut response = json_answer(&message["id"], result);
        response
            .headers_mut()
            .insert("mcp-session-id", session.parse().unwrap());
        return response;
    }
    let current = backend.session.lock().clone();
    let named = headers.get("mcp-session-id").and_then(|v| v.to_str().ok());
    if current.is_none() || named != current.as_deref() {
        return StatusCode::NOT_FOUND.into_response();
    }
    let Some(id) = message.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response(); // a notification
    };
    match name {
        "tools/list" => json_answer(&id, json!({"tools": []})),
        "tools/call" => call(&backend, &message, id).await,
        _ => json_answer(&id, json!({})),
    }
}

async fn call(backend: &Arc<Backend>, message: &Value, id: Value) -> Response {
    if matches!(backend.reply, CallReply::ExpireFirst) && backend.seen.lock().initializes == 1 {
        *backend.session.lock() = None;
        return StatusCode::NOT_FOUND.into_response();
    }
    {
        let mut seen = backend.seen.lock();
        seen.calls += 1;
        seen.call_meta.push(message["params"]["_meta"].clone());
    }
    let result = json!({"content": [{"type": "text", "text": "done"}], "isError": false});
    let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
    match backend.reply {
        CallReply::Json | CallReply::ExpireFirst => json_answer(&id, result),
        CallReply::ListChangedFirst => {
            let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
            event_stream(vec![event(&changed), event(&answer)], None)
        }
        CallReply::ListChangedThenNothing => {
            let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
            // Never told: the answer stays behind until the client closes the stream.
            let (never_told, never) = oneshot::channel::<()>();
            let dropped = DropCounter(backend.clone());
            let stream = event_stream_body(vec![event(&changed)], Some((never, event(&answer))));
            let counted = stream.map(move |chunk| {
                let _held = (&dropped, &never_told);
                chunk
            });
            sse_response(Body::from_stream(counted))
        }
        CallReply::ElicitFirst => {
            let (told, answered) = oneshot::channel();
            *backend.answer_waiter.lock() = Some(told);
            let ask = json!({"jsonrpc": "2.0", "id": "e1", "method": "elicitation/create",
                "params": {"message": "Go on?", "requestedSchema": {"type": "object", "properties": {}}}});
            event_stream(vec![event(&ask)], Some((answered, event(&answer))))
        }
        CallReply::Break => {
            let broken = futures::stream::iter([
                Ok(Bytes::from_static(b"{\"jsonrpc\":\"2.0\",")),
                Err(std::io::Error::other("the backend crashed")),
            ]);
            Response::builder()
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from_stream(broken))
                .unwrap()
        }
    }
}

fn json_answer(id: &Value, result: Value) -> Response {
    let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(answer.to_string()))
        .unwrap()
}

fn event(message: &Value) -> Bytes {
    Bytes::from(format!("event: message\ndata: {message}\n\n"))
}

/// An event stream of `events`, then, once `after` is told, its event.
fn event_stream(events: Vec<Bytes>, after: Option<(oneshot::Receiver<()>, Bytes)>) -> Response {
    sse_response(Body::from_stream(event_stream_body(events, after)))
}

fn event_stream_body(
    events: Vec<Bytes>,
    after: Option<(oneshot::Receiver<()>, Bytes)>,
) -> impl futures::Stream<Item = Result<Bytes, Infallible>> + Send + 'static {
    let first = futures::stream::iter(events.into_iter().map(Ok::<_, Infallible>));
    let then = futures::stream::iter(after).then(|(told, event)| async move {
        let _ = told.await;
        Ok(event)
    });
    first.chain(then)
}

fn sse_response(body: Body) -> Response {
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(body)
        .unwrap()
}

/// Counts, when dropped, an event stream closed before its end.
struct DropCounter(Arc<Backend>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.seen.lock().streams_dropped += 1;
    }
}

/// A ready [`Upstream`] named `pay` (call timeout 30 s) connected to `url` as the pool connects
/// to HTTP servers, with the events its relay sends.
pub(crate) async fn connected_http(
    url: &str,
) -> (Arc<Upstream>, mpsc::UnboundedReceiver<PoolEvent>) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // The fake speaks the handshake era only (the direct call path is a session's).
    let text =
        json!({"mcpServers": {"pay": {"url": url, "timeout": 30, "protocol": "2025-11-25"}}});
    let cfg = crate::config::parse(&text.to_string(), &|_| None)
        .expect("config")
        .servers
        .remove(0);
    let (events, received) = mpsc::unbounded_channel();
    let relay = Relay::new("pay", events, ElicitationFallback::Decline);
    let up = Arc::new(Upstream::new(cfg, relay, None));
    let client = crate::connect::connect(&up, &PoolOptions::default())
        .await
        .expect("initialize");
    *up.peer.write() = Some(client.peer().clone());
    up.set_state(ServerState::Ready, None);
    // The connection task lives as long as the test's runtime.
    tokio::spawn(async move {
        let _ = client.waiting().await;
    });
    (up, received)
}
