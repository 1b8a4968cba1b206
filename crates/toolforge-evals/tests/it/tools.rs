//! Each tool against the fake: output values and shapes, pass-through of options, errors.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolforge_evals::analysis::TrajectoryOptions;
use toolforge_evals::react::{MockTools, ReActIteration};
use toolforge_evals::tools::{CompleteOptions, Limit, StepRequest, within};
use toolforge_evals::{EmbeddingConfig, Tools};

use crate::{Fake, Reply, config, keys, shape, tools_over};

fn user(text: &str) -> Vec<Value> {
    vec![json!({"role": "user", "content": text})]
}

#[tokio::test]
async fn complete_returns_text_and_passes_options_through() {
    let f = Fake::start(&["m"]).await;
    f.script([Reply::text("The answer is 42, as computed.")]);
    let tools = tools_over(&f);
    let tool_def =
        json!({"type": "function", "function": {"name": "t", "parameters": {"type": "object"}}});
    let out = tools
        .complete(
            "m",
            user("q"),
            CompleteOptions {
                temperature: 0.0,
                max_tokens: 64,
                tools: Some(vec![tool_def.clone()]),
                seed: Some(11),
                repeat_penalty: Some(1.05),
                response_format: Some(json!({"type": "json_schema", "json_schema": {"name": "x"}})),
            },
        )
        .await
        .unwrap();
    assert_eq!(out, "The answer is 42, as computed.");
    let req = f.last_request();
    assert_eq!(req["model"], "m");
    assert_eq!(req["messages"], json!(user("q")));
    assert_eq!(req["temperature"], 0.0);
    assert_eq!(req["max_tokens"], 64);
    assert_eq!(req["stream"], true);
    assert_eq!(req["tools"], json!([tool_def]));
    assert_eq!(req["seed"], 11);
    assert_eq!(req["repeat_penalty"], 1.05);
    assert_eq!(req["response_format"]["type"], "json_schema");
}

#[tokio::test]
async fn complete_defaults_match_the_seed() {
    let f = Fake::start(&["m"]).await;
    let tools = tools_over(&f);
    tools
        .complete("m", user("q"), CompleteOptions::default())
        .await
        .unwrap();
    let req = f.last_request();
    assert_eq!(
        (req["temperature"].as_f64(), req["max_tokens"].as_i64()),
        (Some(0.7), Some(2048))
    );
    for absent in ["tools", "seed", "repeat_penalty", "response_format"] {
        assert!(req.get(absent).is_none(), "{absent}");
    }
}

#[tokio::test]
async fn complete_with_only_tool_calls_returns_empty_text() {
    let f = Fake::start(&["m"]).await;
    f.script([Reply::tools("", &[("read_file", "{\"path\": \"a\"}")])]);
    let out = tools_over(&f)
        .complete("m", user("q"), CompleteOptions::default())
        .await
        .unwrap();
    assert_eq!(out, "");
}

#[tokio::test]
async fn complete_accepts_a_non_streamed_answer() {
    let f = Fake::start(&["m"]).await;
    f.script([Reply::Whole("whole answer".into())]);
    let out = tools_over(&f)
        .complete("m", user("q"), CompleteOptions::default())
        .await
        .unwrap();
    assert_eq!(out, "whole answer");
}

#[tokio::test]
async fn complete_errors_carry_the_seed_kinds() {
    let f = Fake::start(&["m"]).await;
    f.script([
        Reply::Status(500, "GPU on fire".into()),
        Reply::Status(400, "bad request".into()),
        Reply::Cut,
    ]);
    let tools = tools_over(&f);
    let e = tools
        .complete("m", user("q"), CompleteOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("httpx.HTTPStatusError: HTTP 500 from "),
        "{e}"
    );
    assert!(e.ends_with("/v1/chat/completions: GPU on fire"), "{e}");
    let e = tools
        .complete("m", user("q"), CompleteOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("HTTP 400") && e.contains("bad request"), "{e}");
    let e = tools
        .complete("m", user("q"), CompleteOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("RuntimeError: ") && e.contains("stream ended"),
        "{e}"
    );
    for (messages, want) in [
        (
            vec![],
            "ValueError: messages must hold at least one message",
        ),
        (
            vec![json!({"content": "no role"})],
            "ValueError: messages[0] is not an OpenAI chat message",
        ),
    ] {
        let e = tools
            .complete("m", messages, CompleteOptions::default())
            .await
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(want), "{e}");
    }
    let e = tools
        .complete(
            "m",
            user("q"),
            CompleteOptions {
                max_tokens: 0,
                ..CompleteOptions::default()
            },
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("ValueError: max_tokens"), "{e}");
}

