//! The selector behind the gateway: two real filesystem servers (npm) offer the same tools, so
//! every tool is an overlap group and each call is routed by the five rules, with the client's
//! prompt from `_meta` and the MCP session's history; the result says where it ran and why.

use serde_json::{Value, json};

use crate::stateless::session_rpc;
use crate::{Served, npm_server};

async fn read(base: &str, session: &str, id: u64, path: &str, prompt: Option<&str>) -> Value {
    let mut params = json!({"name": "read_text_file", "arguments": {"path": path}});
    if let Some(p) = prompt {
        params["_meta"] = json!({"toolforge/prompt": p});
    }
    let (_, r) = session_rpc(base, Some(session), id, "tools/call", params).await;
    r["result"].clone()
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn group_calls_follow_the_selector_and_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    for (sub, body) in [("docs", "from docs\n"), ("notes", "from notes\n")] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
        std::fs::write(root.join(sub).join("file.txt"), body).unwrap();
    }
    let fs = npm_server("server-filesystem");
    let config = json!({"mcpServers": {
        "docs": {"command": "node", "args": [&fs, root.join("docs")]},
        "notes": {"command": "node", "args": [&fs, root.join("notes")], "aliases": ["nb"]}
    }});
    let served = Served::start(&config).await;
    served.wait_health(60, |h| h["status"] == "ok").await;

    let (headers, _) = session_rpc(
        &served.base,
        None,
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "selection-test", "version": "1"}}),
    )
    .await;
    let session = headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .expect("a session")
        .to_owned();
    let notes_file = root.join("notes/file.txt");
    let notes_file = notes_file.to_str().unwrap();

    // No prompt, no history: both schemas accept the arguments, so config order decides.
    let r = read(&served.base, &session, 2, notes_file, None).await;
    let why = &r["_meta"]["toolforge/selection"];
    assert_eq!(why["server"], "docs", "{r}");
    assert_eq!(why["selection_rule"], "priority-order");
    assert_eq!(why["alternatives"], json!(["notes"]));
    assert_eq!(
        r["isError"], true,
        "docs may not read outside its root: {r}"
    );

    // The prompt names the other server by its alias.
    let r = read(
        &served.base,
        &session,
        3,
        notes_file,
        Some("read the file with nb please"),
    )
    .await;
    let why = &r["_meta"]["toolforge/selection"];
    assert_eq!(why["server"], "notes", "{r}");
    assert_eq!(why["selection_rule"], "explicit-mention");
    assert!(text(&r).contains("from notes"), "{r}");

    // Same session, no prompt: the server of the latest call in the group wins.
    let r = read(&served.base, &session, 4, notes_file, None).await;
    let why = &r["_meta"]["toolforge/selection"];
    assert_eq!(why["server"], "notes", "{r}");
    assert_eq!(why["selection_rule"], "session-recency");
    assert!(text(&r).contains("from notes"), "{r}");
}
