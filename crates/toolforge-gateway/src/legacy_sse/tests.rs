//! The legacy surface in process (`Router::oneshot`, the stream read frame by frame), and over
//! loopback with the pool's own legacy client transport in front of it.

use std::time::Duration;

use axum::body::Body;
use http_body_util::BodyExt as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use tower::ServiceExt as _;

use super::*;

/// A server with one tool, `where`, that says what its request looked like: the query of its
/// HTTP request's URI, its `x-mcp-scope` header and its principal.
#[derive(Clone, Default)]
struct Probe;

impl ServerHandler for Probe {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tool: Tool =
            serde_json::from_value(json!({"name": "where", "inputSchema": {"type": "object"}}))
                .unwrap();
        Ok(ListToolsResult::with_all_items(vec![tool]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if request.name == "slow" {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        let parts = ctx.extensions.get::<http::request::Parts>();
        let text = json!({
            "query": parts.and_then(|p| p.uri.query()),
            "scope": parts
                .and_then(|p| p.headers.get("x-mcp-scope"))
                .and_then(|v| v.to_str().ok()),
            "principal": parts.map(|p| crate::identity::principal_of(&p.extensions).to_string()),
        });
        Ok(CallToolResponse::Complete(CallToolResult::success(vec![
            ContentBlock::text(text.to_string()),
        ])))
    }
}

fn router(opts: LegacySseOptions) -> axum::Router {
    routes(|| Probe, opts)
}

/// A request as `principal` (what the identity layer leaves on an authenticated request).
fn request(method: &str, uri: &str, principal: &str, body: &str) -> Request {
    let mut req = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .header("x-mcp-scope", "from-the-post")
        .body(Body::from(body.to_owned()))
        .unwrap();
    req.extensions_mut()
        .insert(toolforge_policy::Principal::new(principal));
    req
}

/// An open stream: its events as they come.
struct Stream {
    body: Body,
    buffer: String,
}

impl Stream {
    /// The next event's (type, data), waiting at most 10 s.
    async fn next(&mut self) -> Option<(String, String)> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut kind = String::from("message");
                let mut data = None;
                for line in block.lines() {
                    if let Some(k) = line.strip_prefix("event: ") {
                        kind = k.to_owned();
                    } else if let Some(d) = line.strip_prefix("data: ") {
                        data = Some(d.to_owned());
                    }
                }
                match data {
                    Some(data) => return Some((kind, data)),
                    None => continue, // a keep-alive comment
                }
            }
            let frame = tokio::time::timeout(Duration::from_secs(10), self.body.frame())
                .await
                .expect("an event within 10 s")?
                .ok()?;
            if let Ok(bytes) = frame.into_data() {
                self.buffer.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
    }

    /// The next `message` event, as JSON.
    async fn message(&mut self) -> Value {
        let (kind, data) = self.next().await.expect("a message");
        assert_eq!(kind, "message");
        serde_json::from_str(&data).unwrap()
    }
}

/// Opens a session as `principal`: its stream and its endpoint.
async fn open_as(router: &axum::Router, uri: &str, principal: &str) -> (Stream, String) {
    let mut req = request("GET", uri, principal, "");
    req.headers_mut()
        .insert("x-mcp-scope", "from-the-get".parse().unwrap());
    req.headers_mut()
        .insert("x-mcp-extra", "from-the-get".parse().unwrap());
    let response = router.clone().oneshot(req).await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut stream = Stream {
        body: response.into_body(),
        buffer: String::new(),
    };
    let (kind, endpoint) = stream.next().await.expect("the endpoint event");
    assert_eq!(kind, "endpoint");
    assert!(endpoint.starts_with("/messages?sessionId="), "{endpoint}");
    (stream, endpoint)
}

async fn post(
    router: &axum::Router,
    endpoint: &str,
    principal: &str,
    body: &Value,
) -> (u16, String) {
    let response = router
        .clone()
        .oneshot(request("POST", endpoint, principal, &body.to_string()))
        .await
        .unwrap();
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;

async fn initialized(router: &axum::Router, uri: &str, principal: &str) -> (Stream, String) {
    let (mut stream, endpoint) = open_as(router, uri, principal).await;
    let init: Value = serde_json::from_str(INITIALIZE).unwrap();
    assert_eq!(post(router, &endpoint, principal, &init).await.0, 202);
    let answer = stream.message().await;
    assert_eq!(answer["id"], 0);
    assert_eq!(answer["result"]["protocolVersion"], "2024-11-05");
    let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(router, &endpoint, principal, &done).await.0, 202);
    (stream, endpoint)
}

fn identity_on() -> LegacySseOptions {
    LegacySseOptions {
        identity_on: true,
        ..LegacySseOptions::default()
    }
}

#[tokio::test]
async fn a_session_answers_on_its_stream_with_the_get_query_and_its_principal() {
    let router = router(identity_on());
    let (mut stream, endpoint) = initialized(&router, "/sse?tools=where&tags=a", "alice").await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "where", "arguments": {}}});
    let (status, body) = post(&router, &endpoint, "alice", &call).await;
    assert_eq!((status, body.as_str()), (202, "Accepted"));
    let answer = stream.message().await;
    assert_eq!(answer["id"], 1, "{answer}");
    let seen: Value =
        serde_json::from_str(answer["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        seen,
        json!({"query": "tools=where&tags=a", "scope": "from-the-post", "principal": "alice"}),
        "the handler saw the POST (its headers, its principal) under the GET's URL"
    );
    // `/messages/` (the Python SDK's spelling) and `session_id` reach the same session.
    let session = endpoint.split_once("sessionId=").unwrap().1;
    let again = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let other = format!("/messages/?session_id={session}");
    assert_eq!(post(&router, &other, "alice", &again).await.0, 202);
    assert_eq!(stream.message().await["id"], 2);
}