#[tokio::test]
async fn a_request_past_timeout_seconds_is_cancelled_and_frees_its_slot() {
    let f = Fake::start(&["m"]).await;
    f.script([
        Reply::delay(3000, Reply::text("late")),
        Reply::text("on time"),
    ]);
    let tools = tools_over(&f);
    let e = within(
        "complete",
        Limit::Requested(1),
        tools.complete("m", user("q"), CompleteOptions::default()),
    )
    .await
    .unwrap_err()
    .to_string();
    assert_eq!(
        e,
        "httpx.TimeoutException: complete exceeded timeout_seconds=1"
    );
    // The single slot is free again at once.
    let ok = within(
        "complete",
        Limit::Requested(2),
        tools.complete("m", user("q"), CompleteOptions::default()),
    )
    .await
    .unwrap();
    assert_eq!(ok, "on time");
    let e = within(
        "list_models",
        Limit::Fixed(Duration::from_millis(10)),
        async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            Ok(())
        },
    )
    .await
    .unwrap_err()
    .to_string();
    assert_eq!(
        e,
        "TimeoutError: list_models did not finish within its 0.01 s limit"
    );
}

fn mocks() -> MockTools {
    serde_json::from_value(json!({
        "read_file": {"./1.txt": "The zebra is a striped animal found in Africa.", "_default": "File not found"}
    }))
    .unwrap()
}

