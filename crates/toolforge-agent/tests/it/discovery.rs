//! Progressive discovery in the run loop, with scripted models and the offline mock: a tool the
//! first offer leaves out is searched for, joins the offer after it (the first offer unchanged)
//! and is called; the search is traced; visibility, policy and exclusions bound what a search
//! finds; dry runs search too; a run adds at most `max_found` tools.

use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use toolforge_agent::discovery::Discovery;
use toolforge_agent::governance::Governance;
use toolforge_agent::trace::Searcher;
use toolforge_agent::{
    Agent, AgentConfig, MemorySessions, RecordKind, RunRequest, RunResult, ToolBackend,
    ToolFailure, ToolOutput, TraceRecord, TraceSink,
};
use toolforge_llm::{
    Content, MockModel, Model, ModelError, ModelRequest, ModelResponse, StopReason, Usage,
};
use toolforge_select::pins::parse_pins;
use toolforge_select::{Catalog, ServerEntry, Tool};

fn tool(server: &str, name: &str, description: &str, required: &[&str]) -> Tool {
    let properties: Map<String, Value> = required
        .iter()
        .map(|p| ((*p).to_owned(), json!({"type": "string"})))
        .collect();
    let mut def = Map::new();
    def.insert("name".into(), json!(name));
    def.insert("description".into(), json!(description));
    def.insert(
        "inputSchema".into(),
        json!({"type": "object", "properties": properties, "required": required}),
    );
    Tool::from_mcp(server, def, &[]).unwrap()
}

fn server(name: &str, tools: Vec<Tool>) -> ServerEntry {
    ServerEntry {
        name: name.into(),
        tags: vec![],
        aliases: vec![],
        tools,
    }
}

fn catalog() -> Catalog {
    Catalog::new(
        vec![
            server(
                "fs",
                vec![
                    tool(
                        "fs",
                        "read_file",
                        "Read a file from the local disk.",
                        &["path"],
                    ),
                    tool(
                        "fs",
                        "write_file",
                        "Write a file to the local disk.",
                        &["path"],
                    ),
                    tool(
                        "fs",
                        "delete_file",
                        "Delete a file from the local disk.",
                        &["path"],
                    ),
                ],
            ),
            server(
                "github",
                vec![
                    tool(
                        "github",
                        "list_commits",
                        "List the commits of a repository.",
                        &["owner", "repo"],
                    ),
                    tool(
                        "github",
                        "list_issues",
                        "List the issues of a repository.",
                        &["owner", "repo"],
                    ),
                    tool(
                        "github",
                        "create_issue",
                        "Open an issue in a repository.",
                        &["owner", "repo"],
                    ),
                ],
            ),
            server(
                "vault",
                vec![tool(
                    "vault",
                    "read_secret",
                    "Read a secret from the vault.",
                    &["path"],
                )],
            ),
        ],
        vec![],
    )
    .unwrap()
}

#[derive(Default)]
pub(super) struct Backend {
    pub(super) calls: Mutex<Vec<String>>,
}

impl ToolBackend for Backend {
    fn catalog(&self) -> Catalog {
        catalog()
    }
    fn unavailable(&self) -> Vec<String> {
        Vec::new()
    }
    fn call<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        _arguments: Map<String, Value>,
        _cancel: Option<CancellationToken>,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolFailure>> {
        self.calls.lock().push(format!("{server}/{tool}"));
        Box::pin(async move {
            Ok(ToolOutput {
                text: format!("{tool} done"),
                structured: None,
                is_error: false,
                attempts: 1,
                retry_reason: None,
            })
        })
    }
}

/// Plays fixed turns (an empty one answers), recording every request.
struct Scripted {
    turns: Mutex<Vec<Vec<Content>>>,
    seen: Mutex<Vec<ModelRequest>>,
}

