//! `toolforge serve --stateless`: no MCP sessions, so any replica answers any request, as behind
//! a load balancer. Plain JSON-RPC over HTTP, one replica per request.

use serde_json::{Value, json};

use crate::Served;

async fn rpc(
    base: &str,
    id: u64,
    method: &str,
    params: Value,
) -> (reqwest::header::HeaderMap, Value) {
    session_rpc(base, None, id, method, params).await
}

/// One JSON-RPC request to `/mcp`, in `session` when given; the headers and the parsed answer.
pub async fn session_rpc(
    base: &str,
    session: Option<&str>,
    id: u64,
    method: &str,
    params: Value,
) -> (reqwest::header::HeaderMap, Value) {
    rpc_at(&format!("{base}/mcp"), session, id, method, params).await
}

/// [`session_rpc`] to the MCP endpoint `url` (a query string included).
pub async fn rpc_at(
    url: &str,
    session: Option<&str>,
    id: u64,
    method: &str,
    params: Value,
) -> (reqwest::header::HeaderMap, Value) {
    let mut req = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18");
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    let r = req
        .json(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{method}");
    let headers = r.headers().clone();
    let text = r.text().await.unwrap();
    // A JSON body, or the first non-empty SSE `data:` line (after the priming event).
    let body = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .find(|d| !d.trim().is_empty())
        .unwrap_or(&text)
        .trim()
        .to_owned();
    (
        headers,
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{method}: {e}: {text}")),
    )
}

#[tokio::test]
async fn stateless_replicas_answer_any_request_without_a_session() {
    let config = json!({"mcpServers": {"toolkit": {"command": "toolforge", "args": ["server", "toolkit", "--stdio"]}}});
    let a = Served::start_full(&config, &[], &["--stateless"]).await;
    let b = Served::start_full(&config, &[], &["--stateless"]).await;

    let (headers, init) = rpc(
        &a.base,
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "lb-test", "version": "1"}}),
    )
    .await;
    assert!(
        headers.get("mcp-session-id").is_none(),
        "stateless mode hands out no session"
    );
    assert_eq!(init["result"]["serverInfo"]["name"], "toolforge");

    // The next requests land on the other replica, with no session and no initialize there.
    let (_, list) = rpc(&b.base, 2, "tools/list", json!({})).await;
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"sql_query"), "{list}");
    let (_, call) = rpc(
        &b.base,
        3,
        "tools/call",
        json!({"name": "sql_query", "arguments": {"sql": "SELECT COUNT(*) AS n FROM customers"}}),
    )
    .await;
    assert_eq!(call["result"]["isError"], false, "{call}");
    let (_, call) = rpc(
        &a.base,
        4,
        "tools/call",
        json!({"name": "no_such_tool", "arguments": {}}),
    )
    .await;
    assert!(
        call["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("unknown tool"),
        "{call}"
    );
}
