//! The run loop against a fake backend and scripted models: routing, parallel calls, rejection,
//! corrective retry, dry-run, traces, sessions, halts and the cost ceiling.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use futures::future::BoxFuture;
use parking_lot::Mutex;
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use toolforge_agent::{
    Agent, AgentConfig, MemorySessions, RunRequest, RunResult, ToolBackend, ToolFailure,
    ToolOutput, TraceRecord, TraceSink,
};
use toolforge_llm::{
    Content, Model, ModelError, ModelRequest, ModelResponse, StopReason, Usage,
    estimate_input_tokens,
};
use toolforge_select::{Catalog, ServerEntry, Tool, ToolId};

fn tool(server: &str, name: &str, description: &str, schema: Value) -> Tool {
    let mut def = Map::new();
    def.insert("name".into(), json!(name));
    def.insert("description".into(), json!(description));
    def.insert("inputSchema".into(), schema);
    Tool::from_mcp(server, def, &[]).unwrap()
}

/// Two servers that both offer `read_file` (an overlap group), plus a tool of their own each.
fn catalog() -> Catalog {
    let path = json!({"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false});
    let gh = json!({"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"path":{"type":"string"}},"required":["owner","repo","path"]});
    Catalog::new(
        vec![
            ServerEntry {
                name: "filesystem".into(),
                tags: vec![],
                aliases: vec!["fs".into()],
                tools: vec![
                    tool("filesystem", "read_file", "Read a file from the local disk.", path.clone()),
                    tool("filesystem", "list_directory", "List a directory.", path),
                ],
            },
            ServerEntry {
                name: "github".into(),
                tags: vec![],
                aliases: vec![],
                tools: vec![
                    tool("github", "read_file", "Read a file from a GitHub repository.", gh),
                    tool(
                        "github",
                        "list_commits",
                        "List commits.",
                        json!({"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"}},"required":["owner","repo"]}),
                    ),
                ],
            },
        ],
        vec![],
    )
    .unwrap()
}

#[derive(Default)]
struct FakeBackend {
    calls: Mutex<Vec<(String, String, Value)>>,
    down: Vec<String>,
    /// Fail the test on any call (proves dry-run never executes).
    forbid_calls: bool,
}

impl ToolBackend for FakeBackend {
    fn catalog(&self) -> Catalog {
        catalog()
    }
    fn unavailable(&self) -> Vec<String> {
        self.down.clone()
    }
    fn call<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        arguments: Map<String, Value>,
        _cancel: Option<CancellationToken>,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolFailure>> {
        assert!(!self.forbid_calls, "a tool was called: {server}/{tool}");
        self.calls
            .lock()
            .push((server.into(), tool.into(), Value::Object(arguments.clone())));
        Box::pin(async move {
            if server == "github" && tool == "list_commits" {
                return Err(ToolFailure {
                    error: "server \"github\" did not answer within 1s".into(),
                    attempts: 3,
                    retry_reason: Some("request timeout".into()),
                });
            }
            Ok(ToolOutput {
                text: format!("contents of {}", arguments["path"]),
                structured: None,
                is_error: false,
                attempts: 1,
                retry_reason: None,
            })
        })
    }
}

/// A model that plays a fixed list of turns (an empty turn answers), then answers "done".
struct Scripted {
    turns: Mutex<Vec<Vec<Content>>>,
    usage: Usage,
    seen: Mutex<Vec<ModelRequest>>,
}

impl Scripted {
    fn new(turns: Vec<Vec<Content>>) -> Self {
        Self {
            turns: Mutex::new(turns.into_iter().rev().collect()),
            usage: Usage {
                input_tokens: 100,
                output_tokens: 20,
                ..Usage::default()
            },
            seen: Mutex::new(Vec::new()),
        }
    }
}

fn call(id: &str, name: &str, input: Value) -> Content {
    Content::ToolUse {
        id: id.into(),
        name: name.into(),
        input,
    }
}

impl Model for Scripted {
    fn provider(&self) -> &'static str {
        "mock"
    }
    fn model(&self) -> &str {
        "claude-sonnet-4-6"
    }
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        self.seen.lock().push(request.clone());
        let turn = self.turns.lock().pop();
        let usage = self.usage;
        Box::pin(async move {
            Ok(match turn {
                Some(content) if !content.is_empty() => ModelResponse {
                    content,
                    stop_reason: StopReason::ToolUse,
                    usage,
                    model: "claude-sonnet-4-6".into(),
                },
                // An empty turn, or none left: the final answer.
                _ => ModelResponse {
                    content: vec![Content::text(
                        r#"{"answer": "done", "key_facts": {"files": 2}}"#,
                    )],
                    stop_reason: StopReason::EndTurn,
                    usage,
                    model: "claude-sonnet-4-6".into(),
                },
            })
        })
    }
}

