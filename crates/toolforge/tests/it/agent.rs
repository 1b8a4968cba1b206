//! The agent end to end, offline: `toolforge chat` and the HTTP API (`/chat`, `/chat/stream`,
//! `/agent/run`, `/openapi.json`) with the mock model over the built-in toolkit server, run as
//! a real stdio MCP server by the pool.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::{Served, bin};

const TASK: &str =
    "Look up customer Alice Nguyen's orders, sum their total, and tell me if it exceeds $500.";
const ANSWER: &str =
    "Alice Nguyen's completed orders total $334.00, which does not exceed $500.00.";
const SQL: &str = "SELECT c.name AS customer_name, o.order_id, o.quantity, p.unit_price, (o.quantity * p.unit_price) AS line_total, o.status FROM orders o JOIN customers c ON c.customer_id = o.customer_id JOIN products p ON p.product_id = o.product_id WHERE c.name = 'Alice Nguyen'";

fn toolkit() -> Value {
    json!({"mcpServers": {"toolkit": {"command": "toolforge", "args": ["server", "toolkit", "--stdio"]}}})
}

fn key_facts() -> Value {
    json!({"customer_name": "Alice Nguyen", "order_total": 334.0, "threshold": 500.0,
           "exceeds_threshold": false, "num_completed_orders": 3})
}

/// Trace records of tool calls only (model-call records carry `"kind": "model_call"`).
fn tool_traces(dir: &std::path::Path) -> Vec<Value> {
    traces(dir)
        .into_iter()
        .filter(|r| r["kind"] == "tool_call")
        .collect()
}

fn traces(dir: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("logs/traces.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad trace line {l}: {e}")))
        .collect()
}

/// The trace records once the file holds at least `n`, or what it holds after 30 s: a running
/// server's writer appends them after the answers.
async fn traces_at_least(dir: &std::path::Path, n: usize) -> Vec<Value> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let all = traces(dir);
        if all.len() >= n || std::time::Instant::now() >= deadline {
            return all;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn chat_cli(dir: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(bin())
            .arg("chat")
            .args(args)
            .current_dir(dir)
            .env_remove("TRACE_SINK")
            .env_remove("LLM_PROVIDER")
            .env_remove("MCP_SERVERS_CONFIG")
            .env_remove("REDIS_URL")
            .env_remove("CATALOG_CACHE_BACKEND")
            .env_remove("CATALOG_CACHE_PATH")
            .env("XDG_CACHE_HOME", dir.join(".cache"))
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("toolforge chat finished within 120 s")
    .expect("toolforge chat ran");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn chat_cli_carries_the_reference_task_and_traces_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("mcp.servers.json"), toolkit().to_string()).unwrap();

    let (code, stdout, stderr) = chat_cli(dir.path(), &[TASK]).await;
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.starts_with(ANSWER), "{stdout}");
    assert!(
        stdout.contains("1. sql_query -> toolkit/sql_query [single-candidate] ok"),
        "{stdout}"
    );
    assert!(stdout.contains("of $0.10 ceiling"), "{stdout}");

    let (code, stdout, stderr) = chat_cli(dir.path(), &[TASK, "--json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r["response"], ANSWER);
    assert_eq!(r["key_facts"], key_facts());
    assert_eq!(r["halted"], false);
    assert_eq!(
        r["steps"][0]["arguments"],
        json!({"sql": SQL, "page_size": 25})
    );
    assert!(r["cost_usd"].as_f64().unwrap() > 0.0);
    assert!(r["cost_usd"].as_f64().unwrap() <= 0.10);

    let all = traces(dir.path());
    assert_eq!(all.len(), 4, "one tool call and one answer per run");
    let billed: f64 = all
        .iter()
        .filter(|t| t["session_id"] == r["session_id"])
        .map(|t| t["cost_usd"].as_f64().unwrap())
        .sum();
    assert!((billed - r["cost_usd"].as_f64().unwrap()).abs() < 1e-8);
    let t = tool_traces(dir.path());
    assert_eq!(t.len(), 2, "one traced call per run");
    assert_eq!(t[1]["session_id"], r["session_id"]);
    assert_eq!(t[1]["executed"], true);
    assert_eq!(t[1]["server"], "toolkit");
    assert_eq!(t[1]["schema_version"], "2");
    assert!(
        t[1].get("arguments").is_none(),
        "arguments need TRACE_VERBOSE"
    );
}

#[tokio::test]
async fn chat_cli_dry_run_plans_without_executing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("mcp.servers.json"), toolkit().to_string()).unwrap();
    // Nothing cached yet: listing must be allowed for the plan to have tools.
    let (code, stdout, stderr) = chat_cli(
        dir.path(),
        &[TASK, "--dry-run", "--allow-listing", "--json"],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r["dry_run"], true);
    // It says what it would do, and claims no result.
    let answer = r["response"].as_str().unwrap();
    assert!(
        answer.starts_with("Dry run: I would look up Alice Nguyen's orders"),
        "{answer}"
    );
    assert!(
        !answer.contains("$334") && !answer.contains("$0.00"),
        "{answer}"
    );
    assert_eq!(r["key_facts"]["executed"], false);
    let step = &r["steps"][0];
    assert_eq!(step["executed"], false);
    assert_eq!(step["dry_run"], true);
    assert_eq!(step["server"], "toolkit");
    assert_eq!(step["selection_rule"], "single-candidate");
    let t = tool_traces(dir.path());
    assert_eq!(t.len(), 1);
    assert_eq!(t[0]["executed"], false);
    assert_eq!(t[0]["dry_run"], true);
    assert_eq!(
        traces(dir.path()).len(),
        2,
        "the planned call and the answer"
    );
}

