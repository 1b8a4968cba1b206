//! The Tasks extension (SEP-2663) in the fixture, through the HTTP router in-process: which
//! calls become tasks, a task's life on `tasks/get` (working, input required, completed,
//! failed, cancelled), `tasks/update` and `tasks/cancel`, and the errors for a client that did
//! not declare the extension.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::modern::{rpc_with, server};

fn tasks() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}})
}

async fn call(s: &axum::Router, method: &str, params: Value, caps: Value) -> Value {
    rpc_with(s, method, params, caps, &[]).await.1
}

/// `tasks/get` of `id` until it reports `status` or ends.
async fn until(s: &axum::Router, id: &str, status: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = call(s, "tasks/get", json!({"taskId": id}), tasks()).await;
        let now = got["result"]["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if now == status || ["completed", "failed", "cancelled"].contains(&now.as_str()) {
            return got["result"].clone();
        }
        assert!(Instant::now() < deadline, "still {now}: {got}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn task_id(created: &Value) -> String {
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned()
}

#[tokio::test]
async fn a_call_becomes_a_task_only_for_a_client_that_declared_the_extension() {
    let s = server();
    let args = json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "x"}});
    let plain = call(&s, "tools/call", args.clone(), json!({})).await;
    assert_eq!(plain["result"]["resultType"], "complete", "{plain}");
    assert_eq!(plain["result"]["content"][0]["text"], "x: computed in 0 s");

    let id = task_id(&call(&s, "tools/call", args, tasks()).await);
    let done = until(&s, &id, "completed").await;
    assert_eq!(
        done["result"]["content"][0]["text"], "x: computed in 0 s",
        "{done}"
    );

    // Task support required: refused without the extension, naming it.
    let refused = call(
        &s,
        "tools/call",
        json!({"name": "failing_job", "arguments": {}}),
        json!({}),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    assert!(
        refused["error"]["data"]["requiredCapabilities"]["extensions"]
            .get("io.modelcontextprotocol/tasks")
            .is_some(),
        "{refused}"
    );
    // `greet` never becomes a task.
    let greet = call(
        &s,
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "Ada"}}),
        tasks(),
    )
    .await;
    assert_eq!(
        greet["result"]["content"][0]["text"], "Hello, Ada!",
        "{greet}"
    );
}

#[tokio::test]
async fn a_task_ends_completed_with_a_tool_error_failed_with_a_protocol_error_or_cancelled() {
    let s = server();
    let failing = task_id(
        &call(
            &s,
            "tools/call",
            json!({"name": "failing_job", "arguments": {}}),
            tasks(),
        )
        .await,
    );
    let broken = task_id(
        &call(
            &s,
            "tools/call",
            json!({"name": "protocol_error_job", "arguments": {}}),
            tasks(),
        )
        .await,
    );
    let long = task_id(
        &call(
            &s,
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 600}}),
            tasks(),
        )
        .await,
    );
    let working = call(&s, "tasks/get", json!({"taskId": long}), tasks()).await;
    assert_eq!(working["result"]["status"], "working", "{working}");
    let ack = call(&s, "tasks/cancel", json!({"taskId": long}), tasks()).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");

    let failed_tool = until(&s, &failing, "completed").await;
    assert_eq!(failed_tool["status"], "completed", "{failed_tool}");
    assert_eq!(failed_tool["result"]["isError"], true, "{failed_tool}");
    let failed = until(&s, &broken, "failed").await;
    assert_eq!(failed["error"]["code"], -32603, "{failed}");
    assert!(failed.get("result").is_none(), "{failed}");
    assert_eq!(until(&s, &long, "cancelled").await["status"], "cancelled");

    let unknown = call(&s, "tasks/get", json!({"taskId": "no-such-task"}), tasks()).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let undeclared = call(&s, "tasks/get", json!({"taskId": long}), json!({})).await;
    assert_eq!(undeclared["error"]["code"], -32021, "{undeclared}");
}

#[tokio::test]
async fn a_task_waits_for_every_answer_it_asked_for() {
    let s = server();
    let id = task_id(
        &call(
            &s,
            "tools/call",
            json!({"name": "multi_input", "arguments": {}}),
            tasks(),
        )
        .await,
    );
    let asking = until(&s, &id, "input_required").await;
    let mut keys: Vec<String> = asking["inputRequests"]
        .as_object()
        .unwrap_or_else(|| panic!("{asking}"))
        .keys()
        .cloned()
        .collect();
    keys.sort();
    assert_eq!(keys, ["confirm", "name"], "{asking}");

    let answer = |key: &str, content: Value| json!({"taskId": id, "inputResponses": {key: {"action": "accept", "content": content}}});
    call(
        &s,
        "tasks/update",
        answer("name", json!({"name": "Ada"})),
        tasks(),
    )
    .await;
    let half = call(&s, "tasks/get", json!({"taskId": id}), tasks()).await;
    assert_eq!(half["result"]["status"], "input_required", "{half}");
    let left: Vec<&String> = half["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(left, ["confirm"], "{half}");
    call(
        &s,
        "tasks/update",
        answer("confirm", json!({"confirm": true})),
        tasks(),
    )
    .await;
    let done = until(&s, &id, "completed").await;
    assert_eq!(
        done["result"]["content"][0]["text"], "Ada answered both questions (go ahead: true)",
        "{done}"
    );
}
