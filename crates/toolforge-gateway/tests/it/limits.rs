//! `--max-body-bytes` on every route (413, chunked too), JSON errors with clear codes, and the
//! validation of `/chat` inputs.

use axum::body::{Body, Bytes};
use axum::http::Request;
use serde_json::json;
use toolforge_gateway::HttpOptions;

use crate::{app, mcp_post, open_session, rpc, send};

const ROUTES: [&str; 4] = ["/mcp", "/chat", "/chat/stream", "/agent/run"];

fn post(path: &str, body: Body) -> Request<Body> {
    Request::post(path)
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body)
        .unwrap()
}

/// A body sent in 1 KiB chunks with no `Content-Length`.
fn chunked(total: usize) -> Body {
    let chunks =
        (0..total.div_ceil(1024)).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![b' '; 1024])));
    Body::from_stream(futures::stream::iter(chunks.collect::<Vec<_>>()))
}

fn opts(max_body_bytes: usize) -> HttpOptions {
    HttpOptions {
        max_body_bytes,
        ..HttpOptions::default()
    }
}

#[tokio::test]
async fn a_body_over_the_limit_gets_413_on_every_route_chunked_or_not() {
    let (router, _dir) = app(opts(4096)).await;
    for path in ROUTES {
        let (status, body) = send(&router, post(path, chunked(64 * 1024))).await;
        assert_eq!(status, 413, "chunked to {path}: {body}");
        let (status, body) = send(&router, post(path, Body::from(vec![b' '; 64 * 1024]))).await;
        assert_eq!(status, 413, "sized to {path}: {body}");
    }
}

#[tokio::test]
async fn the_limit_is_the_operators_not_a_built_in_one() {
    // 5 MiB of padding around small requests: over axum's 2 MiB and rmcp's 4 MiB defaults,
    // under the 16 MiB the operator allows.
    let pad = " ".repeat(5 * 1024 * 1024);
    let (router, _dir) = app(opts(16 * 1024 * 1024)).await;
    let chat = format!(r#"{{"message": "hello",{pad}"dry_run": true}}"#);
    let (status, body) = send(&router, post("/chat", Body::from(chat))).await;
    assert_eq!(status, 200, "{body}");
    let init = format!("{}{pad}", crate::INITIALIZE);
    let (status, body) = send(&router, mcp_post(None, init)).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn malformed_json_on_the_agent_routes_is_a_400_that_says_so() {
    let (router, _dir) = app(HttpOptions::default()).await;
    for path in ["/chat", "/chat/stream", "/agent/run"] {
        // With and without a Content-Type.
        let (status, body) = send(&router, post(path, Body::from("{\"dry_run\": tru"))).await;
        assert_eq!(status, 400, "{path}: {body}");
        assert!(body.contains("not valid JSON"), "{body}");
        let bare = Request::post(path)
            .header("host", "127.0.0.1")
            .body(Body::from("not json"))
            .unwrap();
        let (status, body) = send(&router, bare).await;
        assert_eq!(status, 400, "{path}: {body}");
    }
}

#[tokio::test]
async fn mcp_answers_with_json_rpc_codes() {
    let (router, _dir) = app(HttpOptions::default()).await;
    let (status, body) = send(&router, mcp_post(None, "{oops")).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(rpc(&body)["error"]["code"], -32700, "{body}");
    for invalid in [
        "[]",
        "42",
        r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
        r#"{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}"#,
    ] {
        let (status, body) = send(&router, mcp_post(None, invalid)).await;
        assert_eq!(status, 400, "{invalid}: {body}");
        assert_eq!(rpc(&body)["error"]["code"], -32600, "{invalid}: {body}");
    }
    let session = open_session(&router).await;
    for params in [
        json!({}),
        json!({"name": 3}),
        json!({"name": "x", "arguments": []}),
    ] {
        let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": params});
        let (_, body) = send(&router, mcp_post(Some(&session), call.to_string())).await;
        let reply = rpc(&body);
        assert_eq!(reply["error"]["code"], -32602, "{params}: {body}");
        assert_eq!(reply["id"], 5, "{body}");
    }
    let read = json!({"jsonrpc": "2.0", "id": 6, "method": "resources/read", "params": {}});
    let (_, body) = send(&router, mcp_post(Some(&session), read.to_string())).await;
    assert_eq!(rpc(&body)["error"]["code"], -32602, "{body}");
    // A well-formed call still reaches the gateway (an unknown tool: its own error).
    let call =
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "nope"}});
    let (_, body) = send(&router, mcp_post(Some(&session), call.to_string())).await;
    assert!(body.contains("unknown tool"), "{body}");
}

fn chat(body: serde_json::Value) -> Request<Body> {
    post("/chat", Body::from(body.to_string()))
}

#[tokio::test]
async fn chat_inputs_are_validated() {
    let (router, _dir) = app(HttpOptions::default()).await;
    for bad in ["a/b", "x y", "", &"s".repeat(129), "ünï"] {
        let (status, body) = send(
            &router,
            chat(json!({"message": "hi", "dry_run": true, "session_id": bad})),
        )
        .await;
        assert_eq!(status, 400, "session_id {bad:?}: {body}");
        assert!(body.contains("session_id"), "{body}");
    }
    let (status, body) = send(
        &router,
        chat(json!({"message": "hi", "dry_run": true, "session_id": "user-42:chat_1.a"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let long = "s".repeat(128);
    let (status, body) = send(
        &router,
        chat(json!({"message": "hi", "dry_run": true, "session_id": long})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = send(
        &router,
        post(
            "/agent/run",
            Body::from(json!({"task": "hi", "dry_run": true, "session_id": "../etc"}).to_string()),
        ),
    )
    .await;
    assert_eq!(status, 400, "{body}");

    let turn = json!({"role": "user", "content": "x"});
    let many: Vec<_> = (0..101).map(|_| turn.clone()).collect();
    let (status, body) = send(&router, chat(json!({"message": "hi", "messages": many}))).await;
    assert_eq!(status, 413, "{body}");
    let big = json!({"role": "user", "content": "x".repeat(65 * 1024)});
    let (status, body) = send(&router, chat(json!({"message": "hi", "messages": [big]}))).await;
    assert_eq!(status, 413, "{body}");
    let fat = json!({"role": "user", "content": "x".repeat(60 * 1024)});
    let (status, body) = send(
        &router,
        chat(json!({"message": "hi", "messages": [fat.clone(), fat.clone(), fat.clone(), fat.clone(), fat]})),
    )
    .await;
    assert_eq!(status, 413, "{body}");
    assert!(body.contains("messages"), "{body}");
}
