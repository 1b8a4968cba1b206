//! The run loop against a fake backend and scripted models: routing, parallel calls, rejection,
//! corrective retry, dry-run, traces, sessions, halts and the cost ceiling.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use futures::future::BoxFuture;
use parking_lot::Mutex;
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use toolforge_agent::halt::HaltReason;
use toolforge_agent::{
    Agent, AgentConfig, MemorySessions, RecordKind, RunRequest, RunResult, ToolBackend,
    ToolFailure, ToolOutput, TraceRecord, TraceSink,
};
use toolforge_llm::{
    BoundSource, Content, InputBound, Model, ModelError, ModelRequest, ModelResponse, StopReason,
    Usage, counted_bound,
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
async fn verbose_traces_carry_the_arguments_redacted() {
    const KEY: &str = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    let backend = Arc::new(FakeBackend::default());
    let model = Arc::new(Scripted::new(vec![vec![call(
        "a",
        "read_file",
        json!({"path": format!("/tmp/{KEY}")}),
    )]]));
    let config = AgentConfig {
        trace_verbose: true,
        ..AgentConfig::default()
    };
    let (agent, dir) = agent_with(backend, model, config).await;
    let r = agent.run(request("Read the file"), None).await;
    assert_eq!(r.steps.len(), 1, "{r:?}");
    let t = traces(&agent, &dir).await;
    let arguments = t[0].arguments.as_ref().expect("TRACE_VERBOSE: arguments");
    assert_eq!(arguments["path"], "/tmp/[REDACTED:github_token]");
    let file = std::fs::read_to_string(dir.path().join("logs/traces.jsonl")).unwrap();
    assert!(!file.contains(KEY), "{file}");
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
    assert_eq!(t.len(), 4, "three tool calls, then the answer's model call");
    assert!(
        t.iter()
            .all(|x| x.schema_version == "2" && x.session_id == r.session_id)
    );
    assert!(t[..3].iter().all(|x| x.kind == RecordKind::ToolCall));
    assert_eq!(t[3].kind, RecordKind::ModelCall);
    assert_eq!((t[3].step, t[3].tokens_in, t[3].tokens_out), (2, 100, 20));
    assert!(t[3].server.is_none() && !t[3].executed);
    assert_eq!(t[2].attempt, 3);
    assert_eq!(t[2].retries, 2);
    assert_eq!(t[2].retry_reason.as_deref(), Some("request timeout"));
    assert!(
        t[0].arguments.is_none(),
        "arguments only with TRACE_VERBOSE"
    );
    // Tokens and cost of the first response are split evenly over its three calls.
    let sum_in: u64 = t[..3].iter().map(|x| x.tokens_in).sum();
    assert_eq!(sum_in, 100);
    let traced: f64 = t.iter().map(|x| x.cost_usd).sum();
    assert!(
        (traced - r.cost_usd).abs() < 1e-8,
        "{traced} vs {}",
        r.cost_usd
    );
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
    assert_eq!(t.len(), 2, "the planned call, then the answer's model call");
    assert!(!t[0].executed && t[0].dry_run && t[0].success);
    assert!(t[1].kind == RecordKind::ModelCall && t[1].dry_run);
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
    assert_eq!(r.halt_reason, Some(HaltReason::ServersUnavailable));
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
    assert_eq!(r.halt_reason, Some(HaltReason::MaxSteps));
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
                // Bounded by bytes, the long paths would reach the default ceiling.
                ceiling_usd: 10.0,
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
    assert_eq!(
        lines.len(),
        16 * 6,
        "five tool calls and one answer per run"
    );
    for l in lines {
        let r: TraceRecord = serde_json::from_str(l).unwrap();
        assert_eq!(r.arguments.is_some(), r.kind == RecordKind::ToolCall);
    }
}

/// A provider that bills adversarially: every input token up to the bound the guard could have
/// sized the call with (the byte bound, or its own count plus the margin when it counts), split
/// at random over uncached, cache-write and cache-read input, and output up to `max_tokens`.
/// Now and then it answers instead of calling a tool.
struct AdversarialBiller {
    /// (input share, output share, cache-write share of input, answer now?)
    rolls: Mutex<Vec<(f64, f64, f64, bool)>>,
    /// When set, it counts tokens: this share of the byte bound.
    counts: Option<f64>,
    calls: AtomicU32,
}

impl AdversarialBiller {
    fn bound(&self, request: &ModelRequest) -> InputBound {
        match self.counts {
            Some(share) => {
                let upper = InputBound::upper(request).tokens;
                counted_bound(request, (upper as f64 * share) as u64)
            }
            None => InputBound::upper(request),
        }
    }
}

impl Model for AdversarialBiller {
    fn provider(&self) -> &'static str {
        "mock"
    }
    fn model(&self) -> &str {
        "claude-sonnet-4-6"
    }
    fn input_bound<'a>(&'a self, request: &'a ModelRequest) -> BoxFuture<'a, InputBound> {
        let bound = self.bound(request);
        Box::pin(async move { bound })
    }
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) as usize;
        let (fin, fout, fwrite, answer) = {
            let rolls = self.rolls.lock();
            rolls[n % rolls.len()]
        };
        let input = (self.bound(request).tokens as f64 * fin) as u64;
        let written = (input as f64 * fwrite) as u64;
        let output = (f64::from(request.max_tokens) * fout) as u64;
        let usage = Usage {
            input_tokens: (input - written) / 2,
            output_tokens: output,
            cache_creation_input_tokens: written,
            cache_read_input_tokens: input - written - (input - written) / 2,
        };
        Box::pin(async move {
            let content = if answer {
                vec![Content::text(r#"{"answer": "done"}"#)]
            } else {
                vec![call(
                    &format!("c{n}"),
                    "list_directory",
                    json!({"path": "/"}),
                )]
            };
            Ok(ModelResponse {
                stop_reason: if answer {
                    StopReason::EndTurn
                } else {
                    StopReason::ToolUse
                },
                content,
                usage,
                model: "claude-sonnet-4-6".into(),
            })
        })
    }
}

