//! The server over MCP: in-process (duplex), real stdio (the binary) and real Streamable HTTP.

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use toolforge_toolkit::server::Toolkit;

use crate::{ALICE_SQL, seeded_db};

fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("toolkit-it", "0.1"),
    )
}

async fn call(
    client: &RunningService<RoleClient, ClientConfig>,
    name: &'static str,
    args: Value,
) -> CallToolResult {
    client
        .call_tool(
            CallToolRequestParams::new(name).with_arguments(args.as_object().cloned().unwrap()),
        )
        .await
        .expect("call_tool")
}

async fn exercise(client: &RunningService<RoleClient, ClientConfig>) {
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "sql_query",
            "rest_exchange_rate",
            "run_python",
            "list_resources",
            "open_resource",
            "read_resource",
            "release_resource"
        ]
    );
    let res = client.list_all_resources().await.unwrap();
    assert!(
        res.iter()
            .any(|r| r.uri == "resource://mcp-agent-toolkit/refund_policy.md")
    );
    let t = client.list_all_resource_templates().await.unwrap();
    assert_eq!(t[0].uri_template, "resource://mcp-agent-toolkit/{filename}");
    let read = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "resource://mcp-agent-toolkit/refund_policy.md",
        ))
        .await
        .unwrap();
    assert!(format!("{read:?}").contains("30 days"));
    assert!(
        client
            .read_resource(rmcp::model::ReadResourceRequestParams::new(
                "resource://mcp-agent-toolkit/../Cargo.toml",
            ))
            .await
            .is_err()
    );
    let r = call(client, "list_resources", json!({})).await;
    let listed = r.structured_content.clone().unwrap();
    assert_eq!(
        listed["resources"][1]["uri"],
        "resource://mcp-agent-toolkit/refund_policy.md"
    );
    let r = call(client, "open_resource", json!({"name": "refund_policy.md"})).await;
    let h = r.structured_content.clone().unwrap()["handle_id"].clone();
    for _ in 0..2 {
        let r = call(client, "read_resource", json!({"handle_id": h})).await;
        let c = r.structured_content.clone().unwrap();
        assert!(c["content"].as_str().unwrap().contains("30 days"), "{c}");
    }
    let r = call(client, "release_resource", json!({"handle_id": h})).await;
    assert_ne!(r.is_error, Some(true));
    let r = call(client, "read_resource", json!({"handle_id": h})).await;
    assert_eq!(r.is_error, Some(true), "read after release must fail");
    let r = call(client, "open_resource", json!({"name": "../../etc/passwd"})).await;
    assert_eq!(r.is_error, Some(true));
    // The API at port 9 (discard) is not there: a clear in-band error, the rest keeps working.
    let r = call(
        client,
        "rest_exchange_rate",
        json!({"base": "USD", "target": "EUR"}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    assert!(
        serde_json::to_string(&r.content)
            .unwrap()
            .contains("could not connect"),
        "{r:?}"
    );
    let r = call(
        client,
        "run_python",
        json!({"code": "import math\nprint(math.factorial(10))"}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert_eq!(r.structured_content.clone().unwrap()["stdout"], "3628800\n");
    let r = call(
        client,
        "run_python",
        json!({"code": "open('/etc/passwd').read()"}),
    )
    .await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(r.structured_content.clone().unwrap()["rejected"], true);
    let r = call(
        client,
        "sql_query",
        json!({"sql": ALICE_SQL, "page_size": 25}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let s = r.structured_content.clone().expect("structuredContent");
    assert_eq!(s["total_rows_matched"], 3);
    assert_eq!(s["effective_page_size"], 25);
    assert_eq!(s["next_offset"], Value::Null);
    assert_eq!(s["rows"][0]["unit_price"], 59.5);
    let r = call(
        client,
        "sql_query",
        json!({"sql": "SELECT * FROM orders", "page_size": 500}),
    )
    .await;
    let s = r.structured_content.clone().expect("structuredContent");
    assert_eq!(s["requested_page_size"], 500);
    assert_eq!(s["effective_page_size"], 25);
    assert_eq!(s["has_more"], true);
    assert_eq!(s["next_offset"], 25);
    let r = call(client, "sql_query", json!({"sql": "DELETE FROM orders"})).await;
    assert_eq!(r.is_error, Some(true));
    let text = serde_json::to_string(&r.content).unwrap();
    assert!(text.contains("read-only"), "{text}");
    let r = call(client, "sql_query", json!({"sql": 42})).await;
    assert_eq!(
        r.is_error,
        Some(true),
        "bad argument types are in-band errors"
    );
}

#[tokio::test]
async fn in_process_over_duplex() {
    let (_d, db) = seeded_db();
    let (a, b) = tokio::io::duplex(64 * 1024);
    let server = Toolkit::new(crate::toolkit_config(db, "http://127.0.0.1:9"));
    tokio::spawn(async move {
        if let Ok(s) = server.serve(a).await {
            let _ = s.waiting().await;
        }
    });
    let client = client_config().serve(b).await.unwrap();
    exercise(&client).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn real_streamable_http() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (_d, db) = seeded_db();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let server = tokio::spawn(crate::serve_http(
        crate::toolkit_config(db, "http://127.0.0.1:9"),
        listener,
        cancel.clone(),
    ));
    let transport =
        rmcp::transport::StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp"));
    let client = client_config().serve(transport).await.unwrap();
    exercise(&client).await;
    client.cancel().await.unwrap();
    cancel.cancel();
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn real_stdio_with_the_binary() {
    use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
    // The test binary lives in <target>/<profile>/deps; the CLI is built beside it,
    // whatever CARGO_TARGET_DIR says.
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .join("toolforge");
    assert!(
        bin.is_file(),
        "{} is missing: run `cargo build -p toolforge` (scripts/test does) before this test",
        bin.display()
    );
    let (dir, db) = seeded_db();
    let before = crate::snapshot(dir.path());
    let (transport, _stderr) =
        TokioChildProcess::builder(tokio::process::Command::new(&bin).configure(|c| {
            c.args(["server", "toolkit", "--stdio", "--db"]).arg(&db);
        }))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let client = client_config().serve(transport).await.unwrap();
    exercise(&client).await;
    client.cancel().await.unwrap();
    assert_eq!(
        crate::snapshot(dir.path()),
        before,
        "the served database changed"
    );
}

#[tokio::test]
async fn rest_tool_over_mcp_with_the_mock() {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(toolforge_toolkit::rest::serve_mock(
        l,
        std::future::pending(),
    ));
    let (_d, db) = seeded_db();
    let (a, b) = tokio::io::duplex(64 * 1024);
    let server = Toolkit::new(crate::toolkit_config(db, &api));
    tokio::spawn(async move {
        if let Ok(s) = server.serve(a).await {
            let _ = s.waiting().await;
        }
    });
    let client = client_config().serve(b).await.unwrap();
    let r = call(
        &client,
        "rest_exchange_rate",
        json!({"base": "USD", "target": "GBP", "amount": 334.0}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    let s = r.structured_content.unwrap();
    assert_eq!(s["rate"], 0.79);
    assert_eq!(s["converted"], 263.86);
    let r = call(&client, "rest_exchange_rate", json!({"base": "USD"})).await;
    assert_eq!(r.is_error, Some(true), "missing target is an in-band error");
    client.cancel().await.unwrap();
}
