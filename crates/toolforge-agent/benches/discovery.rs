//! Progressive discovery on the shared development sets (`evals/retrieval`): for each first-offer
//! size, the tool-definition tokens per task and the share of tasks whose every needed tool is
//! (a) in the first offer and (b) reachable with one search per missing tool whose query is the
//! tool's name in words; then the same through the offline mock model end to end (a dry run of
//! the agent, which searches as it sees fit). See `benchmarks/agent/README.md`.
//!
//! `cargo bench -p toolforge-agent --bench discovery` (counts, does not time: the figures are
//! the same on every machine). Writes `target/bench-discovery.json`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use toolforge_agent::discovery::{
    DEFAULT_FIRST_OFFER, DEFAULT_SEARCH_LIMIT, SEARCH_TOOL, search_tool_spec,
};
use toolforge_agent::{
    Agent, AgentConfig, MemorySessions, RunRequest, ToolBackend, ToolFailure, ToolOutput, TraceSink,
};
use toolforge_llm::{MockModel, Model, ModelError, ModelRequest, ModelResponse, ToolSpec};
use toolforge_select::broker::Rules;
use toolforge_select::search::{ToolSearch, name_in_words};
use toolforge_select::{
    Catalog, Limits, Namespace, OfferRequest, Presentation, Selection, ServerEntry, Tool, ToolId,
};

/// First-offer sizes measured; `usize::MAX` is the whole catalog (no search).
const SIZES: &[usize] = &[0, 4, 8, 16, 32, usize::MAX];
/// The tokenizer the definitions are counted with.
const TOKENIZER_MODEL: &str = "gpt-4o";

#[derive(Deserialize)]
struct ToolLine {
    server: String,
    name: String,
    #[serde(default)]
    description: String,
    input_schema: Option<Value>,
}

#[derive(Deserialize)]
struct QueryLine {
    query: String,
    gold_groups: Vec<Vec<String>>,
}

struct Set {
    catalog: Catalog,
    tasks: Vec<(String, Vec<Vec<ToolId>>)>,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn load(name: &'static str) -> Set {
    let dir = root().join("evals/retrieval").join(name);
    let text = std::fs::read_to_string(dir.join("tools.jsonl")).expect("tools.jsonl");
    let mut servers: Vec<ServerEntry> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let t: ToolLine = serde_json::from_str(line).expect("a tool line");
        let mut def = Map::new();
        def.insert("name".into(), json!(t.name));
        def.insert("description".into(), json!(t.description));
        def.insert(
            "inputSchema".into(),
            t.input_schema.unwrap_or_else(|| json!({"type": "object"})),
        );
        let tool = Tool::from_mcp(&t.server, def, &[]).expect("a tool");
        match servers.iter_mut().find(|s| s.name == t.server) {
            Some(s) => s.tools.push(tool),
            None => servers.push(ServerEntry {
                name: t.server.clone(),
                tags: vec![],
                aliases: vec![],
                tools: vec![tool],
            }),
        }
    }
    let catalog = Catalog::new(servers, vec![]).expect("catalog");
    let text = std::fs::read_to_string(dir.join("queries.jsonl")).expect("queries.jsonl");
    let tasks = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let q: QueryLine = serde_json::from_str(line).expect("a query line");
            let groups = q
                .gold_groups
                .iter()
                .map(|g| g.iter().filter_map(|id| ToolId::parse(id)).collect())
                .collect();
            (q.query, groups)
        })
        .collect();
    Set { catalog, tasks }
}

/// Tokens of one tool definition as a model is sent it (its name, description and schema,
/// counted with the o200k tokenizer, plus the per-tool framing the cost guard counts).
fn spec_tokens(spec: &ToolSpec) -> u64 {
    let count = |tools: Vec<ToolSpec>| {
        toolforge_llm::openai_tokens::count(
            TOKENIZER_MODEL,
            &ModelRequest {
                tools,
                ..ModelRequest::default()
            },
        )
        .expect("o200k is shipped")
    };
    count(vec![spec.clone()]) - count(Vec::new())
}

/// The catalog as the agent presents it, with each exposed tool's tokens.
struct Presented {
    presentation: Presentation,
    exposed_of: HashMap<ToolId, usize>,
    tokens: Vec<u64>,
    by_model_name: HashMap<String, u64>,
    search_tokens: u64,
    index: ToolSearch,
    /// BM25 alone over the same tools (the search without its name-in-words tier).
    bm25: toolforge_select::rank::Bm25Index,
}

