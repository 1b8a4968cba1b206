//! Servers that fail: a missing command, one that prints garbage on stdout (tolerated), one that crashes
//! mid-call and one that hangs. The caller gets a clear error in time, `/health` says
//! `degraded`, the others keep serving, and the crashed one comes back.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::stateless::session_rpc;
use crate::{Served, bin, call, python_client, root, server_state, tool};

#[tokio::test]
async fn broken_servers_degrade_health_but_never_the_rest() {
    let python = tool("venv/bin/python");
    let script = root().join("crates/toolforge/tests/python/misbehaving_server.py");
    let config = json!({"mcpServers": {
        "good": {"command": bin(), "args": ["server", "conformance", "--stdio"]},
        "missing": {"command": "/nonexistent/toolforge-test-server", "startTimeout": 5},
        "flaky": {"command": python, "args": [script], "timeout": 3},
        "stuck": {"command": python, "args": [script], "timeout": 3},
        "garbage": {"command": python, "args": [script, "garbage"], "timeout": 3}
    }});
    let served = Served::start(&config).await;
    let health = served
        .wait_health(30, |h| {
            server_state(h, "good")["state"] == "ready"
                && server_state(h, "flaky")["state"] == "ready"
        })
        .await;
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(server_state(&health, "good")["state"], "ready", "{health}");
    let missing = server_state(&health, "missing");
    assert_ne!(missing["state"], "ready", "{health}");
    assert!(
        missing["last_error"]
            .as_str()
            .unwrap_or("")
            .contains("could not start"),
        "{health}"
    );

    let started = Instant::now();
    let out = python_client(&[
        "http".into(),
        served.mcp(),
        "--call".into(),
        "stuck__hang".into(),
        "{}".into(),
        "--call".into(),
        "flaky__crash".into(),
        "{}".into(),
        "--call".into(),
        "test_simple_text".into(),
        "{}".into(),
        "--call".into(),
        "garbage__echo".into(),
        json!({"text": "through the noise"}).to_string(),
    ])
    .await;
    let hang = call(&out, 0);
    assert_eq!(hang["is_error"], true, "{out}");
    assert!(
        hang["text"]
            .as_str()
            .unwrap_or("")
            .contains("did not answer within 3s"),
        "{out}"
    );
    let crash = call(&out, 1);
    assert_eq!(crash["is_error"], true, "{out}");
    assert!(
        crash["text"].as_str().unwrap_or("").contains("flaky"),
        "{out}"
    );
    assert_eq!(
        call(&out, 2)["is_error"],
        false,
        "the good server keeps serving: {out}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "errors came back in time: {:?}",
        started.elapsed()
    );

    // The crashed server is restarted and serves again.
    let health = served
        .wait_health(30, |h| {
            let f = server_state(h, "flaky");
            f["state"] == "ready" && f["restarts"].as_u64().unwrap_or(0) >= 1
        })
        .await;
    let flaky = server_state(&health, "flaky");
    assert_eq!(flaky["state"], "ready", "{health}");
    assert!(flaky["restarts"].as_u64().unwrap_or(0) >= 1, "{health}");
    let out = python_client(&[
        "http".into(),
        served.mcp(),
        "--call".into(),
        "flaky__echo".into(),
        json!({"text": "back again"}).to_string(),
    ])
    .await;
    assert_eq!(call(&out, 0)["text"], "back again", "{out}");
}

