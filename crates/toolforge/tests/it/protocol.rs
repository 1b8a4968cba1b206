//! Today's MCP through the gateway, as the clients people install run it: the official Python
//! SDK's `mcp.Client` in its default mode (it speaks 2026-07-28 first) over `/mcp` and
//! `gateway --stdio`; backend requests (sampling) relayed to the call that caused them and to no
//! other client; a hung backend that never keeps a client waiting; closing a session.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{LISTENING, Served, announced, bin, root, tool};

/// Runs a script of `tests/python/` with the SDK's venv and parses its one JSON line.
async fn python(script: &str, args: &[String]) -> Value {
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(tool("venv/bin/python"))
            .arg(root().join("crates/toolforge/tests/python").join(script))
            .args(args)
            // A `gateway --stdio` the client starts writes no trace into the source tree.
            .env("TRACE_SINK", "off")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("{script} finished within 120 s"))
    .expect("python ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "{script} output is not JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn fixture() -> Value {
    json!({"mcpServers": {"conformance": {"command": bin(), "args": ["server", "conformance", "--stdio"]}}})
}

/// The gateway with the conformance fixture (stdio) as its one server, once that is ready.
pub async fn ready_fixture() -> Served {
    let served = Served::start(&fixture()).await;
    served
        .wait_health(60, |h| {
            crate::server_state(h, "conformance")["state"] == "ready"
        })
        .await;
    served
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

/// What every default-mode client must be able to do through the gateway.
fn assert_modern_client_works(out: &Value) {
    assert_eq!(out["protocol"], "2026-07-28", "{out}");
    assert!(
        out["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|n| n == "test_simple_text")),
        "{out}"
    );
    assert_eq!(out["calls"][0]["is_error"], false, "{out}");
    assert_eq!(
        out["calls"][0]["text"],
        "This is a simple text response for testing."
    );
    assert_eq!(
        out["calls"][1]["is_error"], true,
        "a tool error stays a result: {out}"
    );
    assert_eq!(
        out["reads"][0]["text"], "This is the content of the static text resource.",
        "{out}"
    );
    assert_eq!(
        out["prompts"][0]["texts"][0], "Prompt with arguments: arg1='a', arg2='b'",
        "{out}"
    );
}

const CLIENT_ARGS: [&str; 8] = [
    "--call",
    "test_simple_text",
    "{}",
    "--call",
    "test_error_handling",
    "{}",
    "--read",
    "test://static-text",
];

fn client_args(target: Vec<String>) -> Vec<String> {
    let mut args = target;
    args.extend(strings(&CLIENT_ARGS));
    args.extend(strings(&[
        "--prompt",
        "test_prompt_with_arguments",
        r#"{"arg1": "a", "arg2": "b"}"#,
    ]));
    args
}

#[tokio::test]
async fn python_sdk_default_mode_calls_reads_and_gets_prompts_over_http() {
    let served = Served::start(&fixture()).await;
    let out = python("modern_client.py", &client_args(vec![served.mcp()])).await;
    assert_modern_client_works(&out);
}

#[tokio::test]
async fn python_sdk_default_mode_calls_reads_and_gets_prompts_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("mcp.servers.json");
    std::fs::write(&cfg, fixture().to_string()).unwrap();
    let target = vec![
        "stdio".to_owned(),
        bin().to_owned(),
        "gateway".to_owned(),
        "--stdio".to_owned(),
        "--config".to_owned(),
        cfg.display().to_string(),
        "--".to_owned(),
    ];
    // Listing right after start-up: the gateway answers at once and waits briefly for the
    // starting backend, so the outcome does not depend on start-up timing.
    let out = python("modern_client.py", &client_args(target)).await;
    assert_modern_client_works(&out);
}

/// A stdio "server" that never answers `initialize`: it reads until its stdin closes, so it
/// goes when the gateway that started it does (a sleep outlived a killed gateway).
fn hung_server(dir: &std::path::Path) -> Value {
    let script = dir.join("hung.py");
    std::fs::write(&script, "import sys\nsys.stdin.read()\n").unwrap();
    json!({"command": tool("venv/bin/python"), "args": [script], "startTimeout": 120})
}

#[tokio::test]
async fn a_hung_backend_never_keeps_a_client_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"mcpServers": {
        "hung": hung_server(dir.path()),
        "conformance": {"command": bin(), "args": ["server", "conformance", "--stdio"]},
    }});
    // `Served::start` returns on the first answer of /health: with a 120 s start timeout on
    // the hung server, it answers while that server is still starting.
    let served = Served::start(&config).await;
    let health = served.get("/health").await;
    assert_eq!(crate::server_state(&health, "hung")["state"], "starting");
    let out = python("modern_client.py", &client_args(vec![served.mcp()])).await;
    assert_modern_client_works(&out);
    let health = served.get("/health").await;
    assert_eq!(
        crate::server_state(&health, "hung")["state"],
        "starting",
        "the client was served while the hung server was still starting"
    );
}

