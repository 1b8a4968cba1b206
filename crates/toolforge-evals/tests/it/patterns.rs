//! The seed's composition patterns, run end to end as a caller would: battery evaluation, the
//! facilitator-driven ReAct loop in mock mode and in tool-forwarding mode, prompt optimization
//! and circular-reasoning detection.

use serde_json::{Value, json};
use toolforge_evals::Tools;
use toolforge_evals::analysis::TrajectoryOptions;
use toolforge_evals::react::{MockTools, ReActIteration, ToolCall};
use toolforge_evals::tools::{CompleteOptions, StepRequest};

use crate::{Fake, Reply, config};

fn user(text: &str) -> Vec<Value> {
    vec![json!({"role": "user", "content": text})]
}

#[tokio::test]
async fn battery_evaluation() {
    let a = Fake::start(&["devstral-small"]).await;
    let b = Fake::start(&["gemma-3-27b"]).await;
    let judge = Fake::start(&["judge-model"]).await;
    let tools = Tools::new(&config(&[&a.url, &b.url, &judge.url])).unwrap();
    let tests = [
        (
            "Delete report.pdf",
            "Response must say report.pdf will be deleted",
            "I will delete report.pdf now.",
        ),
        ("Say hello", "Response should greet", "Hello there!"),
    ];
    a.script([
        Reply::text("pong"),
        Reply::text("I will delete report.pdf now."),
        Reply::text("Hello there!"),
    ]);
    b.script([
        Reply::text("pong"),
        Reply::text("I will delete report.pdf now."),
        Reply::text("I refuse."),
    ]);
    let judge_replies = [
        "{\"pass\": true, \"reason\": \"deletes\", \"score\": 9}",
        "{\"pass\": true, \"reason\": \"greets\", \"score\": 8}",
        "{\"pass\": true, \"reason\": \"deletes\", \"score\": 9}",
        "<think>no greeting</think>{\"pass\": false, \"reason\": \"refused\", \"score\": 1}",
    ];
    let models = tools.list_models().await.unwrap().models;
    let models: Vec<String> = models.into_iter().filter(|m| m != "judge-model").collect();
    assert_eq!(models, ["devstral-small", "gemma-3-27b"]);
    let mut results = Vec::new();
    let mut judged = 0;
    for model in &models {
        let warm = tools
            .complete(
                model,
                user("Respond with only 'pong'"),
                CompleteOptions {
                    max_tokens: 8,
                    ..CompleteOptions::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(warm, "pong");
        for (prompt, criteria, expected) in tests {
            let response = tools
                .complete(
                    model,
                    user(prompt),
                    CompleteOptions {
                        temperature: 0.0,
                        ..CompleteOptions::default()
                    },
                )
                .await
                .unwrap();
            judge.script([Reply::text(judge_replies[judged])]);
            judged += 1;
            let verdict = tools
                .judge(&response, criteria, "judge-model", 0.1, 256)
                .await
                .unwrap();
            let drift = tools.calculate_drift(&response, expected).await.unwrap();
            results.push((model.clone(), prompt, verdict.pass, drift));
        }
    }
    let passes: Vec<bool> = results.iter().map(|r| r.2).collect();
    assert_eq!(passes, [true, true, true, false]);
    assert!(results[0].3.abs() < 1e-6, "same text, no drift");
    assert!(results[3].3 > 0.3, "a refusal drifts from the exemplar");
    let warmup = &a.requests()[0];
    assert_eq!(warmup["max_tokens"], 8);
    assert_eq!(a.requests()[1]["temperature"], 0.0);
}

fn file_tools() -> Vec<Value> {
    ["read_file", "move_file", "DONE"]
        .iter()
        .map(|n| json!({"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}))
        .collect()
}

fn step_request(
    trace: &[ReActIteration],
    mock_tools: Option<MockTools>,
    counter: i64,
) -> StepRequest {
    StepRequest {
        model_id: "m".into(),
        system_prompt: "Organize the files into folders. Call DONE when finished.".into(),
        initial_message: "Categorize ./1.txt and ./2.txt".into(),
        trace: trace.to_vec(),
        mock_tools,
        tools: file_tools(),
        call_counter: counter,
        temperature: 0.0,
        max_tokens: 2048,
        response_format: None,
    }
}

#[tokio::test]
async fn facilitator_react_loop_with_mocks() {
    let f = Fake::start(&["m"]).await;
    f.script([
        Reply::tools(
            "Read both files first.",
            &[
                ("read_file", "{\"path\": \"./1.txt\"}"),
                ("read_file", "{\"path\": \"./2.txt\"}"),
            ],
        ),
        Reply::tools(
            "",
            &[(
                "move_file",
                "{\"dst\": \"animals/1.txt\", \"src\": \"./1.txt\"}",
            )],
        ),
        Reply::tools("Wrong guess.", &[("move_file", "{\"src\": \"./9.txt\"}")]),
        Reply::tools(
            "All done.",
            &[(
                "DONE",
                "{\"status\": \"COMPLETED\", \"response\": \"All files organized.\"}",
            )],
        ),
    ]);
    let mocks: MockTools = serde_json::from_value(json!({
        "read_file": {"./1.txt": "The zebra is a striped animal.", "./2.txt": "Paris is a city."},
        "move_file": {"{\"dst\": \"animals/1.txt\", \"src\": \"./1.txt\"}": "moved"}
    }))
    .unwrap();
    let tools = Tools::new(&config(&[&f.url])).unwrap();
    let (mut trace, mut counter) = (Vec::<ReActIteration>::new(), 0);
    let mut final_answer = None;
    let max_iterations = 10;
    while trace.len() < max_iterations {
        let result = tools
            .react_step(step_request(&trace, Some(mocks.clone()), counter))
            .await
            .unwrap();
        if result["completed"] == true {
            final_answer = Some(result["final_response"].as_str().unwrap().to_owned());
            assert_eq!(result["done_trace_entry"]["tool_call"]["id"], "call_5");
            break;
        }
        let new: Vec<ReActIteration> =
            serde_json::from_value(result["new_iterations"].clone()).unwrap();
        trace.extend(new);
        counter = result["call_counter"].as_i64().unwrap();
    }
    assert_eq!(final_answer.as_deref(), Some("All files organized."));
    let summary: Vec<(i64, &str, &str, bool)> = trace
        .iter()
        .map(|i| {
            (
                i.iteration,
                i.tool_call.id.as_str(),
                i.observation.as_str(),
                i.success,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (1, "call_1", "The zebra is a striped animal.", true),
            (1, "call_2", "Paris is a city.", true),
            (3, "call_3", "moved", true),
            (
                4,
                "call_4",
                "Error: No mock response for move_file({'src': './9.txt'})",
                false
            ),
        ]
    );
    // The last request carried the whole trace as messages: system, goal, 2 per iteration.
    assert_eq!(
        f.last_request()["messages"].as_array().unwrap().len(),
        2 + 2 * trace.len()
    );
}

#[tokio::test]
async fn react_loop_in_tool_forwarding_mode() {
    let f = Fake::start(&["m"]).await;
    f.script([
        Reply::tools(
            "I need to calculate the drift between these texts.",
            &[(
                "calculate_drift",
                "{\"text_a\": \"the cat sat\", \"text_b\": \"the cat sat\"}",
            )],
        ),
        Reply::tools("", &[("missing_tool", "{}")]),
        Reply::text("The texts are identical (drift 0)."),
    ]);
    let tools = Tools::new(&config(&[&f.url])).unwrap();
    let (mut trace, mut call_counter) = (Vec::<ReActIteration>::new(), 0);
    let mut final_answer = None;
    for _ in 0..5 {
        let result = tools
            .react_step(step_request(&trace, None, call_counter))
            .await
            .unwrap();
        if result["completed"] == true {
            final_answer = result["final_response"].as_str().map(str::to_owned);
            break;
        }
        assert_eq!(result["new_iterations"], json!([]));
        call_counter = result["call_counter"].as_i64().unwrap();
        for pending in result["pending_tool_calls"].as_array().unwrap() {
            // The caller runs the call against the real service: here, the evals tool itself.
            let observation = match pending["name"].as_str().unwrap() {
                "calculate_drift" => {
                    let d = tools
                        .calculate_drift(
                            pending["args"]["text_a"].as_str().unwrap(),
                            pending["args"]["text_b"].as_str().unwrap(),
                        )
                        .await
                        .unwrap();
                    format!("{d:.3}")
                }
                other => format!("Error: unknown tool {other}"),
            };
            trace.push(ReActIteration {
                iteration: trace.len() as i64,
                tool_call: serde_json::from_value::<ToolCall>(pending.clone()).unwrap(),
                success: !observation.starts_with("Error:"),
                observation,
                thought: result["thought"].as_str().map(str::to_owned),
                latency_ms: 0.0,
            });
        }
    }
    assert_eq!(
        final_answer.as_deref(),
        Some("The texts are identical (drift 0).")
    );
    assert_eq!(trace.len(), 2);
    assert_eq!(trace[0].observation, "0.000");
    assert!(trace[0].success && !trace[1].success);
    assert_eq!(trace[1].tool_call.id, "call_2");
    let msgs = f.last_request()["messages"].clone();
    assert_eq!(
        msgs[3],
        json!({"role": "tool", "content": "0.000", "tool_call_id": "call_1"})
    );
}

#[tokio::test]
async fn prompt_optimization() {
    let f = Fake::start(&["gen", "judge"]).await;
    f.script([Reply::text(
        "{\"interrogative\": \"Could you file a bug before writing code?\", \"passive\": \"A bug should be filed before code is written.\"}",
    )]);
    let tools = Tools::new(&config(&[&f.url])).unwrap();
    let generated = tools
        .generate_variants(
            "File a bug before writing code",
            "gen",
            &["mood".into(), "voice".into()],
            0.3,
            512,
        )
        .await
        .unwrap();
    let variants: indexmap::IndexMap<String, String> =
        serde_json::from_value(generated["variants"].clone()).unwrap();
    let distances = tools
        .analyze_variants(&variants, "imperative", "bug_first")
        .await
        .unwrap();
    assert_eq!(distances["variants_count"], 3);
    for label in ["interrogative", "passive"] {
        assert!(distances["from_baseline"][label].as_f64().unwrap() > 0.0);
    }
    for (label, text) in &variants {
        f.script([
            Reply::text(&format!("Filed a bug ({label}).")),
            Reply::text("{\"pass\": true, \"reason\": \"filed\"}"),
        ]);
        let response = tools
            .complete(
                "gen",
                vec![
                    json!({"role": "system", "content": text}),
                    json!({"role": "user", "content": "Fix the login bug"}),
                ],
                CompleteOptions::default(),
            )
            .await
            .unwrap();
        let verdict = tools
            .judge(&response, "A bug is filed first", "judge", 0.1, 256)
            .await
            .unwrap();
        assert!(verdict.pass, "{label}");
    }
}

#[tokio::test]
async fn circular_reasoning_detection() {
    let tools = Tools::new(&config(&[])).unwrap();
    let circular = "The plan works because it is a good plan. The plan works because it is a good plan. \
                    The plan works because it is a good plan. The plan works because it is a good plan.";
    let t = tools
        .analyze_trajectory(circular, &TrajectoryOptions::default())
        .await
        .unwrap();
    let flagged =
        t["heller_score"].as_f64().unwrap() > 0.5 || t["tautology_density"].as_f64().unwrap() > 0.3;
    assert!(flagged, "{t}");
    let varied = "Rust compiles to native code. Penguins live in Antarctica. Interest rates rose in May. \
                  The violin has four strings.";
    let t = tools
        .analyze_trajectory(varied, &TrajectoryOptions::default())
        .await
        .unwrap();
    assert!(t["tautology_density"].as_f64().unwrap() <= 0.3, "{t}");
}
