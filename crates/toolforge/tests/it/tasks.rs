//! The Tasks extension (SEP-2663) through replicas: two gateways sharing a state key in front
//! of one conformance fixture over HTTP, each caller known by an API key. A task started
//! through one replica is followed, answered and finished through the other; its id opens for
//! the principal who started it and for no one else; a changed id is an unknown task.
//! Plain 2026-07-28 JSON-RPC over HTTP, every request self-contained.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Served;

const ALICE: &str = "alice-key-0123456789";
const BOB: &str = "bob-key-0123456789abc";
const STATE_KEY: &str = "a state key both replicas share, well past 32 bytes";

/// Two replicas with the same state key and API keys, in front of one fixture over HTTP.
async fn replicas() -> (Served, Served, tokio::process::Child, tempfile::TempDir) {
    let (fixture, url) = crate::notification_order::fixture_over_http().await;
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.txt");
    std::fs::write(&keys, format!("{ALICE} alice\n{BOB} bob\n")).unwrap();
    let config = json!({"mcpServers": {"conformance": {"type": "http", "url": url}}});
    let envs = [("TOOLFORGE_STATE_KEY", STATE_KEY)];
    let args = ["--api-keys", keys.to_str().unwrap()];
    let (a, b) = tokio::join!(
        Served::start_full(&config, &envs, &args),
        Served::start_full(&config, &envs, &args)
    );
    for served in [&a, &b] {
        wait_ready(served).await;
    }
    (a, b, fixture, dir)
}

async fn wait_ready(served: &Served) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let health: Value = reqwest::Client::new()
            .get(format!("{}/health", served.base))
            .bearer_auth(ALICE)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap_or(Value::Null);
        if crate::server_state(&health, "conformance")["state"] == "ready" {
            return;
        }
        assert!(Instant::now() < deadline, "not ready: {health}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One 2026-07-28 request to `served` as the holder of `key`, declaring the tasks extension
/// when `tasks` is set; the JSON-RPC answer.
async fn rpc(served: &Served, key: &str, method: &str, mut params: Value, tasks: bool) -> Value {
    let capabilities = if tasks {
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}})
    } else {
        json!({})
    };
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "tasks-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities
    });
    let name = params
        .get("name")
        .or_else(|| params.get("taskId"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let mut request = reqwest::Client::new()
        .post(served.mcp())
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if !name.is_empty() {
        request = request.header("mcp-name", name);
    }
    let text = request
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    crate::answer_json(&text).unwrap_or_else(|e| panic!("{method}: {e}: {text}"))
}

/// `tasks/get` of `task_id` on `served` as `key`, polled until the task has `status` (or ended).
async fn poll_until(served: &Served, key: &str, task_id: &str, status: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = rpc(served, key, "tasks/get", json!({"taskId": task_id}), true).await;
        let now = got["result"]["status"].as_str().unwrap_or_default();
        if now == status || ["completed", "failed", "cancelled"].contains(&now) {
            return got["result"].clone();
        }
        assert!(got["result"].is_object(), "{got}");
        assert!(Instant::now() < deadline, "still {now}: {got}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_task_started_on_one_replica_is_followed_on_the_other_and_only_by_its_caller() {
    let (a, b, _fixture, _keys) = replicas().await;

    let created = rpc(
        &a,
        ALICE,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 1, "label": "replicas"}}),
        true,
    )
    .await;
    let created = &created["result"];
    assert_eq!(created["resultType"], "task", "{created}");
    let task_id = created["taskId"].as_str().expect("a task id").to_owned();
    assert!(
        created["ttlMs"].as_u64().is_some_and(|t| t > 0),
        "{created}"
    );
    assert_eq!(
        created["_meta"]["toolforge/selection"]["server"], "conformance",
        "{created}"
    );

    // Followed through the other replica, to its result.
    let done = poll_until(&b, ALICE, &task_id, "completed").await;
    assert_eq!(done["taskId"], task_id.as_str(), "{done}");
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "replicas: computed in 1 s",
        "{done}"
    );

    // Another principal, a changed id, and a request without the extension get nothing.
    for replica in [&a, &b] {
        let bobs = rpc(replica, BOB, "tasks/get", json!({"taskId": task_id}), true).await;
        assert_eq!(bobs["error"]["code"], -32602, "{bobs}");
        let cancel = rpc(
            replica,
            BOB,
            "tasks/cancel",
            json!({"taskId": task_id}),
            true,
        )
        .await;
        assert_eq!(cancel["error"]["code"], -32602, "{cancel}");
    }
    let mut changed = task_id.clone().into_bytes();
    let i = changed.len() / 2;
    changed[i] = if changed[i] == b'A' { b'B' } else { b'A' };
    let changed = String::from_utf8(changed).unwrap();
    let forged = rpc(&b, ALICE, "tasks/get", json!({"taskId": changed}), true).await;
    assert_eq!(forged["error"]["code"], -32602, "{forged}");
    let undeclared = rpc(&b, ALICE, "tasks/get", json!({"taskId": task_id}), false).await;
    assert_eq!(undeclared["error"]["code"], -32021, "{undeclared}");

    // A client that did not declare the extension gets the result in the call.
    let plain = rpc(
        &a,
        ALICE,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "plain"}}),
        false,
    )
    .await;
    assert_eq!(plain["result"]["resultType"], "complete", "{plain}");
    assert_eq!(
        plain["result"]["content"][0]["text"], "plain: computed in 0 s",
        "{plain}"
    );
}

