//! What a replica behind a load balancer owes its operators: `/metrics` that a real Prometheus
//! parser reads, a graceful drain on SIGTERM, and a clear answer to a session it does not hold.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{Served, root, tool};

const TASK: &str =
    "Look up customer Alice Nguyen's orders, sum their total, and tell me if it exceeds $500.";

/// The counting backend (`tests/python/counting_server.py`) recording into `count`.
fn counting(count: &std::path::Path) -> Value {
    let python = tool("venv/bin/python");
    let script = root().join("crates/toolforge/tests/python/counting_server.py");
    json!({"mcpServers": {
        "counting": {"command": python, "args": [script, count], "timeout": 60},
        "toolkit": {"command": "toolforge", "args": ["server", "toolkit", "--stdio"]}
    }})
}

/// One stateless 2026-07-28 `tools/call` to `base/mcp`; the HTTP status and the JSON-RPC answer.
async fn modern_call(base: &str, tool: &str, args: Value) -> (u16, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool, "arguments": args,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "replicas-test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {"sampling": {}}
        }
    }});
    let r = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .json(&body)
        .send()
        .await
        .expect("an answer");
    let status = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    let data = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .find(|d| !d.trim().is_empty())
        .unwrap_or(&text);
    (
        status,
        serde_json::from_str(data.trim()).unwrap_or(Value::Null),
    )
}

/// `text` parsed by the Prometheus Python client's own parser: every sample as
/// `[name, labels, value]`, or the parser's error.
async fn prometheus_parse(text: &str) -> Vec<(String, Value, f64)> {
    use tokio::io::AsyncWriteExt as _;
    let script = "import json, sys\n\
        from prometheus_client.parser import text_string_to_metric_families\n\
        out = []\n\
        for fam in text_string_to_metric_families(sys.stdin.read()):\n\
        \x20   for s in fam.samples:\n\
        \x20       out.append([s.name, s.labels, s.value])\n\
        print(json.dumps(out))\n";
    let mut child = tokio::process::Command::new(tool("venv/bin/python"))
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python runs");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(text.as_bytes()).await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    assert!(
        out.status.success(),
        "the Prometheus parser refused /metrics (is prometheus-client installed? scripts/setup): {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let samples: Vec<(String, Value, f64)> =
        serde_json::from_slice(&out.stdout).expect("parser output");
    samples
}

fn sample(samples: &[(String, Value, f64)], name: &str, labels: &Value) -> Option<f64> {
    samples
        .iter()
        .find(|(n, l, _)| {
            n == name
                && labels
                    .as_object()
                    .unwrap()
                    .iter()
                    .all(|(k, v)| l.get(k) == Some(v))
        })
        .map(|(_, _, v)| *v)
}

#[tokio::test]
async fn metrics_parse_with_the_prometheus_parser_and_count_what_happened() {
    let dir = tempfile::tempdir().unwrap();
    let count = dir.path().join("count");
    let served = Served::start(&counting(&count)).await;
    served.wait_health(60, |h| h["status"] == "ok").await;

    let (status, answer) = modern_call(&served.base, "record", json!({"id": "m-1"})).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["result"]["content"][0]["text"], "ran m-1",
        "{answer}"
    );
    let chat: Value = reqwest::Client::new()
        .post(format!("{}/chat", served.base))
        .json(&json!({"message": TASK}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let cost = chat["cost_usd"].as_f64().expect("a billed run");
    assert!(cost > 0.0, "{chat}");

    let r = reqwest::get(format!("{}/metrics", served.base))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4"),
    );
    let samples = prometheus_parse(&r.text().await.unwrap()).await;

    let requests = |route: &str| {
        sample(
            &samples,
            "toolforge_http_requests_total",
            &json!({"route": route, "method": "POST", "status": "200"}),
        )
    };
    assert_eq!(requests("/chat"), Some(1.0));
    assert_eq!(requests("/mcp"), Some(1.0));
    assert_eq!(
        sample(
            &samples,
            "toolforge_http_request_duration_seconds_count",
            &json!({"route": "/chat"})
        ),
        Some(1.0)
    );
    // The /mcp call and the agent's call, each under its server and tool.
    assert_eq!(
        sample(
            &samples,
            "toolforge_tool_calls_total",
            &json!({"server": "counting", "tool": "record", "outcome": "ok"})
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &samples,
            "toolforge_tool_calls_total",
            &json!({"server": "toolkit", "tool": "sql_query", "outcome": "ok"})
        ),
        Some(1.0)
    );
    let billed = sample(&samples, "toolforge_cost_usd_total", &json!({})).expect("the run's cost");
    assert!((billed - cost).abs() < 1e-9, "{billed} vs {cost}");
    assert_eq!(
        sample(&samples, "toolforge_quarantined_tools", &json!({})),
        Some(0.0)
    );
    assert_eq!(
        sample(&samples, "toolforge_draining", &json!({})),
        Some(0.0)
    );
    assert!(sample(&samples, "toolforge_sessions", &json!({})).is_some());
}

