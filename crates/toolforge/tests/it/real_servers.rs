//! The gateway in front of real reference servers (npm: filesystem, everything, memory; PyPI:
//! time, git), with the official Python SDK as the client, over `/mcp` and over stdio.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::{Served, bin, call, npm_server, python_client, server_state, tool};

fn fixture_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("note.txt"),
        "hello from the filesystem server\n",
    )
    .expect("write");
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).expect("mkdir");
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(&repo)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.test")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.test")
            .output()
            .expect("git runs")
            .status
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "a\n").expect("write");
    git(&["add", "a.txt"]);
    git(&["commit", "-q", "-m", "first"]);
    std::fs::write(repo.join("b.txt"), "untracked\n").expect("write");
    dir
}

fn config(dir: &std::path::Path) -> Value {
    let root = std::fs::canonicalize(dir).expect("canonical dir");
    json!({"mcpServers": {
        "filesystem": {"command": "node", "args": [npm_server("server-filesystem"), root], "aliases": ["fs"]},
        "everything": {"command": "node", "args": [npm_server("server-everything")]},
        "memory": {"command": "node", "args": [npm_server("server-memory")],
                   "env": {"MEMORY_FILE_PATH": root.join("memory.jsonl")}},
        "time": {"command": tool("venv/bin/mcp-server-time"), "args": ["--local-timezone", "UTC"]},
        "git": {"command": tool("venv/bin/mcp-server-git"), "args": ["--repository", root.join("repo")]}
    }})
}

#[tokio::test]
async fn real_servers_through_http_with_the_python_sdk() {
    let dir = fixture_dir();
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    let served = Served::start(&config(dir.path())).await;
    let health = served.wait_health(60, |h| h["status"] == "ok").await;
    assert_eq!(health["status"], "ok", "{health}");
    for name in ["filesystem", "everything", "memory", "time", "git"] {
        let s = server_state(&health, name);
        assert_eq!(s["state"], "ready", "{s}");
        assert!(s["tools"].as_u64().unwrap_or(0) > 0, "{s}");
    }

    let rows = served.get("/tools").await;
    let rows = rows.as_array().expect("array");
    let has = |server: &str, tool: &str| {
        rows.iter()
            .any(|r| r["server"] == server && r["name"] == tool)
    };
    assert!(has("filesystem", "read_text_file"));
    assert!(has("time", "get_current_time"));
    assert!(has("git", "git_status"));
    assert!(has("memory", "create_entities"));
    assert!(
        rows.iter()
            .all(|r| r["input_schema"].is_object() && r["exposed_name"].is_string())
    );
    let exposed: BTreeSet<String> = rows
        .iter()
        .filter_map(|r| r["exposed_name"].as_str().map(str::to_owned))
        .collect();

    let note = root.join("note.txt").display().to_string();
    let repo = root.join("repo").display().to_string();
    let out = python_client(&[
        "http".into(),
        served.mcp(),
        "--call".into(),
        "read_text_file".into(),
        json!({"path": note}).to_string(),
        "--call".into(),
        "get_current_time".into(),
        json!({"timezone": "UTC"}).to_string(),
        "--call".into(),
        "git_status".into(),
        json!({"repo_path": repo}).to_string(),
        "--call".into(),
        "read_text_file".into(),
        json!({"path": "/etc/passwd"}).to_string(),
    ])
    .await;
    assert_eq!(out["server"], "toolforge");
    let listed: BTreeSet<String> = out["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t.as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        listed, exposed,
        "the client sees exactly the exposed names of /tools"
    );
    assert_eq!(call(&out, 0)["is_error"], false, "{out}");
    assert!(
        call(&out, 0)["text"]
            .as_str()
            .unwrap_or("")
            .contains("hello from the filesystem server"),
        "{out}"
    );
    assert_eq!(call(&out, 1)["is_error"], false, "{out}");
    assert!(
        call(&out, 1)["text"].as_str().unwrap_or("").contains("UTC"),
        "{out}"
    );
    assert!(
        call(&out, 2)["text"]
            .as_str()
            .unwrap_or("")
            .contains("b.txt"),
        "untracked file listed: {out}"
    );
    // The backend's own refusal passes through as a tool error, not a gateway failure.
    assert_eq!(call(&out, 3)["is_error"], true, "{out}");
}

#[tokio::test]
async fn stdio_gateway_with_the_python_sdk() {
    let dir = fixture_dir();
    let cfg = dir.path().join("mcp.servers.json");
    let mut config = config(dir.path());
    let servers = config["mcpServers"].as_object_mut().expect("object");
    servers.retain(|k, _| k == "time" || k == "filesystem");
    std::fs::write(&cfg, config.to_string()).expect("write");
    let out = python_client(&[
        "stdio".into(),
        "--call".into(),
        "get_current_time".into(),
        json!({"timezone": "Europe/Paris"}).to_string(),
        "--call".into(),
        "no_such_tool".into(),
        "{}".into(),
        "--".into(),
        bin().into(),
        "gateway".into(),
        "--stdio".into(),
        "--config".into(),
        cfg.display().to_string(),
    ])
    .await;
    assert_eq!(out["server"], "toolforge", "{out}");
    let tools = out["tools"].as_array().expect("tools");
    assert!(tools.iter().any(|t| t == "get_current_time"), "{out}");
    assert!(tools.iter().any(|t| t == "read_text_file"), "{out}");
    assert!(
        call(&out, 0)["text"]
            .as_str()
            .unwrap_or("")
            .contains("Europe/Paris"),
        "{out}"
    );
    let unknown = call(&out, 1);
    let msg = unknown["error"]
        .as_str()
        .or(unknown["text"].as_str())
        .unwrap_or("");
    assert!(msg.contains("unknown tool: no_such_tool"), "{out}");
}
