//! The legacy HTTP+SSE transport (2024-11-05) both ways, with the official Python SDK at both
//! ends: its SSE server (`tests/python/sse_server.py`, `MCPServer.run("sse")`) behind the
//! gateway as a `"type": "sse"` backend, and its SSE client (`mcp.client.sse.sse_client`) in
//! front, on `/sse`; and the built-in servers' `-t stdio|sse|http` with `/sse` and `GET /tools`.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::{LISTENING, Served, announced, bin, call, python_client, root, server_state, tool};

/// `sse_server.py` on the port it announces, killed on drop.
struct SseBackend {
    _child: tokio::process::Child,
    port: u16,
}

impl SseBackend {
    /// On a port the system picks.
    async fn start() -> Self {
        Self::start_on(0).await
    }

    /// On `port` (0: one the system picks).
    async fn start_on(port: u16) -> Self {
        let mut child = tokio::process::Command::new(tool("venv/bin/python"))
            .arg(root().join("crates/toolforge/tests/python/sse_server.py"))
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start sse_server.py");
        let stdout = child.stdout.take().expect("piped stdout");
        let addr = announced(stdout, LISTENING, Duration::from_secs(60)).await;
        let port = addr
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("sse_server.py announced {addr:?}"));
        Self {
            _child: child,
            port,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/sse", self.port)
    }
}