#[cfg(unix)]
#[tokio::test]
async fn sigterm_drains_a_call_in_flight_then_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let count = dir.path().join("count");
    let mut served = Served::start_full(
        &counting(&count),
        &[],
        &["--drain-timeout", "20", "--drain-grace", "1"],
    )
    .await;
    served.wait_health(60, |h| h["status"] == "ok").await;
    // A keep-alive connection opened before the signal, to ask /health on during the drain.
    let kept = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .build()
        .unwrap();
    let health = format!("{}/health", served.base);
    assert_eq!(kept.get(&health).send().await.unwrap().status(), 200);

    let base = served.base.clone();
    let slow = tokio::spawn(async move {
        modern_call(&base, "slow", json!({"id": "slow-1", "seconds": 3})).await
    });
    // The call is in flight once the replica counts it.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = kept
            .get(format!("{}/metrics", served.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        // The scrape itself is one request in flight.
        if text.contains("toolforge_http_requests_in_flight 2") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the slow call never started: {text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let pid = served.pid();
    assert_eq!(unsafe_free_kill(pid, "TERM"), 0);

    // Draining: 503 with "draining": true on the open connection; new connections refused.
    let deadline = Instant::now() + Duration::from_secs(10);
    let body = loop {
        let r = kept.get(&health).send().await.expect("the kept connection");
        if r.status() == 503 {
            break r.json::<Value>().await.unwrap();
        }
        assert!(Instant::now() < deadline, "/health never turned 503");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(body["draining"], true, "{body}");
    let fresh = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    // The listener closes right after the flag is set.
    let deadline = Instant::now() + Duration::from_secs(10);
    while fresh.get(&health).send().await.is_ok() {
        assert!(
            Instant::now() < deadline,
            "a draining replica accepts no new connection"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The call in flight finishes with its answer, and the backend ran it once.
    let (status, answer) = slow.await.unwrap();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["result"]["content"][0]["text"], "ran slow-1",
        "{answer}"
    );
    assert_eq!(std::fs::read_to_string(&count).unwrap(), "slow-1\n");
    let code = served.wait_exit(Duration::from_secs(20)).await;
    assert_eq!(code, Some(0), "a drained replica exits 0");
}

/// `kill -SIG pid` (the workspace denies unsafe code, so no libc call here).
fn unsafe_free_kill(pid: u32, signal: &str) -> i32 {
    std::process::Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .ok()
        .and_then(|s| s.code())
        .unwrap_or(-1)
}

#[tokio::test]
async fn a_session_this_replica_does_not_hold_gets_a_clear_404_and_a_new_one_works() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(&counting(&dir.path().join("count"))).await;
    let r = reqwest::Client::new()
        .post(served.mcp())
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .header("mcp-session-id", "a-session-of-a-replica-that-died")
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let body: Value = r.json().await.expect("a JSON-RPC error body");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("session not found or expired") && message.contains("initialize"),
        "{body}"
    );

    let (headers, init) = crate::stateless::session_rpc(
        &served.base,
        None,
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "replicas-test", "version": "1"}}),
    )
    .await;
    assert_eq!(init["result"]["serverInfo"]["name"], "toolforge");
    let session = headers["mcp-session-id"].to_str().unwrap().to_owned();
    let initialized = reqwest::Client::new()
        .post(served.mcp())
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .header("mcp-session-id", &session)
        .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await
        .unwrap();
    assert!(initialized.status().is_success());
    let (_, list) =
        crate::stateless::session_rpc(&served.base, Some(&session), 2, "tools/list", json!({}))
            .await;
    assert!(list["result"]["tools"].is_array(), "{list}");
}