#[tokio::test]
async fn malformed_and_oversized_requests_get_clear_errors() {
    let config = json!({"mcpServers": {"good": {"command": bin(), "args": ["server", "conformance", "--stdio"]}}});
    let served = Served::start(&config).await;
    let client = reqwest::Client::new();
    // A body announced larger than the limit is refused from its headers, before it is read.
    let addr = served.base.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n",
        5 * 1024 * 1024
    );
    tokio::io::AsyncWriteExt::write_all(&mut stream, head.as_bytes())
        .await
        .expect("write");
    let mut answer = vec![0u8; 4096];
    let n = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        tokio::io::AsyncReadExt::read(&mut stream, &mut answer),
    )
    .await
    .expect("answered without waiting for the body")
    .expect("read");
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("larger than"), "{answer}");

    let r = client
        .post(served.mcp())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body("{not json")
        .send()
        .await
        .expect("answer");
    assert!(r.status().is_client_error(), "{}", r.status());

    let r = client
        .get(format!("{}/nope", served.base))
        .send()
        .await
        .expect("answer");
    assert_eq!(r.status(), 404);
    let body: serde_json::Value = r.json().await.expect("json");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("/nope"),
        "{body}"
    );

    let r = client
        .get(format!("{}/tools", served.base))
        .header("host", "evil.example.com")
        .send()
        .await
        .expect("answer");
    assert_eq!(
        r.status(),
        403,
        "DNS-rebinding protection on the JSON routes too"
    );
}

#[tokio::test]
async fn a_call_the_client_gives_up_on_is_cancelled_on_the_backend() {
    let python = tool("venv/bin/python");
    let script = root().join("crates/toolforge/tests/python/misbehaving_server.py");
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("cancelled.jsonl");
    let config = json!({"mcpServers": {
        "slow": {"command": python, "args": [script], "timeout": 60, "env": {"CANCEL_LOG": log}}
    }});
    let served = Served::start(&config).await;
    let started = Instant::now();
    let out = python_client(&[
        "http".into(),
        served.mcp(),
        "--call-timeout".into(),
        "1".into(),
        "--call".into(),
        "hang".into(),
        "{}".into(),
    ])
    .await;
    assert!(
        call(&out, 0)["error"].is_string(),
        "the client timed out: {out}"
    );
    // The backend hears of it long before the server's own 60 s deadline.
    let mut seen = String::new();
    while started.elapsed() < Duration::from_secs(20) {
        seen = std::fs::read_to_string(&log).unwrap_or_default();
        if !seen.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        seen.contains("requestId"),
        "notifications/cancelled reached the backend: {seen:?}"
    );
}