fn read_file_tool() -> Value {
    json!({"type": "function", "function": {"name": "read_file", "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}})
}

fn step(trace: Vec<ReActIteration>, mock_tools: Option<MockTools>, counter: i64) -> StepRequest {
    StepRequest {
        model_id: "m".into(),
        system_prompt: "You sort files.".into(),
        initial_message: "Categorize ./1.txt".into(),
        trace,
        mock_tools,
        tools: vec![read_file_tool()],
        call_counter: counter,
        temperature: 0.0,
        max_tokens: 2048,
        response_format: None,
    }
}

#[tokio::test]
async fn react_step_mock_mode_shape_and_messages() {
    let f = Fake::start(&["m"]).await;
    f.script([Reply::tools(
        "I need to read the file to determine its category.",
        &[("read_file", "{\"path\": \"./1.txt\"}")],
    )]);
    let tools = tools_over(&f);
    let r = tools
        .react_step(step(vec![], Some(mocks()), 0))
        .await
        .unwrap();
    assert_eq!(
        shape(&r),
        json!({"completed": "bool", "final_response": "null", "new_iterations": [{
            "iteration": "number", "tool_call": {"id": "string", "name": "string", "args": {"path": "string"}},
            "observation": "string", "success": "bool", "thought": "string", "latency_ms": "number"}],
            "pending_tool_calls": [], "call_counter": "number", "latency_ms": "number"})
    );
    let it = &r["new_iterations"][0];
    assert_eq!(it["iteration"], 1);
    assert_eq!(
        it["tool_call"],
        json!({"id": "call_1", "name": "read_file", "args": {"path": "./1.txt"}})
    );
    assert_eq!(
        it["observation"],
        "The zebra is a striped animal found in Africa."
    );
    assert_eq!(it["success"], true);
    assert_eq!(r["call_counter"], 1);
    assert!(r["latency_ms"].as_f64().unwrap() > 0.0);
    let req = f.last_request();
    assert_eq!(req["temperature"], 0.0);
    assert_eq!(
        req["messages"][0],
        json!({"role": "system", "content": "You sort files."})
    );
    assert_eq!(
        req["messages"][1],
        json!({"role": "user", "content": "Categorize ./1.txt"})
    );
    assert_eq!(req["tools"][0]["function"]["name"], "read_file");

    // The next step rebuilds the conversation from the trace.
    let trace: Vec<ReActIteration> = serde_json::from_value(r["new_iterations"].clone()).unwrap();
    f.script([Reply::text("Category: animals")]);
    let r2 = tools
        .react_step(step(trace, Some(mocks()), 1))
        .await
        .unwrap();
    assert_eq!(
        r2,
        json!({"completed": true, "final_response": "Category: animals", "new_iterations": [],
               "pending_tool_calls": [], "call_counter": 1, "latency_ms": r2["latency_ms"]})
    );
    let msgs = f.last_request()["messages"].clone();
    assert_eq!(
        msgs[2]["tool_calls"][0]["function"]["arguments"],
        "{\"path\": \"./1.txt\"}"
    );
    assert_eq!(
        msgs[2]["content"],
        "I need to read the file to determine its category."
    );
    assert_eq!(
        msgs[3],
        json!({"role": "tool", "content": "The zebra is a striped animal found in Africa.", "tool_call_id": "call_1"})
    );
}

#[tokio::test]
async fn react_step_forwarding_and_done_shapes() {
    let f = Fake::start(&["m"]).await;
    f.script([
        Reply::tools(
            "I need to calculate the drift between these texts.",
            &[
                ("calculate_drift", "{\"text_a\": \"a\", \"text_b\": \"b\"}"),
                ("broken", "{\"x\": "),
            ],
        ),
        Reply::tools(
            "I have finished organizing all files.",
            &[
                ("read_file", "{\"path\": \"x\"}"),
                (
                    "DONE",
                    "{\"status\": \"COMPLETED\", \"response\": \"All files organized.\"}",
                ),
            ],
        ),
    ]);
    let tools = tools_over(&f);
    let r = tools.react_step(step(vec![], None, 0)).await.unwrap();
    assert_eq!(
        keys(&r),
        [
            "completed",
            "final_response",
            "new_iterations",
            "pending_tool_calls",
            "call_counter",
            "thought",
            "latency_ms"
        ]
    );
    assert_eq!(
        r["pending_tool_calls"],
        json!([{"id": "call_1", "name": "calculate_drift", "args": {"text_a": "a", "text_b": "b"}},
               {"id": "call_2", "name": "broken", "args": {}}])
    );
    assert_eq!(
        r["thought"],
        "I need to calculate the drift between these texts."
    );
    assert_eq!(
        (r["completed"].clone(), r["final_response"].clone()),
        (json!(false), Value::Null)
    );

    let r = tools
        .react_step(step(vec![], Some(mocks()), 37))
        .await
        .unwrap();
    assert_eq!(
        r,
        json!({
            "completed": true,
            "final_response": "All files organized.",
            "done_args": {"status": "COMPLETED", "response": "All files organized."},
            "done_trace_entry": {
                "tool_call": {"id": "call_38", "name": "DONE", "args": {"status": "COMPLETED", "response": "All files organized."}},
                "thought": "I have finished organizing all files."
            },
            "new_iterations": [],
            "pending_tool_calls": [],
            "call_counter": 38,
            "latency_ms": r["latency_ms"],
        })
    );
}

#[tokio::test]
async fn judge_verdicts_and_fallbacks() {
    let f = Fake::start(&["judge"]).await;
    f.script([
        Reply::text("<think>The user wants a delete call. {\"pass\": false}</think>{\"pass\": true, \"reason\": \"Response clearly indicates intent to delete the file.\", \"score\": 8}"),
        Reply::text("Verdict: FAIL. The response refused the task."),
        Reply::text("I am not sure."),
    ]);
    let tools = tools_over(&f);
    let v = tools
        .judge(
            "I will delete report.pdf",
            "Response must call delete_file with path report.pdf",
            "judge",
            0.1,
            256,
        )
        .await
        .unwrap();
    let v = serde_json::to_value(v).unwrap();
    assert_eq!(
        shape(&v),
        json!({"pass": "bool", "reason": "string", "score": "number", "raw_response": "string"})
    );
    assert_eq!(v["pass"], true);
    assert_eq!(v["score"], 8.0);
    assert!(v["raw_response"].as_str().unwrap().starts_with("<think>"));
    let req = f.last_request();
    assert_eq!(
        (req["temperature"].as_f64(), req["max_tokens"].as_i64()),
        (Some(0.1), Some(256))
    );
    assert!(
        req["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("Response must call delete_file")
    );

    let v = tools
        .judge("no", "be helpful", "judge", 0.1, 256)
        .await
        .unwrap();
    assert!(!v.pass);
    assert_eq!(v.score, None);
    let e = tools
        .judge("?", "be helpful", "judge", 0.1, 256)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("ValueError: "), "{e}");
}

#[tokio::test]
async fn generate_variants_shape_and_prompt() {
    let f = Fake::start(&["gen"]).await;
    f.script([Reply::text(
        "```json\n{\"interrogative\": \"Could you file a bug before writing code?\", \"declarative\": \"Bugs are filed before code is written.\", \"passive\": \"A bug should be filed before code is written\", \"first_person\": \"We file a bug before writing code\", \"third_person\": \"The developer files a bug before writing code\", \"presuppositional\": \"Since bugs are filed before coding begins...\", \"descriptive\": \"The practice is to file a bug first.\"}\n```",
    )]);
    let tools = tools_over(&f);
    let dims: Vec<String> = ["mood", "voice", "person", "frame"]
        .map(String::from)
        .to_vec();
    let v = tools
        .generate_variants("File a bug before writing code", "gen", &dims, 0.3, 512)
        .await
        .unwrap();
    assert_eq!(
        keys(&v),
        [
            "baseline",
            "dimensions_requested",
            "variants",
            "variant_count"
        ]
    );
    assert_eq!(v["baseline"], "File a bug before writing code");
    assert_eq!(v["dimensions_requested"], json!(dims));
    assert_eq!(
        v["variants"]["imperative"],
        "File a bug before writing code"
    );
    assert_eq!(
        v["variants"]["passive"],
        "A bug should be filed before code is written"
    );
    assert_eq!(v["variant_count"], 8);
    let req = f.last_request();
    assert_eq!(
        (req["temperature"].as_f64(), req["max_tokens"].as_i64()),
        (Some(0.3), Some(512))
    );
    let e = tools
        .generate_variants("  ", "gen", &dims, 0.3, 512)
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(e, "ValueError: baseline must not be empty");
    f.script([Reply::text("Sorry, I can't.")]);
    let e = tools
        .generate_variants("Do X", "gen", &dims, 0.3, 512)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("ValueError: the model's answer holds no JSON"),
        "{e}"
    );
}

const STORY: &str = "The meeting started at nine. Everyone sat down quietly. The agenda was read aloud. \
                     Then a whale fell from the sky. The minutes were approved.";

#[tokio::test]
async fn embedding_tools_shapes_with_the_default_embedder() {
    let f = Fake::start(&["m"]).await;
    let tools = tools_over(&f);
    let d = tools
        .calculate_drift("read the file", "read the file")
        .await
        .unwrap();
    assert!(d.abs() < 1e-6, "{d}");
    let d2 = tools
        .calculate_drift("read the file", "send an email to Bob")
        .await
        .unwrap();
    assert!(d2 > 0.3 && d2 <= 2.0, "{d2}");

    let variants: indexmap::IndexMap<String, String> = [
        ("imperative", "Delete the file"),
        ("polite", "Could you please delete the file?"),
        ("passive", "The file should be deleted"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let v = tools
        .analyze_variants(&variants, "imperative", "deletion_request")
        .await
        .unwrap();
    assert_eq!(
        shape(&v),
        json!({"constraint_name": "string", "baseline_label": "string", "variants_count": "number",
               "from_baseline": {"polite": "number", "passive": "number"},
               "pairwise": {"(imperative, polite)": "number", "(imperative, passive)": "number", "(polite, passive)": "number"},
               "recommendations": [{"variant": "string", "distance": "number", "text": "string"}]})
    );
    assert_eq!(v["variants_count"], 3);
    let e = tools
        .analyze_variants(&variants, "nope", "x")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("ValueError: unknown baseline label"), "{e}");

    let t = tools
        .analyze_trajectory(STORY, &TrajectoryOptions::default())
        .await
        .unwrap();
    assert_eq!(
        keys(&t),
        [
            "n_sentences",
            "mean_velocity",
            "mean_acceleration",
            "max_acceleration",
            "acceleration_spikes",
            "deadpan_score",
            "heller_score",
            "circularity_score",
            "tautology_density",
            "deceleration_score",
            "adams_interpretation",
            "heller_interpretation"
        ]
    );
    assert_eq!(t["n_sentences"], 5);
    let with = tools
        .analyze_trajectory(
            STORY,
            &TrajectoryOptions {
                acceleration_threshold: 0.3,
                include_sentences: true,
            },
        )
        .await
        .unwrap();
    assert_eq!(with["sentences"].as_array().unwrap().len(), 5);
    let e = tools
        .analyze_trajectory("Only one sentence.", &TrajectoryOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("ValueError: too few sentences"), "{e}");

    let c = tools
        .compare_trajectories(STORY, "The class began at eight. Students opened books. A dragon entered. Homework was assigned.", 0.3)
        .await
        .unwrap();
    assert_eq!(
        shape(&c),
        json!({"fitness_score": "number", "synthetic_deadpan": "number", "synthetic_heller": "number",
               "acceleration_dtw": "number", "acceleration_correlation": "number",
               "spike_position_match": "number", "spike_count_match": "number", "interpretation": "string",
               "golden_summary": {"n_sentences": "number", "deadpan_score": "number", "mean_velocity": "number"},
               "synthetic_summary": {"n_sentences": "number", "deadpan_score": "number", "mean_velocity": "number"}})
    );
    let same = tools.compare_trajectories(STORY, STORY, 0.3).await.unwrap();
    assert_eq!(same["fitness_score"], 0.0);
}

#[tokio::test]
async fn a_served_embedding_model_is_found_like_a_chat_model() {
    let chat = Fake::start(&["chat-model"]).await;
    let embed = Fake::start(&["embeddinggemma-300m"]).await;
    let mut cfg = config(&[&chat.url, &embed.url]);
    cfg.embedding = EmbeddingConfig::Served {
        model: "embeddinggemma-300m".into(),
    };
    let tools = Tools::new(&cfg).unwrap();
    let d = tools
        .calculate_drift("alpha beta", "alpha beta")
        .await
        .unwrap();
    assert!(d.abs() < 1e-6);
    let reqs = embed.state.embed_requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0]["input"], json!(["alpha beta", "alpha beta"]));
    // Sentences of both texts go in one request.
    tools.compare_trajectories(STORY, STORY, 0.3).await.unwrap();
    assert_eq!(
        embed.state.embed_requests.lock().unwrap()[1]["input"]
            .as_array()
            .unwrap()
            .len(),
        10
    );

    let mut cfg = config(&[&chat.url]);
    cfg.embedding = EmbeddingConfig::Served {
        model: "missing-embedder".into(),
    };
    let e = Tools::new(&cfg)
        .unwrap()
        .calculate_drift("a", "b")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("RuntimeError: embedding backend failed: ") && e.contains("missing-embedder"),
        "{e}"
    );
}