async fn agent_with(
    backend: Arc<FakeBackend>,
    model: Arc<dyn Model>,
    config: AgentConfig,
) -> (Agent, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let sink = TraceSink::open(&dir.path().join("logs/traces.jsonl"))
        .await
        .unwrap();
    let agent = Agent::new(
        backend,
        model,
        Arc::new(MemorySessions::default()),
        sink,
        config,
    );
    (agent, dir)
}

async fn traces(agent: &Agent, dir: &tempfile::TempDir) -> Vec<TraceRecord> {
    agent.traces().flush().await;
    let text = std::fs::read_to_string(dir.path().join("logs/traces.jsonl")).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l}: {e}")))
        .collect()
}

fn request(message: &str) -> RunRequest {
    RunRequest {
        message: message.into(),
        ..RunRequest::default()
    }
}

#[tokio::test]
async fn parallel_calls_are_routed_executed_and_traced() {
    let backend = Arc::new(FakeBackend::default());
    let model = Arc::new(Scripted::new(vec![vec![
        Content::text("Reading both."),
        call("a", "read_file", json!({"path": "README.md"})),
        call(
            "b",
            "read_file",
            json!({"owner": "o", "repo": "r", "path": "SECURITY.md"}),
        ),
        call("c", "list_commits", json!({"owner": "o", "repo": "r"})),
    ]]));
    let (agent, dir) = agent_with(backend.clone(), model.clone(), AgentConfig::default()).await;
    let r: RunResult = agent
        .run(request("Use the fs server to read README.md"), None)
        .await;
    assert!(!r.halted, "{r:?}");
    assert_eq!(r.response, "done");
    assert_eq!(r.key_facts, json!({"files": 2}));
    assert_eq!(r.steps.len(), 3);
    // explicit-mention picks filesystem through its alias; the GitHub-shaped call validates only
    // against github's schema.
    assert_eq!(r.steps[0].server.as_deref(), Some("filesystem"));
    assert_eq!(
        r.steps[0].selection_rule.as_deref(),
        Some("explicit-mention")
    );
    assert_eq!(r.steps[0].alternatives, vec!["github"]);
    assert_eq!(r.steps[1].server.as_deref(), Some("filesystem"));
    assert_eq!(
        r.steps[2].selection_rule.as_deref(),
        Some("single-candidate")
    );
    assert!(!r.steps[2].success);
    assert!(
        !r.steps[1].executed,
        "filesystem's schema rejects the GitHub-shaped arguments"
    );
    assert_eq!(backend.calls.lock().len(), 2);
    let t = traces(&agent, &dir).await;
    assert_eq!(t.len(), 3);
    assert!(
        t.iter()
            .all(|x| x.schema_version == "1" && x.session_id == r.session_id)
    );
    assert_eq!(t[2].attempt, 3);
    assert_eq!(t[2].retries, 2);
    assert_eq!(t[2].retry_reason.as_deref(), Some("request timeout"));
    assert!(
        t[0].arguments.is_none(),
        "arguments only with TRACE_VERBOSE"
    );
    // Tokens and cost of the response are split evenly over its three calls.
    let sum_in: u64 = t.iter().map(|x| x.tokens_in).sum();
    assert_eq!(sum_in, 100);
    // The same tools, in the same order, on both model calls (the cached prefix).
    let seen = model.seen.lock();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].tools, seen[1].tools);
    assert!(seen[0].cache);
}