#[tokio::test]
async fn another_principal_is_told_the_session_does_not_exist() {
    let router = router(identity_on());
    let (_stream, endpoint) = initialized(&router, "/sse", "alice").await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let (status, body) = post(&router, &endpoint, "mallory", &ping).await;
    assert_eq!(status, 404, "{body}");
    let (status, _) = post(&router, "/messages?sessionId=nope", "alice", &ping).await;
    assert_eq!(status, 404);
    let (status, body) = post(&router, "/messages", "alice", &ping).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("sessionId is required"), "{body}");
}

#[tokio::test]
async fn bad_messages_get_json_rpc_errors_where_the_client_waits_for_them() {
    let router = router(identity_on());
    let (mut stream, endpoint) = initialized(&router, "/sse", "alice").await;
    // Not JSON: refused in the POST's answer.
    let response = router
        .clone()
        .oneshot(request("POST", &endpoint, "alice", "{nope"))
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["error"]["code"], code::PARSE_ERROR);
    // A request with bad parameters: its error is its answer, on the stream.
    let bad =
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"arguments": 1}});
    assert_eq!(post(&router, &endpoint, "alice", &bad).await.0, 202);
    let answer = stream.message().await;
    assert_eq!(answer["id"], 5);
    assert_eq!(answer["error"]["code"], code::INVALID_PARAMS, "{answer}");
    // A request reusing the id of one in flight.
    let slow = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
                      "params": {"name": "slow", "arguments": {}}});
    assert_eq!(post(&router, &endpoint, "alice", &slow).await.0, 202);
    let (status, body) = post(&router, &endpoint, "alice", &slow).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("already used"), "{body}");
    // A body over the bound.
    let small = routes(
        || Probe,
        LegacySseOptions {
            max_body_bytes: 64,
            ..identity_on()
        },
    );
    let (_s, endpoint) = open_as(&small, "/sse", "alice").await;
    let big =
        json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x".repeat(100)}});
    assert_eq!(post(&small, &endpoint, "alice", &big).await.0, 413);
}

#[tokio::test]
async fn no_session_opens_past_the_cap_and_a_closed_stream_frees_its_place() {
    let opts = LegacySseOptions {
        sessions: SessionLimits {
            max_sessions: 1,
            idle_timeout: Duration::from_secs(300),
        },
        ..identity_on()
    };
    let sessions = LegacySessions::default();
    let router = routes_counted(|| Probe, opts, &sessions);
    let (stream, endpoint) = open_as(&router, "/sse", "alice").await;
    let refused = router
        .clone()
        .oneshot(request("GET", "/sse", "alice", ""))
        .await
        .unwrap();
    assert_eq!(refused.status(), 503);
    assert_eq!(sessions.open(), 1);
    drop(stream); // the client hangs up
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while sessions.open() > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the session never ended"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    assert_eq!(post(&router, &endpoint, "alice", &ping).await.0, 404);
    open_as(&router, "/sse", "alice").await;
}

#[tokio::test]
async fn an_idle_session_ends_its_stream() {
    let opts = LegacySseOptions {
        sessions: SessionLimits {
            max_sessions: 10,
            idle_timeout: Duration::from_millis(200),
        },
        ..identity_on()
    };
    let sessions = LegacySessions::default();
    let router = routes_counted(|| Probe, opts, &sessions);
    let (mut stream, _) = initialized(&router, "/sse", "alice").await;
    assert!(stream.next().await.is_none(), "the stream ended");
    assert_eq!(sessions.open(), 0);
}

#[tokio::test]
async fn the_pool_s_legacy_client_lists_and_calls_through_it() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let app = router(LegacySseOptions::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let mut headers = http::HeaderMap::new();
    headers.insert("x-mcp-scope", "from-the-client".parse().unwrap());
    let transport = toolforge_mcp::legacy_sse::LegacySseTransport::connect(
        reqwest::Client::new(),
        &format!("{base}/sse?q=x"),
        headers,
    )
    .await
    .expect("connected");
    let client = ().serve(transport).await.expect("initialized");
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools[0].name, "where");
    let result = client
        .call_tool(CallToolRequestParams::new("where"))
        .await
        .unwrap();
    let seen: Value = serde_json::from_str(&result.content[0].as_text().unwrap().text).unwrap();
    assert_eq!(seen["query"], "q=x");
    assert_eq!(seen["scope"], "from-the-client");
    client.cancel().await.ok();
}
