//! A client hands a response to its caller only after the notifications that came before it
//! are handled: a tool's last log message, sent with its result in one write, has been seen by
//! the client's handler when the call returns.
#![cfg(not(feature = "local"))]
// Log messages (deprecated by SEP-2577) are the notifications a tool sends most.
#![allow(deprecated)]

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

/// Records the numbers of the log messages it handled, in the order it finished them. Message
/// `i` of `n` first yields `(n - i) * slowness` times, so that handlers run side by side would
/// finish the later messages first; `gate`, while closed, holds every handler at its start.
#[derive(Clone)]
struct Sequence {
    seen: Arc<Mutex<Vec<u64>>>,
    of: u64,
    slowness: u64,
    gate: Arc<tokio::sync::Semaphore>,
}

impl Sequence {
    fn new(of: u64, slowness: u64, open: bool) -> Self {
        Self {
            seen: Arc::default(),
            of,
            slowness,
            gate: Arc::new(tokio::sync::Semaphore::new(if open {
                tokio::sync::Semaphore::MAX_PERMITS
            } else {
                0
            })),
        }
    }

    fn seen(&self) -> Vec<u64> {
        self.seen.lock().unwrap().clone()
    }
}

impl ClientHandler for Sequence {
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _open = self.gate.acquire().await.expect("gate");
        let i = params.data.as_u64().expect("a numbered message");
        for _ in 0..(self.of.saturating_sub(i) * self.slowness) {
            tokio::task::yield_now().await;
        }
        self.seen.lock().unwrap().push(i);
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }
}

/// A server on the other end of `io` that answers each `tools/call` with `n` numbered log
/// messages and then its result, one message per write; `written` counts the messages whose
/// write completed.
async fn serve_numbered(
    io: tokio::io::DuplexStream,
    n: u64,
    written: Arc<std::sync::atomic::AtomicU64>,
) {
    let (read, mut write) = tokio::io::split(io);
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let message: serde_json::Value = serde_json::from_str(&line).unwrap();
        let Some(id) = message.get("id").cloned() else {
            continue;
        };
        let mut replies = Vec::new();
        match message["method"].as_str() {
            Some("initialize") => replies.push(serde_json::json!({"jsonrpc": "2.0", "id": id,
                "result": {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}, "logging": {}},
                    "serverInfo": {"name": "numbered", "version": "1"}
                }})),
            Some("tools/call") => {
                for i in 0..n {
                    replies.push(serde_json::json!({"jsonrpc": "2.0",
                        "method": "notifications/message",
                        "params": {"level": "info", "data": i}}));
                }
                replies.push(serde_json::json!({"jsonrpc": "2.0", "id": id,
                    "result": {"content": [{"type": "text", "text": "done"}]}}));
            }
            _ => replies.push(serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {}})),
        }
        for reply in replies {
            write
                .write_all(format!("{reply}\n").as_bytes())
                .await
                .unwrap();
            written.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

#[tokio::test]
async fn every_notification_is_handled_once_in_the_order_sent_before_the_result() -> anyhow::Result<()>
{
    const N: u64 = 64;
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(serve_numbered(server_io, N, Arc::default()));
    let handler = Sequence::new(N, 4, true);
    let client = handler.clone().serve(client_io).await?;
    for call in 1..=3 {
        client.call_tool(CallToolRequestParams::new("t")).await?;
        let expected: Vec<u64> = (0..call).flat_map(|_| 0..N).collect();
        assert_eq!(
            handler.seen(),
            expected,
            "call {call}: every log message handled, in the order sent, when the call returned"
        );
    }
    client.cancel().await?;
    Ok(())
}

// The clock is paused below: it jumps only when every task waits, so a wait on it is a wait
// until nothing can move any more, and a stall shows as a timeout instead of a hung test.

#[tokio::test(start_paused = true)]
async fn a_peer_cannot_queue_more_than_the_bound_behind_a_slow_handler() -> anyhow::Result<()> {
    // Far more than the queue holds, each message about 90 bytes.
    const N: u64 = 2_000;
    let (client_io, server_io) = tokio::io::duplex(4 * 1024);
    let written = Arc::new(std::sync::atomic::AtomicU64::new(0));
    tokio::spawn(serve_numbered(server_io, N, written.clone()));
    let handler = Sequence::new(N, 0, false);
    let client = handler.clone().serve(client_io).await?;
    let peer = client.peer().clone();
    let call = tokio::spawn(async move { peer.call_tool(CallToolRequestParams::new("t")).await });
    // Until nothing moves: the handler waits at its gate, the client has stopped reading.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let stalled_at = written.load(std::sync::atomic::Ordering::SeqCst);
    // The queue's 256 and one held, the result, and what a 4 KiB pipe and the reader's line
    // buffer hold (about 70 of these messages): 328 when this was written.
    assert!(
        stalled_at < 256 + 1 + 1 + 200,
        "{stalled_at} messages written while the handler was held: the client read on without \
         bound"
    );
    assert!(!call.is_finished(), "the result came before its notifications");
    handler.gate.add_permits(tokio::sync::Semaphore::MAX_PERMITS);
    tokio::time::timeout(std::time::Duration::from_secs(60), call).await???;
    assert_eq!(handler.seen(), (0..N).collect::<Vec<_>>());
    client.cancel().await?;
    Ok(())
}

/// Answers `ask` log messages by asking its server (`tools/list`) on the same connection.
#[derive(Clone, Default)]
struct Asker(Arc<Mutex<Vec<String>>>);

impl ClientHandler for Asker {
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        context: NotificationContext<RoleClient>,
    ) {
        let tools = context.peer.list_tools(None).await;
        self.0
            .lock()
            .unwrap()
            .push(format!("{}: {}", params.data, tools.is_ok()));
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }
}