/// `toolforge serve` over one `asking_backend.py` (stdio or HTTP), and the overlap client's
/// answer.
async fn overlapping_sampling(mut backend: Value) -> Value {
    // `ask` samples mid-call, which only the handshake era allows: the backend is pinned to it.
    backend["protocol"] = json!("2025-11-25");
    let served = Served::start(&json!({"mcpServers": {"asker": backend}})).await;
    served
        .wait_health(60, |h| crate::server_state(h, "asker")["state"] == "ready")
        .await;
    python("overlap_client.py", &[served.mcp(), "ask".to_owned()]).await
}

/// `asking_backend.py` over Streamable HTTP on a port it picks; its URL, and the child (killed
/// on drop).
pub async fn http_asking_backend() -> (String, tokio::process::Child) {
    let mut backend = tokio::process::Command::new(tool("venv/bin/python"))
        .arg(root().join("crates/toolforge/tests/python/asking_backend.py"))
        .args(["http", "0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = backend.stdout.take().expect("piped stdout");
    let addr = announced(stdout, LISTENING, Duration::from_secs(60)).await;
    (format!("http://{addr}/mcp"), backend)
}

#[tokio::test]
async fn overlapping_calls_each_get_their_own_clients_sampling_answer_over_http() {
    let (url, _backend) = http_asking_backend().await;
    let out = overlapping_sampling(json!({"type": "http", "url": url})).await;
    // The backend asks only once both calls are in flight; each request arrives on the stream
    // of the call that made it, so each client is asked about its own call only.
    assert_eq!(out["A"]["text"], "answered by A", "{out}");
    assert_eq!(out["B"]["text"], "answered by B", "{out}");
    assert_eq!(out["asked"]["A"], json!(["who answers for A?"]), "{out}");
    assert_eq!(out["asked"]["B"], json!(["who answers for B?"]), "{out}");
}

#[tokio::test]
async fn a_stdio_backend_asking_during_calls_of_two_clients_is_refused_not_guessed() {
    let backend = json!({
        "command": tool("venv/bin/python"),
        "args": [root().join("crates/toolforge/tests/python/asking_backend.py"), "stdio"],
    });
    let out = overlapping_sampling(backend).await;
    // stdio says nothing about which call asked: while both calls are in flight, no client may
    // answer for the other, so the first request is refused. Once that call has failed, the
    // other call is the only one in flight, and a request arriving then can only be its own.
    let mut refused = 0;
    for who in ["A", "B"] {
        let text = out[who].to_string();
        if text.contains("refuses rather than ask the wrong client") {
            refused += 1;
            assert_eq!(out["asked"][who], json!([]), "{who} was refused: {out}");
        } else {
            assert_eq!(out[who]["text"], format!("answered by {who}"), "{out}");
            assert_eq!(
                out["asked"][who],
                json!([format!("who answers for {who}?")]),
                "{who} is asked about its own call only: {out}"
            );
        }
    }
    assert!(
        refused >= 1,
        "overlapping calls: one request is refused: {out}"
    );
}

#[tokio::test]
async fn a_stdio_backend_isolated_per_session_asks_each_client_about_its_own_call() {
    let dir = tempfile::tempdir().unwrap();
    let barrier = dir.path().join("barrier");
    let backend = json!({
        "command": tool("venv/bin/python"),
        "args": [root().join("crates/toolforge/tests/python/asking_backend.py"), "stdio"],
        "env": {"ASK_BARRIER_FILE": barrier},
        "isolation": "session",
    });
    let out = overlapping_sampling(backend).await;
    // A process per session: each request has one possible caller, so none is refused.
    assert_eq!(out["A"]["text"], "answered by A", "{out}");
    assert_eq!(out["B"]["text"], "answered by B", "{out}");
    assert_eq!(out["asked"]["A"], json!(["who answers for A?"]), "{out}");
    assert_eq!(out["asked"]["B"], json!(["who answers for B?"]), "{out}");
    // Both calls met in the barrier: they overlapped.
    let met = std::fs::read_to_string(&barrier).unwrap();
    assert_eq!(met.lines().count(), 2, "{met}");
}

#[tokio::test]
async fn closing_a_session_answers_ok() {
    let served = Served::start(&fixture()).await;
    let (headers, _) = crate::stateless::session_rpc(
        &served.base,
        None,
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "t", "version": "1"}}),
    )
    .await;
    let session = headers["mcp-session-id"].to_str().unwrap().to_owned();
    let closed = reqwest::Client::new()
        .delete(served.mcp())
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    // The Python SDK warns its user on anything but 200 or 204.
    assert!(
        matches!(closed.status().as_u16(), 200 | 204),
        "{}",
        closed.status()
    );
}