fn texts(out: &Value) -> Vec<String> {
    out["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|n| n.as_str())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_python_sdk_s_sse_client_lists_and_calls_an_sse_server_through_the_gateway() {
    let backend = SseBackend::start().await;
    let config = json!({"mcpServers": {"legacy": {"url": backend.url(), "type": "sse"}}});
    let served = Served::start(&config).await;
    let health = served
        .wait_health(60, |h| server_state(h, "legacy")["state"] == "ready")
        .await;
    assert_eq!(server_state(&health, "legacy")["tools"], 3, "{health}");

    let out = python_client(&[
        "sse".into(),
        format!("{}/sse", served.base),
        "--call".into(),
        "add".into(),
        json!({"a": 2, "b": 3}).to_string(),
        "--call".into(),
        "echo".into(),
        json!({"text": "over two legacy hops"}).to_string(),
        "--read".into(),
        "legacy://motd".into(),
    ])
    .await;
    assert_eq!(out["server"], "toolforge", "{out}");
    let mut tools = texts(&out);
    tools.sort();
    assert_eq!(tools, ["add", "crash", "echo"], "{out}");
    assert_eq!(call(&out, 0)["text"], "5", "{out}");
    assert_eq!(call(&out, 1)["text"], "echo: over two legacy hops", "{out}");
    assert_eq!(
        out["reads"][0]["text"], "served over the legacy transport",
        "{out}"
    );

    // The connection URL's query scopes the session (seed 001: `/sse?tools=…`).
    let out = python_client(&[
        "sse".into(),
        format!("{}/sse?tools=echo", served.base),
        "--call".into(),
        "add".into(),
        json!({"a": 1, "b": 1}).to_string(),
    ])
    .await;
    assert_eq!(texts(&out), ["echo"], "{out}");
    assert!(
        call(&out, 0)["error"]
            .as_str()
            .unwrap_or_default()
            .contains("unknown tool"),
        "a hidden tool is not callable either: {out}"
    );
}

#[tokio::test]
async fn a_legacy_backend_that_dies_mid_call_is_not_called_again_and_is_reconnected() {
    let backend = SseBackend::start().await;
    let port = backend.port;
    let config = json!({"mcpServers": {"legacy": {"url": backend.url(), "type": "sse"}}});
    let served = Served::start(&config).await;
    served
        .wait_health(60, |h| server_state(h, "legacy")["state"] == "ready")
        .await;
    let out = python_client(&[
        "http".into(),
        served.mcp(),
        "--call".into(),
        "crash".into(),
        json!({}).to_string(),
    ])
    .await;
    let text = call(&out, 0)["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(call(&out, 0)["is_error"], true, "{out}");
    assert!(text.contains("not retried"), "at most once: {out}");
    drop(backend);
    // The server comes back on its address: the pool reconnects by itself.
    let _again = SseBackend::start_on(port).await;
    let health = served
        .wait_health(60, |h| {
            let s = server_state(h, "legacy");
            s["state"] == "ready" && s["restarts"].as_u64().unwrap_or(0) >= 1
        })
        .await;
    assert_eq!(
        server_state(&health, "legacy")["state"],
        "ready",
        "{health}"
    );
    let out = python_client(&[
        "http".into(),
        served.mcp(),
        "--call".into(),
        "add".into(),
        json!({"a": 20, "b": 22}).to_string(),
    ])
    .await;
    assert_eq!(call(&out, 0)["text"], "42", "{out}");
}

/// `toolforge server toolkit ARGS` on a free port, killed on drop; its base URL.
struct Builtin {
    _child: tokio::process::Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Builtin {
    async fn start(args: &[&str]) -> Self {
        // The test's own HTTP client (reqwest with rustls, its provider chosen here).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().expect("tempdir");
        let mut child = tokio::process::Command::new(bin())
            .args(["server", "toolkit"])
            .args(args)
            .args(["--port", "0"])
            .env("XDG_DATA_HOME", dir.path())
            .env_remove("MCP_ENABLED_TOOLS")
            .env_remove("MCP_DISABLED_TOOLS")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start toolforge server toolkit");
        let stderr = child.stderr.take().expect("piped stderr");
        let addr = announced(stderr, LISTENING, Duration::from_secs(90)).await;
        let base = format!("http://{addr}");
        Self {
            _child: child,
            base,
            _dir: dir,
        }
    }
}

fn row_names(rows: &Value) -> Vec<&str> {
    rows.as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["name"].as_str())
        .collect()
}

#[tokio::test]
async fn a_built_in_server_answers_sse_and_get_tools_as_serve_does() {
    let toolkit = Builtin::start(&["-t", "sse", "--disabled-tools", "rest_exchange_rate"]).await;
    let rows: Value = reqwest::get(format!("{}/tools", toolkit.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names = row_names(&rows);
    assert!(
        names.contains(&"sql_query") && names.contains(&"run_python"),
        "{rows}"
    );
    assert!(
        !names.contains(&"rest_exchange_rate"),
        "the operator's --disabled-tools: {rows}"
    );
    let row = &rows[0];
    assert_eq!(row["server"], "toolkit", "{row}");
    assert_eq!(row["name"], row["exposed_name"], "{row}");
    assert!(
        row["input_schema"].is_object() && row["tags"].is_array(),
        "{row}"
    );
    // Seed 001, example C: the request's headers narrow it.
    let narrowed: Value = reqwest::Client::new()
        .get(format!("{}/tools", toolkit.base))
        .header("x-mcp-disabled-tools", "run_python")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let narrowed = row_names(&narrowed);
    assert!(!narrowed.contains(&"run_python") && narrowed.contains(&"sql_query"));
    // A page of another site is refused.
    let foreign = reqwest::Client::new()
        .get(format!("{}/tools", toolkit.base))
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), 403);

    // Seed 001, example B: the SDK's SSE client sees what the connection URL's query leaves.
    let out = python_client(&[
        "sse".into(),
        format!("{}/sse?tools=sql_query,run_python", toolkit.base),
        "--call".into(),
        "run_python".into(),
        json!({"code": "print(6 * 7)"}).to_string(),
    ])
    .await;
    let mut tools = texts(&out);
    tools.sort();
    assert_eq!(tools, ["run_python", "sql_query"], "{out}");
    assert!(
        call(&out, 0)["text"]
            .as_str()
            .unwrap_or_default()
            .contains("42"),
        "{out}"
    );
    // Streamable HTTP on the same port.
    let out = python_client(&["http".into(), format!("{}/mcp", toolkit.base)]).await;
    assert!(texts(&out).contains(&"list_resources".to_owned()), "{out}");
}

#[tokio::test]
async fn t_stdio_serves_stdin_and_the_old_flags_still_work() {
    // Seed 001, example A: `-t stdio --tools a,b` exposes exactly those.
    let out = python_client(&[
        "stdio".into(),
        "--".into(),
        bin().into(),
        "server".into(),
        "toolkit".into(),
        "-t".into(),
        "stdio".into(),
        "--tools".into(),
        "sql_query,list_resources".into(),
    ])
    .await;
    let mut tools = texts(&out);
    tools.sort();
    assert_eq!(tools, ["list_resources", "sql_query"], "{out}");
    // `--port` alone is `-t http`; `-t stdio --port` contradicts itself.
    let toolkit = Builtin::start(&[]).await;
    let out = python_client(&["http".into(), format!("{}/mcp", toolkit.base)]).await;
    assert!(texts(&out).contains(&"sql_query".to_owned()), "{out}");
    let refused = tokio::process::Command::new(bin())
        .args(["server", "toolkit", "-t", "stdio", "--port", "1"])
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--port is for an HTTP transport"),
        "{stderr}"
    );
}

/// The first `endpoint` event of a `GET /sse` answer (the stream stays open: closing it ends
/// the session).
async fn endpoint_of(response: &mut reqwest::Response) -> String {
    let mut text = String::new();
    let read = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(chunk)) = response.chunk().await {
            text.push_str(&String::from_utf8_lossy(&chunk));
            if let Some(rest) = text.split("event: endpoint").nth(1)
                && let Some(data) = rest.split("data: ").nth(1)
                && let Some(line) = data.split('\n').next()
                && data.contains('\n')
            {
                return line.trim().to_owned();
            }
        }
        panic!("the stream ended before its endpoint event: {text:?}");
    })
    .await;
    read.expect("an endpoint event within 30 s")
}

