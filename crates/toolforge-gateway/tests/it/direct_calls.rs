//! A session's `tools/call` answered on the HTTP task, without the session's worker (the
//! vendored rmcp's `direct.rs`, which the gateway's sessions allow): which calls take that path
//! and which keep the worker, cancellation of such a call (no answer follows it), the session's
//! idle clock, and the reply of a call that outlasts the keep-alive interval.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, Response};
use futures::Stream;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientJsonRpcMessage, ContentBlock,
    ErrorData, ServerCapabilities, ServerConfig, ServerJsonRpcMessage,
};
use rmcp::service::RequestContext;
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId};
use rmcp::transport::streamable_http_server::{
    SessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use rmcp::{RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tower::ServiceExt as _;

use crate::{mcp_post, rpc, text};

const DEADLINE: Duration = Duration::from_secs(10);

/// Two tools: `echo` answers at once; `wait` answers when its call is cancelled.
#[derive(Clone, Default)]
struct Tools {
    waiting: Arc<Notify>,
    cancelled: Arc<Notify>,
}

impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
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

/// rmcp's local sessions, counting the requests that went through a session's worker
/// (`create_stream`) and the touches of calls answered without it.
struct Counting {
    inner: LocalSessionManager,
    touch_interval: Option<Duration>,
    streams: AtomicUsize,
    touches: AtomicUsize,
}

impl Counting {
    fn new(touch_interval: Option<Duration>) -> Self {
        Self {
            inner: LocalSessionManager::default(),
            touch_interval,
            streams: AtomicUsize::new(0),
            touches: AtomicUsize::new(0),
        }
    }

    fn streams(&self) -> usize {
        self.streams.load(Ordering::SeqCst)
    }

    fn touches(&self) -> usize {
        self.touches.load(Ordering::SeqCst)
    }
}

impl SessionManager for Counting {
    type Error = LocalSessionManagerError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.inner.create_session().await
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.streams.fetch_add(1, Ordering::SeqCst);
        self.inner.create_stream(id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.resume(id, last_event_id).await
    }

    fn direct_touch_interval(&self) -> Option<Duration> {
        self.touch_interval
    }

    async fn touch_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.touches.fetch_add(1, Ordering::SeqCst);
        self.inner.touch_session(id).await
    }
}

type Service = StreamableHttpService<Tools, Counting>;

fn service(tools: &Tools, sessions: &Arc<Counting>, keep_alive: Duration) -> Service {
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
    let sessions = Arc::new(Counting::new(Some(Duration::from_secs(3600))));
    let service = service(&Tools::default(), &sessions, Duration::from_secs(15));
    let session = open(&service, json!({})).await;
    let before = sessions.streams();
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
    assert_eq!(
        sessions.streams(),
        before,
        "no call went through the worker"
    );
    let ping = json!({"jsonrpc": "2.0", "id": 20, "method": "ping"});
    let _ = answer(send(&service, post(Some(&session), ping)).await).await;
    assert_eq!(sessions.streams(), before + 1, "other requests still do");
}

#[tokio::test]
async fn calls_that_may_get_more_than_their_answer_keep_the_worker() {
    let sessions = Arc::new(Counting::new(Some(Duration::from_secs(3600))));
    let service = service(&Tools::default(), &sessions, Duration::from_secs(15));
    // A progress token: its notifications ride the call's own stream.
    let session = open(&service, json!({})).await;
    let before = sessions.streams();
    let with_token = json!({
        "jsonrpc": "2.0", "id": 30, "method": "tools/call",
        "params": {"name": "echo", "_meta": {"progressToken": "p"}}
    });
    let reply = answer(send(&service, post(Some(&session), with_token)).await).await;
    assert_eq!(reply["result"]["content"][0]["text"], "hi", "{reply}");
    assert_eq!(sessions.streams(), before + 1);
    // A client the server may ask back (sampling, elicitation, roots): those requests ride the
    // call's stream too.
    for capability in ["sampling", "elicitation", "roots"] {
        let session = open(&service, json!({capability: {}})).await;
        let before = sessions.streams();
        let reply = answer(send(&service, post(Some(&session), call(31, "echo"))).await).await;
        assert_eq!(reply["result"]["content"][0]["text"], "hi", "{reply}");
        assert_eq!(sessions.streams(), before + 1, "{capability}");
    }
    // A manager that does not allow it keeps every request on the worker.
    let sessions = Arc::new(Counting::new(None));
    let service = self::service(&Tools::default(), &sessions, Duration::from_secs(15));
    let session = open(&service, json!({})).await;
    let before = sessions.streams();
    let _ = answer(send(&service, post(Some(&session), call(32, "echo"))).await).await;
    assert_eq!(sessions.streams(), before + 1);
    assert_eq!(sessions.touches(), 0);
}

#[tokio::test]
async fn cancelling_a_call_answered_directly_reaches_its_handler() {
    let tools = Tools::default();
    let sessions = Arc::new(Counting::new(Some(Duration::from_secs(3600))));
    // A keep-alive interval shorter than the call: its reply turns into an SSE stream.
    let service = service(&tools, &sessions, Duration::from_millis(50));
    let session = open(&service, json!({})).await;
    let before = sessions.streams();
    let waiting = tools.waiting.notified();
    let in_flight = tokio::spawn({
        let (service, session) = (service.clone(), session.clone());
        async move { send(&service, post(Some(&session), call(40, "wait"))).await }
    });
    tokio::time::timeout(DEADLINE, waiting)
        .await
        .expect("the call starts");
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
    assert_eq!(
        sessions.streams(),
        before,
        "the call did not take the worker"
    );
}

#[tokio::test]
async fn calls_answered_directly_touch_the_session_at_its_interval() {
    // Every call touches when the interval is zero.
    let sessions = Arc::new(Counting::new(Some(Duration::ZERO)));
    let service = service(&Tools::default(), &sessions, Duration::from_secs(15));
    let session = open(&service, json!({})).await;
    for id in 50..53 {
        let _ = answer(send(&service, post(Some(&session), call(id, "echo"))).await).await;
    }
    assert_eq!(sessions.touches(), 3);
    // None within the interval after the session came up.
    let sessions = Arc::new(Counting::new(Some(Duration::from_secs(3600))));
    let service = self::service(&Tools::default(), &sessions, Duration::from_secs(15));
    let session = open(&service, json!({})).await;
    for id in 54..57 {
        let _ = answer(send(&service, post(Some(&session), call(id, "echo"))).await).await;
    }
    assert_eq!(sessions.touches(), 0);
}
