//! A client hands a response to its caller only after the notifications that came before it
//! are handled: a tool's last log message, sent with its result in one write, has been seen by
//! the client's handler when the call returns.
#![cfg(not(feature = "local"))]

use std::sync::{Arc, Mutex};

use rmcp::{
    ClientHandler, RoleClient, ServiceExt,
    model::{CallToolRequestParams, ClientConfig, LoggingMessageNotificationParam},
    service::NotificationContext,
};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Records what it handled; its log handler takes a while (it yields many times first).
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<String>>>);

impl ClientHandler for Recorder {
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        self.0.lock().unwrap().push(params.data.to_string());
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }
}

/// A server on the other end of `io`: answers initialize, then answers each `tools/call`
/// with a log message and its result in one write.
async fn serve(io: tokio::io::DuplexStream) {
    let (read, mut write) = tokio::io::split(io);
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let message: serde_json::Value = serde_json::from_str(&line).unwrap();
        let Some(id) = message.get("id").cloned() else {
            continue;
        };
        let reply = match message["method"].as_str() {
            Some("initialize") => format!(
                "{}\n",
                serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}, "logging": {}},
                    "serverInfo": {"name": "order", "version": "1"}
                }})
            ),
            Some("tools/call") => format!(
                "{}\n{}\n",
                serde_json::json!({"jsonrpc": "2.0", "method": "notifications/message",
                    "params": {"level": "info", "data": "last words"}}),
                serde_json::json!({"jsonrpc": "2.0", "id": id,
                    "result": {"content": [{"type": "text", "text": "done"}]}})
            ),
            _ => format!(
                "{}\n",
                serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {}})
            ),
        };
        write.write_all(reply.as_bytes()).await.unwrap();
    }
}

#[tokio::test]
async fn a_log_message_before_the_result_is_handled_before_the_call_returns()
-> anyhow::Result<()> {
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(serve(server_io));
    let recorder = Recorder::default();
    let client = recorder.clone().serve(client_io).await?;
    for n in 0..5 {
        let result = client.call_tool(CallToolRequestParams::new("t")).await?;
        assert!(result.is_error != Some(true), "{result:?}");
        let seen = recorder.0.lock().unwrap().len();
        assert_eq!(seen, n + 1, "call {n}: its log message was handled before it returned");
    }
    client.cancel().await?;
    Ok(())
}
