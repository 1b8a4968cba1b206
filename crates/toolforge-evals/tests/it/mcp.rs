//! The MCP surface in process (rmcp client over a duplex pipe): tool list and schemas, every
//! tool's wire shape, errors as `isError` results, server-side limits.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use toolforge_evals::server::TOOL_ORDER;
use toolforge_evals::{EvalsConfig, EvalsServer};

use crate::{Fake, Reply, config, keys, shape};

type Client = RunningService<RoleClient, ClientConfig>;

async fn connect(cfg: &EvalsConfig) -> Client {
    let (a, b) = tokio::io::duplex(256 * 1024);
    let server = EvalsServer::new(cfg).expect("server");
    tokio::spawn(async move {
        if let Ok(s) = server.serve(a).await {
            let _ = s.waiting().await;
        }
    });
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("evals-it", "0.1"),
    )
    .serve(b)
    .await
    .expect("client")
}

async fn call(client: &Client, name: &'static str, args: Value) -> CallToolResult {
    client
        .call_tool(
            CallToolRequestParams::new(name).with_arguments(args.as_object().cloned().unwrap()),
        )
        .await
        .expect("call_tool")
}

fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn ok(r: &CallToolResult) -> Value {
    assert_ne!(r.is_error, Some(true), "tool failed: {}", text(r));
    r.structured_content.clone().expect("structured content")
}

fn err(r: &CallToolResult) -> String {
    assert_eq!(r.is_error, Some(true), "expected an error, got {}", text(r));
    text(r)
}

