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

/// `toolforge broker select` loads a go-toolbroker rule file unchanged (Go's key casing, `match:
/// {patterns}`, `action: {type}`) and prints the seed's fields.
#[test]
fn broker_select_loads_a_go_toolbroker_rule_file() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.json");
    std::fs::write(
        &rules,
        serde_json::json!({"Rules": [
            {"Name": "no-writes", "Intent": "*", "Priority": 50,
             "Match": {"Patterns": ["write_*", "create_*"]}, "Action": {"Type": "exclude"}},
            {"Name": "reading", "Intent": "read", "Priority": 10,
             "Match": {"Patterns": ["read_*", "get_*"]}, "Action": {"Type": "include"}}
        ]})
        .to_string(),
    )
    .unwrap();
    let out = std::process::Command::new(crate::bin())
        .args([
            "broker",
            "select",
            "--message",
            "show me the README",
            "--json",
        ])
        .arg("--rules")
        .arg(&rules)
        .arg("--catalog")
        .arg(crate::root().join("evals/catalogs/reference.json"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "count",
            "intent",
            "override_block",
            "rationale",
            "tools",
            "total"
        ]
    );
    assert_eq!(r["intent"], "read");
    assert_eq!(r["total"], 64);
    let names: Vec<&str> = r["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(r["count"], names.len());
    assert!(names.contains(&"read_file") && names.contains(&"get_file_contents"));
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("read_") || n.starts_with("get_")),
        "{names:?}"
    );
}

/// `chat` applies the configuration's broker rules (`"toolforge": {"broker": {"rules"}}`,
/// relative to the file) and says which tool it left out and why; an unknown
/// `EMBEDDER_BACKEND` stops it before any server starts.
#[tokio::test]
async fn chat_applies_the_configured_rules_and_says_what_it_left_out() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("conf")).unwrap();
    std::fs::write(
        dir.path().join("conf/rules.yaml"),
        "rules:\n  - name: no-python\n    intent: \"*\"\n    match: {patterns: [run_python]}\n    action: {type: exclude}\n",
    )
    .unwrap();
    let config = dir.path().join("conf/mcp.servers.json");
    std::fs::write(
        &config,
        serde_json::json!({
            "mcpServers": {"toolkit": {"command": "toolforge", "args": ["server", "toolkit", "--stdio"]}},
            "toolforge": {"broker": {"rules": "rules.yaml"}}
        })
        .to_string(),
    )
    .unwrap();
    let run = |backend: Option<&str>| {
        let mut cmd = tokio::process::Command::new(crate::bin());
        cmd.args(["chat", "--dry-run", "--json", "run some python"])
            .arg("--config")
            .arg(&config)
            .current_dir(dir.path())
            .env("TRACE_SINK", "off")
            .env_remove("LLM_PROVIDER")
            .env_remove("REDIS_URL")
            .env_remove("EMBEDDER_BACKEND")
            .kill_on_drop(true);
        if let Some(b) = backend {
            cmd.env("EMBEDDER_BACKEND", b);
        }
        cmd.output()
    };
    let out = tokio::time::timeout(std::time::Duration::from_secs(120), run(None))
        .await
        .expect("chat finished within 120 s")
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let has = |key: &str, name: &str| {
        r[key]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t.as_str() == Some(name))
    };
    assert!(has("available_tools", "run_python"));
    assert!(!has("offered_tools", "run_python"));
    assert!(has("offered_tools", "sql_query"));
    let why = r["broker_rationale"].as_str().unwrap();
    assert!(
        why.contains("toolkit/run_python (excluded by rule \"no-python\")"),
        "{why}"
    );

    let out = tokio::time::timeout(std::time::Duration::from_secs(60), run(Some("bogus")))
        .await
        .expect("chat finished within 60 s")
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("EMBEDDER_BACKEND") && !err.contains("ready"),
        "{err}"
    );
}

/// `GET /tools` marks a search that matched nothing (the full visible set is listed), and a
/// part of a word matches (seed 001's case-insensitive CONTAINS).
#[tokio::test]
async fn get_tools_marks_a_search_that_matched_nothing() {
    let served = Served::start(&json!({"mcpServers": {"toolkit": {
        "command": "toolforge", "args": ["server", "toolkit", "--stdio"]}}}))
    .await;
    served.wait_health(60, |h| h["status"] == "ok").await;
    let get = |q: &'static str| {
        let url = format!("{}/tools?q={q}", served.base);
        async move { reqwest::get(url).await.unwrap() }
    };
    let all = get("zzqx").await;
    assert_eq!(
        all.headers()["x-toolforge-query-matched"],
        "false",
        "no match falls back to everything and says so"
    );
    let all: Value = all.json().await.unwrap();
    let some = get("PYTH").await;
    assert_eq!(some.headers()["x-toolforge-query-matched"], "true");
    let some: Value = some.json().await.unwrap();
    let names: Vec<&str> = some
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"run_python"), "{names:?}");
    assert!(names.len() < all.as_array().unwrap().len());
}