#[tokio::test]
async fn unknown_tools_are_rejected_and_bad_arguments_get_one_corrective_retry() {
    let backend = Arc::new(FakeBackend::default());
    let model = Arc::new(Scripted::new(vec![
        vec![call("a", "delete_everything", json!({}))],
        vec![call("b", "list_directory", json!({"dir": "/"}))],
        vec![call("c", "list_directory", json!({"path": "/"}))],
    ]));
    let (agent, dir) = agent_with(backend.clone(), model.clone(), AgentConfig::default()).await;
    let r = agent.run(request("list the root"), None).await;
    assert_eq!(r.steps.len(), 3);
    let t = traces(&agent, &dir).await;
    assert_eq!(t[0].tool, "delete_everything");
    assert!(!t[0].executed && !t[0].success);
    assert!(t[0].error.as_deref().unwrap().contains("unknown tool"));
    assert!(!t[1].executed && t[1].error.as_deref().unwrap().contains("path"));
    assert!(!t[1].corrective_retry);
    assert!(t[2].executed && t[2].success && t[2].corrective_retry);
    assert_eq!(backend.calls.lock().len(), 1);
    // The model was told, with the schema.
    let seen = model.seen.lock();
    let told = serde_json::to_string(&seen[2].messages.last().unwrap().content).unwrap();
    assert!(told.contains("do not match the input schema"), "{told}");
}

#[tokio::test]
async fn dry_run_never_calls_a_tool_and_never_feeds_recency() {
    let backend = Arc::new(FakeBackend {
        forbid_calls: true,
        down: vec!["filesystem".into(), "github".into()],
        ..FakeBackend::default()
    });
    let model = Arc::new(Scripted::new(vec![vec![call(
        "a",
        "read_file",
        json!({"path": "README.md"}),
    )]]));
    let (agent, dir) = agent_with(backend.clone(), model, AgentConfig::default()).await;
    let mut req = request("read README.md");
    req.dry_run = true;
    req.session_id = Some("s1".into());
    let r = agent.run(req, None).await;
    assert!(
        !r.halted,
        "servers being down does not stop a dry run: {r:?}"
    );
    assert!(r.dry_run);
    let t = traces(&agent, &dir).await;
    assert_eq!(t.len(), 1);
    assert!(!t[0].executed && t[0].dry_run && t[0].success);
    assert_eq!(t[0].server.as_deref(), Some("filesystem"));
    assert!(agent.sessions().history("s1").await.is_empty());
}

#[tokio::test]
async fn down_servers_halt_a_real_run() {
    let backend = Arc::new(FakeBackend {
        forbid_calls: true,
        down: vec!["filesystem".into(), "github".into()],
        ..FakeBackend::default()
    });
    let model = Arc::new(Scripted::new(vec![]));
    let (agent, _dir) = agent_with(backend, model.clone(), AgentConfig::default()).await;
    let r = agent.run(request("read README.md"), None).await;
    assert_eq!(r.halt_reason.as_deref(), Some("servers_unavailable"));
    assert!(r.error.unwrap().contains("filesystem, github"));
    assert!(
        model.seen.lock().is_empty(),
        "no model call when nothing can run"
    );
}

#[tokio::test]
async fn session_recency_carries_across_requests() {
    let backend = Arc::new(FakeBackend::default());
    let model = Arc::new(Scripted::new(vec![
        vec![call(
            "a",
            "read_file",
            json!({"owner": "o", "repo": "r", "path": "a.md"}),
        )],
        vec![],
        // Neither schema accepts a numeric path, so argument-type keeps both and the session's
        // last server decides.
        vec![call("b", "read_file", json!({"path": 5}))],
    ]));
    let (agent, _dir) = agent_with(backend, model, AgentConfig::default()).await;
    let mut first = request("read a.md");
    first.session_id = Some("sess".into());
    let r1 = agent.run(first.clone(), None).await;
    assert_eq!(r1.steps.len(), 1, "{r1:?}");
    assert_eq!(r1.steps[0].selection_rule.as_deref(), Some("argument-type"));
    assert_eq!(r1.steps[0].server.as_deref(), Some("github"));
    let r2 = agent.run(first, None).await;
    assert_eq!(r2.session_id, "sess");
    assert_eq!(
        r2.steps[0].selection_rule.as_deref(),
        Some("session-recency")
    );
    assert_eq!(r2.steps[0].server.as_deref(), Some("github"));
    assert!(!r2.steps[0].executed, "invalid arguments are never sent");
    assert_eq!(
        agent.sessions().history("sess").await,
        vec![ToolId::new("github", "read_file")]
    );
}