/// The gateway in front of `asking_backend.py` spoken to on 2026-07-28, where a server that needs
/// the user's input answers `input_required` instead of asking mid-call.
async fn modern_asking_gateway() -> (Served, tokio::process::Child) {
    let (url, backend) = http_asking_backend().await;
    let served = Served::start(&json!({"mcpServers": {
        "asker": {"type": "http", "url": url, "protocol": "2026-07-28"}
    }}))
    .await;
    served
        .wait_health(60, |h| crate::server_state(h, "asker")["state"] == "ready")
        .await;
    (served, backend)
}

#[tokio::test]
async fn input_required_reaches_a_modern_client_and_its_retry_resumes_the_call() {
    let (served, _backend) = modern_asking_gateway().await;
    // The SDK gets `input_required` with the gateway's sealed state, asks its sampling
    // callback, and retries; the gateway opens the state and resumes at the same backend.
    let out = python(
        "modern_client.py",
        &[
            served.mcp(),
            "--call".into(),
            "who".into(),
            r#"{"name": "M"}"#.into(),
        ],
    )
    .await;
    assert_eq!(out["protocol"], "2026-07-28", "{out}");
    assert_eq!(
        out["calls"][0]["text"], "answered by the modern client",
        "{out}"
    );
}

#[tokio::test]
async fn input_required_is_asked_of_a_handshake_era_client_on_its_own_call() {
    let (served, _backend) = modern_asking_gateway().await;
    // Two handshake-era sessions at once: the gateway asks each client mid-call, the old way,
    // and retries the backend with its answer.
    let out = python("overlap_client.py", &[served.mcp(), "who".to_owned()]).await;
    assert_eq!(out["A"]["text"], "answered by A", "{out}");
    assert_eq!(out["B"]["text"], "answered by B", "{out}");
    assert_eq!(out["asked"]["A"], json!(["who answers for A?"]), "{out}");
    assert_eq!(out["asked"]["B"], json!(["who answers for B?"]), "{out}");
}

/// One stateless 2026-07-28 `tools/call` of `who`, with `extra` merged into its params.
async fn modern_call(served: &Served, extra: Value) -> Value {
    let mut params = json!({"name": "who", "arguments": {"name": "X"}});
    if let (Some(p), Value::Object(extra)) = (params.as_object_mut(), extra) {
        p.extend(extra);
    }
    modern_rpc(served, "", "tools/call", params).await
}

