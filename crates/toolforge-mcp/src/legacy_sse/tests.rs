//! The legacy transport against a hand-written 2024-11-05 server (axum on loopback): an event
//! stream whose first event names where to POST, each POST answered 202 and its answer sent on
//! the stream.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::*;

/// The fake server's state: the stream of its one session, and what it was sent.
#[derive(Default)]
struct Fake {
    stream: Mutex<Option<mpsc::UnboundedSender<Bytes>>>,
    posted: Mutex<Vec<Value>>,
    /// The `endpoint` event's data (a relative URL unless a test changes it).
    endpoint: Mutex<String>,
    /// Answer every POST with this status instead (after recording it).
    refuse_with: Mutex<Option<StatusCode>>,
}

fn event(kind: &str, data: &str) -> Bytes {
    Bytes::from(format!("event: {kind}\ndata: {data}\n\n"))
}

async fn open(State(fake): State<Arc<Fake>>) -> Response {
    let (tx, rx) = mpsc::unbounded_channel();
    let _ = tx.send(Bytes::from_static(b": hello\n\n"));
    let _ = tx.send(event("endpoint", &fake.endpoint.lock()));
    *fake.stream.lock() = Some(tx);
    let body = futures::stream::unfold(rx, |mut rx| async move {
        let chunk = rx.recv().await?;
        Some((Ok::<_, std::convert::Infallible>(chunk), rx))
    });
    (
        [(http::header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(body),
    )
        .into_response()
}

async fn message(
    State(fake): State<Arc<Fake>>,
    Query(query): Query<std::collections::HashMap<String, String>>,
    body: Bytes,
) -> Response {
    let message: Value = serde_json::from_slice(&body).unwrap_or_default();
    fake.posted.lock().push(message.clone());
    if let Some(status) = *fake.refuse_with.lock() {
        return (status, "refused").into_response();
    }
    if query.get("sessionId").map(String::as_str) != Some("s1") {
        return (StatusCode::NOT_FOUND, "Could not find session").into_response();
    }
    let (Some(method), Some(id)) = (message["method"].as_str(), message.get("id")) else {
        return StatusCode::ACCEPTED.into_response();
    };
    let result = match method {
        "initialize" => json!({
            "protocolVersion": "2024-11-05",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "legacy-fake", "version": "0"}
        }),
        "tools/list" => json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}),
        "tools/call" => json!({"content": [{"type": "text",
            "text": format!("echo {}", message["params"]["arguments"]["text"].as_str().unwrap_or(""))}]}),
        _ => json!({}),
    };
    let answer = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
    if let Some(stream) = fake.stream.lock().as_ref() {
        let _ = stream.send(event("message", &answer));
    }
    (StatusCode::ACCEPTED, "Accepted").into_response()
}

async fn fake_server() -> (String, Arc<Fake>) {
    let fake = Arc::new(Fake::default());
    *fake.endpoint.lock() = "/messages?sessionId=s1".to_owned();
    let app = axum::Router::new()
        .route("/sse", axum::routing::get(open))
        .route("/messages", axum::routing::post(message))
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, fake)
}

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

async fn connect(base: &str) -> Result<LegacySseTransport, LegacySseError> {
    LegacySseTransport::connect(client(), &format!("{base}/sse"), http::HeaderMap::new()).await
}

#[tokio::test]
async fn a_client_initializes_lists_and_calls_over_the_legacy_transport() {
    let (base, fake) = fake_server().await;
    let transport = connect(&base).await.expect("connected");
    assert_eq!(
        transport.endpoint().as_str(),
        format!("{base}/messages?sessionId=s1"),
        "the relative endpoint is resolved against the stream's URL"
    );
    let client = ().serve(transport).await.expect("initialized");
    assert_eq!(
        client
            .peer_info()
            .unwrap()
            .server_info
            .as_ref()
            .unwrap()
            .name,
        "legacy-fake",
        "initialize went out as a POST and its answer came on the stream"
    );
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools[0].name, "echo");
    let result = client
        .call_tool(
            CallToolRequestParams::new("echo")
                .with_arguments(json!({"text": "hi"}).as_object().cloned().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(result.content[0].as_text().unwrap().text, "echo hi");
    let methods: Vec<String> = fake
        .posted
        .lock()
        .iter()
        .filter_map(|m| m["method"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        methods,
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call"
        ]
    );
    // The server ends the stream: the connection ends with it.
    fake.stream.lock().take();
    tokio::time::timeout(std::time::Duration::from_secs(10), client.waiting())
        .await
        .expect("the connection ended with its stream")
        .ok();
}

#[tokio::test]
async fn an_endpoint_on_another_origin_is_refused() {
    let (base, fake) = fake_server().await;
    *fake.endpoint.lock() = "http://evil.example/messages?sessionId=s1".to_owned();
    let err = connect(&base).await.expect_err("refused");
    assert!(err.to_string().contains("another origin"), "{err}");
    assert!(fake.posted.lock().is_empty(), "nothing was posted anywhere");
}

#[tokio::test]
async fn a_stream_that_is_not_an_event_stream_or_starts_otherwise_is_refused() {
    let app = axum::Router::new()
        .route(
            "/json",
            axum::routing::get(|| async { axum::Json(json!({})) }),
        )
        .route(
            "/early",
            axum::routing::get(|| async {
                (
                    [(http::header::CONTENT_TYPE, "text/event-stream")],
                    "event: message\ndata: {}\n\n",
                )
            }),
        )
        .route(
            "/missing",
            axum::routing::get(|| async { (StatusCode::NOT_FOUND, "no such route") }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let connect = |path: &'static str| {
        let url = format!("{base}{path}");
        async move {
            LegacySseTransport::connect(client(), &url, http::HeaderMap::new())
                .await
                .expect_err("refused")
                .to_string()
        }
    };
    assert!(connect("/json").await.contains("not text/event-stream"));
    assert!(connect("/early").await.contains("not endpoint"));
    let missing = connect("/missing").await;
    assert!(missing.contains("HTTP 404: no such route"), "{missing}");
}

#[tokio::test]
async fn a_post_the_server_refuses_says_whether_it_reached_the_server() {
    let (base, fake) = fake_server().await;
    let mut transport = connect(&base).await.expect("connected");
    let ping = || -> ClientJsonRpcMessage {
        serde_json::from_value(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})).unwrap()
    };
    *fake.refuse_with.lock() = Some(StatusCode::SERVICE_UNAVAILABLE);
    let err = transport.send(ping()).await.expect_err("a 503");
    assert!(
        matches!(err, LegacySseError::Status { status: 503, .. }),
        "{err}"
    );
    assert!(!err.never_sent(), "a 5xx may have reached the server");
    // A 404: the server has no such session, so the message did not reach it, and the
    // connection is over (the pool reconnects).
    *fake.refuse_with.lock() = Some(StatusCode::NOT_FOUND);
    let err = transport.send(ping()).await.expect_err("a 404");
    assert!(err.never_sent(), "{err}");
    assert!(transport.receive().await.is_none(), "the connection ended");
    let err = transport.send(ping()).await.expect_err("closed");
    assert!(matches!(err, LegacySseError::Closed) && err.never_sent());
}

#[tokio::test]
async fn a_refused_connection_is_never_sent() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect_err("nothing listens");
    assert!(err.never_sent(), "{err}");
}
