//! A client's request posted from the caller's task (`DirectRequests`): answered from its own
//! POST; not sent without a published session; and a response that carries more than the
//! answer handed over to the worker, its messages handled before the answer.
#![cfg(not(feature = "local"))]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::{
    ClientHandler, ErrorData, RoleClient, ServerHandler, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ClientConfig,
        ClientJsonRpcMessage, ContentBlock, ProgressNotificationParam, ProtocolVersion,
        RequestId, ServerCapabilities, ServerConfig, ServerJsonRpcMessage, ServerResult,
    },
    service::{NotificationContext, PeerRequestOptions, RequestContext},
    transport::{
        StreamableHttpClientTransport,
        streamable_http_client::{
            DirectOutcome, DirectRequests, StreamableHttpClientTransportConfig,
        },
        streamable_http_server::{
            StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
        },
    },
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Answers every call with its name; reports progress first when the call has a token.
#[derive(Clone)]
struct Tools;

impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<rmcp::RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(token) = context.meta.get_progress_token() {
            context
                .peer
                .notify_progress(ProgressNotificationParam::new(token, 1.0))
                .await
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(format!(
            "called {}",
            request.name
        ))])
        .into())
    }
}

/// A client of a protocol version whose requests carry only the session's headers; counts the
/// progress notifications it handles.
#[derive(Clone, Default)]
struct Client {
    progress: Arc<Mutex<u32>>,
}

impl ClientHandler for Client {
    async fn on_progress(
        &self,
        _params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        *self.progress.lock().unwrap() += 1;
    }

    fn get_info(&self) -> ClientConfig {
        let mut config = ClientConfig::default();
        config.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        config
    }
}

async fn spawn_server() -> (String, CancellationToken) {
    let ct = CancellationToken::new();
    let config = StreamableHttpServerConfig::default()
        .with_json_response(true)
        .with_cancellation_token(ct.child_token());
    let service: StreamableHttpService<Tools, LocalSessionManager> =
        StreamableHttpService::new(|| Ok(Tools), Default::default(), config);
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn({
        let ct = ct.clone();
        async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async move { ct.cancelled_owned().await })
                .await;
        }
    });
    (format!("http://{addr}/mcp"), ct)
}

fn call(id: &RequestId, progress: bool) -> ClientJsonRpcMessage {
    let mut params = json!({"name": "echo"});
    if progress {
        params["_meta"] = json!({"progressToken": "p"});
    }
    serde_json::from_value(json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params
    }))
    .unwrap()
}

/// Polls `condition` until it holds, for at most ten seconds.
async fn eventually(what: &str, condition: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(tokio::time::Instant::now() < deadline, "{what}: not in time");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn text_of(result: &ServerResult) -> String {
    let ServerResult::CallToolResult(result) = result else {
        panic!("not a tools/call result: {result:?}");
    };
    serde_json::to_value(&result.content).unwrap()[0]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn an_answer_is_read_from_the_request_s_own_post() -> anyhow::Result<()> {
    let (url, server) = spawn_server().await;
    let direct = DirectRequests::new();
    let transport = StreamableHttpClientTransport::with_direct_requests(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(url),
        direct.clone(),
    );
    let client = Client::default().serve(transport).await?;
    eventually("the session is published", || direct.is_published()).await;
    for _ in 0..3 {
        let id = client.peer().next_request_id();
        match direct.send(call(&id, false)).await {
            DirectOutcome::Answered(ServerJsonRpcMessage::Response(response)) => {
                assert_eq!(response.id, id);
                assert_eq!(text_of(&response.result), "called echo");
            }
            _ => panic!("the call was not answered from its own POST"),
        }
    }
    // The worker withdraws its session when it ends.
    client.cancel().await?;
    eventually("the session is withdrawn", || !direct.is_published()).await;
    let id = RequestId::Number(99);
    assert!(matches!(
        direct.send(call(&id, false)).await,
        DirectOutcome::NotSent
    ));
    server.cancel();
    Ok(())
}

#[tokio::test]
async fn nothing_is_sent_without_a_published_session() {
    let direct = DirectRequests::<reqwest::Client>::new();
    assert!(!direct.is_published());
    let id = RequestId::Number(1);
    assert!(matches!(
        direct.send(call(&id, false)).await,
        DirectOutcome::NotSent
    ));
}

#[tokio::test]
async fn a_stream_with_more_than_the_answer_is_handed_to_the_worker() -> anyhow::Result<()> {
    let (url, server) = spawn_server().await;
    let direct = DirectRequests::new();
    let transport = StreamableHttpClientTransport::with_direct_requests(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(url),
        direct.clone(),
    );
    let handler = Client::default();
    let client = handler.clone().serve(transport).await?;
    eventually("the session is published", || direct.is_published()).await;
    let id = client.peer().next_request_id();
    let DirectOutcome::Streaming(hand_over) = direct.send(call(&id, true)).await else {
        panic!("progress before the answer: the stream is handed over");
    };
    let handle = client
        .peer()
        .expect_response(id, PeerRequestOptions::no_options())
        .await?;
    let _reading = hand_over.start();
    let result = tokio::time::timeout(Duration::from_secs(10), handle.await_response())
        .await
        .expect("the answer in time")?;
    assert_eq!(text_of(&result), "called echo");
    assert_eq!(
        *handler.progress.lock().unwrap(),
        1,
        "the progress was handled before the answer"
    );
    client.cancel().await?;
    server.cancel();
    Ok(())
}
