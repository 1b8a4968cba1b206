//! One ReAct iteration as a pure function: messages rebuilt from the trace, the model's answer
//! turned into trace entries (mock dispatch), pending calls (forwarding) or a final answer.
//!
//! The trace is the canonical record and messages are rebuilt from it on every call, so the
//! step holds no state. The shapes (`ToolCall`, `ReActIteration`) are shared with LAS and kept
//! wire-compatible.
//!
//! Decisions where the contract is loose:
//! - every iteration of one step is numbered `len(trace) + 1` (the model answered once);
//! - mock lookup step 2 compares each argument value, in the model's order, rendered with
//!   Python's `str()` (`True`, `None`, `2.0`, `{'a': 1}`) against the mock keys;
//! - a miss reads `Error: No mock response for <tool>(<args as a Python dict repr>)`;
//! - empty argument text counts as `{}`; other garbled arguments become `{}` with an
//!   `Error: Could not parse tool arguments: …` observation in mock mode, and plain `{}` in
//!   forwarding mode, where the caller decides;
//! - `thought` appears at the top level of forwarding results only (in mock mode it is in each
//!   iteration), and `pending_tool_calls` is always present (empty outside forwarding).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::chat::{Completion, RawToolCall};
use crate::pyjson;

/// The name of the tool a model calls to finish.
pub const DONE: &str = "DONE";

/// Mock responses: tool name → (key → observation).
pub type MockTools = BTreeMap<String, BTreeMap<String, String>>;

/// One tool call (LAS's `ToolCall`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub args: Map<String, Value>,
}

/// One iteration of the trace (LAS's `ReActIteration`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReActIteration {
    pub iteration: i64,
    pub tool_call: ToolCall,
    /// The mock or real tool's answer; starting with `Error:` marks a failure.
    pub observation: String,
    /// True when the call parsed and matched a mock.
    pub success: bool,
    /// The model's text before its tool calls.
    #[serde(default)]
    pub thought: Option<String>,
    #[serde(default)]
    pub latency_ms: f64,
}

/// The chat messages for the next model call: system, goal, then for each iteration the
/// assistant's call (its thought as content) and the tool's observation.
#[must_use]
pub fn build_messages(system_prompt: &str, goal: &str, trace: &[ReActIteration]) -> Vec<Value> {
    let mut messages = vec![
        json!({"role": "system", "content": system_prompt}),
        json!({"role": "user", "content": goal}),
    ];
    for step in trace {
        messages.push(json!({
            "role": "assistant",
            "content": step.thought.clone().unwrap_or_default(),
            "tool_calls": [{
                "id": step.tool_call.id,
                "type": "function",
                "function": {
                    "name": step.tool_call.name,
                    "arguments": pyjson::dumps(&Value::Object(step.tool_call.args.clone())),
                },
            }],
        }));
        messages.push(json!({
            "role": "tool",
            "content": step.observation,
            "tool_call_id": step.tool_call.id,
        }));
    }
    messages
}

/// The mock observation for a call, by the seed's resolution order: exact arguments
/// (`json.dumps(args, sort_keys=True)`), then any argument's value (`str(value)`), then the
/// tool's `_default`, else an `Error:` message.
#[must_use]
pub fn dispatch_mock(name: &str, args: &Map<String, Value>, mocks: &MockTools) -> String {
    let args_value = Value::Object(args.clone());
    let empty = BTreeMap::new();
    let table = mocks.get(name).unwrap_or(&empty);
    if let Some(hit) = table.get(&pyjson::dumps_sorted(&args_value)) {
        return hit.clone();
    }
    for value in args.values() {
        if let Some(hit) = table.get(&pyjson::str_of(value)) {
            return hit.clone();
        }
    }
    if let Some(hit) = table.get("_default") {
        return hit.clone();
    }
    format!(
        "Error: No mock response for {name}({})",
        pyjson::repr(&args_value)
    )
}

/// The arguments as an object, or why they are not one.
fn parse_args(raw: &str) -> Result<Map<String, Value>, String> {
    if raw.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!("Expected dict, got {}", pyjson::type_name(&other))),
        Err(e) => Err(e.to_string()),
    }
}

fn thought_of(text: &str) -> Value {
    if text.is_empty() {
        Value::Null
    } else {
        Value::String(text.to_owned())
    }
}

