//! Fairness between clients over real Streamable HTTP: each session has its own unguessable
//! resource handles, and `run_python` has one budget for all, answered "busy" past it.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use toolforge_toolkit::budget::PythonBudget;
use toolforge_toolkit::server::ToolkitConfig;

use crate::seeded_db;

type Client = RunningService<RoleClient, ClientConfig>;

async fn call(client: &Client, name: &'static str, args: Value) -> CallToolResult {
    client
        .call_tool(
            CallToolRequestParams::new(name).with_arguments(args.as_object().cloned().unwrap()),
        )
        .await
        .expect("call_tool")
}

fn text(r: &CallToolResult) -> String {
    serde_json::to_string(&r.content).unwrap()
}

/// Serves `config` over HTTP; returns the URL and the token that stops it.
async fn serve(config: ToolkitConfig) -> (String, tokio_util::sync::CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    tokio::spawn(crate::serve_http(config, listener, cancel.clone()));
    (format!("http://{addr}/mcp"), cancel)
}

async fn connect(url: &str) -> Client {
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url.to_owned());
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("fairness-it", "0.1"),
    )
    .serve(transport)
    .await
    .unwrap()
}

#[tokio::test]
async fn handles_belong_to_their_session() {
    let (_dir, db) = seeded_db();
    let (url, cancel) = serve(crate::toolkit_config(db, "http://127.0.0.1:9")).await;
    let alice = connect(&url).await;
    let mallory = connect(&url).await;
    let r = call(&alice, "open_resource", json!({"name": "refund_policy.md"})).await;
    let handle = r.structured_content.unwrap()["handle_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(handle.len(), 34, "h- and 128 bits in hex: {handle}");
    // Another session can neither read, release nor list it.
    let r = call(&mallory, "read_resource", json!({"handle_id": handle})).await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    let r = call(&mallory, "release_resource", json!({"handle_id": handle})).await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    let listed = call(&mallory, "list_resources", json!({})).await;
    assert_eq!(
        listed.structured_content.unwrap()["open_handles"],
        json!([])
    );
    // Its owner still can.
    let listed = call(&alice, "list_resources", json!({})).await;
    assert_eq!(
        listed.structured_content.unwrap()["open_handles"][0]["handle_id"],
        handle
    );
    let r = call(&alice, "read_resource", json!({"handle_id": handle})).await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    // Handles one session opens do not use up another's.
    for _ in 0..toolforge_toolkit::server::MAX_HANDLES {
        let r = call(&mallory, "open_resource", json!({"name": "schema.sql"})).await;
        assert_ne!(r.is_error, Some(true), "{}", text(&r));
    }
    let r = call(&alice, "open_resource", json!({"name": "schema.sql"})).await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    alice.cancel().await.unwrap();
    mallory.cancel().await.unwrap();
    cancel.cancel();
}

#[tokio::test]
async fn run_python_past_the_budget_is_busy() {
    let (_dir, db) = seeded_db();
    let mut config = crate::toolkit_config(db, "http://127.0.0.1:9");
    config.sandbox.budget = PythonBudget {
        max_concurrent: 1,
        max_total_memory_bytes: config.sandbox.max_memory_bytes,
    };
    let (url, cancel) = serve(config).await;
    let second = connect(&url).await;
    // One session spins until its timeout, holding the whole budget meanwhile.
    let spin = |url: String| {
        tokio::spawn(async move {
            let first = connect(&url).await;
            let r = call(
                &first,
                "run_python",
                json!({"code": "while True:\n    pass", "timeout_seconds": 10}),
            )
            .await;
            first.cancel().await.unwrap();
            r
        })
    };
    let mut spinning = spin(url.clone());
    // The other is told it is busy (polled: the first must have started; if the other's
    // own run took the budget first, the spinner was the one told, and starts again).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let busy = loop {
        let r = call(&second, "run_python", json!({"code": "print(1)"})).await;
        if r.is_error == Some(true) && text(&r).contains("busy") {
            break r;
        }
        if spinning.is_finished() {
            let spun = spinning.await.unwrap();
            assert!(text(&spun).contains("busy"), "{}", text(&spun));
            spinning = spin(url.clone());
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never busy: {}",
            text(&r)
        );
        // Leave the spinner room to start between probes.
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(text(&busy).contains("try again"), "{}", text(&busy));
    // Once the first run ends, its share comes back.
    let spun = spinning.await.unwrap();
    assert!(text(&spun).contains("timed_out"), "{}", text(&spun));
    let r = call(&second, "run_python", json!({"code": "print(6 * 7)"})).await;
    assert!(text(&r).contains("42"), "{}", text(&r));
    second.cancel().await.unwrap();
    cancel.cancel();
}