#[tokio::test]
async fn pagination_is_followed_and_list_changed_refreshes_the_catalog() {
    let python = tool("venv/bin/python");
    let script = root().join("crates/toolforge/tests/python/misbehaving_server.py");
    let config = json!({"mcpServers": {"paged": {"command": python, "args": [script]}}});
    let served = Served::start(&config).await;
    let names = |rows: &serde_json::Value| -> Vec<String> {
        rows.as_array()
            .map(|r| {
                r.iter()
                    .filter_map(|t| t["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    // Four tools over two pages.
    assert_eq!(
        names(&served.get("/tools").await),
        ["echo", "crash", "hang", "grow"]
    );
    let out = python_client(&[
        "http".into(),
        served.mcp(),
        "--call".into(),
        "grow".into(),
        "{}".into(),
    ])
    .await;
    assert_eq!(call(&out, 0)["text"], "extra_4", "{out}");
    let start = Instant::now();
    let mut rows = served.get("/tools").await;
    while !names(&rows).contains(&"extra_4".to_owned()) && start.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
        rows = served.get("/tools").await;
    }
    assert_eq!(names(&rows), ["echo", "crash", "hang", "grow", "extra_4"]);
}

/// The calls a backend of `at_most_once_server.py` executed, one name a line.
fn executed(count: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(count)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn tool_text(r: &serde_json::Value) -> String {
    r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_backend_that_dies_mid_call_ran_it_once_and_the_caller_hears_at_once() {
    let python = tool("venv/bin/python");
    let script = root().join("crates/toolforge/tests/python/at_most_once_server.py");
    let dir = tempfile::tempdir().expect("tempdir");
    let count = dir.path().join("calls.txt");
    let config = json!({"mcpServers": {
        "pay": {"command": python, "args": [script, "stdio", count], "timeout": 30}
    }});
    let served = Served::start_full(&config, &[], &["--stateless"]).await;
    served
        .wait_health(30, |h| server_state(h, "pay")["state"] == "ready")
        .await;
    let params = json!({"name": "charge", "arguments": {"amount": 10}});
    let (_, r) = session_rpc(&served.base, None, 1, "tools/call", params).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    let text = tool_text(&r);
    // The closed connection answered, not the 30 s deadline; and the error says why the call
    // was not sent again.
    assert!(!text.contains("did not answer within"), "{text}");
    assert!(
        text.contains("\"pay\"")
            && text.contains("not retried")
            && text.contains("may have reached"),
        "{text}"
    );
    assert_eq!(executed(&count), ["charge"], "executed exactly once");

    // A read-only tool may run again: after the same crash it is retried on the restarted
    // server and answers.
    let (_, r) = session_rpc(
        &served.base,
        None,
        2,
        "tools/call",
        json!({"name": "lookup"}),
    )
    .await;
    assert_ne!(r["result"]["isError"], true, "{r}");
    assert_eq!(tool_text(&r), "lookup", "{r}");
    assert_eq!(executed(&count), ["charge", "lookup", "lookup"]);
}

#[tokio::test]
async fn an_http_400_from_a_backend_is_sent_once() {
    let python = tool("venv/bin/python");
    let script = root().join("crates/toolforge/tests/python/at_most_once_server.py");
    let dir = tempfile::tempdir().expect("tempdir");
    let count = dir.path().join("calls.txt");
    let mut backend = tokio::process::Command::new(python)
        .arg(&script)
        .args(["http", "0"])
        .arg(&count)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the HTTP backend");
    let stdout = backend.stdout.take().expect("piped stdout");
    let addr = crate::announced(stdout, crate::LISTENING, Duration::from_secs(60)).await;
    let config = json!({"mcpServers": {
        "h": {"url": format!("http://{addr}/mcp"), "timeout": 30}
    }});
    let served = Served::start_full(&config, &[], &["--stateless"]).await;
    served
        .wait_health(60, |h| server_state(h, "h")["state"] == "ready")
        .await;
    let (_, r) = session_rpc(
        &served.base,
        None,
        1,
        "tools/call",
        json!({"name": "charge"}),
    )
    .await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(tool_text(&r).contains("400"), "{r}");
    assert_eq!(
        executed(&count),
        ["charge"],
        "one tools/call reached the backend"
    );
}

#[tokio::test]
async fn a_tool_added_without_list_changed_is_found_and_an_unreachable_legacy_sse_server_fails_alone()
 {
    let python = tool("venv/bin/python");
    let script = root().join("crates/toolforge/tests/python/at_most_once_server.py");
    let dir = tempfile::tempdir().expect("tempdir");
    let count = dir.path().join("calls.txt");
    let config = json!({"mcpServers": {
        "quiet": {"command": python, "args": [script, "stdio", count]},
        "legacy": {"url": "http://127.0.0.1:9/sse", "type": "sse"}
    }});
    let served = Served::start_full(&config, &[], &["--stateless"]).await;
    let health = served
        .wait_health(30, |h| {
            server_state(h, "quiet")["state"] == "ready"
                && server_state(h, "legacy")["last_error"].is_string()
        })
        .await;
    let legacy = server_state(&health, "legacy");
    assert_ne!(legacy["state"], "ready", "{health}");
    assert_ne!(legacy["state"], "disabled", "{health}");
    assert!(
        legacy["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("the SSE stream at http://127.0.0.1:9/sse failed")),
        "{health}"
    );

    let (_, r) = session_rpc(
        &served.base,
        None,
        1,
        "tools/call",
        json!({"name": "sneak"}),
    )
    .await;
    let added = tool_text(&r);
    assert!(added.starts_with("late_"), "{r}");
    // The catalog does not know it yet: one refresh of the list finds it.
    let (_, r) = session_rpc(&served.base, None, 2, "tools/call", json!({"name": added})).await;
    assert_eq!(tool_text(&r), added, "{r}");
    assert_eq!(executed(&count), ["sneak", added.as_str()]);
    // A name no server has is still unknown.
    let (_, r) = session_rpc(&served.base, None, 3, "tools/call", json!({"name": "nope"})).await;
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("unknown tool")),
        "{r}"
    );
}
