//! `tools/list` over HTTP is answered from a cache per catalog generation and visibility
//! scope, its tool array spliced into rmcp's framing: the answers are the lists themselves, a
//! backend's change reaches the next list, and scopes never share an answer.

use std::sync::Arc;

use axum::body::Body;
use axum::http::Request;
use parking_lot::Mutex;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool as McpTool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};
use toolforge_gateway::{HttpOptions, Shared};

use crate::{rpc, send};

fn tool(name: &str) -> McpTool {
    serde_json::from_value(json!({
        "name": name,
        "description": format!("The tool {name}."),
        "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}},
        "outputSchema": {"type": "array"},
        "_meta": {"tags": ["t"]}
    }))
    .unwrap()
}

/// A backend whose tool list the test changes (it tells nobody: the gateway finds out when a
/// client calls a tool it does not list yet).
#[derive(Clone, Default)]
struct Changing {
    tools: Arc<Mutex<Vec<McpTool>>>,
}

impl ServerHandler for Changing {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _req: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools.lock().clone()))
    }

    async fn call_tool(
        &self,
        _req: CallToolRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        Ok(CallToolResponse::Complete(CallToolResult::success(vec![
            ContentBlock::text("ok"),
        ])))
    }
}

/// The backend on a loopback port; its `/mcp` URL.
async fn start_backend(backend: Changing) -> String {
    let service = StreamableHttpService::new(
        move || Ok(backend.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let app = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/mcp")
}

async fn gateway(backend: &str) -> (axum::Router, Arc<Shared>) {
    // 2026-07-28 to the backend, so the pool sees its non-object output schemas.
    let text = json!({"mcpServers": {"b": {"url": backend, "protocol": "2026-07-28"}}}).to_string();
    let config = toolforge_mcp::config::parse(&text, &|_| None).unwrap();
    let pool = toolforge_mcp::Pool::start(config, toolforge_mcp::PoolOptions::default()).await;
    let shared = Shared::new(pool, toolforge_select::presentation::Namespace::Auto);
    (
        toolforge_gateway::router(shared.clone(), HttpOptions::default()),
        shared,
    )
}

fn post(path: &str, version: &str, session: Option<&str>, body: &Value) -> Request<Body> {
    let mut b = Request::post(path)
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", version);
    if let Some(s) = session {
        b = b.header("mcp-session-id", s);
    }
    b.body(Body::from(body.to_string())).unwrap()
}

/// A handshake-era session opened at `path`.
async fn session(router: &axum::Router, path: &str) -> String {
    use tower::ServiceExt as _;
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let res = router
        .clone()
        .oneshot(post(path, "2025-06-18", None, &init))
        .await
        .unwrap();
    let id = res.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    crate::text(res).await;
    let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    send(router, post(path, "2025-06-18", Some(&id), &done)).await;
    id
}

/// The `tools/list` answer of a session at `path` (the JSON-RPC message and the raw body).
async fn list(router: &axum::Router, path: &str, session: &str) -> (Value, String) {
    let req = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"});
    let (status, body) = send(router, post(path, "2025-06-18", Some(session), &req)).await;
    assert_eq!(status, 200, "{body}");
    (rpc(&body), body)
}

/// A 2026-07-28 `tools/list` (no session; a JSON answer).
async fn list_modern(router: &axum::Router) -> (Value, String) {
    let req = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}}}});
    let mut request = post("/mcp", "2026-07-28", None, &req);
    request
        .headers_mut()
        .insert("mcp-method", "tools/list".parse().unwrap());
    let (status, body) = send(router, request).await;
    assert_eq!(status, 200, "{body}");
    (rpc(&body), body)
}