#[tokio::test]
async fn with_identity_on_a_legacy_session_needs_a_token_and_belongs_to_its_principal() {
    let backend = SseBackend::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = dir.path().join("keys.txt");
    std::fs::write(
        &keys,
        "alice-key-0123456789 alice\nbob-key-0123456789abc bob\n",
    )
    .unwrap();
    let config = json!({"mcpServers": {"legacy": {"url": backend.url(), "type": "sse"}}});
    let served =
        Served::start_full(&config, &[], &["--api-keys", &keys.display().to_string()]).await;
    let client = reqwest::Client::new();
    let health = || {
        client
            .get(format!("{}/health", served.base))
            .bearer_auth("alice-key-0123456789")
            .send()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let h: Value = health().await.unwrap().json().await.unwrap();
        if server_state(&h, "legacy")["state"] == "ready" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{h}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let anonymous = client
        .get(format!("{}/sse", served.base))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401, "no token, no session");

    // The SDK's SSE client with alice's token lists and calls.
    let out = python_client(&[
        "sse".into(),
        format!("{}/sse", served.base),
        "--header".into(),
        "Authorization:Bearer alice-key-0123456789".into(),
        "--call".into(),
        "add".into(),
        json!({"a": 40, "b": 2}).to_string(),
    ])
    .await;
    assert_eq!(call(&out, 0)["text"], "42", "{out}");

    // Alice's session is hers: bob, who learned its URL, is told it does not exist.
    let mut stream = client
        .get(format!("{}/sse", served.base))
        .bearer_auth("alice-key-0123456789")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let endpoint = endpoint_of(&mut stream).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let as_bob = client
        .post(format!("{}{endpoint}", served.base))
        .bearer_auth("bob-key-0123456789abc")
        .json(&ping)
        .send()
        .await
        .unwrap();
    assert_eq!(as_bob.status(), 404, "not bob's session");
    let as_alice = client
        .post(format!("{}{endpoint}", served.base))
        .bearer_auth("alice-key-0123456789")
        .json(&ping)
        .send()
        .await
        .unwrap();
    assert_eq!(as_alice.status(), 202, "alice's own session");
    drop(stream);
}
