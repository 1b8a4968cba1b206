//! `toolforge server evals --stdio` driven by the official Python MCP SDK; the script starts its
//! own fake OpenAI-compatible server on loopback and points `LM_STUDIO_SERVERS` (and
//! `EMBEDDING_MODEL`) at it.

use std::time::Duration;

use serde_json::{Value, json};

use crate::{bin, root, tool};

async fn run_script() -> Value {
    let python = tool("venv/bin/python");
    let script = root().join("crates/toolforge-evals/tests/python/evals_stdio.py");
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(python)
            .arg(script)
            .arg(bin())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the script finished within 120 s")
    .expect("the script ran");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "script output is not JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn call<'a>(out: &'a Value, i: usize, name: &str) -> &'a Value {
    let c = &out["calls"][i];
    assert_eq!(c["name"], name, "{c}");
    c
}

fn ok<'a>(out: &'a Value, i: usize, name: &str) -> &'a Value {
    let c = call(out, i, name);
    assert_eq!(c["is_error"], false, "{c}");
    c
}

#[tokio::test]
async fn evals_over_stdio_with_the_python_sdk() {
    let out = run_script().await;
    assert_eq!(out["server"], "toolforge-evals");
    assert_eq!(
        out["tools"],
        json!([
            "list_models",
            "complete",
            "react_step",
            "judge",
            "calculate_drift",
            "analyze_variants",
            "generate_variants",
            "analyze_trajectory",
            "compare_trajectories",
            "grade_selection"
        ])
    );
    let url = out["server_url"].as_str().unwrap();
    let models = &ok(&out, 0, "list_models")["structured"];
    assert_eq!(
        models["models"],
        json!(["fake-embed", "fake-model", "judge-model"])
    );
    assert_eq!(models["servers"][url], models["models"]);
    assert_eq!(models["unreachable"], json!([]));

    assert_eq!(
        ok(&out, 1, "complete")["text"],
        "echo: Respond with only 'pong'"
    );
    let first = &out["requests"][0];
    assert_eq!(
        (first["max_tokens"].as_i64(), first["seed"].as_i64()),
        (Some(8), Some(3))
    );
    assert_eq!(first["temperature"], 0.7);

    let step = &ok(&out, 2, "react_step")["structured"];
    assert_eq!(step["new_iterations"][0]["observation"], "zebra");
    assert_eq!(step["new_iterations"][0]["tool_call"]["id"], "call_1");
    let done = &ok(&out, 3, "react_step")["structured"];
    assert_eq!(done["completed"], true);
    assert_eq!(done["final_response"], "finished");
    assert_eq!(done["done_trace_entry"]["tool_call"]["id"], "call_2");

    let verdict = &ok(&out, 4, "judge")["structured"];
    assert_eq!(
        (verdict["pass"].clone(), verdict["score"].clone()),
        (json!(true), json!(7.0))
    );
    assert_eq!(ok(&out, 5, "calculate_drift")["text"], "0.0");
    let variants = &ok(&out, 6, "generate_variants")["structured"];
    assert_eq!(variants["variant_count"], 2);
    let distances = &ok(&out, 7, "analyze_variants")["structured"];
    assert!(distances["from_baseline"]["passive"].as_f64().unwrap() > 0.0);
    assert_eq!(
        ok(&out, 8, "analyze_trajectory")["structured"]["n_sentences"],
        3
    );

    let missing = call(&out, 9, "complete");
    assert_eq!(missing["is_error"], true);
    assert!(
        missing["text"]
            .as_str()
            .unwrap()
            .starts_with("RuntimeError: no server available for model \"missing-model\""),
        "{missing}"
    );
}
