//! A dry run contacts no MCP server: with the tools in the (persistent, default) catalog cache it
//! sends not one byte to any server; without them it says so and plans without their tools,
//! unless `--allow-listing` lets it list them first. The server here is a stdio script that
//! appends every line it receives to a file.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::{bin, tool};

/// A stdio MCP server with one weather tool that records every line it reads.
const RECORDER: &str = r#"
import json, sys
log = open(sys.argv[1], "a")
for line in sys.stdin:
    log.write(line if line.endswith("\n") else line + "\n")
    log.flush()
    msg = json.loads(line)
    if "id" not in msg or "method" not in msg:
        continue
    method = msg["method"]
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"],
                  "capabilities": {"tools": {}},
                  "serverInfo": {"name": "recorder", "version": "1.0.0"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "weather_forecast",
                             "description": "Get the weather forecast for a city.",
                             "inputSchema": {"type": "object",
                                             "properties": {"city": {"type": "string"}}}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "sunny, 21 C"}], "isError": False}
    elif method == "ping":
        result = {}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"],
                          "error": {"code": -32601, "message": "method not found"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"#;

const REQUEST: &str = "Get the weather forecast for the city \"Lisbon\"";

fn setup(dir: &Path) -> std::path::PathBuf {
    let script = dir.join("recorder.py");
    std::fs::write(&script, RECORDER).unwrap();
    let log = dir.join("received.jsonl");
    let python = tool("venv/bin/python");
    let config = json!({"mcpServers": {"recorder": {
        "command": python.to_str().unwrap(),
        "args": [script.to_str().unwrap(), log.to_str().unwrap()],
        "timeout": 20,
    }}});
    std::fs::write(dir.join("mcp.servers.json"), config.to_string()).unwrap();
    log
}

/// `toolforge chat --json` in `dir`, with its own cache directory; the parsed response.
async fn chat(dir: &Path, cache: &Path, args: &[&str]) -> (i32, Value) {
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(bin())
            .arg("chat")
            .args(args)
            .arg("--json")
            .current_dir(dir)
            .env_remove("TRACE_SINK")
            .env_remove("LLM_PROVIDER")
            .env_remove("MCP_SERVERS_CONFIG")
            .env_remove("REDIS_URL")
            .env_remove("CATALOG_CACHE_BACKEND")
            .env_remove("CATALOG_CACHE_PATH")
            .env("XDG_CACHE_HOME", cache)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("toolforge chat finished within 120 s")
    .expect("toolforge chat ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let parsed = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), parsed)
}

fn received(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

#[tokio::test]
async fn a_dry_run_with_a_cached_catalog_sends_no_byte_to_any_server() {
    let dir = tempfile::tempdir().unwrap();
    let log = setup(dir.path());
    let cache = dir.path().join("cache");

    // A real run lists the tools (and so fills the default, persistent cache) and calls one.
    let (code, r) = chat(dir.path(), &cache, &[REQUEST]).await;
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["steps"][0]["executed"], true, "{r}");
    let before = received(&log);
    assert!(before.contains("\"tools/list\""), "{before}");
    assert!(before.contains("\"tools/call\""), "{before}");
    assert!(
        cache.join("toolforge/catalog.sqlite").exists(),
        "the default cache is a file in the user's cache directory"
    );

    // The dry run plans the same call from the cache: not one more byte reaches the server.
    let (code, r) = chat(dir.path(), &cache, &[REQUEST, "--dry-run"]).await;
    assert_eq!(code, 0, "{r}");
    assert_eq!(received(&log), before, "the dry run contacted the server");
    assert_eq!(r["dry_run"], true);
    let step = &r["steps"][0];
    assert_eq!(step["tool"], "weather_forecast", "{r}");
    assert_eq!(step["server"], "recorder");
    assert_eq!(step["executed"], false);
    let answer = r["response"].as_str().unwrap();
    assert!(
        answer.starts_with("Dry run: I would call weather_forecast"),
        "{answer}"
    );
    assert!(
        !answer.contains("sunny"),
        "a dry run states no result: {answer}"
    );
}

#[tokio::test]
async fn without_a_cached_catalog_a_dry_run_says_so_or_lists_when_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let log = setup(dir.path());
    let cache = dir.path().join("cache");

    let (code, r) = chat(dir.path(), &cache, &[REQUEST, "--dry-run"]).await;
    assert_eq!(code, 0, "{r}");
    assert_eq!(received(&log), "", "the dry run contacted the server");
    let answer = r["response"].as_str().unwrap();
    assert!(
        answer.starts_with("Dry run without the tools of recorder: no cached tool list"),
        "{answer}"
    );
    assert!(answer.contains("--allow-listing"), "{answer}");
    assert_eq!(r["steps"], json!([]));
    assert_eq!(r["available_tools"], json!([]));

    // Allowed to list: the server is asked for its tools, and never called.
    let (code, r) = chat(
        dir.path(),
        &cache,
        &[REQUEST, "--dry-run", "--allow-listing"],
    )
    .await;
    assert_eq!(code, 0, "{r}");
    let got = received(&log);
    assert!(got.contains("\"tools/list\""), "{got}");
    assert!(!got.contains("\"tools/call\""), "{got}");
    assert_eq!(r["steps"][0]["tool"], "weather_forecast", "{r}");
    assert_eq!(r["steps"][0]["executed"], false);
}
