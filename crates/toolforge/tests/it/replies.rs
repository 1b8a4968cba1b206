//! How the gateway frames a request's reply on `POST /mcp`: the final response alone goes out
//! as `application/json` (one write, the way the fastest peers answer); a reply with anything
//! before it (progress here) goes out as an SSE stream, every message in order. Sessions get
//! this from the vendored rmcp's patch, 2026-07-28 requests from rmcp's own JSON option.

use serde_json::{Value, json};

use crate::Served;

/// One POST to `/mcp`: its `Content-Type` and body.
async fn post(served: &Served, headers: &[(&str, &str)], body: Value) -> (String, String) {
    let mut request = reqwest::Client::new()
        .post(served.mcp())
        .header("accept", "application/json, text/event-stream");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.json(&body).send().await.unwrap();
    assert!(
        response.status().is_success(),
        "{body}: {}",
        response.status()
    );
    let kind = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (kind, response.text().await.unwrap())
}

/// The JSON-RPC messages of an SSE body, in order (priming events carry none).
fn sse_messages(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_json::from_str(d.trim()).unwrap_or_else(|e| panic!("{e}: {d}")))
        .collect()
}

/// A handshake-era session on `served`: its id.
async fn open_session(served: &Served) -> String {
    let response = reqwest::Client::new()
        .post(served.mcp())
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        )
        .send()
        .await
        .unwrap();
    let session = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let _ = response.text().await;
    let headers = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    let (_, body) = post(
        served,
        &headers,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert!(body.is_empty(), "{body}");
    session
}

#[tokio::test]
async fn a_bare_reply_is_json_and_one_after_progress_is_a_stream_in_order() {
    let served = crate::protocol::ready_fixture().await;
    let session = open_session(&served).await;
    let headers = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];

    let (kind, body) = post(
        &served,
        &headers,
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": "test_simple_text", "arguments": {}}}),
    )
    .await;
    assert!(kind.starts_with("application/json"), "{kind}: {body}");
    let reply: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(reply["id"], 7, "{reply}");
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    assert!(reply["result"]["content"][0]["text"].is_string(), "{reply}");

    // The fixture reports progress three times before it answers: all of it, then the answer.
    let (kind, body) = post(
        &served,
        &headers,
        json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
               "params": {"name": "test_tool_with_progress", "arguments": {},
                          "_meta": {"progressToken": "p8"}}}),
    )
    .await;
    assert!(kind.starts_with("text/event-stream"), "{kind}: {body}");
    let messages = sse_messages(&body);
    let (answer, before) = messages.split_last().expect("messages");
    assert_eq!(answer["id"], 8, "{body}");
    assert!(answer["result"]["content"][0]["text"].is_string(), "{body}");
    assert!(!before.is_empty(), "progress comes first: {body}");
    for message in before {
        assert_eq!(message["method"], "notifications/progress", "{body}");
        assert_eq!(message["params"]["progressToken"], "p8", "{body}");
    }

    // A 2026-07-28 request (no session) is answered with JSON too.
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let (kind, body) = post(
        &served,
        &[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "test_simple_text"),
        ],
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
               "params": {"name": "test_simple_text", "arguments": {}, "_meta": meta}}),
    )
    .await;
    assert!(kind.starts_with("application/json"), "{kind}: {body}");
    let reply: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(reply["id"], 9, "{reply}");
    assert!(reply["result"]["content"][0]["text"].is_string(), "{reply}");
}