#[tokio::test]
async fn a_task_asking_for_input_is_answered_and_cancelled_through_either_replica() {
    let (a, b, _fixture, _keys) = replicas().await;

    let created = rpc(
        &a,
        ALICE,
        "tools/call",
        json!({"name": "confirm_delete", "arguments": {"filename": "notes.txt"}}),
        true,
    )
    .await;
    let task_id = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    let asking = poll_until(&b, ALICE, &task_id, "input_required").await;
    assert_eq!(asking["status"], "input_required", "{asking}");
    let keys: Vec<String> = asking["inputRequests"]
        .as_object()
        .unwrap_or_else(|| panic!("{asking}"))
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        asking["inputRequests"][&keys[0]]["method"], "elicitation/create",
        "{asking}"
    );
    let mut responses = serde_json::Map::new();
    for key in keys {
        responses.insert(
            key,
            json!({"action": "accept", "content": {"confirm": true}}),
        );
    }
    let ack = rpc(
        &b,
        ALICE,
        "tasks/update",
        json!({"taskId": task_id, "inputResponses": responses}),
        true,
    )
    .await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let done = poll_until(&a, ALICE, &task_id, "completed").await;
    assert_eq!(
        done["result"]["content"][0]["text"], "Deleted notes.txt",
        "{done}"
    );

    // A long task cancelled through the replica that did not start it.
    let long = rpc(
        &a,
        ALICE,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 600, "label": "long"}}),
        true,
    )
    .await;
    let long_id = long["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{long}"))
        .to_owned();
    let ack = rpc(&b, ALICE, "tasks/cancel", json!({"taskId": long_id}), true).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let cancelled = poll_until(&a, ALICE, &long_id, "cancelled").await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
}

/// The agent (`toolforge chat`, the offline model) in front of the fixture over stdio: a call
/// the fixture runs as a task is followed to its result, which the run reads as the call's; a
/// tool that only runs as a task works; a task that asks for the user's input is cancelled
/// with an error saying why.
#[tokio::test]
async fn the_agent_follows_a_task_to_its_result() {
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"mcpServers": {"conformance": {
        "command": crate::bin(), "args": ["server", "conformance", "--stdio"]
    }}});
    std::fs::write(dir.path().join("mcp.servers.json"), config.to_string()).unwrap();
    let run = |request: &'static str| {
        let dir = dir.path().to_owned();
        async move {
            // The exit code says whether every call succeeded; two of these fail on purpose.
            let (_, out, err) = crate::agent::chat_cli(&dir, &[request]).await;
            format!("{out}{err}")
        }
    };

    let out = run("slow compute for 1 seconds with label \"agent-task\"").await;
    assert!(out.contains("agent-task: computed in 1 s"), "{out}");
    // Task support required: without following tasks the call would be refused (-32021).
    let out = run("run the failing job").await;
    assert!(
        out.contains("failing_job: the job ran and reported an error"),
        "{out}"
    );
    let out = run("confirm delete of \"notes.txt\"").await;
    assert!(
        out.contains("the task asks for the user's input, which this caller cannot give"),
        "{out}"
    );
}
