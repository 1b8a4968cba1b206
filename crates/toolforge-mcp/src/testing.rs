//! Test fixtures: an [`Upstream`] connected, over an in-memory pipe, to a hand-written backend
//! that speaks newline-delimited JSON-RPC like a stdio server.

use std::sync::Arc;

use rmcp::ServiceExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::relay::{ElicitationFallback, Relay};
use crate::upstream::{ServerState, Upstream};

/// What the fake backend does with a request.
pub(crate) enum Reply {
    /// Answer with this result.
    Result(Value),
    /// Write half an answer and drop the connection, like a process that crashes mid-call.
    Crash,
}

/// A ready [`Upstream`] named `pay` (call timeout 30 s) whose backend answers `initialize`
/// itself and every other request with `reply(method, params)`; notifications are ignored.
/// Its lists are not read yet.
pub(crate) async fn connected<F>(mut reply: F) -> Arc<Upstream>
where
    F: FnMut(&str, &Value) -> Reply + Send + 'static,
{
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        let (read, mut write) = tokio::io::split(theirs);
        let mut lines = BufReader::new(read).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let msg: Value = serde_json::from_str(&line).unwrap_or_default();
            let (Some(method), Some(id)) = (msg["method"].as_str(), msg.get("id")) else {
                continue;
            };
            let result = if method == "initialize" {
                json!({
                    "protocolVersion": msg["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "fake", "version": "0"}})
            } else {
                match reply(method, &msg["params"]) {
                    Reply::Result(result) => result,
                    Reply::Crash => {
                        let _ = write.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":").await;
                        return;
                    }
                }
            };
            let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
            let _ = write.write_all(format!("{answer}\n").as_bytes()).await;
        }
    });
    let text = json!({"mcpServers": {"pay": {"command": "unused", "timeout": 30}}});
    let cfg = crate::config::parse(&text.to_string(), &|_| None)
        .expect("config")
        .servers
        .remove(0);
    let (events, _) = tokio::sync::mpsc::unbounded_channel();
    let relay = Relay::new("pay", events, ElicitationFallback::Decline);
    let up = Arc::new(Upstream::new(cfg, relay.clone(), None));
    let (read, write) = tokio::io::split(ours);
    let client = relay.serve((read, write)).await.expect("initialize");
    *up.peer.write() = Some(client.peer().clone());
    up.set_state(ServerState::Ready, None);
    // The connection task lives as long as the test's runtime.
    tokio::spawn(async move {
        let _ = client.waiting().await;
    });
    up
}