/// A share that is often exactly the worst case.
fn share() -> impl Strategy<Value = f64> {
    prop_oneof![Just(1.0), Just(0.0), 0.0f64..=1.0]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    #[test]
    fn spend_never_passes_the_ceiling(
        ceiling in 0.0005f64..0.2,
        max_tokens in 1u32..8192,
        rolls in proptest::collection::vec((share(), share(), share(), proptest::bool::weighted(0.1)), 1..8),
        counts in proptest::option::of(0.05f64..=1.0),
        history in 0usize..4,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let result = rt.block_on(async {
            let model = Arc::new(AdversarialBiller { rolls: Mutex::new(rolls), counts, calls: AtomicU32::new(0) });
            let config = AgentConfig { ceiling_usd: ceiling, max_tokens, max_steps: 30, ..AgentConfig::default() };
            let agent = Agent::new(
                Arc::new(FakeBackend::default()),
                model,
                Arc::new(MemorySessions::default()),
                TraceSink::disabled(),
                config,
            );
            let mut req = request("list the root again and again");
            req.prior = (0..history).map(|i| toolforge_llm::Message::user("earlier turn ".repeat(200 * i))).collect();
            agent.run(req, None).await
        });
        prop_assert!(result.cost_usd <= ceiling, "spent {} > {}", result.cost_usd, ceiling);
        let step_cost: f64 = result.steps.iter().map(|s| s.cost_usd).sum();
        prop_assert!(step_cost <= result.cost_usd + 1e-9);
        if result.halted {
            prop_assert!(matches!(result.halt_reason, Some(HaltReason::CostCeiling | HaltReason::MaxSteps | HaltReason::MaxTokens)), "{:?}", result.halt_reason);
        }
    }
}

/// Counts the count requests; bills exactly its count.
struct Counter {
    asked: AtomicU32,
}

impl Model for Counter {
    fn provider(&self) -> &'static str {
        "mock"
    }
    fn model(&self) -> &str {
        "claude-sonnet-4-6"
    }
    fn input_bound<'a>(&'a self, request: &'a ModelRequest) -> BoxFuture<'a, InputBound> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let bound = counted_bound(request, 50);
        Box::pin(async move { bound })
    }
    fn complete<'a>(
        &'a self,
        _request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            Ok(ModelResponse {
                content: vec![Content::text(r#"{"answer": "done"}"#)],
                stop_reason: StopReason::EndTurn,
                usage: Usage {
                    input_tokens: 50,
                    output_tokens: 10,
                    ..Usage::default()
                },
                model: "claude-sonnet-4-6".into(),
            })
        })
    }
}