#[tokio::test]
async fn a_changed_or_foreign_request_state_is_refused() {
    let (served, _backend) = modern_asking_gateway().await;
    let first = modern_call(&served, json!({})).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let sealed = first["result"]["requestState"].as_str().unwrap().to_owned();
    // The backend's own state is inside, not handed to the client in the clear as-is.
    assert!(sealed.starts_with("rs1."), "{sealed}");
    let mut changed = sealed.clone().into_bytes();
    let i = changed.len() / 2;
    changed[i] = if changed[i] == b'A' { b'B' } else { b'A' };
    let changed = String::from_utf8(changed).unwrap();
    for state in [changed.as_str(), "not-a-state"] {
        let retry = modern_call(
            &served,
            json!({"requestState": state, "inputResponses": {}}),
        )
        .await;
        assert_eq!(retry["error"]["code"], -32602, "{retry}");
        assert!(
            retry["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("requestState is not valid")),
            "{retry}"
        );
    }
}

/// The regression: a 2026-07-28 backend's sealed state could be replayed by its own caller
/// within its lifetime, and the backend ran the call again (a payment, twice). Each state is
/// good for one retry: the second is refused before it reaches the backend.
#[tokio::test]
async fn a_modern_backends_request_state_is_good_for_one_retry() {
    let (served, _backend) = modern_asking_gateway().await;
    let first = modern_call(&served, json!({})).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let key = first["result"]["inputRequests"]
        .as_object()
        .and_then(|r| r.keys().next().cloned())
        .expect("an input request");
    let answer = json!({"role": "assistant", "model": "m",
        "content": {"type": "text", "text": "answered once"}});
    let retry = json!({
        "requestState": first["result"]["requestState"],
        "inputResponses": {key: answer},
    });
    let done = modern_call(&served, retry.clone()).await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "answered once",
        "{done}"
    );
    let again = modern_call(&served, retry).await;
    assert_eq!(again["error"]["code"], -32602, "{again}");
    assert!(
        again["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("already used")),
        "{again}"
    );
}

/// A handshake-era backend asks a 2026-07-28 client mid-call (`who` samples mid-call on
/// 2025-11-25): the gateway parks the call and gives the client `input_required`; the retry
/// answers the waiting backend and gets the call's result. The same state again finds no call
/// waiting: refused, and the call is not sent again.
#[tokio::test]
async fn a_handshake_era_backend_asking_a_modern_client_waits_for_its_retry() {
    let served = Served::start(&json!({"mcpServers": {"asker": {
        "command": tool("venv/bin/python"),
        "args": [root().join("crates/toolforge/tests/python/asking_backend.py"), "stdio"],
        "protocol": "2025-11-25",
    }}}))
    .await;
    served
        .wait_health(60, |h| crate::server_state(h, "asker")["state"] == "ready")
        .await;
    let first = modern_call(&served, json!({})).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let requests = first["result"]["inputRequests"]
        .as_object()
        .expect("requests");
    assert_eq!(requests.len(), 1, "{first}");
    let (key, request) = requests.iter().next().unwrap();
    assert_eq!(request["method"], "sampling/createMessage", "{first}");
    assert_eq!(
        request["params"]["messages"][0]["content"]["text"], "who answers for X?",
        "{first}"
    );
    let answer = json!({"role": "assistant", "model": "m",
        "content": {"type": "text", "text": "answered by the retry"}});
    let retry = json!({
        "requestState": first["result"]["requestState"],
        "inputResponses": {key.clone(): answer},
    });
    let done = modern_call(&served, retry.clone()).await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "answered by the retry",
        "{done}"
    );
    let again = modern_call(&served, retry).await;
    assert_eq!(again["error"]["code"], -32602, "{again}");
    let message = again["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("no longer waiting") && message.contains("call the tool again"),
        "{again}"
    );
}

/// A 2026-07-28 backend tells its list changes only to `subscriptions/listen` streams: the
/// pool keeps one open on it, so the fixture's prompt list change reaches a handshake-era
/// session through the gateway.
#[tokio::test]
async fn a_2026_07_28_backends_list_changes_reach_the_pool_through_listen() {
    let mut config = fixture();
    config["mcpServers"]["conformance"]["protocol"] = json!("2026-07-28");
    let served = Served::start(&config).await;
    served
        .wait_health(60, |h| {
            crate::server_state(h, "conformance")["state"] == "ready"
        })
        .await;
    let client = root().join("crates/toolforge/tests/python/list_changed_client.py");
    let out = tokio::process::Command::new(tool("venv/bin/python"))
        .arg(client)
        .args([served.mcp(), served.mcp()])
        .args([
            "test_trigger_prompt_change",
            "notifications/prompts/list_changed",
            "--repeat",
        ])
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), out)
        .await
        .expect("the client finished within 60 s")
        .expect("the client ran");
    let text = String::from_utf8_lossy(&out.stdout);
    let out: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(out["open"]["notified"].as_u64() >= Some(1), "{out}");
}

