//! The gateway's HTTP face in process: limits and codes through `Router::oneshot`, the
//! listener's timeouts over loopback TCP, and `/chat/stream` cancellation against a fake
//! backend.

mod cancel;
mod direct_calls;
mod limits;
mod list_cache;
mod listener;
mod sessions;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, Response};
use futures::future::BoxFuture;
use http_body_util::BodyExt as _;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use toolforge_agent::{
    Agent, AgentConfig, MemorySessions, ToolBackend, ToolFailure, ToolOutput, TraceSink,
};
use toolforge_gateway::{HttpOptions, Shared};
use toolforge_llm::{Content, Model, ModelError, ModelRequest, ModelResponse, StopReason, Usage};
use toolforge_select::{Catalog, ServerEntry, Tool};
use tower::ServiceExt as _;

/// The gateway over a pool with no servers.
pub async fn empty_shared() -> Arc<Shared> {
    let pool = toolforge_mcp::Pool::start(
        toolforge_mcp::PoolConfig::default(),
        toolforge_mcp::PoolOptions::default(),
    )
    .await;
    Shared::new(pool, toolforge_select::presentation::Namespace::Auto)
}

/// One tool, `slow` on server `s`.
pub fn catalog() -> Catalog {
    let mut def = Map::new();
    def.insert("name".into(), json!("slow"));
    def.insert("description".into(), json!("Takes its time."));
    def.insert("inputSchema".into(), json!({"type": "object"}));
    Catalog::new(
        vec![ServerEntry {
            name: "s".into(),
            tags: vec![],
            aliases: vec![],
            tools: vec![Tool::from_mcp("s", def, &[]).unwrap()],
        }],
        vec![],
    )
    .unwrap()
}

/// A backend whose one tool runs until it is cancelled.
#[derive(Default)]
pub struct SlowBackend {
    pub calls: parking_lot::Mutex<u32>,
    pub started: tokio::sync::Notify,
    pub cancelled: tokio::sync::Notify,
}

impl ToolBackend for SlowBackend {
    fn catalog(&self) -> Catalog {
        catalog()
    }
    fn unavailable(&self) -> Vec<String> {
        Vec::new()
    }
    fn call<'a>(
        &'a self,
        _server: &'a str,
        _tool: &'a str,
        _arguments: Map<String, Value>,
        cancel: Option<CancellationToken>,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolFailure>> {
        *self.calls.lock() += 1;
        Box::pin(async move {
            self.started.notify_one();
            match cancel {
                Some(c) => c.cancelled().await,
                None => futures::future::pending().await,
            }
            self.cancelled.notify_one();
            Err(ToolFailure {
                error: "the call was cancelled".into(),
                attempts: 1,
                retry_reason: None,
            })
        })
    }
}

/// A model that asks for `slow` on every turn while `tool_turns` last, then answers.
pub struct Scripted {
    pub tool_turns: parking_lot::Mutex<u32>,
    pub completions: parking_lot::Mutex<u32>,
}

impl Scripted {
    pub fn new(tool_turns: u32) -> Self {
        Self {
            tool_turns: parking_lot::Mutex::new(tool_turns),
            completions: parking_lot::Mutex::new(0),
        }
    }
}

impl Model for Scripted {
    fn provider(&self) -> &'static str {
        "mock"
    }
    fn model(&self) -> &str {
        "mock"
    }
    fn complete<'a>(
        &'a self,
        _request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        *self.completions.lock() += 1;
        let tool = {
            let mut left = self.tool_turns.lock();
            let tool = *left > 0;
            *left = left.saturating_sub(1);
            tool
        };
        let usage = Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Usage::default()
        };
        Box::pin(async move {
            Ok(if tool {
                ModelResponse {
                    content: vec![Content::ToolUse {
                        id: "c1".into(),
                        name: "slow".into(),
                        input: json!({}),
                    }],
                    stop_reason: StopReason::ToolUse,
                    usage,
                    model: "mock".into(),
                }
            } else {
                ModelResponse {
                    content: vec![Content::text(r#"{"answer": "done", "key_facts": {}}"#)],
                    stop_reason: StopReason::EndTurn,
                    usage,
                    model: "mock".into(),
                }
            })
        })
    }
}

/// An agent over `backend` and `model`, tracing into a temporary directory.
pub async fn agent(
    backend: Arc<dyn ToolBackend>,
    model: Arc<dyn Model>,
) -> (Arc<Agent>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let sink = TraceSink::open(&dir.path().join("traces.jsonl"))
        .await
        .unwrap();
    let agent = Agent::new(
        backend,
        model,
        Arc::new(MemorySessions::default()),
        sink,
        AgentConfig::default(),
    );
    (Arc::new(agent), dir)
}

/// The whole router, with an agent that answers at once, under `opts`.
pub async fn app(opts: HttpOptions) -> (axum::Router, tempfile::TempDir) {
    let (agent, dir) = agent(Arc::new(SlowBackend::default()), Arc::new(Scripted::new(0))).await;
    let opts = HttpOptions {
        agent: Some(agent),
        ..opts
    };
    (toolforge_gateway::router(empty_shared().await, opts), dir)
}

/// Sends `req` and returns the status and the whole body as text.
pub async fn send(router: &axum::Router, req: Request<Body>) -> (u16, String) {
    let res = router.clone().oneshot(req).await.unwrap();
    let status = res.status().as_u16();
    (status, text(res).await)
}

pub async fn text(res: Response<Body>) -> String {
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The JSON-RPC message in a body that is JSON or SSE.
pub fn rpc(body: &str) -> Value {
    if let Ok(v) = serde_json::from_str(body) {
        return v;
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some())
        .unwrap_or_else(|| panic!("no JSON-RPC message in {body}"))
}

/// A POST to `/mcp` as an MCP client sends it.
pub fn mcp_post(session: Option<&str>, body: impl Into<Body>) -> Request<Body> {
    let mut b = Request::post("/mcp")
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18");
    if let Some(s) = session {
        b = b.header("mcp-session-id", s);
    }
    b.body(body.into()).unwrap()
}

pub const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// Opens a session: `initialize`, then `notifications/initialized`.
pub async fn open_session(router: &axum::Router) -> String {
    let res = router
        .clone()
        .oneshot(mcp_post(None, INITIALIZE))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let id = res
        .headers()
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .unwrap()
        .to_owned();
    let _ = text(res).await;
    let (status, _) = send(
        router,
        mcp_post(
            Some(&id),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        ),
    )
    .await;
    assert_eq!(status, 202);
    id
}