#[tokio::test]
async fn tokens_are_counted_only_when_the_byte_bound_does_not_fit() {
    // A generous ceiling: the byte bound pays the whole max_tokens, nobody is asked.
    let model = Arc::new(Counter {
        asked: AtomicU32::new(0),
    });
    let (agent, _dir) = agent_with(
        Arc::new(FakeBackend::default()),
        model.clone(),
        AgentConfig::default(),
    )
    .await;
    let r = agent.run(request("hello"), None).await;
    assert!(!r.halted, "{r:?}");
    assert_eq!(model.asked.load(Ordering::SeqCst), 0);

    // A ceiling the byte bound cannot pay (about 2,000 tokens of tools and prompt at $3.75 per
    // million is $0.0075), but the count can: the call is made, sized from the count.
    let model = Arc::new(Counter {
        asked: AtomicU32::new(0),
    });
    let config = AgentConfig {
        ceiling_usd: 0.002,
        ..AgentConfig::default()
    };
    let (agent, _dir) = agent_with(Arc::new(FakeBackend::default()), model.clone(), config).await;
    let r = agent.run(request("hello"), None).await;
    assert_eq!(model.asked.load(Ordering::SeqCst), 1);
    assert!(!r.halted, "{r:?}");
    assert_eq!(r.response, "done");
    assert!(r.cost_usd <= 0.002);
    let _ = BoundSource::Counted;
}

/// Bills 20,000 input tokens whatever it is sent, and counts 20,000 when asked; always calls a
/// tool.
struct Overbiller {
    calls: AtomicU32,
}

impl Model for Overbiller {
    fn provider(&self) -> &'static str {
        "mock"
    }
    fn model(&self) -> &str {
        "claude-sonnet-4-6"
    }
    fn input_bound<'a>(&'a self, request: &'a ModelRequest) -> BoxFuture<'a, InputBound> {
        let bound = counted_bound(request, 20_000);
        Box::pin(async move { bound })
    }
    fn complete<'a>(
        &'a self,
        _request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            Ok(ModelResponse {
                content: vec![call(
                    &format!("c{n}"),
                    "list_directory",
                    json!({"path": "/"}),
                )],
                stop_reason: StopReason::ToolUse,
                usage: Usage {
                    input_tokens: 20_000,
                    output_tokens: 100,
                    ..Usage::default()
                },
                model: "claude-sonnet-4-6".into(),
            })
        })
    }
}

/// The regression: after the provider billed more input than the byte bound, the next call
/// was sized from the byte bound again although the provider's own count was ten times larger:
/// a second call went out and $0.123 was spent under a $0.10 ceiling. Now the first bill past
/// its bound makes every later bound the largest figure seen, and the run halts at the ceiling.
#[tokio::test]
async fn a_bill_past_the_byte_bound_bounds_every_later_call() {
    let model = Arc::new(Overbiller {
        calls: AtomicU32::new(0),
    });
    let config = AgentConfig {
        ceiling_usd: 0.10,
        max_steps: 10,
        ..AgentConfig::default()
    };
    let (agent, _dir) = agent_with(Arc::new(FakeBackend::default()), model.clone(), config).await;
    let r = agent
        .run(request("list the root again and again"), None)
        .await;
    assert_eq!(model.calls.load(Ordering::SeqCst), 1, "{r:?}");
    assert_eq!(r.halt_reason, Some(HaltReason::CostCeiling), "{r:?}");
    // The one call: 20,000 input tokens at $3 and 100 output tokens at $15 per million.
    assert!((r.cost_usd - 0.0615).abs() < 1e-9, "{}", r.cost_usd);
}