fn names(reply: &Value) -> Vec<String> {
    reply["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {reply}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn the_cached_list_is_the_list_and_follows_a_backend_change() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let backend = Changing::default();
    backend.tools.lock().push(tool("alpha"));
    let (router, shared) = gateway(&start_backend(backend.clone()).await).await;
    let id = session(&router, "/mcp").await;

    let (first, raw) = list(&router, "/mcp", &id).await;
    assert_eq!(names(&first), ["alpha"]);
    assert!(
        !raw.contains("toolforge-list-"),
        "no placeholder left: {raw}"
    );
    // What rmcp writes for the list to a 2025-06-18 peer: the definitions as the gateway
    // re-exposes them, minus the non-object output schema that era does not allow.
    let mut expected = serde_json::to_value(shared.tool_list()).unwrap();
    expected[0].as_object_mut().unwrap().remove("outputSchema");
    assert_eq!(first["result"]["tools"], expected);
    assert_eq!(first["result"]["ttlMs"], json!(30_000));
    assert!(first["result"].get("resultType").is_none(), "{first}");
    let (again, _) = list(&router, "/mcp", &id).await;
    assert_eq!(again, first);
    assert_eq!(shared.list_cache_usage().0, 1, "one scope, one entry");

    // 2026-07-28 keeps the output schema and says `resultType`: another entry.
    let (modern, raw) = list_modern(&router).await;
    assert!(!raw.contains("toolforge-list-"), "{raw}");
    assert_eq!(
        modern["result"]["tools"],
        serde_json::to_value(shared.tool_list()).unwrap()
    );
    assert_eq!(modern["result"]["resultType"], "complete");
    assert_eq!(modern["result"]["cacheScope"], "public");
    assert_eq!(shared.list_cache_usage().0, 2);

    // The backend gains a tool; a call of it makes the gateway re-read the backend's list.
    backend.tools.lock().push(tool("beta"));
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                      "params": {"name": "beta", "arguments": {}}});
    let (_, body) = send(&router, post("/mcp", "2025-06-18", Some(&id), &call)).await;
    assert_eq!(rpc(&body)["result"]["content"][0]["text"], "ok", "{body}");
    let (after, _) = list(&router, "/mcp", &id).await;
    assert_eq!(names(&after), ["alpha", "beta"]);
    let (after, _) = list_modern(&router).await;
    assert_eq!(names(&after), ["alpha", "beta"]);
}

#[tokio::test]
async fn two_scopes_never_share_an_answer() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let backend = Changing::default();
    backend
        .tools
        .lock()
        .extend([tool("alpha"), tool("beta"), tool("gamma")]);
    let (router, shared) = gateway(&start_backend(backend).await).await;
    let everything = session(&router, "/mcp").await;
    let one = session(&router, "/mcp?tools=beta").await;
    let two = session(&router, "/mcp?tools=alpha,gamma").await;
    for _ in 0..2 {
        assert_eq!(
            names(&list(&router, "/mcp", &everything).await.0),
            ["alpha", "beta", "gamma"]
        );
        assert_eq!(
            names(&list(&router, "/mcp?tools=beta", &one).await.0),
            ["beta"]
        );
        let (reply, _) = list(&router, "/mcp?tools=alpha,gamma", &two).await;
        assert_eq!(names(&reply), ["alpha", "gamma"]);
        assert_eq!(reply["result"]["cacheScope"], "private", "{reply}");
    }
    assert_eq!(shared.list_cache_usage().0, 3, "one entry per scope");
}

#[tokio::test]
async fn hostile_scopes_stay_within_the_cap() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let backend = Changing::default();
    backend.tools.lock().extend([tool("alpha"), tool("beta")]);
    let (router, shared) = gateway(&start_backend(backend).await).await;
    let cap = toolforge_gateway::mcp::list_cache::MAX_ENTRIES;
    let id = session(&router, "/mcp").await;
    for i in 0..cap + 10 {
        // Each request names another scope with its own `x-mcp-query` header.
        let req = json!({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/list"});
        let mut request = post("/mcp", "2025-06-18", Some(&id), &req);
        request
            .headers_mut()
            .insert("x-mcp-query", format!("alpha {i}").parse().unwrap());
        let (status, body) = send(&router, request).await;
        assert_eq!(status, 200, "{body}");
        assert!(names(&rpc(&body)).contains(&"alpha".to_owned()), "{body}");
        assert!(shared.list_cache_usage().0 <= cap);
    }
    assert_eq!(shared.list_cache_usage().0, cap);
}