/// One stateless 2026-07-28 request to `/mcp{query}`; the JSON-RPC answer.
async fn modern_rpc(served: &Served, query: &str, method: &str, params: Value) -> Value {
    modern_rpc_with(served, query, method, params, &[]).await
}

/// [`modern_rpc`] with extra request headers.
async fn modern_rpc_with(
    served: &Served,
    query: &str,
    method: &str,
    params: Value,
    headers: &[(&str, &str)],
) -> Value {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"sampling": {}}
    });
    let mut request = reqwest::Client::new()
        .post(format!("{}{query}", served.mcp()))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = params["name"].as_str() {
        request = request.header("mcp-name", name);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let text = request
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let body = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .find(|d| !d.trim().is_empty())
        .unwrap_or(&text);
    serde_json::from_str(body.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[tokio::test]
async fn list_answers_say_how_long_and_for_whom_they_may_be_cached() {
    let served = ready_fixture().await;
    for method in ["tools/list", "prompts/list", "resources/list"] {
        let open = modern_rpc(&served, "", method, json!({})).await;
        assert_eq!(open["result"]["ttlMs"], 30_000, "{method}: {open}");
        assert_eq!(open["result"]["cacheScope"], "public", "{method}: {open}");
        // Narrowed by this request's visibility: what it shows is this client's own.
        let narrowed = modern_rpc(&served, "?tools=test_simple_text", method, json!({})).await;
        assert_eq!(
            narrowed["result"]["cacheScope"], "private",
            "{method}: {narrowed}"
        );
    }
    let narrowed = modern_rpc(&served, "?tools=test_simple_text", "tools/list", json!({})).await;
    assert_eq!(
        narrowed["result"]["tools"].as_array().map(Vec::len),
        Some(1),
        "{narrowed}"
    );
    // A search that matches nothing lists everything visible, and says so.
    let none = modern_rpc(&served, "?q=zzqqxxnothing", "tools/list", json!({})).await;
    assert_eq!(
        none["result"]["_meta"]["toolforge/queryMatched"], false,
        "{none}"
    );
    assert!(
        none["result"]["tools"]
            .as_array()
            .is_some_and(|t| t.len() > 10),
        "{none}"
    );
    let some = modern_rpc(&served, "?q=simple", "tools/list", json!({})).await;
    assert!(
        some["result"]["_meta"]
            .get("toolforge/queryMatched")
            .is_none(),
        "{some}"
    );
}

#[tokio::test]
async fn a_backend_that_cannot_start_is_explained_without_type_names() {
    // Nothing listens on the discard port.
    let config = json!({"mcpServers": {"dead": {"type": "http", "url": "http://127.0.0.1:9/mcp"}}});
    let served = Served::start(&config).await;
    let health = served
        .wait_health(60, |h| crate::server_state(h, "dead")["state"] == "failed")
        .await;
    let error = crate::server_state(&health, "dead")["last_error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(error.contains("http://127.0.0.1:9/mcp"), "{error}");
    assert!(
        !error.contains("::") && !error.contains("rmcp"),
        "a Rust type name in /health: {error}"
    );
}

#[tokio::test]
async fn broker_rules_narrow_tools_list_to_the_requests_intent() {
    let dir = tempfile::tempdir().unwrap();
    // A go-toolbroker rule file, unchanged: for intent "media" only the media tools.
    let rules = dir.path().join("rules.json");
    std::fs::write(
        &rules,
        r#"{"rules": [{"name": "media-only", "intent": "media", "priority": 10,
            "match": {"patterns": ["test_image_content", "test_audio_content"]},
            "action": {"type": "include"}}]}"#,
    )
    .unwrap();
    let served =
        Served::start_full(&fixture(), &[], &["--rules", &rules.display().to_string()]).await;
    served
        .wait_health(60, |h| {
            crate::server_state(h, "conformance")["state"] == "ready"
        })
        .await;
    let list = |intent: Option<&'static str>| {
        let served = &served;
        async move {
            let headers: Vec<(&str, &str)> =
                intent.map(|i| ("x-mcp-intent", i)).into_iter().collect();
            let v = modern_rpc_with(served, "", "tools/list", json!({}), &headers).await;
            let names: Vec<String> = v["result"]["tools"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect();
            (names, v["result"]["cacheScope"].clone())
        }
    };
    let (media, scope) = list(Some("media")).await;
    assert_eq!(
        media,
        ["test_image_content", "test_audio_content"],
        "{media:?}"
    );
    assert_eq!(scope, "private");
    // No intent asked and none detected: the rules for "*" (none here) keep every tool.
    let (all, _) = list(None).await;
    assert!(all.len() > 10, "{all:?}");
}