fn present(catalog: &Catalog) -> Presented {
    let presentation = Presentation::new(catalog, Namespace::Auto);
    let mut exposed_of = HashMap::new();
    let mut tokens = Vec::new();
    let mut by_model_name = HashMap::new();
    let mut representatives: Vec<&Tool> = Vec::new();
    for (i, e) in presentation.tools().iter().enumerate() {
        for m in &e.members {
            exposed_of.insert(m.clone(), i);
        }
        let spec = ToolSpec {
            name: presentation.model_name(e).to_owned(),
            description: e.description.clone(),
            input_schema: e.input_schema.to_value(),
        };
        let n = spec_tokens(&spec);
        tokens.push(n);
        by_model_name.insert(spec.name, n);
        representatives.push(catalog.get(&e.members[0]).expect("a member"));
    }
    let search_spec = search_tool_spec(SEARCH_TOOL, DEFAULT_SEARCH_LIMIT);
    let search_tokens = spec_tokens(&search_spec);
    by_model_name.insert(search_spec.name, search_tokens);
    let index = ToolSearch::new(&representatives);
    let bm25 = toolforge_select::rank::Bm25Index::from_tools(&representatives);
    Presented {
        bm25,
        presentation,
        exposed_of,
        tokens,
        by_model_name,
        search_tokens,
        index,
    }
}

#[derive(Default, Clone)]
struct Row {
    size: usize,
    tasks: usize,
    first_tokens: u64,
    grown_tokens: u64,
    searches: u64,
    in_first: usize,
    reachable: usize,
    /// Reachable when the search ranks by BM25 alone.
    reachable_bm25: usize,
    /// The needed tools out of reach (with the name tier, then with BM25 alone).
    missed: Vec<String>,
    missed_bm25: Vec<String>,
}

/// The first offer for `message` at `size` (what `Selection::offer` ranks in), as exposed tools.
fn first_offer(selection: &Selection, presented: &Presented, message: &str) -> Vec<usize> {
    let offer = selection.offer(&OfferRequest::new(message));
    let ids: HashSet<ToolId> = offer.ids().into_iter().collect();
    let mut exposed: Vec<usize> = ids
        .iter()
        .filter_map(|id| presented.exposed_of.get(id).copied())
        .collect();
    exposed.sort_unstable();
    exposed.dedup();
    exposed
}

fn satisfied(presented: &Presented, offered: &HashSet<usize>, group: &[ToolId]) -> bool {
    group.iter().any(|m| {
        presented
            .exposed_of
            .get(m)
            .is_some_and(|e| offered.contains(e))
    })
}

fn static_rows(set: &Set, presented: &Presented) -> Vec<Row> {
    let all: u64 = presented.tokens.iter().sum();
    let mut rows = Vec::new();
    for &size in SIZES {
        let mut row = Row {
            size,
            tasks: set.tasks.len(),
            ..Row::default()
        };
        if size == usize::MAX {
            row.first_tokens = all * set.tasks.len() as u64;
            row.grown_tokens = row.first_tokens;
            row.in_first = set.tasks.len();
            row.reachable = set.tasks.len();
            row.reachable_bm25 = set.tasks.len();
            rows.push(row);
            continue;
        }
        let selection = Selection::new(
            set.catalog.clone(),
            Rules::default(),
            Limits {
                max_tools: size,
                ..Limits::default()
            },
        );
        for (message, groups) in &set.tasks {
            let first = first_offer(&selection, presented, message);
            let mut offered: HashSet<usize> = first.iter().copied().collect();
            let first_tokens: u64 =
                first.iter().map(|&i| presented.tokens[i]).sum::<u64>() + presented.search_tokens;
            let mut grown = first_tokens;
            if groups.iter().all(|g| satisfied(presented, &offered, g)) {
                row.in_first += 1;
            }
            // The same searches ranked by BM25 alone.
            let mut plain: HashSet<usize> = first.iter().copied().collect();
            let mut reached_bm25 = true;
            for group in groups {
                if satisfied(presented, &plain, group) {
                    continue;
                }
                let query = name_in_words(&group[0].name);
                let hits: Vec<usize> = presented
                    .bm25
                    .search(&query, usize::MAX)
                    .into_iter()
                    .map(|(k, _)| k)
                    .filter(|k| !plain.contains(k))
                    .take(DEFAULT_SEARCH_LIMIT)
                    .collect();
                plain.extend(hits);
                if !satisfied(presented, &plain, group) {
                    reached_bm25 = false;
                    row.missed_bm25.push(group[0].to_string());
                }
            }
            row.reachable_bm25 += usize::from(reached_bm25);
            let mut reached = true;
            for group in groups {
                if satisfied(presented, &offered, group) {
                    continue;
                }
                // What a model that knows the tool it needs asks: its name in words.
                let query = name_in_words(&group[0].name);
                row.searches += 1;
                let hits = presented
                    .index
                    .search(&query, DEFAULT_SEARCH_LIMIT, |k| !offered.contains(&k));
                for hit in &hits {
                    offered.insert(hit.index);
                    grown += presented.tokens[hit.index];
                }
                if !satisfied(presented, &offered, group) {
                    reached = false;
                    row.missed.push(group[0].to_string());
                }
            }
            if reached {
                row.reachable += 1;
            }
            row.first_tokens += first_tokens;
            row.grown_tokens += grown;
        }
        rows.push(row);
    }
    rows
}

