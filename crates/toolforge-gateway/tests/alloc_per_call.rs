//! Allocations per `tools/call` through the gateway, in process: a counting global allocator,
//! the gateway's router driven with `oneshot` (session path, and the 2026-07-28 stateless path),
//! and an echo backend over loopback Streamable HTTP on a thread of its own whose allocations
//! are not counted. Prints the figures (`--nocapture`); asserts bounds well above them, so a
//! change that adds per-call copies of the catalog or the tool definitions fails here.

#![allow(unsafe_code)] // the counting allocator

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt as _;
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
use tower::ServiceExt as _;

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Set on the backend's threads: their allocations are not the gateway's.
    static UNCOUNTED: Cell<bool> = const { Cell::new(false) };
}

fn count(size: usize) {
    if !UNCOUNTED.try_with(Cell::get).unwrap_or(true) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(size as u64, Ordering::Relaxed);
    }
}

// SAFETY: every call is passed on to `System` unchanged; counting touches only atomics and a
// const-initialised thread-local.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The backend: one tool, `echo`.
#[derive(Clone)]
struct Echo;

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _req: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let echo: McpTool = serde_json::from_value(json!({
            "name": "echo",
            "description": "Echo the message back.",
            "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}
        }))
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        Ok(ListToolsResult::with_all_items(vec![echo]))
    }

    async fn call_tool(
        &self,
        req: CallToolRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let message = req
            .arguments
            .as_ref()
            .and_then(|a| a.get("message"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        Ok(CallToolResponse::Complete(CallToolResult::success(vec![
            ContentBlock::text(message),
        ])))
    }
}

/// Starts the backend on its own (uncounted) thread; its `/mcp` URL.
fn start_backend() -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        UNCOUNTED.with(|u| u.set(true));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .on_thread_start(|| UNCOUNTED.with(|u| u.set(true)))
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let service = StreamableHttpService::new(
                || Ok(Echo),
                Arc::new(LocalSessionManager::default()),
                StreamableHttpServerConfig::default(),
            );
            let app = axum::Router::new().nest_service("/mcp", service);
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("a loopback port");
            let addr = listener.local_addr().expect("its address");
            tx.send(format!("http://{addr}/mcp"))
                .expect("the test waits");
            axum::serve(listener, app)
                .await
                .expect("the backend serves");
        });
    });
    rx.recv().expect("the backend's URL")
}

async fn gateway(backend: &str) -> axum::Router {
    let text = json!({"mcpServers": {"b": {"url": backend}}}).to_string();
    let config = toolforge_mcp::config::parse(&text, &|_| None).expect("a valid config");
    let pool = toolforge_mcp::Pool::start(config, toolforge_mcp::PoolOptions::default()).await;
    let shared = Shared::new(pool, toolforge_select::presentation::Namespace::Auto);
    toolforge_gateway::router(shared, HttpOptions::default())
}

fn post(version: &str, session: Option<&str>, body: String) -> Request<Body> {
    let mut b = Request::post("/mcp")
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", version);
    if let Some(s) = session {
        b = b.header("mcp-session-id", s);
    }
    b.body(body.into()).expect("a request")
}

/// Sends `req`; the session id it was given, and the body.
async fn send(router: &axum::Router, req: Request<Body>) -> (Option<String>, String) {
    let res = router.clone().oneshot(req).await.expect("an answer");
    let session = res
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let bytes = res.into_body().collect().await.expect("a body").to_bytes();
    (session, String::from_utf8_lossy(&bytes).into_owned())
}

const CALLS: u64 = 200;

/// Allocations and bytes per call over `CALLS` calls made by `call(i)`, after 20 warm-up calls.
async fn measure<F, Fut>(call: F) -> (u64, u64)
where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = String>,
{
    for i in 0..20 {
        let body = call(i).await;
        assert!(body.contains("\"text\":\"hello\""), "{body}");
    }
    let (a0, b0) = (
        ALLOCATIONS.load(Ordering::Relaxed),
        BYTES.load(Ordering::Relaxed),
    );
    for i in 0..CALLS {
        call(20 + i).await;
    }
    let a = ALLOCATIONS.load(Ordering::Relaxed) - a0;
    let b = BYTES.load(Ordering::Relaxed) - b0;
    (a / CALLS, b / CALLS)
}

fn call_body(id: u64) -> String {
    json!({"jsonrpc": "2.0", "id": id + 1, "method": "tools/call",
           "params": {"name": "echo", "arguments": {"message": "hello"}}})
    .to_string()
}

#[tokio::test(flavor = "current_thread")]
async fn allocations_per_tools_call() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let backend = start_backend();

    // The session path (2025-06-18): initialize once, then calls in the session.
    let router = gateway(&backend).await;
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "alloc", "version": "1"}}});
    let (session, body) = send(&router, post("2025-06-18", None, init.to_string())).await;
    let session = session.unwrap_or_else(|| panic!("no session: {body}"));
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    send(
        &router,
        post("2025-06-18", Some(&session), initialized.to_string()),
    )
    .await;
    let (session_allocs, session_bytes) = measure(|i| {
        let router = router.clone();
        let session = session.clone();
        async move {
            send(&router, post("2025-06-18", Some(&session), call_body(i)))
                .await
                .1
        }
    })
    .await;

    // The 2026-07-28 stateless path: every call stands alone.
    let (stateless_allocs, stateless_bytes) = measure(|i| {
        let router = router.clone();
        async move {
            let mut body: Value = serde_json::from_str(&call_body(i)).expect("JSON");
            body["params"]["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "alloc", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {}
            });
            let req = Request::post("/mcp")
                .header("host", "127.0.0.1")
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/call")
                .header("mcp-name", "echo")
                .body(Body::from(body.to_string()))
                .expect("a request");
            send(&router, req).await.1
        }
    })
    .await;

    println!(
        "per tools/call through the gateway (and its backend client), {CALLS} calls: \
         session path {session_allocs} allocations / {session_bytes} bytes; \
         2026-07-28 stateless path {stateless_allocs} allocations / {stateless_bytes} bytes"
    );
    // Bounds about twice the figures of 2026-11-24 (debug build: 553 and 721).
    assert!(
        session_allocs < 1_100,
        "{session_allocs} allocations per call"
    );
    assert!(
        stateless_allocs < 1_450,
        "{stateless_allocs} allocations per call"
    );
}
