//! Black-box tests of the `toolforge` binary: the gateway over real MCP servers from npm and
//! PyPI, driven by the official Python MCP SDK as the client, and the pool's fault handling.
//! Everything they need is installed by `scripts/setup` under `.tools/`.

mod agent;
mod apps;
mod cache;
mod client;
mod console;
mod cost_report;
mod dry_run;
mod evals;
mod faults;
mod governance_pins;
mod governance_policy;
mod hardening;
mod http_backend;
mod inspector;
mod legacy_sse;
mod notification_order;
mod oauth;
mod otel;
mod overlaps;
mod protocol;
mod real_servers;
mod replicas;
mod replies;
mod retrieval;
mod scheduling;
mod sdk_clients;
mod selection;
mod stateless;
mod tasks;
mod visibility;
mod wire_formats;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A file or directory under `.tools/`, or a panic saying how to get it.
pub fn tool(rel: &str) -> PathBuf {
    let p = root().join(".tools").join(rel);
    assert!(
        p.exists(),
        "{} is missing: run scripts/setup (it installs the real MCP servers the tests use)",
        p.display()
    );
    p
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_toolforge")
}

pub fn npm_server(pkg: &str) -> PathBuf {
    tool(&format!(
        "npm/node_modules/@modelcontextprotocol/{pkg}/dist/index.js"
    ))
}

/// The address a child announces on `stream` once it listens: the `host:port` right after
/// `marker` on the first line that has it (children are started on port 0, so no port is
/// picked, released and raced for). The rest of the stream is read and dropped in the
/// background, so the child never blocks on a full pipe.
pub async fn announced(
    stream: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    marker: &str,
    within: Duration,
) -> String {
    use tokio::io::AsyncBufReadExt as _;
    let mut lines = tokio::io::BufReader::new(stream).lines();
    let deadline = tokio::time::Instant::now() + within;
    let addr = loop {
        let line = tokio::time::timeout_at(deadline, lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("nothing said {marker:?} within {within:?}"))
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("the child ended before it said {marker:?}"));
        if let Some(addr) = address_after(&line, marker) {
            break addr;
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    addr
}

/// [`announced`] for a child of `std::process`, read on a thread of its own.
pub fn announced_blocking(
    stream: impl std::io::Read + Send + 'static,
    marker: &str,
    within: Duration,
) -> String {
    use std::io::BufRead as _;
    let (tx, rx) = std::sync::mpsc::channel();
    let wanted = marker.to_owned();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in std::io::BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if !sent && let Some(addr) = address_after(&line, &wanted) {
                sent = tx.send(addr).is_ok();
            }
        }
    });
    rx.recv_timeout(within)
        .unwrap_or_else(|e| panic!("no {marker:?} from the child within {within:?} ({e})"))
}

/// `host:port` right after `marker` in `line`, up to a `/` or a blank.
fn address_after(line: &str, marker: &str) -> Option<String> {
    let rest = &line[line.find(marker)? + marker.len()..];
    let end = rest
        .find(|c: char| c == '/' || c.is_whitespace())
        .unwrap_or(rest.len());
    Some(rest[..end].to_owned())
}

/// What `toolforge serve` says once it listens, before its address.
pub const SERVING: &str = "toolforge: serving http://";
/// What the Python backends of `tests/python/` say once they listen over HTTP.
pub const LISTENING: &str = "listening on http://";

/// `toolforge serve` on a loopback port it picks, killed on drop.
pub struct Served {
    child: tokio::process::Child,
    pub base: String,
    pub dir: tempfile::TempDir,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

impl Served {
    pub async fn start(config: &Value) -> Self {
        Self::start_with(config, &[]).await
    }

    /// Like [`Served::start`], with extra environment. The server runs in its temp dir, so its
    /// trace file is `dir/logs/traces.jsonl`.
    pub async fn start_with(config: &Value, envs: &[(&str, &str)]) -> Self {
        Self::start_full(config, envs, &[]).await
    }