// ---- end to end, through the mock ----

struct Backend {
    catalog: Catalog,
}

impl ToolBackend for Backend {
    fn catalog(&self) -> Catalog {
        self.catalog.clone()
    }
    fn unavailable(&self) -> Vec<String> {
        Vec::new()
    }
    fn call<'a>(
        &'a self,
        _server: &'a str,
        _tool: &'a str,
        _arguments: Map<String, Value>,
        _cancel: Option<CancellationToken>,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolFailure>> {
        panic!("a dry run calls no tool")
    }
}

/// The mock, with the tool definitions of every request it is sent recorded.
struct Recording {
    inner: MockModel,
    calls: Mutex<Vec<Vec<String>>>,
}

impl Model for Recording {
    fn provider(&self) -> &'static str {
        self.inner.provider()
    }
    fn model(&self) -> &str {
        self.inner.model()
    }
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        self.calls
            .lock()
            .push(request.tools.iter().map(|t| t.name.clone()).collect());
        self.inner.complete(request)
    }
    fn input_bound<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, toolforge_llm::InputBound> {
        self.inner.input_bound(request)
    }
}

#[derive(Default, Clone)]
struct MockRow {
    size: usize,
    tasks: usize,
    model_calls: u64,
    /// Definition tokens summed over every model call.
    tokens: u64,
    searches: u64,
    /// Every needed tool was offered by the run's last call.
    offered: usize,
    /// Every needed tool was called (planned: a dry run).
    called: usize,
}

async fn mock_rows(set: &Set, presented: &Presented) -> Vec<MockRow> {
    let mut rows = Vec::new();
    for &size in SIZES {
        let model = Arc::new(Recording {
            inner: MockModel::new(),
            calls: Mutex::new(Vec::new()),
        });
        let agent = Agent::new(
            Arc::new(Backend {
                catalog: set.catalog.clone(),
            }),
            model.clone(),
            Arc::new(MemorySessions::default()),
            TraceSink::disabled(),
            AgentConfig {
                max_tools: size,
                // A dry run's turns cost nothing real; let every run finish its plan.
                ceiling_usd: 10.0,
                ..AgentConfig::default()
            },
        );
        let mut row = MockRow {
            size,
            tasks: set.tasks.len(),
            ..MockRow::default()
        };
        for (message, groups) in &set.tasks {
            model.calls.lock().clear();
            let result = agent
                .run(
                    RunRequest {
                        message: message.clone(),
                        dry_run: true,
                        ..RunRequest::default()
                    },
                    None,
                )
                .await;
            let calls = model.calls.lock().clone();
            row.model_calls += calls.len() as u64;
            row.searches += result.searches.len() as u64;
            for names in &calls {
                row.tokens += names
                    .iter()
                    .map(|n| presented.by_model_name.get(n).copied().unwrap_or(0))
                    .sum::<u64>();
            }
            let last: HashSet<&str> = calls
                .last()
                .map(|n| n.iter().map(String::as_str).collect())
                .unwrap_or_default();
            let offered_ok = groups.iter().all(|g| {
                g.iter().any(|m| {
                    presented.exposed_of.get(m).is_some_and(|&e| {
                        let exposed = &presented.presentation.tools()[e];
                        last.contains(presented.presentation.model_name(exposed))
                    })
                })
            });
            let planned: HashSet<ToolId> = result
                .steps
                .iter()
                .filter(|s| s.success)
                .filter_map(|s| Some(ToolId::new(s.server.as_ref()?, s.server_tool.as_ref()?)))
                .collect();
            let called_ok = groups.iter().all(|g| g.iter().any(|m| planned.contains(m)));
            row.offered += usize::from(offered_ok);
            row.called += usize::from(called_ok);
        }
        rows.push(row);
    }
    rows
}

/// `target/` of this build: the bench binary runs from `target/<profile>/deps/`.
fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            let deps = exe.parent()?;
            (deps.file_name()? == "deps").then(|| deps.parent()?.parent().map(PathBuf::from))?
        })
        .unwrap_or_else(|| root().join("target"))
}

