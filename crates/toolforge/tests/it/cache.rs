//! The catalog cache through the binary: a warm SQLite cache lets a dry run plan without
//! starting any server, and Redis shares lists between replicas and never causes an outage.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{Served, bin};

const TASK: &str =
    "Look up customer Alice Nguyen's orders, sum their total, and tell me if it exceeds $500.";

/// A config whose toolkit is started through a wrapper that logs each start to `starts.log`.
fn counted_toolkit(dir: &std::path::Path) -> Value {
    let wrapper = dir.join("toolkit.sh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho started >> '{}'\nexec '{}' server toolkit --stdio\n",
            dir.join("starts.log").display(),
            bin()
        ),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    json!({"mcpServers": {"toolkit": {"command": wrapper}}})
}

fn starts(dir: &std::path::Path) -> usize {
    std::fs::read_to_string(dir.join("starts.log"))
        .unwrap_or_default()
        .lines()
        .count()
}

async fn chat(dir: &std::path::Path, extra: &[&str]) -> Value {
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(bin())
            .args(["chat", "--json", TASK])
            .args(extra)
            .current_dir(dir)
            .env("CATALOG_CACHE_BACKEND", "sqlite")
            .env("CATALOG_CACHE_PATH", dir.join("cache/catalog.sqlite"))
            .env_remove("LLM_PROVIDER")
            .env_remove("TRACE_SINK")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("chat finished")
    .expect("chat ran");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[tokio::test]
async fn a_warm_sqlite_cache_lets_dry_run_plan_without_starting_servers() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("mcp.servers.json"),
        counted_toolkit(dir.path()).to_string(),
    )
    .unwrap();

    // Empty cache: a dry run allowed to list lists the tools once, filling it.
    let r = chat(dir.path(), &["--dry-run", "--allow-listing"]).await;
    assert_eq!(r["steps"][0]["server"], "toolkit");
    assert_eq!(starts(dir.path()), 1);

    // Warm cache: a new process plans the same without starting the server.
    let r = chat(dir.path(), &["--dry-run"]).await;
    assert_eq!(r["steps"][0]["server"], "toolkit", "{r}");
    assert_eq!(r["steps"][0]["dry_run"], true);
    assert_eq!(r["halted"], false, "{r}");
    assert_eq!(starts(dir.path()), 1, "a dry run contacted a server");

    // A real run starts it.
    let r = chat(dir.path(), &[]).await;
    assert_eq!(r["steps"][0]["executed"], true, "{r}");
    assert_eq!(starts(dir.path()), 2);
}

/// A `redis-server` listening on a Unix socket in a directory of its own (no TCP port to pick
/// and race for), killed on drop.
pub struct Redis {
    child: std::process::Child,
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn start_redis() -> Redis {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("redis.sock");
    let child = std::process::Command::new("redis-server")
        .args(["--port", "0", "--unixsocket"])
        .arg(&socket)
        .args([
            "--unixsocketperm",
            "700",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server is missing: run scripts/setup (it installs Redis)");
    let start = Instant::now();
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "redis-server did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Redis {
        child,
        url: format!("redis+unix://{}", socket.display()),
        _dir: dir,
    }
}

#[tokio::test]
async fn redis_shares_the_catalog_between_replicas_and_its_loss_is_no_outage() {
    let redis = start_redis();
    let url = redis.url.clone();
    let config = json!({"mcpServers": {"toolkit": {"command": "toolforge", "args": ["server", "toolkit", "--stdio"]}}});
    let env = [
        ("CATALOG_CACHE_BACKEND", "redis"),
        ("REDIS_URL", url.as_str()),
    ];
    let first = Served::start_with(&config, &env).await;
    let h = first
        .wait_health(30, |h| h["cache"]["writes"].as_u64() >= Some(1))
        .await;
    assert_eq!(h["cache"]["backend"], "redis", "{h}");
    assert_eq!(h["cache"]["servers"]["toolkit"]["source"], "live");

    // A second replica finds the list in Redis before its own server answers.
    let second = Served::start_with(&config, &env).await;
    let h = second.get("/health").await;
    assert_eq!(h["cache"]["hits"], 1, "{h}");

    // Redis goes away: the replicas keep serving what they hold, and a new one starts on the
    // in-memory cache with a warning instead of failing.
    drop(redis);
    let tools = first.get("/tools").await;
    assert_eq!(tools.as_array().map(Vec::len), Some(7));
    let third = Served::start_with(&config, &env).await;
    let h = third
        .wait_health(30, |h| h["servers"][0]["state"] == "ready")
        .await;
    assert_eq!(h["cache"]["backend"], "memory", "{h}");
    assert_eq!(third.get("/tools").await.as_array().map(Vec::len), Some(7));
}
