//! A notification a tool's handler sends (a log message) rides the stream of the request it
//! serves, in order with the request's answer, as the handler's own requests do (SEP-2260):
//! a client that reads only its POST's stream sees every log message of its call, before the
//! result.
#![cfg(not(feature = "local"))]
#![allow(deprecated)] // logging (SEP-2577) is what such handlers still send

use std::sync::Arc;

use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
        LoggingLevel, LoggingMessageNotificationParam, ServerCapabilities, ServerConfig,
    },
    service::RequestContext,
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const LINES: [&str; 3] = ["started", "working", "finished"];

#[derive(Clone)]
struct LoggingServer;

impl ServerHandler for LoggingServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .build(),
        )
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        for line in LINES {
            context
                .peer
                .notify_logging_message(LoggingMessageNotificationParam::new(
                    LoggingLevel::Info,
                    json!(line),
                ))
                .await
                .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        }
        Ok(CallToolResult::success(vec![ContentBlock::text("done")]).into())
    }
}

async fn start_server(ct: CancellationToken) -> String {
    let service = StreamableHttpService::new(
        move || Ok(LoggingServer),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default().with_cancellation_token(ct.child_token()),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://127.0.0.1:{}/mcp",
        listener.local_addr().unwrap().port()
    );
    tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async move { ct.cancelled().await })
            .await
            .unwrap();
    });
    url
}

/// The JSON-RPC messages of a reply, in order.
fn messages(body: &str) -> Vec<Value> {
    if body.trim_start().starts_with('{') {
        return vec![serde_json::from_str(body).unwrap()];
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_json::from_str(d.trim()).unwrap())
        .collect()
}

#[tokio::test]
async fn a_handlers_log_messages_ride_its_requests_stream_before_the_answer() {
    let ct = CancellationToken::new();
    let url = start_server(ct.clone()).await;
    let client = reqwest::Client::new();
    let post = |body: Value, session: Option<String>| {
        let mut request = client
            .post(&url)
            .header("Accept", "text/event-stream, application/json")
            .header("Content-Type", "application/json");
        if let Some(session) = session {
            request = request
                .header("Mcp-Session-Id", session)
                .header("Mcp-Protocol-Version", "2025-11-25");
        }
        request.json(&body).send()
    };
    let response = post(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test-client", "version": "1.0.0"}}}),
        None,
    )
    .await
    .unwrap();
    assert!(response.status().is_success());
    let session = response.headers()["Mcp-Session-Id"]
        .to_str()
        .unwrap()
        .to_owned();
    let _ = response.text().await;
    post(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        Some(session.clone()),
    )
    .await
    .unwrap();

    for id in 1..=20 {
        let body = post(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "log", "arguments": {}}}),
            Some(session.clone()),
        )
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
        let messages = messages(&body);
        let (answer, before) = messages.split_last().expect("an answer");
        assert_eq!(answer["id"], id, "the answer comes last: {body}");
        let logged: Vec<&Value> = before
            .iter()
            .filter(|m| m["method"] == "notifications/message")
            .map(|m| &m["params"]["data"])
            .collect();
        assert_eq!(logged, LINES, "call {id}: every log message, in order: {body}");
    }
    ct.cancel();
}