/// Runs, halts and dry runs: the trace holds every billed dollar.
#[tokio::test]
async fn the_trace_holds_every_billed_dollar() {
    let backend = Arc::new(FakeBackend::default());
    let dir = tempfile::tempdir().unwrap();
    let sink = TraceSink::open(&dir.path().join("t.jsonl")).await.unwrap();
    let tool_turn = |i: usize| {
        vec![
            call(&format!("a{i}"), "list_directory", json!({"path": "/"})),
            call(&format!("b{i}"), "list_directory", json!({"path": "/tmp"})),
            call(&format!("c{i}"), "read_file", json!({"path": "/etc"})),
        ]
    };
    let mut total = 0.0;
    let mut runs = 0;
    for (turns, config, dry_run) in [
        // Answers at once (no tool call at all).
        (vec![], AgentConfig::default(), false),
        // Three calls per turn, then an answer.
        (
            (0..2).map(tool_turn).collect(),
            AgentConfig::default(),
            false,
        ),
        // The same, planned only.
        (
            (0..2).map(tool_turn).collect(),
            AgentConfig::default(),
            true,
        ),
        // Halted by the step cap.
        (
            (0..5).map(tool_turn).collect(),
            AgentConfig {
                max_steps: 2,
                ..AgentConfig::default()
            },
            false,
        ),
        // Halted by the ceiling after some spend.
        (
            (0..50).map(tool_turn).collect(),
            AgentConfig {
                ceiling_usd: 0.05,
                ..AgentConfig::default()
            },
            false,
        ),
    ] {
        let mut model = Scripted::new(turns);
        model.usage = Usage {
            input_tokens: 1234,
            output_tokens: 77,
            cache_creation_input_tokens: 511,
            cache_read_input_tokens: 1999,
        };
        let agent = Agent::new(
            backend.clone(),
            Arc::new(model),
            Arc::new(MemorySessions::default()),
            sink.clone(),
            config,
        );
        let mut req = request("list /");
        req.dry_run = dry_run;
        let r = agent.run(req, None).await;
        assert!(r.cost_usd > 0.0);
        total += r.cost_usd;
        runs += 1;
    }
    assert_eq!(runs, 5);
    sink.flush().await;
    let text = std::fs::read_to_string(dir.path().join("t.jsonl")).unwrap();
    let records: Vec<TraceRecord> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let traced: f64 = records.iter().map(|r| r.cost_usd).sum();
    assert!(
        (traced - total).abs() < 1e-8,
        "traced ${traced} but the responses billed ${total}"
    );
    assert!(records.iter().any(|r| r.kind == RecordKind::ModelCall));
    assert!(
        records
            .iter()
            .any(|r| r.kind == RecordKind::ToolCall && r.dry_run)
    );
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn fail_closed_refuses_to_run_while_the_trace_cannot_be_written() {
    let sink = TraceSink::open(std::path::Path::new("/dev/full"))
        .await
        .unwrap();
    let model = Arc::new(Scripted::new(vec![vec![call(
        "a",
        "list_directory",
        json!({"path": "/"}),
    )]]));
    let backend = Arc::new(FakeBackend::default());
    let agent = Agent::new(
        backend.clone(),
        model.clone(),
        Arc::new(MemorySessions::default()),
        sink.clone(),
        AgentConfig {
            trace_fail_closed: true,
            ..AgentConfig::default()
        },
    );
    // The first run learns it at its first record: it stops before the next model call.
    let r = agent.run(request("list /"), None).await;
    assert_eq!(r.halt_reason, Some(HaltReason::TraceUnavailable), "{r:?}");
    assert!(
        r.error
            .as_deref()
            .unwrap()
            .contains("trace file cannot be written")
    );
    assert_eq!(model.seen.lock().len(), 1);
    assert_eq!(backend.calls.lock().len(), 1);
    // The next run is refused before any model or tool call.
    let r = agent.run(request("list /"), None).await;
    assert_eq!(r.halt_reason, Some(HaltReason::TraceUnavailable));
    assert!(r.error.as_deref().unwrap().contains("Nothing was run"));
    assert_eq!(model.seen.lock().len(), 1);
    assert_eq!(backend.calls.lock().len(), 1);
    assert!(sink.lost_records() >= 1);
}

/// The wire formats a run produces, pinned: the `/chat` response body (`RunResult`) and the
/// trace records (schema "1" plus `kind`). A change to either is a change for every reader
/// (clients, `cost-report`, dashboards) and shows up here as a snapshot diff. Values that vary
/// per run (session id, times, latencies) are redacted.
#[tokio::test]
async fn wire_formats_of_a_run_and_its_trace() {
    let backend = Arc::new(FakeBackend::default());
    let model = Arc::new(Scripted::new(vec![vec![
        Content::text("Reading."),
        call("a", "read_file", json!({"path": "README.md"})),
    ]]));
    let (agent, dir) = agent_with(backend, model, AgentConfig::default()).await;
    let mut req = request("Use the fs server to read README.md");
    req.session_id = Some("wire-1".into());
    let r = agent.run(req, None).await;
    let records = traces(&agent, &dir).await;
    insta::assert_json_snapshot!("run_result", r, {
        ".**.latency_ms" => "[latency]",
        ".**.duration_ms" => "[duration]",
    });
    insta::assert_json_snapshot!("trace_records", records, {
        "[].timestamp" => "[timestamp]",
        "[].latency_ms" => "[latency]",
        "[].prev_hash" => "[prev_hash]",
    });
}
