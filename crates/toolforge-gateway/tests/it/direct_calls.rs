//! A session's `tools/call` answered without the session's worker (`direct_calls.rs`, through
//! the gateway's session manager): which calls take that path and which keep the worker,
//! cancellation of such a call (no answer follows it), and the session's idle clock, which
//! counts those calls and keeps a session with a call in flight.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio::sync::Notify;
use toolforge_gateway::SessionLimits;
use toolforge_gateway::mcp_sessions::{CappedSessions, DirectSlot};
use tower::ServiceExt as _;

use crate::{mcp_post, rpc, text};

const DEADLINE: Duration = Duration::from_secs(10);

/// Two tools: `echo` answers at once; `wait` answers when its call is cancelled. Registers
/// itself for calls without the worker unless `unregistered`.
#[derive(Clone, Default)]
struct Tools {
    unregistered: bool,
    waiting: Arc<Notify>,
    cancelled: Arc<Notify>,
}

impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn on_initialized(&self, ctx: NotificationContext<RoleServer>) {
        if let Some(slot) = ctx.extensions.get::<DirectSlot<Tools>>()
            && !self.unregistered
        {
            slot.register(self.clone(), ctx.peer.clone());
        }
    }

    async fn call_tool(
        &self,
        req: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if req.name == "wait" {
            self.waiting.notify_one();
            ctx.ct.cancelled().await;
            self.cancelled.notify_one();
            return Err(ErrorData::internal_error("cancelled", None));
        }
        Ok(CallToolResponse::Complete(CallToolResult::success(vec![
            ContentBlock::text("hi"),
        ])))
    }
}

type Sessions = CappedSessions<Tools>;
type Service = StreamableHttpService<Tools, Sessions>;

fn sessions(idle: Duration) -> Arc<Sessions> {
    Arc::new(CappedSessions::new(SessionLimits {
        max_sessions: 10,
        idle_timeout: idle,
    }))
}

fn service(tools: &Tools, sessions: &Arc<Sessions>, keep_alive: Duration) -> Service {
    let tools = tools.clone();
    let config = StreamableHttpServerConfig::default()
        .with_json_response(true)
        .with_sse_keep_alive(Some(keep_alive));
    StreamableHttpService::new(move || Ok(tools.clone()), sessions.clone(), config)
}

fn post(session: Option<&str>, body: Value) -> Request<Body> {
    mcp_post(session, body.to_string())
}

async fn send(service: &Service, request: Request<Body>) -> Response<Body> {
    let response = tokio::time::timeout(DEADLINE, service.clone().oneshot(request))
        .await
        .expect("answered in time");
    response.expect("an HTTP answer").map(Body::new)
}

/// The JSON-RPC answer in a JSON or SSE body, read within the deadline.
async fn answer(response: Response<Body>) -> Value {
    let body = tokio::time::timeout(DEADLINE, text(response))
        .await
        .expect("the body ends in time");
    rpc(&body)
}

/// Opens a session for a client with `capabilities`, completes the handshake, and has one
/// `ping` answered (through the worker): the session is then fully up.
async fn open(service: &Service, capabilities: Value) -> String {
    let initialize = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": capabilities,
            "clientInfo": {"name": "direct-calls", "version": "0"}
        }
    });
    let response = send(service, post(None, initialize)).await;
    let session = response
        .headers()
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .unwrap()
        .to_owned();
    let _ = answer(response).await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = send(service, post(Some(&session), initialized)).await;
    assert_eq!(response.status(), 202);
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let pong = answer(send(service, post(Some(&session), ping)).await).await;
    assert!(pong.get("result").is_some(), "{pong}");
    session
}

fn call(id: u64, tool: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool}})
}

#[tokio::test]
async fn calls_are_answered_without_the_session_worker() {
    let sessions = sessions(Duration::from_secs(3600));
    let service = service(&Tools::default(), &sessions, Duration::from_secs(15));
    let session = open(&service, json!({})).await;
    for id in 10..15 {
        let response = send(&service, post(Some(&session), call(id, "echo"))).await;
        assert_eq!(
            response.headers()["content-type"],
            "application/json",
            "a JSON reply, as through the worker"
        );
        let reply = answer(response).await;
        assert_eq!(reply["id"], id, "{reply}");
        assert_eq!(reply["result"]["content"][0]["text"], "hi", "{reply}");
    }
    assert_eq!(sessions.direct_calls(), 5, "every call without the worker");
    let ping = json!({"jsonrpc": "2.0", "id": 20, "method": "ping"});
    let _ = answer(send(&service, post(Some(&session), ping)).await).await;
    assert_eq!(sessions.direct_calls(), 5, "other requests take the worker");
}