    /// Like [`Served::start_with`], with extra `toolforge serve` arguments.
    pub async fn start_full(config: &Value, envs: &[(&str, &str)], args: &[&str]) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = dir.path().join("mcp.servers.json");
        std::fs::write(&cfg, config.to_string()).expect("write config");
        let mut child = tokio::process::Command::new(bin())
            .args(["serve", "--config"])
            .arg(&cfg)
            .args(["--port", "0"])
            .args(args)
            .current_dir(dir.path())
            .env_remove("TRACE_SINK")
            .env_remove("LLM_PROVIDER")
            .env_remove("REDIS_URL")
            .env_remove("CATALOG_CACHE_BACKEND")
            .env("XDG_CACHE_HOME", dir.path().join(".cache"))
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start toolforge serve");
        let stderr = child.stderr.take().expect("piped stderr");
        let addr = announced(stderr, SERVING, Duration::from_secs(90)).await;
        let served = Self {
            child,
            base: format!("http://{addr}"),
            dir,
        };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(90) {
            if served.try_get("/health").await.is_some() {
                return served;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("toolforge serve did not answer /health within 90 s");
    }

    async fn try_get(&self, path: &str) -> Option<Value> {
        let r = reqwest::get(format!("{}{path}", self.base)).await.ok()?;
        r.json().await.ok()
    }

    pub async fn get(&self, path: &str) -> Value {
        self.try_get(path)
            .await
            .unwrap_or_else(|| panic!("GET {path} failed"))
    }

    /// Polls `/health` until `pred` holds (at most `secs`), returning the last body.
    pub async fn wait_health(&self, secs: u64, pred: impl Fn(&Value) -> bool) -> Value {
        let start = Instant::now();
        loop {
            let h = self.get("/health").await;
            if pred(&h) || start.elapsed() > Duration::from_secs(secs) {
                return h;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    pub fn mcp(&self) -> String {
        format!("{}/mcp", self.base)
    }

    /// The process id of `toolforge serve`.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("toolforge serve is running")
    }

    /// Waits (at most `within`) for `toolforge serve` to exit; its exit code.
    pub async fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        tokio::time::timeout(within, self.child.wait())
            .await
            .ok()?
            .ok()?
            .code()
    }
}

pub fn server_state<'a>(health: &'a Value, name: &str) -> &'a Value {
    health["servers"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no server {name} in {health}"))
}

/// Runs the Python SDK client (`tests/python/mcp_client.py`) and parses its JSON output.
pub async fn python_client(args: &[String]) -> Value {
    let python = tool("venv/bin/python");
    let script = root().join("crates/toolforge/tests/python/mcp_client.py");
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(python)
            .arg(script)
            .args(args)
            // A `gateway --stdio` the client starts writes no trace into the source tree.
            .env("TRACE_SINK", "off")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("python client finished within 120 s")
    .expect("python client ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "python client output is not JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

pub fn call(out: &Value, i: usize) -> &Value {
    &out["calls"][i]
}

/// One JSON-RPC request to a `serve --stateless` gateway's `mcp` URL (2025-06-18), with `key` as
/// the bearer token (an API key or an access token); the answer's JSON.
pub async fn stateless_rpc(mcp: &str, key: Option<&str>, method: &str, params: Value) -> Value {
    let mut req = reqwest::Client::new()
        .post(mcp)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    let text = req.send().await.unwrap().text().await.unwrap();
    answer_json(&text).unwrap_or_else(|e| panic!("{method}: {e}: {text}"))
}

/// The JSON-RPC message of an `/mcp` answer: a JSON body, or the first `data:` of an SSE one.
pub fn answer_json(text: &str) -> serde_json::Result<Value> {
    let body = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .find(|d| !d.trim().is_empty())
        .unwrap_or(text);
    serde_json::from_str(body.trim())
}