#[tokio::test(start_paused = true)]
async fn a_notification_handler_may_wait_for_an_answer_on_its_own_connection()
-> anyhow::Result<()> {
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    // The server sends `ask`, answers the `tools/list` it brings, then the call's result, and
    // another `ask` with its `tools/list` answered after the result.
    tokio::spawn(async move {
        let (read, mut write) = tokio::io::split(server_io);
        let mut lines = BufReader::new(read).lines();
        let mut call = None;
        while let Ok(Some(line)) = lines.next_line().await {
            let message: serde_json::Value = serde_json::from_str(&line).unwrap();
            let Some(id) = message.get("id").cloned() else {
                continue;
            };
            let mut replies = Vec::new();
            match message["method"].as_str() {
                Some("initialize") => replies.push(serde_json::json!({"jsonrpc": "2.0",
                    "id": id, "result": {
                        "protocolVersion": message["params"]["protocolVersion"],
                        "capabilities": {"tools": {}, "logging": {}},
                        "serverInfo": {"name": "asking", "version": "1"}
                    }})),
                Some("tools/call") => {
                    call = Some(id);
                    replies.push(serde_json::json!({"jsonrpc": "2.0",
                        "method": "notifications/message",
                        "params": {"level": "info", "data": "first"}}));
                }
                Some("tools/list") => {
                    let tools = serde_json::json!({"jsonrpc": "2.0", "id": id,
                        "result": {"tools": []}});
                    match call.take() {
                        Some(call) => {
                            replies.push(tools);
                            replies.push(serde_json::json!({"jsonrpc": "2.0",
                                "method": "notifications/message",
                                "params": {"level": "info", "data": "second"}}));
                            replies.push(serde_json::json!({"jsonrpc": "2.0", "id": call,
                                "result": {"content": [{"type": "text", "text": "done"}]}}));
                        }
                        None => replies.push(tools),
                    }
                }
                _ => replies.push(serde_json::json!({"jsonrpc": "2.0", "id": id,
                    "result": {}})),
            }
            for reply in replies {
                write
                    .write_all(format!("{reply}\n").as_bytes())
                    .await
                    .unwrap();
            }
        }
    });
    let asker = Asker::default();
    let client = asker.clone().serve(client_io).await?;
    let call = client.call_tool(CallToolRequestParams::new("t"));
    tokio::time::timeout(std::time::Duration::from_secs(60), call)
        .await
        .expect("a handler waiting for its own connection's answer stalled it")?;
    assert_eq!(
        *asker.0.lock().unwrap(),
        ["\"first\": true", "\"second\": true"],
        "both handlers got their answers, before the call's result"
    );
    client.cancel().await?;
    Ok(())
}