/// Two replicas in front of the asking backend, sharing `envs`.
async fn asking_replicas(envs: &[(&str, &str)]) -> (Served, Served, tokio::process::Child) {
    let (url, backend) = crate::protocol::http_asking_backend().await;
    let config = json!({"mcpServers": {
        "asker": {"type": "http", "url": url, "protocol": "2026-07-28"}
    }});
    let a = Served::start_with(&config, envs).await;
    let b = Served::start_with(&config, envs).await;
    for r in [&a, &b] {
        r.wait_health(60, |h| crate::server_state(h, "asker")["state"] == "ready")
            .await;
    }
    (a, b, backend)
}

/// `who` on `first`, its `input_required` answered and the retry sent to `second`.
async fn resumed_elsewhere(first: &Served, second: &Served) -> Value {
    let asked = asked_on(first).await;
    retried_on(second, &asked).await
}

/// `who` on `served`: its `input_required` result.
async fn asked_on(served: &Served) -> Value {
    let (_, asked) = modern_call(&served.base, "who", json!({"name": "R"})).await;
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    asked["result"].clone()
}

/// The retry of `result` (an `input_required` of `who`), answered, sent to `second`.
async fn retried_on(second: &Served, result: &Value) -> Value {
    let mut responses = serde_json::Map::new();
    for key in result["inputRequests"]
        .as_object()
        .expect("inputRequests")
        .keys()
    {
        responses.insert(
            key.clone(),
            json!({"role": "assistant", "model": "test",
                   "content": {"type": "text", "text": "answered on the other replica"}}),
        );
    }
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "who", "arguments": {"name": "R"},
        "requestState": result["requestState"],
        "inputResponses": responses,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "replicas-test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {"sampling": {}}
        }
    }});
    let text = reqwest::Client::new()
        .post(second.mcp())
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "who")
        .json(&body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let data = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .find(|d| !d.trim().is_empty())
        .unwrap_or(&text);
    serde_json::from_str(data.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// A handshake-era backend asking a 2026-07-28 client mid-call parks the call on the replica
/// that made it. A retry that reaches another replica (same key: the state opens there) is
/// refused, saying why; the call is not sent again. On its own replica the retry goes on.
#[tokio::test]
async fn a_parked_call_goes_on_only_on_its_own_replica() {
    let config = json!({"mcpServers": {"asker": {
        "command": tool("venv/bin/python"),
        "args": [root().join("crates/toolforge/tests/python/asking_backend.py"), "stdio"],
        // Parked calls are a handshake-era backend's (it asks mid-call).
        "protocol": "2025-11-25",
    }}});
    let key = "a request-state key both replicas share, past 32 bytes";
    let envs = [("TOOLFORGE_STATE_KEY", key)];
    let (a, b) = tokio::join!(
        Served::start_with(&config, &envs),
        Served::start_with(&config, &envs)
    );
    for r in [&a, &b] {
        r.wait_health(60, |h| crate::server_state(h, "asker")["state"] == "ready")
            .await;
    }
    let asked = asked_on(&a).await;
    let refused = retried_on(&b, &asked).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("another toolforge replica"), "{refused}");
    let done = retried_on(&a, &asked).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "answered on the other replica",
        "{done}"
    );
}

#[tokio::test]
async fn replicas_sharing_redis_open_each_others_request_state() {
    let redis = crate::cache::start_redis();
    let (a, b, _backend) = asking_replicas(&[("REDIS_URL", redis.url.as_str())]).await;
    let done = resumed_elsewhere(&a, &b).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "answered on the other replica",
        "{done}"
    );

    // Without the shared key, the other replica cannot open the state.
    let (c, d, _backend) = asking_replicas(&[]).await;
    let refused = resumed_elsewhere(&c, &d).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
}