/// The pool's default is `"auto"`: a server that answers `server/discover` is spoken to on
/// 2026-07-28, one pinned to `"2025-11-25"` with the handshake; `/health` (and the console's
/// catalog, which shows the same rows) says which era each backend speaks.
#[tokio::test]
async fn health_shows_the_era_each_backend_speaks() {
    let fixture = |protocol: Option<&str>| {
        let mut server = json!({"command": bin(), "args": ["server", "conformance", "--stdio"]});
        if let Some(p) = protocol {
            server["protocol"] = json!(p);
        }
        server
    };
    let served = Served::start(&json!({"mcpServers": {
        "auto": fixture(None),
        "pinned": fixture(Some("2025-11-25")),
    }}))
    .await;
    let health = served
        .wait_health(60, |h| {
            ["auto", "pinned"]
                .iter()
                .all(|s| crate::server_state(h, s)["state"] == "ready")
        })
        .await;
    assert_eq!(
        crate::server_state(&health, "auto")["protocol"],
        "2026-07-28",
        "{health}"
    );
    assert_eq!(
        crate::server_state(&health, "pinned")["protocol"],
        "2025-11-25",
        "{health}"
    );
    let catalog = served.get("/ui/api/catalog").await;
    let auto = catalog["servers"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "auto"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(auto["protocol"], "2026-07-28", "{catalog}");
}

/// The regression: a client that connects as the gateway starts (a desktop host launching
/// `gateway --stdio`) was answered before any backend was up: no instructions and only the
/// tools capability. `initialize` now waits for the backends' start grace, and the answer
/// carries each backend's instructions under its name.
#[tokio::test]
async fn a_client_connecting_at_start_gets_the_backends_instructions() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("mcp.servers.json");
    std::fs::write(
        &cfg,
        json!({"mcpServers": {"conformance": {"command": bin(), "args": ["server", "conformance", "--stdio"]}}})
            .to_string(),
    )
    .unwrap();
    let mut child = tokio::process::Command::new(bin())
        .args(["gateway", "--stdio", "--config"])
        .arg(&cfg)
        .current_dir(dir.path())
        .env("TRACE_SINK", "off")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(
            br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}
"#,
        )
        .await
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("initialize answered")
        .unwrap()
        .unwrap();
    let answer: Value = serde_json::from_str(&line).unwrap();
    let instructions = answer["result"]["instructions"]
        .as_str()
        .unwrap_or_default();
    assert!(
        instructions.starts_with("## conformance\nThe fixture"),
        "{answer}"
    );
    assert!(
        answer["result"]["capabilities"]["prompts"].is_object(),
        "{answer}"
    );
}

/// Instructions are attributed to their backend and shown only for backends the client may
/// see: a server whose tools a visibility filter hides keeps its instructions to itself.
#[tokio::test]
async fn instructions_of_a_hidden_backend_are_not_shown() {
    let fixture = || json!({"command": bin(), "args": ["server", "conformance", "--stdio"]});
    let mut secret = fixture();
    secret["tags"] = json!(["hidden"]);
    let served = Served::start_full(
        &json!({"mcpServers": {"open": fixture(), "secret": secret}}),
        &[],
        &["--disabled-tags", "hidden"],
    )
    .await;
    served
        .wait_health(60, |h| {
            ["open", "secret"]
                .iter()
                .all(|s| crate::server_state(h, s)["state"] == "ready")
        })
        .await;
    let r = reqwest::Client::new()
        .post(served.mcp())
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        )
        .send()
        .await
        .unwrap();
    let text = r.text().await.unwrap();
    let body = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .find(|d| !d.trim().is_empty())
        .unwrap_or(&text);
    let answer: Value = serde_json::from_str(body.trim()).unwrap();
    let instructions = answer["result"]["instructions"]
        .as_str()
        .unwrap_or_default();
    assert!(instructions.contains("## open\n"), "{answer}");
    assert!(!instructions.contains("secret"), "{answer}");
}
