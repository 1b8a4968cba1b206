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

/// `toolforge server evals --port N` (Streamable HTTP), with no model server at all: the
/// embedding tools run on the offline hashing embedder, the model tools report the missing
/// adapter as the seed's `RuntimeError`, and the visibility flags apply.
#[tokio::test]
async fn evals_over_http_offline_with_visibility() {
    let mut child = tokio::process::Command::new(bin())
        .args(["server", "evals", "--port", "0"])
        .args(["--disabled-tools", "generate_variants"])
        .env_remove("LM_STUDIO_SERVERS")
        .env_remove("TOGETHER_API_KEY")
        .env_remove("HF_TOKEN")
        .env_remove("EMBEDDING_MODEL")
        .env_remove("EMBEDDER_BACKEND")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start toolforge server evals");
    let stderr = child.stderr.take().expect("piped stderr");
    let addr = crate::announced(
        stderr,
        "evals listening on http://",
        Duration::from_secs(60),
    )
    .await;
    let url = format!("http://{addr}/mcp");
    let out = crate::python_client(&[
        "http".into(),
        url,
        "--call".into(),
        "calculate_drift".into(),
        json!({"text_a": "The cat sat on the mat.", "text_b": "The cat sat on the mat."})
            .to_string(),
        "--call".into(),
        "complete".into(),
        json!({"model_id": "nope", "messages": [{"role": "user", "content": "hi"}]}).to_string(),
        "--call".into(),
        "generate_variants".into(),
        json!({"baseline": "File a bug", "model_id": "nope"}).to_string(),
    ])
    .await;
    let tools = out["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), 9, "{out}");
    assert!(!tools.iter().any(|t| t == "generate_variants"));
    let drift = &out["calls"][0];
    assert_eq!(drift["is_error"], false, "{out}");
    assert!(
        drift["text"].as_str().unwrap_or_default().starts_with('0'),
        "{out}"
    );
    let complete = &out["calls"][1];
    assert_eq!(complete["is_error"], true, "{out}");
    assert!(
        complete["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with("RuntimeError"),
        "{out}"
    );
    assert!(
        out["calls"][2]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("unknown tool"),
        "{out}"
    );
    let _ = child.start_kill();
}