/// Turns one model answer into the step result. `mock_tools: None` is forwarding mode.
#[must_use]
pub fn step(
    trace_len: usize,
    mock_tools: Option<&MockTools>,
    mut call_counter: i64,
    completion: &Completion,
) -> Value {
    let text = completion.text.as_str();
    let latency = completion.latency_ms;
    let calls: &[RawToolCall] = &completion.tool_calls;

    if calls.is_empty() {
        return json!({
            "completed": true,
            "final_response": text,
            "new_iterations": [],
            "pending_tool_calls": [],
            "call_counter": call_counter,
            "latency_ms": latency,
        });
    }

    // DONE wins over every other call of the step, before forwarding or mock dispatch.
    if let Some(done) = calls.iter().find(|c| c.name == DONE) {
        call_counter += 1;
        let done_args = parse_args(&done.arguments).unwrap_or_default();
        let final_response = match done_args.get("response") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => text.to_owned(),
            Some(other) => other.to_string(),
        };
        return json!({
            "completed": true,
            "final_response": final_response,
            "done_args": done_args,
            "done_trace_entry": {
                "tool_call": {"id": format!("call_{call_counter}"), "name": DONE, "args": done_args},
                "thought": thought_of(text),
            },
            "new_iterations": [],
            "pending_tool_calls": [],
            "call_counter": call_counter,
            "latency_ms": latency,
        });
    }

    let Some(mocks) = mock_tools else {
        let pending: Vec<Value> = calls
            .iter()
            .map(|c| {
                call_counter += 1;
                json!({
                    "id": format!("call_{call_counter}"),
                    "name": c.name,
                    "args": parse_args(&c.arguments).unwrap_or_default(),
                })
            })
            .collect();
        return json!({
            "completed": false,
            "final_response": null,
            "new_iterations": [],
            "pending_tool_calls": pending,
            "call_counter": call_counter,
            "thought": thought_of(text),
            "latency_ms": latency,
        });
    };

    let iteration = i64::try_from(trace_len).unwrap_or(i64::MAX - 1) + 1;
    let thought = (!text.is_empty()).then(|| text.to_owned());
    let mut new_iterations = Vec::new();
    for call in calls {
        call_counter += 1;
        let id = format!("call_{call_counter}");
        let it = match parse_args(&call.arguments) {
            Ok(args) => {
                let observation = dispatch_mock(&call.name, &args, mocks);
                ReActIteration {
                    iteration,
                    success: !observation.starts_with("Error:"),
                    tool_call: ToolCall {
                        id,
                        name: call.name.clone(),
                        args,
                    },
                    observation,
                    thought: thought.clone(),
                    latency_ms: latency,
                }
            }
            Err(why) => ReActIteration {
                iteration,
                tool_call: ToolCall {
                    id,
                    name: call.name.clone(),
                    args: Map::new(),
                },
                observation: format!("Error: Could not parse tool arguments: {why}"),
                success: false,
                thought: thought.clone(),
                latency_ms: latency,
            },
        };
        new_iterations.push(it);
    }
    json!({
        "completed": false,
        "final_response": null,
        "new_iterations": new_iterations,
        "pending_tool_calls": [],
        "call_counter": call_counter,
        "latency_ms": latency,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mocks() -> MockTools {
        serde_json::from_value(json!({
            "read_file": {
                "{\"path\": \"./1.txt\"}": "exact",
                "./2.txt": "by value",
                "_default": "default"
            },
            "flag": {"True": "bool value", "3": "int value"},
            "nest": {"{\"a\": {\"b\": 1, \"c\": [1, 2]}, \"z\": \"\\u00e9\"}": "nested exact"}
        }))
        .unwrap()
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn mock_resolution_order() {
        let m = mocks();
        let check = |name: &str, a: Value, want: &str| {
            assert_eq!(
                dispatch_mock(name, &args(a.clone()), &m),
                want,
                "{name} {a}"
            );
        };
        check("read_file", json!({"path": "./1.txt"}), "exact");
        check(
            "read_file",
            json!({"mode": "r", "path": "./2.txt"}),
            "by value",
        );
        check("read_file", json!({"path": "./9.txt"}), "default");
        check("flag", json!({"on": true}), "bool value");
        check("flag", json!({"n": 3}), "int value");
        check(
            "nest",
            json!({"z": "é", "a": {"c": [1, 2], "b": 1}}),
            "nested exact",
        );
        check(
            "flag",
            json!({"x": "it's", "y": null}),
            "Error: No mock response for flag({'x': \"it's\", 'y': None})",
        );
        check(
            "unknown",
            json!({}),
            "Error: No mock response for unknown({})",
        );
    }

    #[test]
    fn messages_rebuild_from_the_trace() {
        let trace = vec![ReActIteration {
            iteration: 1,
            tool_call: ToolCall {
                id: "call_1".into(),
                name: "read_file".into(),
                args: args(json!({"path": "é", "b": 1})),
            },
            observation: "obs".into(),
            success: true,
            thought: None,
            latency_ms: 0.0,
        }];
        let m = build_messages("sys", "goal", &trace);
        assert_eq!(m.len(), 4);
        assert_eq!(m[2]["content"], "");
        assert_eq!(
            m[2]["tool_calls"][0]["function"]["arguments"],
            "{\"path\": \"\\u00e9\", \"b\": 1}"
        );
        assert_eq!(
            m[3],
            json!({"role": "tool", "content": "obs", "tool_call_id": "call_1"})
        );
    }

    fn completion(text: &str, calls: &[(&str, &str)]) -> Completion {
        Completion {
            text: text.into(),
            tool_calls: calls
                .iter()
                .map(|(n, a)| RawToolCall {
                    name: (*n).into(),
                    arguments: (*a).into(),
                })
                .collect(),
            latency_ms: 12.5,
        }
    }

    #[test]
    fn text_only_completes() {
        let r = step(3, Some(&mocks()), 4, &completion("all done", &[]));
        assert_eq!(
            r,
            json!({"completed": true, "final_response": "all done", "new_iterations": [],
                   "pending_tool_calls": [], "call_counter": 4, "latency_ms": 12.5})
        );
    }

    #[test]
    fn done_wins_and_counts() {
        let c = completion(
            "finished",
            &[
                ("read_file", "{\"path\": \"./1.txt\"}"),
                ("DONE", "{\"status\": \"COMPLETED\", \"response\": \"ok\"}"),
            ],
        );
        let r = step(0, Some(&mocks()), 37, &c);
        assert_eq!(r["completed"], true);
        assert_eq!(r["final_response"], "ok");
        assert_eq!(r["call_counter"], 38);
        assert_eq!(r["done_trace_entry"]["tool_call"]["id"], "call_38");
        assert_eq!(r["done_trace_entry"]["thought"], "finished");
        assert_eq!(r["done_args"]["status"], "COMPLETED");
        let keys: Vec<&String> = r.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "completed",
                "final_response",
                "done_args",
                "done_trace_entry",
                "new_iterations",
                "pending_tool_calls",
                "call_counter",
                "latency_ms"
            ]
        );
        // No `response`: the model's text; garbled DONE args: {}.
        let r = step(0, None, 0, &completion("bye", &[("DONE", "{not json")]));
        assert_eq!(r["final_response"], "bye");
        assert_eq!(r["done_args"], json!({}));
    }

    #[test]
    fn forwarding_returns_pending_calls() {
        let c = completion(
            "",
            &[("calculate_drift", "{\"text_a\": \"a\"}"), ("x", "[1]")],
        );
        let r = step(5, None, 0, &c);
        assert_eq!(
            r,
            json!({"completed": false, "final_response": null, "new_iterations": [],
                   "pending_tool_calls": [
                       {"id": "call_1", "name": "calculate_drift", "args": {"text_a": "a"}},
                       {"id": "call_2", "name": "x", "args": {}}],
                   "call_counter": 2, "thought": null, "latency_ms": 12.5})
        );
    }

    #[test]
    fn mock_mode_numbers_iterations_after_the_trace() {
        let c = completion(
            "thinking",
            &[
                ("read_file", "{\"path\": \"./1.txt\"}"),
                ("read_file", "oops"),
                ("nope", ""),
            ],
        );
        let r = step(2, Some(&mocks()), 10, &c);
        let its = r["new_iterations"].as_array().unwrap();
        assert_eq!(its.len(), 3);
        assert!(
            its.iter()
                .all(|i| i["iteration"] == 3 && i["thought"] == "thinking")
        );
        assert_eq!(its[0]["observation"], "exact");
        assert_eq!(its[0]["success"], true);
        assert_eq!(
            its[1]["tool_call"],
            json!({"id": "call_12", "name": "read_file", "args": {}})
        );
        assert!(
            its[1]["observation"]
                .as_str()
                .unwrap()
                .starts_with("Error: Could not parse tool arguments: ")
        );
        assert_eq!(its[1]["success"], false);
        assert_eq!(
            its[2]["observation"],
            "Error: No mock response for nope({})"
        );
        assert_eq!(r["call_counter"], 13);
        assert!(r.get("thought").is_none());
    }
}