#[tokio::test]
async fn tool_list_order_and_schemas() {
    let client = connect(&config(&[])).await;
    let info = client.peer_info().unwrap();
    assert_eq!(info.server_info.clone().unwrap().name, "toolforge-evals");
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, TOOL_ORDER);
    let schema = |name: &str| -> Value {
        let t = tools.iter().find(|t| t.name == name).unwrap();
        Value::Object((*t.input_schema).clone())
    };
    let react = schema("react_step");
    let required: Vec<&str> = react["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for r in [
        "model_id",
        "system_prompt",
        "initial_message",
        "trace",
        "mock_tools",
        "tools",
    ] {
        assert!(required.contains(&r), "{r} required: {react}");
    }
    assert!(!required.contains(&"call_counter"));
    assert_eq!(
        react["properties"]["mock_tools"]["type"],
        json!(["object", "null"]),
        "{react}"
    );
    let complete = schema("complete");
    assert_eq!(complete["properties"]["temperature"]["default"], 0.7);
    assert_eq!(complete["properties"]["max_tokens"]["default"], 2048);
    assert_eq!(complete["properties"]["timeout_seconds"]["default"], 300);
    assert_eq!(schema("judge")["properties"]["temperature"]["default"], 0.1);
    assert_eq!(
        schema("judge")["properties"]["timeout_seconds"]["default"],
        60
    );
    assert_eq!(
        schema("generate_variants")["properties"]["dimensions"]["default"],
        json!(["mood", "voice", "person", "frame"])
    );
    assert_eq!(
        schema("analyze_variants")["properties"]["baseline_label"]["default"],
        "imperative"
    );
    assert_eq!(
        schema("analyze_variants")["properties"]["constraint_name"]["default"],
        "unnamed"
    );
    assert_eq!(
        schema("analyze_trajectory")["properties"]["acceleration_threshold"]["default"],
        0.3
    );
    assert_eq!(
        schema("analyze_trajectory")["properties"]["include_sentences"]["default"],
        false
    );
    let no_args = schema("list_models");
    assert!(
        no_args.get("required").is_none() && no_args["type"] == "object",
        "{no_args}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn every_tool_over_mcp() {
    let f = Fake::start(&["m", "judge"]).await;
    let client = connect(&config(&[&f.url])).await;

    let r = ok(&call(&client, "list_models", json!({})).await);
    assert_eq!(
        r,
        json!({"models": ["judge", "m"], "servers": {f.url.clone(): ["judge", "m"]}, "unreachable": []})
    );

    f.script([Reply::text("pong")]);
    let r = call(&client, "complete", json!({"model_id": "m", "messages": [{"role": "user", "content": "Respond with only 'pong'"}], "max_tokens": 8})).await;
    assert_eq!(text(&r), "pong");
    assert_eq!(ok(&r), json!({"result": "pong"}));

    f.script([Reply::tools(
        "Reading.",
        &[("read_file", "{\"path\": \"./1.txt\"}")],
    )]);
    let r = ok(&call(
        &client,
        "react_step",
        json!({
        "model_id": "m", "system_prompt": "s", "initial_message": "g", "trace": [],
        "mock_tools": {"read_file": {"{\"path\": \"./1.txt\"}": "zebra"}}, "tools": []}),
    )
    .await);
    assert_eq!(r["new_iterations"][0]["observation"], "zebra");
    assert_eq!(r["call_counter"], 1);

    f.script([Reply::tools(
        "Forwarding.",
        &[("read_file", "{\"path\": \"./1.txt\"}")],
    )]);
    let r = ok(&call(
        &client,
        "react_step",
        json!({
        "model_id": "m", "system_prompt": "s", "initial_message": "g", "trace": [],
        "mock_tools": null, "tools": [], "call_counter": 4}),
    )
    .await);
    assert_eq!(
        r["pending_tool_calls"],
        json!([{"id": "call_5", "name": "read_file", "args": {"path": "./1.txt"}}])
    );

    f.script([Reply::text(
        "{\"pass\": true, \"reason\": \"fine\", \"score\": 9}",
    )]);
    let r = ok(&call(
        &client,
        "judge",
        json!({"response": "r", "criteria": "c", "judge_model": "judge"}),
    )
    .await);
    assert_eq!(
        r,
        json!({"pass": true, "reason": "fine", "score": 9.0, "raw_response": "{\"pass\": true, \"reason\": \"fine\", \"score\": 9}"})
    );

    let r = call(
        &client,
        "calculate_drift",
        json!({"text_a": "same words", "text_b": "same words"}),
    )
    .await;
    let drift: f64 = text(&r).parse().unwrap();
    assert!(drift.abs() < 1e-6);
    assert!(ok(&r)["result"].is_number());

    let r = ok(&call(
        &client,
        "analyze_variants",
        json!({"variants": {"imperative": "Delete it", "polite": "Please delete it"}}),
    )
    .await);
    assert_eq!(
        (r["baseline_label"].clone(), r["constraint_name"].clone()),
        (json!("imperative"), json!("unnamed"))
    );

    f.script([Reply::text("{\"passive\": \"It should be deleted.\"}")]);
    let r = ok(&call(
        &client,
        "generate_variants",
        json!({"baseline": "Delete it", "model_id": "m", "dimensions": ["voice"]}),
    )
    .await);
    assert_eq!(
        r,
        json!({"baseline": "Delete it", "dimensions_requested": ["voice"],
        "variants": {"imperative": "Delete it", "passive": "It should be deleted."}, "variant_count": 2})
    );

    let r = ok(&call(
        &client,
        "analyze_trajectory",
        json!({"text": "One idea here. Another idea there. A third one."}),
    )
    .await);
    assert_eq!(r["n_sentences"], 3);
    let r = ok(&call(
        &client,
        "compare_trajectories",
        json!({
        "golden_text": "A cat sat. It purred. It slept. Then it woke.",
        "synthetic_text": "A dog ran. It barked. It rested. Then it ate."}),
    )
    .await);
    assert!(keys(&r).contains(&"fitness_score".to_owned()));

    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let r = ok(&call(
        &client,
        "grade_selection",
        json!({
        "catalog": root.join("evals/catalogs/reference.json"),
        "cases": root.join("evals/golden_tasks.jsonl")}),
    )
    .await);
    assert_eq!(shape(&r)["failures"], json!([]));
    assert_eq!(r["accuracy"], 1.0);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn failures_are_tool_errors_with_the_seed_kinds() {
    let f = Fake::start(&["m"]).await;
    f.script([Reply::Status(503, "loading model".into())]);
    let client = connect(&config(&[&f.url])).await;
    let e = err(&call(
        &client,
        "complete",
        json!({"model_id": "m", "messages": [{"role": "user", "content": "x"}]}),
    )
    .await);
    assert!(e.starts_with("httpx.HTTPStatusError: HTTP 503"), "{e}");
    let e = err(&call(
        &client,
        "complete",
        json!({"model_id": "other", "messages": [{"role": "user", "content": "x"}]}),
    )
    .await);
    assert!(
        e.starts_with("RuntimeError: no server available for model \"other\""),
        "{e}"
    );
    let e = err(&call(&client, "complete", json!({"model_id": "m", "messages": [{"role": "user", "content": "x"}], "timeout_seconds": 0})).await);
    assert_eq!(
        e,
        "ValueError: timeout_seconds must be between 1 and 3600, got 0"
    );
    // `mock_tools` is required even though it may be null.
    let r = client
        .call_tool(CallToolRequestParams::new("react_step").with_arguments(
            json!({"model_id": "m", "system_prompt": "s", "initial_message": "g", "trace": [], "tools": []})
                .as_object()
                .cloned()
                .unwrap(),
        ))
        .await;
    match r {
        Ok(r) => assert!(err(&r).contains("mock_tools"), "{}", text(&r)),
        Err(e) => assert!(e.to_string().contains("mock_tools"), "{e}"),
    }
    // An unknown tool is a protocol error.
    assert!(
        client
            .call_tool(CallToolRequestParams::new("no_such_tool"))
            .await
            .is_err()
    );

    f.script([Reply::delay(3000, Reply::text("late"))]);
    let started = std::time::Instant::now();
    let e = err(&call(&client, "complete", json!({"model_id": "m", "messages": [{"role": "user", "content": "x"}], "timeout_seconds": 1})).await);
    assert_eq!(
        e,
        "httpx.TimeoutException: complete exceeded timeout_seconds=1"
    );
    assert!(started.elapsed() < Duration::from_millis(2500));
    client.cancel().await.unwrap();

    let client = connect(&config(&[])).await;
    let e = err(&call(&client, "list_models", json!({})).await);
    assert!(e.starts_with("RuntimeError: no adapter registered"), "{e}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn fixed_limits_apply_to_tools_without_timeout_seconds() {
    // A server that accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hang = format!("http://{}", listener.local_addr().unwrap());
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    let mut cfg = config(&[&hang]);
    cfg.timeouts.list_models = Duration::from_millis(300);
    let client = connect(&cfg).await;
    let e = err(&call(&client, "list_models", json!({})).await);
    assert_eq!(
        e,
        "TimeoutError: list_models did not finish within its 0.3 s limit"
    );
    client.cancel().await.unwrap();
    hold.abort();
}