#[tokio::test]
async fn max_steps_halts_with_partial_output() {
    let backend = Arc::new(FakeBackend::default());
    let turns = (0..10)
        .map(|i| {
            vec![call(
                &format!("c{i}"),
                "list_directory",
                json!({"path": "/"}),
            )]
        })
        .collect();
    let model = Arc::new(Scripted::new(turns));
    let config = AgentConfig {
        max_steps: 3,
        ..AgentConfig::default()
    };
    let (agent, _dir) = agent_with(backend, model, config).await;
    let r = agent.run(request("list"), None).await;
    assert!(r.halted);
    assert_eq!(r.halt_reason.as_deref(), Some("max_steps"));
    assert_eq!(r.steps.len(), 3);
    assert!(
        r.response
            .starts_with("Halted (max_steps). Completed so far")
    );
}

#[tokio::test]
async fn concurrent_runs_write_whole_lines() {
    let backend = Arc::new(FakeBackend::default());
    let dir = tempfile::tempdir().unwrap();
    let sink = TraceSink::open(&dir.path().join("t.jsonl")).await.unwrap();
    let mut handles = Vec::new();
    for i in 0..16 {
        let turns = (0..5)
            .map(|j| {
                vec![call(
                    &format!("c{j}"),
                    "list_directory",
                    json!({"path": format!("/{i}/{j}/{}", "x".repeat(3000))}),
                )]
            })
            .collect();
        let agent = Arc::new(Agent::new(
            backend.clone(),
            Arc::new(Scripted::new(turns)),
            Arc::new(MemorySessions::default()),
            sink.clone(),
            AgentConfig {
                trace_verbose: true,
                ..AgentConfig::default()
            },
        ));
        handles.push(tokio::spawn(
            async move { agent.run(request("go"), None).await },
        ));
    }
    for h in handles {
        h.await.unwrap();
    }
    sink.flush().await;
    let text = std::fs::read_to_string(dir.path().join("t.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 16 * 5);
    for l in lines {
        let r: TraceRecord = serde_json::from_str(l).unwrap();
        assert!(r.arguments.is_some());
    }
}

/// A model that keeps calling tools and reports random usage within what a provider may
/// bill: input no more than the estimate, output no more than `max_tokens`.
struct RandomSpender {
    rolls: Mutex<Vec<(f64, f64, f64)>>,
    calls: AtomicU32,
}

impl Model for RandomSpender {
    fn provider(&self) -> &'static str {
        "mock"
    }
    fn model(&self) -> &str {
        "claude-sonnet-4-6"
    }
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) as usize;
        let (fin, fout, fcache) = {
            let rolls = self.rolls.lock();
            rolls[n % rolls.len()]
        };
        let est = estimate_input_tokens(request);
        let input = (est as f64 * fin) as u64;
        let cached = (input as f64 * fcache) as u64;
        let output = (f64::from(request.max_tokens) * fout) as u64;
        Box::pin(async move {
            Ok(ModelResponse {
                content: vec![call(
                    &format!("c{n}"),
                    "list_directory",
                    json!({"path": "/"}),
                )],
                stop_reason: StopReason::ToolUse,
                usage: Usage {
                    input_tokens: input - cached,
                    output_tokens: output,
                    cache_creation_input_tokens: cached / 2,
                    cache_read_input_tokens: cached - cached / 2,
                },
                model: "claude-sonnet-4-6".into(),
            })
        })
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn spend_never_passes_the_ceiling(
        ceiling in 0.0005f64..0.2,
        max_tokens in 1u32..8192,
        rolls in proptest::collection::vec((0.0f64..=1.0, 0.0f64..=1.0, 0.0f64..=1.0), 1..8),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let result = rt.block_on(async {
            let model = Arc::new(RandomSpender { rolls: Mutex::new(rolls), calls: AtomicU32::new(0) });
            let config = AgentConfig { ceiling_usd: ceiling, max_tokens, max_steps: 30, ..AgentConfig::default() };
            let agent = Agent::new(
                Arc::new(FakeBackend::default()),
                model,
                Arc::new(MemorySessions::default()),
                TraceSink::disabled(),
                config,
            );
            agent.run(request("list the root again and again"), None).await
        });
        prop_assert!(result.cost_usd <= ceiling + 1e-12, "spent {} > {}", result.cost_usd, ceiling);
        let step_cost: f64 = result.steps.iter().map(|s| s.cost_usd).sum();
        prop_assert!(step_cost <= result.cost_usd + 1e-9);
        if result.halted {
            prop_assert!(matches!(result.halt_reason.as_deref(), Some("cost_ceiling" | "max_steps")));
        }
    }
}