impl Scripted {
    fn new(turns: Vec<Vec<Content>>) -> Arc<Self> {
        Arc::new(Self {
            turns: Mutex::new(turns.into_iter().rev().collect()),
            seen: Mutex::new(Vec::new()),
        })
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
        let turn = self.turns.lock().pop().unwrap_or_default();
        let usage = Usage {
            input_tokens: 90,
            output_tokens: 30,
            ..Usage::default()
        };
        Box::pin(async move {
            Ok(if turn.is_empty() {
                ModelResponse {
                    content: vec![Content::text(r#"{"answer": "done", "key_facts": {}}"#)],
                    stop_reason: StopReason::EndTurn,
                    usage,
                    model: "claude-sonnet-4-6".into(),
                }
            } else {
                ModelResponse {
                    content: turn,
                    stop_reason: StopReason::ToolUse,
                    usage,
                    model: "claude-sonnet-4-6".into(),
                }
            })
        })
    }
}

fn call(id: &str, name: &str, input: Value) -> Content {
    Content::ToolUse {
        id: id.into(),
        name: name.into(),
        input,
    }
}

/// A first offer of `fs/read_file` alone (pinned, nothing ranked in), plus the search tool.
pub(super) fn config() -> AgentConfig {
    AgentConfig {
        max_tools: 0,
        pins: parse_pins(["fs/read_file"]).unwrap(),
        ..AgentConfig::default()
    }
}

pub(super) async fn run(
    model: Arc<dyn Model>,
    config: AgentConfig,
    request: RunRequest,
    governance: Option<Governance>,
) -> (RunResult, Vec<TraceRecord>, Arc<Backend>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("traces.jsonl");
    let sink = TraceSink::open(&path).await.unwrap();
    let backend = Arc::new(Backend::default());
    let mut agent = Agent::new(
        backend.clone(),
        model,
        Arc::new(MemorySessions::default()),
        sink.clone(),
        config,
    );
    if let Some(g) = governance {
        agent = agent.with_governance(Arc::new(g));
    }
    let result = agent.run(request, None).await;
    sink.flush().await;
    let records = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (result, records, backend)
}

pub(super) fn request(message: &str) -> RunRequest {
    RunRequest {
        message: message.into(),
        ..RunRequest::default()
    }
}

fn names(request: &ModelRequest) -> Vec<&str> {
    request.tools.iter().map(|t| t.name.as_str()).collect()
}

#[tokio::test]
async fn a_tool_left_out_is_found_appended_after_the_first_offer_and_called() {
    let model = Scripted::new(vec![
        vec![
            Content::text("Looking for it."),
            call(
                "s1",
                "search_tools",
                json!({"query": "list commits", "limit": 1}),
            ),
            // Not offered yet: a search in the same turn does not make it callable.
            call("c0", "list_commits", json!({"owner": "o", "repo": "r"})),
        ],
        vec![call(
            "c1",
            "list_commits",
            json!({"owner": "o", "repo": "r"}),
        )],
    ]);
    let (r, t, backend) = run(model.clone(), config(), request("history of o/r"), None).await;
    assert!(!r.halted, "{r:?}");
    assert_eq!(r.offered_tools, ["read_file", "search_tools"]);

    let seen = model.seen.lock();
    assert_eq!(seen.len(), 3);
    assert_eq!(names(&seen[0]), ["read_file", "search_tools"]);
    assert_eq!(
        names(&seen[1]),
        ["read_file", "search_tools", "list_commits"]
    );
    // The first offer is unchanged, byte for byte, and marked stable on every call.
    assert_eq!(seen[1].tools[..2], seen[0].tools[..]);
    assert_eq!(seen[2].tools, seen[1].tools);
    assert!(seen.iter().all(|s| s.stable_tools == 2 && s.cache));
    drop(seen);

    assert_eq!(r.searches.len(), 1);
    let search = &r.searches[0];
    assert_eq!(
        (search.step, search.by, search.query.as_str()),
        (1, Searcher::Agent, "list commits")
    );
    assert_eq!(search.added, ["list_commits"]);
    assert_eq!(r.steps.len(), 2);
    assert!(
        !r.steps[0].executed
            && r.steps[0]
                .error
                .as_deref()
                .unwrap()
                .contains("unknown tool")
    );
    assert!(r.steps[1].executed && r.steps[1].success);
    assert_eq!(*backend.calls.lock(), ["github/list_commits"]);

    let kinds: Vec<RecordKind> = t.iter().map(|x| x.kind).collect();
    assert_eq!(
        kinds,
        [
            RecordKind::ToolSearch,
            RecordKind::ToolCall,
            RecordKind::ToolCall,
            RecordKind::ModelCall
        ]
    );
    // The search record's wire format (schema "2"), pinned like the other kinds'.
    insta::assert_json_snapshot!("search_record", t[0], {
        ".timestamp" => "[timestamp]",
        ".session_id" => "[session]",
        ".prev_hash" => "[prev_hash]",
    });
    insta::assert_json_snapshot!("run_result_searches", r.searches);
    let record = t[0].search.as_ref().unwrap();
    assert_eq!((record.query.as_str(), record.limit), ("list commits", 1));
    assert_eq!(record.added, ["github/list_commits"]);
    assert_eq!(
        (t[0].tool.as_str(), t[0].server.as_ref()),
        ("search_tools", None)
    );
    assert!(!t[0].executed && t[0].success);
    assert!(t.iter().all(|x| x.schema_version == "2"));
    // The turn's cost is split over its search and its call; the trace holds every dollar.
    assert!((t[0].cost_usd - t[1].cost_usd).abs() < 1e-9);
    let traced: f64 = t.iter().map(|x| x.cost_usd).sum();
    assert!(
        (traced - r.cost_usd).abs() < 1e-8,
        "{traced} vs {}",
        r.cost_usd
    );
}

#[tokio::test]
async fn a_search_never_finds_what_visibility_policy_or_an_exclusion_hides() {
    // Visibility hides the vault; the policy lets nobody search create_issue; a rule excludes
    // deleting.
    let hide_vault: toolforge_agent::Visibility =
        Arc::new(|c: &Catalog| c.narrowed(|_, tool| tool.server != "vault", |_| true));
    let policies = toolforge_policy::Policies::parse(
        "@id(\"everyone\") permit(principal, action, resource);\n\
         @id(\"no-issue-search\") forbid(principal, action == Action::\"search\", resource == Tool::\"github/create_issue\");",
    )
    .unwrap();
    let governance = Governance {
        policies: Some(policies),
        limiter: None,
    };
    let rules = toolforge_select::broker::Rules::from_yaml_str(
        "rules:\n- {name: never-delete, intent: '*', priority: 100, match: {tools: ['delete_*']}, action: exclude}\n",
    )
    .unwrap();
    let queries = [
        "read secret",
        "vault",
        "create issue",
        "repository issues",
        "delete file",
    ];
    let turns = queries
        .iter()
        .enumerate()
        .map(|(i, q)| {
            vec![call(
                &format!("s{i}"),
                "search_tools",
                json!({"query": q, "limit": 10}),
            )]
        })
        .chain([vec![
            call("x1", "vault__read_secret", json!({"path": "k"})),
            call("x2", "create_issue", json!({"owner": "o", "repo": "r"})),
            call("x3", "search_tools", json!({"limit": 2})),
        ]])
        .collect();
    let model = Scripted::new(turns);
    let mut req = request("look around");
    req.visibility = Some(hide_vault);
    let config = AgentConfig { rules, ..config() };
    let (r, t, backend) = run(model.clone(), config, req, Some(governance)).await;
    let hidden = [
        "read_secret",
        "vault__read_secret",
        "create_issue",
        "delete_file",
    ];
    for search in &r.searches[..queries.len()] {
        for name in hidden {
            assert!(!search.found.iter().any(|f| f == name), "{search:?}");
        }
    }
    // Without the policy, "create issue" finds create_issue by name, and "repository issues"
    // matches its description; with it, only the tools the policy lets it search.
    assert!(r.searches[2].found.is_empty());
    assert_eq!(r.searches[3].added, ["list_issues", "list_commits"]);
    for request in model.seen.lock().iter() {
        for name in hidden {
            assert!(!names(request).contains(&name), "{name} was offered");
        }
    }
    assert!(backend.calls.lock().is_empty(), "no hidden tool ran");
    assert!(r.steps.iter().all(|s| !s.executed));
    // A search without a query is refused, and traced as such.
    let refused = r.searches.last().unwrap();
    assert!(
        refused
            .error
            .as_deref()
            .unwrap()
            .contains("needs a `query`")
    );
    let record = t
        .iter()
        .rfind(|x| x.kind == RecordKind::ToolSearch)
        .unwrap();
    assert!(!record.success && record.error.is_some());
}

#[tokio::test]
async fn a_dry_run_searches_and_plans_what_it_found() {
    let model = Scripted::new(vec![
        vec![call("s", "search_tools", json!({"query": "list issues"}))],
        vec![call("c", "list_issues", json!({"owner": "o", "repo": "r"}))],
    ]);
    let mut req = request("what is open in o/r");
    req.dry_run = true;
    let (r, t, backend) = run(model, config(), req, None).await;
    assert_eq!(r.searches[0].added[0], "list_issues");
    assert!(r.steps[0].dry_run && !r.steps[0].executed && r.steps[0].success);
    assert!(t[0].kind == RecordKind::ToolSearch && t[0].dry_run);
    assert!(backend.calls.lock().is_empty());
}

#[tokio::test]
async fn a_run_adds_at_most_max_found_tools() {
    let model = Scripted::new(vec![
        vec![call(
            "s1",
            "search_tools",
            json!({"query": "list", "limit": 5}),
        )],
        vec![call("s2", "search_tools", json!({"query": "write file"}))],
    ]);
    let config = AgentConfig {
        discovery: Discovery {
            max_found: 1,
            ..Discovery::default()
        },
        ..config()
    };
    let (r, _, _) = run(model.clone(), config, request("anything"), None).await;
    assert!(r.searches[0].found.len() >= 2, "{:?}", r.searches[0]);
    assert_eq!(r.searches[0].added.len(), 1);
    assert!(r.searches[1].added.is_empty());
    assert_eq!(model.seen.lock().last().unwrap().tools.len(), 3);
}

#[tokio::test]
async fn no_search_tool_when_the_first_offer_holds_everything_or_search_is_off() {
    let model = Scripted::new(vec![]);
    let everything = AgentConfig {
        max_tools: 100,
        ..AgentConfig::default()
    };
    let (r, _, _) = run(model.clone(), everything, request("hi"), None).await;
    assert!(!r.offered_tools.iter().any(|n| n == "search_tools"));
    assert_eq!(r.offered_tools.len(), 7);
    let off = AgentConfig {
        discovery: Discovery {
            search: false,
            ..Discovery::default()
        },
        ..config()
    };
    let (r, _, _) = run(model, off, request("hi"), None).await;
    assert_eq!(r.offered_tools, ["read_file"]);
}

#[tokio::test]
async fn the_offline_mock_searches_for_what_it_was_not_offered() {
    let (r, t, backend) = run(
        Arc::new(MockModel::new()),
        config(),
        request("list the commits of owner acme repo rockets"),
        None,
    )
    .await;
    assert!(!r.halted, "{r:?}");
    assert_eq!(r.searches.len(), 1);
    assert!(
        r.searches[0].added.contains(&"list_commits".to_owned()),
        "{r:?}"
    );
    assert_eq!(*backend.calls.lock(), ["github/list_commits"]);
    assert_eq!(
        r.steps[0].arguments,
        json!({"owner": "acme", "repo": "rockets"})
    );
    assert!(t.iter().any(|x| x.kind == RecordKind::ToolSearch));
}

#[tokio::test]
async fn what_a_principal_called_is_pinned_in_its_next_first_offer() {
    let model = Scripted::new(vec![
        vec![call(
            "s",
            "search_tools",
            json!({"query": "list commits", "limit": 1}),
        )],
        vec![call(
            "c",
            "list_commits",
            json!({"owner": "o", "repo": "r"}),
        )],
    ]);
    let agent = Agent::new(
        Arc::new(Backend::default()),
        model,
        Arc::new(MemorySessions::default()),
        TraceSink::disabled(),
        AgentConfig {
            learned_pins: 2,
            ..config()
        },
    );
    let as_ = |who: &str| RunRequest {
        principal: toolforge_policy::Principal::new(who),
        ..request("history of o/r")
    };
    let first = agent.run(as_("alice"), None).await;
    assert!(!first.offered_tools.contains(&"list_commits".to_owned()));
    let again = agent.run(as_("alice"), None).await;
    assert_eq!(
        again.offered_tools,
        ["read_file", "list_commits", "search_tools"]
    );
    assert!(
        again
            .broker_rationale
            .contains("github/list_commits (learned pin: called 1 time in recent runs)"),
        "{}",
        again.broker_rationale
    );
    let other = agent.run(as_("bob"), None).await;
    assert!(!other.offered_tools.contains(&"list_commits".to_owned()));
    assert_eq!(agent.learned_pins().pins("alice", 5).len(), 1);
}