#[tokio::test]
async fn calls_that_may_get_more_than_their_answer_keep_the_worker() {
    let sessions = sessions(Duration::from_secs(3600));
    let service = service(&Tools::default(), &sessions, Duration::from_secs(15));
    // A progress token: its notifications ride the call's own stream.
    let session = open(&service, json!({})).await;
    let with_token = json!({
        "jsonrpc": "2.0", "id": 30, "method": "tools/call",
        "params": {"name": "echo", "_meta": {"progressToken": "p"}}
    });
    let reply = answer(send(&service, post(Some(&session), with_token)).await).await;
    assert_eq!(reply["result"]["content"][0]["text"], "hi", "{reply}");
    assert_eq!(sessions.direct_calls(), 0);
    // A client the server may ask back (sampling, elicitation, roots): those requests ride the
    // call's stream too.
    for capability in ["sampling", "elicitation", "roots"] {
        let session = open(&service, json!({capability: {}})).await;
        let reply = answer(send(&service, post(Some(&session), call(31, "echo"))).await).await;
        assert_eq!(reply["result"]["content"][0]["text"], "hi", "{reply}");
        assert_eq!(sessions.direct_calls(), 0, "{capability}");
    }
    // A session whose handler did not register itself keeps every request on the worker.
    let unregistered = Tools {
        unregistered: true,
        ..Tools::default()
    };
    let service = self::service(&unregistered, &sessions, Duration::from_secs(15));
    let session = open(&service, json!({})).await;
    let reply = answer(send(&service, post(Some(&session), call(32, "echo"))).await).await;
    assert_eq!(reply["result"]["content"][0]["text"], "hi", "{reply}");
    assert_eq!(sessions.direct_calls(), 0);
}

#[tokio::test]
async fn cancelling_a_call_answered_directly_reaches_its_handler() {
    let tools = Tools::default();
    let sessions = sessions(Duration::from_secs(3600));
    // A keep-alive interval shorter than the call: its reply turns into an SSE stream.
    let service = service(&tools, &sessions, Duration::from_millis(50));
    let session = open(&service, json!({})).await;
    let waiting = tools.waiting.notified();
    let in_flight = tokio::spawn({
        let (service, session) = (service.clone(), session.clone());
        async move { send(&service, post(Some(&session), call(40, "wait"))).await }
    });
    tokio::time::timeout(DEADLINE, waiting)
        .await
        .expect("the call starts");
    assert_eq!(
        sessions.direct_calls(),
        1,
        "the call did not take the worker"
    );
    // The reply's head comes once the keep-alive interval has passed: an SSE stream.
    let response = tokio::time::timeout(DEADLINE, in_flight)
        .await
        .expect("the reply's head in time")
        .expect("the request task");
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let cancelled = tools.cancelled.notified();
    let cancel = json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 40, "reason": "enough"}
    });
    assert_eq!(
        send(&service, post(Some(&session), cancel)).await.status(),
        202
    );
    tokio::time::timeout(DEADLINE, cancelled)
        .await
        .expect("the handler sees the cancellation");
    // As through the worker, a cancelled request gets no answer: its stream ends without one.
    let body = tokio::time::timeout(DEADLINE, text(response))
        .await
        .expect("the stream ends");
    assert!(
        !body.contains("jsonrpc"),
        "no answer to a cancelled call: {body}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_in_flight_keeps_its_session_past_the_idle_limit() {
    let idle = Duration::from_secs(1);
    let tools = Tools::default();
    let sessions = sessions(idle);
    let service = service(&tools, &sessions, Duration::from_secs(15));
    let session = open(&service, json!({})).await;
    let waiting = tools.waiting.notified();
    // Read without the deadlines of `send` and `answer`: on the paused clock below they would
    // expire long before the call is meant to end.
    let in_flight = tokio::spawn({
        let (service, session) = (service.clone(), session.clone());
        async move {
            let response = service
                .oneshot(post(Some(&session), call(60, "wait")))
                .await
                .expect("an HTTP answer");
            text(response.map(Body::new)).await
        }
    });
    waiting.await;
    // The clock is paused: time passes only while every task waits, so the reaper has looked
    // many times when this returns.
    tokio::time::sleep(idle * 5).await;
    assert_eq!(
        sessions.open().await,
        1,
        "a session with a call in flight stays"
    );
    // The session's end cancels the call: a session closed by its client.
    let cancelled = tools.cancelled.notified();
    let delete = Request::delete("/mcp")
        .header("host", "127.0.0.1")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .body(Body::empty())
        .unwrap();
    let _ = send(&service, delete).await;
    cancelled.await;
    let _ = in_flight.await;
    assert_eq!(sessions.open().await, 0);
}

#[tokio::test(start_paused = true)]
async fn a_session_used_only_for_direct_calls_stays_and_an_idle_one_ends() {
    let idle = Duration::from_secs(60);
    let sessions = sessions(idle);
    let service = service(&Tools::default(), &sessions, Duration::from_secs(15));
    let session = open(&service, json!({})).await;
    // A call every half limit for five limits: only the calls keep the session.
    for id in 70..80 {
        tokio::time::sleep(idle / 2).await;
        let reply = answer(send(&service, post(Some(&session), call(id, "echo"))).await).await;
        assert_eq!(reply["id"], id, "{reply}");
    }
    assert_eq!(sessions.direct_calls(), 10);
    assert_eq!(sessions.open().await, 1);
    // Idle for a limit and a half: the reaper, every quarter limit, has ended it.
    tokio::time::sleep(idle * 3 / 2).await;
    assert_eq!(sessions.open().await, 0, "the idle session ended");
    let ping = json!({"jsonrpc": "2.0", "id": 90, "method": "ping"});
    let response = send(&service, post(Some(&session), ping)).await;
    assert_eq!(response.status(), 404, "and is gone");
}
