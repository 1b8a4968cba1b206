//! A Streamable HTTP backend behind the gateway: calls reuse pooled connections instead of
//! opening a TCP connection per JSON-RPC message (a third of a proxied call's cost).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use tokio::net::{TcpListener, TcpStream};

use crate::Served;
use crate::stateless::session_rpc;

/// A TCP forwarder to `target` that counts the connections it accepted.
async fn counting_forwarder(target: String) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let target = target.clone();
            tokio::spawn(async move {
                if let Ok(mut outbound) = TcpStream::connect(target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    (port, accepted)
}

#[tokio::test]
async fn calls_to_an_http_backend_reuse_connections() {
    let backend = Served::start(&json!({"mcpServers": {
        "toolkit": {"command": "toolforge", "args": ["server", "toolkit", "--stdio"]}
    }}))
    .await;
    let (port, accepted) =
        counting_forwarder(backend.base.trim_start_matches("http://").to_owned()).await;
    let front = Served::start_full(
        &json!({"mcpServers": {"back": {"url": format!("http://127.0.0.1:{port}/mcp")}}}),
        &[],
        &["--stateless"],
    )
    .await;
    front.wait_health(60, |h| h["status"] == "ok").await;
    let before = accepted.load(Ordering::SeqCst);

    const CALLS: usize = 20;
    for id in 0..CALLS {
        let params = json!({"name": "list_resources", "arguments": {}});
        let (_, r) = session_rpc(&front.base, None, id as u64, "tools/call", params).await;
        assert_eq!(r["result"]["isError"], false, "{r}");
        assert!(
            r["result"]["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("schema.sql")),
            "the backend's answer comes through: {r}"
        );
    }
    let opened = accepted.load(Ordering::SeqCst) - before;
    // Without pooling every message opens a connection (at least 20 here). With it, a few may
    // still open: hyper hands a connection back to its pool only after the response is read,
    // so on a loaded machine the next request can start first and open another.
    assert!(
        opened <= CALLS / 4,
        "{CALLS} calls opened {opened} new connections to the backend; pooled connections \
         should carry them"
    );
}