fn label(size: usize) -> String {
    if size == usize::MAX {
        "full catalog".to_owned()
    } else {
        size.to_string()
    }
}

fn pct(n: usize, of: usize) -> f64 {
    100.0 * n as f64 / of.max(1) as f64
}

fn per_task(total: u64, tasks: usize) -> f64 {
    total as f64 / tasks.max(1) as f64
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut report = Vec::new();
    for name in ["livemcpbench", "metatool"] {
        let set = load(name);
        let presented = present(&set.catalog);
        let full: u64 = presented.tokens.iter().sum();
        println!(
            "\n## {name}: {} tasks, {} tools ({} as presented), {full} definition tokens in all",
            set.tasks.len(),
            set.catalog.tools().count(),
            presented.tokens.len()
        );
        let rows = static_rows(&set, &presented);
        println!(
            "\nOne search per missing tool, query = its name in words, limit {DEFAULT_SEARCH_LIMIT}:\n"
        );
        println!(
            "| first offer | definition tokens / task, first call | after the searches | vs full catalog | searches / task | (a) every tool in the first offer | (b) reachable with one search each | (b) with BM25 alone |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|");
        for r in &rows {
            let grown = per_task(r.grown_tokens, r.tasks);
            println!(
                "| {} | {:.0} | {:.0} | {:.1} % fewer | {:.2} | {:.1} % | {:.1} % | {:.1} % |",
                label(r.size),
                per_task(r.first_tokens, r.tasks),
                grown,
                100.0 * (1.0 - grown / full as f64),
                r.searches as f64 / r.tasks as f64,
                pct(r.in_first, r.tasks),
                pct(r.reachable, r.tasks),
                pct(r.reachable_bm25, r.tasks),
            );
        }
        if let Some(r) = rows.iter().find(|r| r.size == DEFAULT_FIRST_OFFER) {
            println!(
                "\nOut of reach at the default first offer ({DEFAULT_FIRST_OFFER}): {:?}; with BM25 alone: {:?}",
                r.missed, r.missed_bm25
            );
        }
        let mock = mock_rows(&set, &presented).await;
        println!(
            "\nThrough the mock model end to end (dry runs; the mock searches as it sees fit):\n"
        );
        println!(
            "| first offer | model calls / task | definition tokens / task, all calls | vs full catalog | searches / task | every needed tool offered by the last call | every needed tool called |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|");
        let full_mock = mock
            .iter()
            .find(|r| r.size == usize::MAX)
            .map_or(1.0, |r| per_task(r.tokens, r.tasks));
        for r in &mock {
            let tokens = per_task(r.tokens, r.tasks);
            println!(
                "| {} | {:.2} | {:.0} | {:.1} % fewer | {:.2} | {:.1} % | {:.1} % |",
                label(r.size),
                r.model_calls as f64 / r.tasks as f64,
                tokens,
                100.0 * (1.0 - tokens / full_mock),
                r.searches as f64 / r.tasks as f64,
                pct(r.offered, r.tasks),
                pct(r.called, r.tasks),
            );
        }
        report.push(json!({
            "set": name,
            "tasks": set.tasks.len(),
            "full_catalog_tokens": full,
            "search_limit": DEFAULT_SEARCH_LIMIT,
            "default_first_offer": DEFAULT_FIRST_OFFER,
            "static": rows.iter().map(|r| json!({
                "first_offer": label(r.size),
                "first_tokens_per_task": per_task(r.first_tokens, r.tasks),
                "tokens_after_searches_per_task": per_task(r.grown_tokens, r.tasks),
                "searches_per_task": r.searches as f64 / r.tasks as f64,
                "in_first_offer": pct(r.in_first, r.tasks),
                "reachable_with_one_search": pct(r.reachable, r.tasks),
                "reachable_with_one_search_bm25_alone": pct(r.reachable_bm25, r.tasks),
            })).collect::<Vec<_>>(),
            "mock": mock.iter().map(|r| json!({
                "first_offer": label(r.size),
                "model_calls_per_task": r.model_calls as f64 / r.tasks as f64,
                "tokens_per_task": per_task(r.tokens, r.tasks),
                "searches_per_task": r.searches as f64 / r.tasks as f64,
                "offered": pct(r.offered, r.tasks),
                "called": pct(r.called, r.tasks),
            })).collect::<Vec<_>>(),
        }));
    }
    let out = target_dir().join("bench-discovery.json");
    if let Ok(text) = serde_json::to_string_pretty(&Value::Array(report)) {
        let _ = std::fs::write(&out, text);
        println!("\nwritten to {}", out.display());
    }
}
