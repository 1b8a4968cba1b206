//! Every notification a backend sends while a call runs reaches that call's client, all of
//! them, in the order sent, before the call's result: the conformance fixture's three log
//! messages and three progress notifications, through one gateway on its default
//! configuration, with the fixture behind it over stdio and over Streamable HTTP, to a
//! handshake-era session. Each call is made 20 times on one session: one message lost or
//! overtaken in any of them fails the test.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::{Served, announced, bin};

/// Calls of each tool per backend transport.
const CALLS: usize = 20;

/// The fixture over Streamable HTTP, killed on drop, and its URL.
pub async fn fixture_over_http() -> (tokio::process::Child, String) {
    let mut child = tokio::process::Command::new(bin())
        .args(["server", "conformance", "--port", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the conformance fixture");
    let stderr = child.stderr.take().expect("piped stderr");
    let addr = announced(
        stderr,
        "conformance fixture listening on http://",
        Duration::from_secs(30),
    )
    .await;
    (child, format!("http://{addr}/mcp"))
}

/// The gateway with `server` as its one backend `conformance`, once that is ready.
async fn gateway(server: Value) -> Served {
    let served = Served::start(&json!({"mcpServers": {"conformance": server}})).await;
    served
        .wait_health(60, |h| {
            crate::server_state(h, "conformance")["state"] == "ready"
        })
        .await;
    served
}

/// A handshake-era session: its id. The client declares `sampling`, as the conformance suite's
/// does: a session's call from a client that declared nothing the backend could ask it is
/// answered without the session's worker, which gives the call's stream nothing but the answer.
async fn open_session(http: &reqwest::Client, served: &Served) -> String {
    let response = http
        .post(served.mcp())
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"sampling": {}},
            "clientInfo": {"name": "order", "version": "1"}}}),
        )
        .send()
        .await
        .expect("initialize");
    let session = response.headers()["mcp-session-id"]
        .to_str()
        .expect("session id")
        .to_owned();
    let _ = response.text().await;
    messages(
        http,
        served,
        &session,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    session
}

/// Posts `body` on `session`: the JSON-RPC messages of the reply, in order.
async fn messages(
    http: &reqwest::Client,
    served: &Served,
    session: &str,
    body: Value,
) -> Vec<Value> {
    let response = http
        .post(served.mcp())
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .json(&body)
        .send()
        .await
        .expect("post");
    assert!(
        response.status().is_success(),
        "{body}: {}",
        response.status()
    );
    let text = response.text().await.expect("body");
    if text.trim_start().starts_with('{') {
        return vec![serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))];
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_json::from_str(d.trim()).unwrap_or_else(|e| panic!("{e}: {d}")))
        .collect()
}

/// Calls `test_tool_with_logging` and `test_tool_with_progress` [`CALLS`] times each through
/// `served` and checks every reply: all the fixture's notifications, in order, then the result.
async fn assert_every_notification_in_order(served: &Served, label: &str) {
    let http = reqwest::Client::new();
    let session = open_session(&http, served).await;
    for n in 0..CALLS {
        let id = 100 + n;
        let reply = messages(
            &http,
            served,
            &session,
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "test_tool_with_logging", "arguments": {}}}),
        )
        .await;
        let logged: Vec<&Value> = reply
            .iter()
            .filter(|m| m["method"] == "notifications/message")
            .map(|m| &m["params"]["data"])
            .collect();
        assert_eq!(
            logged,
            [
                "Tool execution started",
                "Tool processing data",
                "Tool execution completed"
            ],
            "{label}, logging call {n}: {reply:?}"
        );
        assert_eq!(reply.len(), 4, "{label}, logging call {n}: {reply:?}");
        assert_eq!(
            reply[3]["id"], id,
            "{label}: the result comes last: {reply:?}"
        );

        let id = 200 + n;
        let token = format!("p{n}");
        let reply = messages(
            &http,
            served,
            &session,
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "test_tool_with_progress", "arguments": {},
                              "_meta": {"progressToken": token.clone()}}}),
        )
        .await;
        let progress: Vec<(f64, &Value)> = reply
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .map(|m| {
                (
                    m["params"]["progress"].as_f64().unwrap_or(-1.0),
                    &m["params"]["progressToken"],
                )
            })
            .collect();
        let token = json!(token);
        assert_eq!(
            progress,
            [(0.0, &token), (50.0, &token), (100.0, &token)],
            "{label}, progress call {n}: all three, increasing: {reply:?}"
        );
        assert_eq!(reply.len(), 4, "{label}, progress call {n}: {reply:?}");
        assert_eq!(
            reply[3]["id"], id,
            "{label}: the result comes last: {reply:?}"
        );
    }
}

#[tokio::test]
async fn every_log_message_and_progress_of_a_stdio_backends_call_arrives_in_order() {
    let served =
        gateway(json!({"command": bin(), "args": ["server", "conformance", "--stdio"]})).await;
    assert_every_notification_in_order(&served, "stdio backend").await;
}

#[tokio::test]
async fn every_log_message_and_progress_of_an_http_backends_call_arrives_in_order() {
    let (_fixture, url) = fixture_over_http().await;
    let served = gateway(json!({"type": "http", "url": url})).await;
    assert_every_notification_in_order(&served, "HTTP backend").await;
}