#[tokio::test]
async fn without_an_embedder_the_embedding_tools_fail_and_the_rest_work() {
    let f = Fake::start(&["m"]).await;
    let mut cfg = config(&[&f.url]);
    cfg.embedding = EmbeddingConfig::Unavailable {
        reason: "no embedding backend configured".into(),
    };
    let tools = Arc::new(Tools::new(&cfg).unwrap());
    let want = "ImportError: no embedding backend configured";
    assert_eq!(
        tools
            .calculate_drift("a", "b")
            .await
            .unwrap_err()
            .to_string(),
        want
    );
    assert_eq!(
        tools
            .analyze_variants(&indexmap::IndexMap::new(), "imperative", "x")
            .await
            .unwrap_err()
            .to_string(),
        want
    );
    assert_eq!(
        tools
            .analyze_trajectory("", &TrajectoryOptions::default())
            .await
            .unwrap_err()
            .to_string(),
        want
    );
    assert_eq!(
        tools
            .compare_trajectories(STORY, STORY, 0.3)
            .await
            .unwrap_err()
            .to_string(),
        want
    );
    assert_eq!(
        tools
            .complete("m", user("hi"), CompleteOptions::default())
            .await
            .unwrap(),
        "echo: hi"
    );
    assert!(tools.list_models().await.is_ok());
}