#[tokio::test]
async fn chat_cli_refuses_bad_settings_clearly() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("mcp.servers.json"), toolkit().to_string()).unwrap();
    let out = tokio::process::Command::new(bin())
        .args(["chat", TASK])
        .current_dir(dir.path())
        .env("LLM_PROVIDER", "anthropic")
        .env_remove("ANTHROPIC_API_KEY")
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ANTHROPIC_API_KEY"), "{err}");

    let out = tokio::process::Command::new(bin())
        .args(["chat", TASK])
        .current_dir(dir.path())
        .env("COST_CEILING_USD", "ten dollars")
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("COST_CEILING_USD"), "{err}");
}

async fn post(served: &Served, path: &str, body: &Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{}{path}", served.base))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// Parses an SSE body into (event, data) pairs.
fn sse_events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter_map(|block| {
            let mut event = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(e) = line.strip_prefix("event:") {
                    event = Some(e.trim().to_owned());
                } else if let Some(d) = line.strip_prefix("data:") {
                    data.push_str(d.trim_start());
                }
            }
            Some((event?, serde_json::from_str(&data).ok()?))
        })
        .collect()
}

#[tokio::test]
async fn http_api_chat_stream_agent_run_and_openapi() {
    let served = Served::start(&toolkit()).await;

    // POST /chat, then the same session again.
    let (status, r) = post(
        &served,
        "/chat",
        &json!({"message": TASK, "session_id": "it-1"}),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["response"], ANSWER);
    assert_eq!(r["session_id"], "it-1");
    assert_eq!(r["halted"], false);
    assert!(r["halt_reason"].is_null());
    assert_eq!(r["steps"][0]["selection_rule"], "single-candidate");
    let chat_body = r.clone();
    let (_, again) = post(
        &served,
        "/chat",
        &json!({"message": TASK, "session_id": "it-1", "dry_run": true,
                "messages": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]}),
    )
    .await;
    assert_eq!(again["session_id"], "it-1");
    assert_eq!(again["steps"][0]["executed"], false);

    // POST /chat/stream: session.start, one tool.result per call, final.response last.
    let text = reqwest::Client::new()
        .post(format!("{}/chat/stream", served.base))
        .json(&json!({"message": TASK}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events = sse_events(&text);
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(
        names,
        ["session.start", "tool.result", "final.response"],
        "{text}"
    );
    assert_eq!(events[0].1["session_id"], events[2].1["session_id"]);
    assert_eq!(events[1].1["tool"], "sql_query");
    assert_eq!(events[2].1["response"], ANSWER);

    // POST /agent/run: seed 002's structured answer.
    let (status, r) = post(&served, "/agent/run", &json!({"task": TASK})).await;
    assert_eq!(status, 200, "{r}");
    let result = &r["result"];
    assert_eq!(result["status"], "completed");
    assert_eq!(result["answer"], ANSWER);
    assert_eq!(result["key_facts"], key_facts());
    let call = &result["tool_calls"][0];
    assert_eq!(call["step"], 1);
    assert_eq!(call["tool_name"], "sql_query");
    assert_eq!(call["arguments"]["page_size"], 25);
    assert_eq!(call["arguments"]["sql"], SQL);
    let raw = &call["raw_result"];
    assert_eq!(
        raw["columns"],
        json!([
            "customer_name",
            "order_id",
            "quantity",
            "unit_price",
            "line_total",
            "status"
        ])
    );
    assert_eq!(
        raw["rows"][0],
        json!({"customer_name": "Alice Nguyen", "order_id": 1, "quantity": 1,
               "unit_price": 59.5, "line_total": 59.5, "status": "completed"})
    );
    for (k, v) in [
        ("row_count_returned", json!(3)),
        ("total_rows_matched", json!(3)),
        ("offset", json!(0)),
        ("requested_page_size", json!(25)),
        ("effective_page_size", json!(25)),
        ("has_more", json!(false)),
        ("next_offset", Value::Null),
    ] {
        assert_eq!(raw[k], v, "raw_result.{k} in {raw}");
    }
    assert_eq!(
        r["available_tools"],
        json!([
            "sql_query",
            "rest_exchange_rate",
            "run_python",
            "list_resources",
            "open_resource",
            "read_resource",
            "release_resource"
        ])
    );

    // Bad input gets a clear JSON error.
    let bad = reqwest::Client::new()
        .post(format!("{}/chat", served.base))
        .header("content-type", "application/json")
        .body("{\"message\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status().as_u16(), 400);
    let body: Value = bad.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("invalid request body")
    );
    let (status, body) = post(&served, "/chat", &json!({"message": "  "})).await;
    assert_eq!(status, 400);
    assert!(body["error"]["message"].as_str().unwrap().contains("empty"));
    let (status, _) = post(&served, "/chat", &json!({"msg": TASK})).await;
    assert_eq!(status, 422);
    let (status, body) = post(
        &served,
        "/chat",
        &json!({"message": TASK, "messages": [{"role": "system", "content": "x"}]}),
    )
    .await;
    assert_eq!(status, 422);
    assert!(body["error"]["message"].as_str().unwrap().contains("role"));

    // The OpenAPI document names every route and embeds the answer's schema.
    let doc = served.get("/openapi.json").await;
    assert_eq!(doc["openapi"], "3.1.0");
    for path in [
        "/chat",
        "/chat/stream",
        "/agent/run",
        "/tools",
        "/health",
        "/mcp",
    ] {
        assert!(doc["paths"].get(path).is_some(), "{path} is not documented");
    }
    assert!(
        doc["components"]["schemas"]["AgentAnswer"]["properties"]
            .get("key_facts")
            .is_some()
    );
    // The bodies this test sent and got match the document's schemas.
    let conforms = |name: &str, body: &Value| {
        let schema = json!({
            "$ref": format!("#/components/schemas/{name}"),
            "components": doc["components"].clone(),
        });
        let validator = jsonschema::validator_for(&schema).expect("the document's schemas compile");
        let errors: Vec<String> = validator.iter_errors(body).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{name}: {errors:?}\n{body}");
    };
    conforms("ChatResponse", &chat_body);
    conforms("ChatResponse", &again);
    conforms("AgentRunResponse", &r);
    conforms(
        "ChatRequest",
        &json!({"message": TASK, "session_id": "it-1", "dry_run": true,
                "messages": [{"role": "user", "content": "hello"}]}),
    );

    // /health shows the trace writer: nothing lost.
    let health = served.get("/health").await;
    assert_eq!(health["trace"]["lost_records"], 0, "{health}");
    assert_eq!(health["trace"]["failing"], false, "{health}");

    // Every executed call was traced by the one writer, as whole lines (written after the
    // answers, in batches: read once all eight are there).
    let all = traces_at_least(served.dir.path(), 8).await;
    let t: Vec<&Value> = all.iter().filter(|r| r["kind"] == "tool_call").collect();
    assert_eq!(
        t.len(),
        4,
        "chat, chat (dry run), stream, agent/run: one call each"
    );
    assert_eq!(t.iter().filter(|r| r["dry_run"] == true).count(), 1);
    assert_eq!(all.len(), 8, "and one model call with the answer each");
}

#[tokio::test]
async fn chat_answers_503_when_its_servers_are_down_but_dry_run_still_plans() {
    let config =
        json!({"mcpServers": {"ghost": {"command": "/nonexistent/toolforge-ghost", "timeout": 2}}});
    let served = Served::start(&config).await;
    let (status, body) = post(&served, "/chat", &json!({"message": "read README.md"})).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["halt_reason"], "servers_unavailable");
    assert!(body["error"]["message"].as_str().unwrap().contains("ghost"));
    let (status, body) = post(
        &served,
        "/chat",
        &json!({"message": "read README.md", "dry_run": true}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["dry_run"], true);
    // The stream reports the refusal as its terminal `error` event.
    let text = reqwest::Client::new()
        .post(format!("{}/chat/stream", served.base))
        .json(&json!({"message": "read README.md"}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let events = sse_events(&text);
    assert_eq!(
        events.last().map(|(e, _)| e.as_str()),
        Some("error"),
        "{text}"
    );
    assert_eq!(events.last().unwrap().1["status"], 503);
}

#[tokio::test]
async fn fail_closed_tracing_refuses_chat_with_503_when_the_trace_cannot_be_written() {
    let config = json!({"mcpServers": {"toolkit": {"command": bin(), "args": ["server", "toolkit", "--stdio"]}}});
    let served = Served::start_with(
        &config,
        &[("TRACE_SINK", "/dev/full"), ("TRACE_FAIL_CLOSED", "1")],
    )
    .await;
    // The first record fails to write; from then on every run is refused before it starts.
    let mut last = (0, Value::Null);
    for i in 0..3 {
        let body = json!({"message": "Run this Python: print(1)", "session_id": format!("fc-{i}")});
        last = post(&served, "/chat", &body).await;
        if last.0 == 503 {
            break;
        }
    }
    assert_eq!(last.0, 503, "{}", last.1);
    assert_eq!(
        last.1["error"]["halt_reason"], "trace_unavailable",
        "{}",
        last.1
    );
}