#[tokio::test]
async fn grade_selection_reports_accuracy_and_failures() {
    let tools = Tools::new(&config(&[])).unwrap();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let catalog = root.join("evals/catalogs/reference.json");
    let cases = root.join("evals/golden_tasks.jsonl");
    let r = tools
        .grade_selection(catalog.clone(), cases.clone())
        .await
        .unwrap();
    assert_eq!(
        keys(&r),
        ["accuracy", "total", "passed", "by_rule", "failures"]
    );
    assert_eq!(r["accuracy"], 1.0);
    assert_eq!(r["failures"], json!([]));
    assert!(r["by_rule"]["priority-order"]["total"].as_u64().unwrap() > 0);

    // One wrong expectation becomes one failure.
    let text = std::fs::read_to_string(&cases).unwrap();
    let mut first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    first["expected"]["selection_rule"] = json!("priority-order");
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("cases.jsonl");
    std::fs::write(&bad, format!("{first}\n")).unwrap();
    let r = tools.grade_selection(catalog.clone(), bad).await.unwrap();
    assert_eq!(
        (r["total"].as_u64(), r["passed"].as_u64()),
        (Some(1), Some(0))
    );
    assert_eq!(
        shape(&r["failures"]),
        json!([{"id": "string", "pass": "bool",
                "expected": {"server": "string", "tool": "string", "selection_rule": "string", "alternatives": ["string"]},
                "got": {"server": "string", "tool": "string", "selection_rule": "string", "alternatives": ["string"]}}])
    );
    let e = tools
        .grade_selection(catalog, dir.path().join("missing.jsonl"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("ValueError: cannot read the cases file"),
        "{e}"
    );
}
