//! Visibility for one request over 10,000 tools on 100 servers (target from the issue: resolving
//! visibility plus search for one request, p99 < 1 ms on a 2-core machine).
//!
//! Measured, over a deterministic synthetic catalog (realistic `verb_noun` names, sentence
//! descriptions, domain and annotation tags, parameter names):
//!
//! 1. `operator_only`: `visibility::resolve` with the operator's channels alone (an env deny
//!    list and a CLI tag allow list), as every request without its own channels pays;
//! 2. `request_tools_deny_query`: the full per-request path as the gateway runs it (clone the
//!    operator channels, `Channels::with_query_pairs` for a `tools=` list of 50 names,
//!    `Channels::with_header_pairs` for a header deny list and an `x-mcp-query` search, then
//!    `resolve`);
//! 3. `request_deny_query_no_list`: the same without the `tools=` list, so the search ranks every
//!    tool the operator leaves visible (the worst case for search: BM25 over thousands of tools);
//! 4. `indexed_*`: cases 1-3 as the gateway runs them, through a `VisibilityIndex` built once
//!    per catalog and answering each tool's verdict by position (`verdicts_with_index`), so no
//!    per-request id is built for the 10,000 tools;
//! 5. `part_bm25_index_visible`, the part of 3 that search costs: building the BM25 index over
//!    the tools the operator leaves visible and ranking the query, as `resolve` does per request;
//! 6. baselines in the same run, so figures read as ratios: `baseline_iter_catalog` (walk every
//!    tool once, reading its tags) and `baseline_collect_ids` (collect every tool's id, which
//!    `resolve` must do anyway since its answer names every tool, visible or hidden).
//!
//! Criterion reports means and medians. Afterwards a bounded timed loop (2,000 requests per case
//! after 200 warm-up ones, each case cut at 4 s, so under 30 s in all) prints mean/p50/p99/max
//! per case to stdout, since the target is a p99.

use std::collections::HashSet;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use serde_json::{Map, Value, json};
use toolforge_select::rank::Bm25Index;
use toolforge_select::visibility::{
    self, ChannelInput, Channels, Policy, Verdicts, VisibilityIndex, Visible,
};
use toolforge_select::{Catalog, ServerEntry, Tool, ToolId};

const SERVERS: usize = 100;
const TOOLS_PER_SERVER: usize = 100;

const DOMAINS: &[&str] = &[
    "github",
    "gitlab",
    "jira",
    "slack",
    "notion",
    "postgres",
    "filesystem",
    "browser",
    "calendar",
    "email",
    "weather",
    "stripe",
    "kubernetes",
    "docker",
    "sentry",
    "grafana",
    "s3",
    "figma",
    "linear",
    "zendesk",
];

/// `(verb, tag)`: the verb's annotation-style tag.
const VERBS: &[(&str, &str)] = &[
    ("list", "read-only"),
    ("get", "read-only"),
    ("search", "read-only"),
    ("read", "read-only"),
    ("describe", "read-only"),
    ("create", "write"),
    ("update", "write"),
    ("send", "write"),
    ("archive", "write"),
    ("delete", "destructive"),
];

const NOUNS: &[&str] = &[
    "issue",
    "pull_request",
    "repository",
    "branch",
    "commit",
    "message",
    "channel",
    "document",
    "table_row",
    "event",
];

const WORDS: &[&str] = &[
    "the",
    "a",
    "for",
    "of",
    "with",
    "by",
    "in",
    "from",
    "matching",
    "given",
    "current",
    "recent",
    "open",
    "closed",
    "user",
    "project",
    "team",
    "workspace",
    "filter",
    "status",
    "label",
    "owner",
    "date",
    "range",
    "page",
    "results",
    "returns",
    "optional",
    "identifier",
    "details",
    "metadata",
    "content",
    "summary",
    "account",
    "permissions",
    "query",
    "limit",
    "sorted",
];

/// A deterministic pseudo-random stream (LCG), so every run builds the same catalog.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as usize
    }

    fn word(&mut self) -> &'static str {
        WORDS[self.next() % WORDS.len()]
    }
}

fn server_name(s: usize) -> String {
    format!("{}-{}", DOMAINS[s % DOMAINS.len()], s / DOMAINS.len())
}

fn tool_name(t: usize) -> String {
    format!("{}_{}", VERBS[t % VERBS.len()].0, NOUNS[t / VERBS.len()])
}

/// 100 servers of 100 tools: every `verb_noun` once per server (so plain names repeat across
/// servers, as real catalogs' `search` and `list_*` do), each with a one-sentence description,
/// 1-3 parameters, the server's domain tag, the verb's tag and sometimes `network`.
fn catalog() -> Catalog {
    let mut rng = Lcg(42);
    let servers = (0..SERVERS)
        .map(|s| {
            let server = server_name(s);
            let domain = DOMAINS[s % DOMAINS.len()];
            let tools = (0..TOOLS_PER_SERVER)
                .map(|t| {
                    let (verb, verb_tag) = VERBS[t % VERBS.len()];
                    let noun = NOUNS[t / VERBS.len()];
                    let filler: Vec<&str> = (0..8 + rng.next() % 10).map(|_| rng.word()).collect();
                    let description = format!(
                        "{verb} a {} in {domain}: {}.",
                        noun.replace('_', " "),
                        filler.join(" ")
                    );
                    let mut properties = Map::new();
                    properties.insert(format!("{noun}_id"), json!({"type": "string"}));
                    for _ in 0..rng.next() % 3 {
                        properties.insert(rng.word().to_owned(), json!({"type": "string"}));
                    }
                    let mut tags = vec![domain.to_owned(), verb_tag.to_owned()];
                    if rng.next().is_multiple_of(4) {
                        tags.push("network".to_owned());
                    }
                    let mut definition = Map::new();
                    definition.insert("name".into(), Value::String(tool_name(t)));
                    definition.insert("description".into(), Value::String(description.clone()));
                    Tool {
                        server: server.clone(),
                        name: tool_name(t),
                        description,
                        input_schema: toolforge_select::InputSchema::from_value(
                            &json!({"type": "object", "properties": properties}),
                        ),
                        tags,
                        definition,
                    }
                })
                .collect();
            ServerEntry {
                name: server,
                tags: vec![domain.to_owned()],
                aliases: Vec::new(),
                tools,
            }
        })
        .collect();
    Catalog::new(servers, Vec::new()).expect("unique server names")
}

/// The operator's channels: an env deny list of 20 names (plain, qualified and a whole server)
/// and a CLI tag allow list that lets through the read-only and write tools (90 % of them).
fn operator() -> Channels {
    let mut deny: Vec<String> = (0..18)
        .map(|i| format!("{}/{}", server_name(i * 5), tool_name(i * 3)))
        .collect();
    deny.push("archive_channel".to_owned());
    deny.push(server_name(99));
    let deny = deny.join(",");
    let env = ChannelInput::from_env(&|key| (key == "MCP_DISABLED_TOOLS").then(|| deny.clone()))
        .expect("valid env channel");
    let cli = ChannelInput::from_cli(None, None, Some("read-only,write"), None)
        .expect("valid cli channel");
    Channels::operator(env, cli)
}

const QUERY: &str = "list open issues in a repository";

fn pair(k: &str, v: &str) -> (String, String) {
    (k.to_owned(), v.to_owned())
}

/// A request's query pairs: `tools=` 50 qualified names spread over the catalog.
fn query_pairs() -> Vec<(String, String)> {
    let names: Vec<String> = (0..50)
        .map(|i| format!("{}/{}", server_name(i * 2), tool_name((i * 7) % 100)))
        .collect();
    vec![pair("tools", &names.join(","))]
}

/// A request's headers: a deny list and a search query.
fn header_pairs() -> Vec<(String, String)> {
    vec![
        pair(
            "x-mcp-disabled-tools",
            &format!("{},{}/list_issue", tool_name(2), server_name(0)),
        ),
        pair("x-mcp-query", QUERY),
    ]
}

/// One request as the gateway handles it: operator channels cloned, the request's parsed.
fn per_request(
    catalog: &Catalog,
    operator: &Channels,
    policy: &Policy,
    query: &[(String, String)],
    headers: &[(String, String)],
) -> Visible {
    visibility::resolve(catalog, &request_channels(operator, query, headers), policy)
}

/// [`per_request`] as the gateway runs it: through the catalog's [`VisibilityIndex`], each
/// tool's verdict by position (the gateway keeps the catalog, so it names no tool).
fn per_request_indexed(
    s: &Setup,
    query: &[(String, String)],
    headers: &[(String, String)],
) -> Verdicts {
    let channels = request_channels(&s.operator, query, headers);
    visibility::verdicts_with_index(&s.catalog, &s.index, &channels, &s.policy)
}

fn shown(verdicts: &Verdicts) -> usize {
    verdicts.reasons.iter().filter(|r| r.is_none()).count()
}

fn request_channels(
    operator: &Channels,
    query: &[(String, String)],
    headers: &[(String, String)],
) -> Channels {
    let mut channels = operator.clone();
    if !query.is_empty() {
        channels = channels.with_query_pairs(query);
    }
    if !headers.is_empty() {
        channels = channels.with_header_pairs(headers);
    }
    channels
}

struct Setup {
    catalog: Catalog,
    /// Built once per catalog, as the gateway keeps one per catalog generation.
    index: VisibilityIndex,
    /// The tools the operator's channels leave visible: what a search without a `tools=` list
    /// indexes.
    operator_visible: Vec<Tool>,
    operator: Channels,
    policy: Policy,
    query: Vec<(String, String)>,
    headers: Vec<(String, String)>,
}

fn setup() -> Setup {
    let catalog = catalog();
    let operator = operator();
    let visible = visibility::resolve(&catalog, &operator, &Policy::default());
    let visible: HashSet<ToolId> = visible.tools.into_iter().collect();
    let operator_visible = catalog
        .tools()
        .filter(|t| visible.contains(&t.id()))
        .cloned()
        .collect();
    Setup {
        index: VisibilityIndex::new(&catalog),
        catalog,
        operator_visible,
        operator,
        policy: Policy::default(),
        query: query_pairs(),
        headers: header_pairs(),
    }
}

type Case = (&'static str, Box<dyn Fn(&Setup) -> usize>);

fn cases() -> Vec<Case> {
    vec![
        (
            "baseline_iter_catalog",
            Box::new(|s: &Setup| s.catalog.tools().filter(|t| !t.tags.is_empty()).count()),
        ),
        (
            "baseline_collect_ids",
            Box::new(|s: &Setup| s.catalog.tools().map(Tool::id).collect::<Vec<_>>().len()),
        ),
        (
            "operator_only",
            Box::new(|s: &Setup| {
                visibility::resolve(&s.catalog, &s.operator, &s.policy)
                    .tools
                    .len()
            }),
        ),
        (
            "request_tools_deny_query",
            Box::new(|s: &Setup| {
                per_request(&s.catalog, &s.operator, &s.policy, &s.query, &s.headers)
                    .tools
                    .len()
            }),
        ),
        (
            "request_deny_query_no_list",
            Box::new(|s: &Setup| {
                per_request(&s.catalog, &s.operator, &s.policy, &[], &s.headers)
                    .tools
                    .len()
            }),
        ),
        (
            "indexed_operator_only",
            Box::new(|s: &Setup| {
                shown(&visibility::verdicts_with_index(
                    &s.catalog,
                    &s.index,
                    &s.operator,
                    &s.policy,
                ))
            }),
        ),
        (
            "indexed_request_tools_deny_query",
            Box::new(|s: &Setup| shown(&per_request_indexed(s, &s.query, &s.headers))),
        ),
        (
            "indexed_request_deny_query_no_list",
            Box::new(|s: &Setup| shown(&per_request_indexed(s, &[], &s.headers))),
        ),
        (
            "part_bm25_index_visible",
            Box::new(|s: &Setup| {
                let docs: Vec<&Tool> = s.operator_visible.iter().collect();
                Bm25Index::from_tools(&docs).search(QUERY, 20).len()
            }),
        ),
    ]
}

/// Sanity: the scenario hides and shows what it means to, so the timings are of real work.
fn check(s: &Setup) {
    assert_eq!(s.catalog.len(), SERVERS * TOOLS_PER_SERVER);
    let operator = visibility::resolve(&s.catalog, &s.operator, &s.policy);
    assert!(
        (8_000..9_000).contains(&operator.tools.len()),
        "{}",
        operator.tools.len()
    );
    let request = per_request(&s.catalog, &s.operator, &s.policy, &s.query, &s.headers);
    assert!(request.warnings.is_empty(), "{:?}", request.warnings);
    assert_eq!(request.query_matched, Some(true));
    assert!(
        !request.tools.is_empty() && request.tools.len() < 50,
        "{}",
        request.tools.len()
    );
    let wide = per_request(&s.catalog, &s.operator, &s.policy, &[], &s.headers);
    assert_eq!(wide.query_matched, Some(true));
    assert_eq!(wide.tools.len(), s.policy.search_limit);
    // The indexed verdicts are the same decisions.
    for (query, headers) in [(&s.query[..], &s.headers[..]), (&[], &s.headers[..])] {
        let named = per_request(&s.catalog, &s.operator, &s.policy, query, headers);
        let verdicts = per_request_indexed(s, query, headers).into_visible(&s.catalog);
        assert_eq!(named, verdicts);
    }
    println!(
        "scenario: {} tools; operator leaves {}; tools= list + header deny + query leaves {}; \
         header deny + query without a list leaves {} (search limit)",
        s.catalog.len(),
        operator.tools.len(),
        request.tools.len(),
        wide.tools.len()
    );
}

fn bench(c: &mut Criterion) {
    let s = setup();
    check(&s);
    let mut g = c.benchmark_group("visibility_10k_tools");
    for (name, case) in cases() {
        g.bench_function(name, |b| b.iter(|| black_box(case(black_box(&s)))));
    }
    g.finish();
}

/// The most one case of the timed loop may take (6 cases with warm-ups: under 30 s in all).
const CASE_BUDGET: Duration = Duration::from_secs(4);

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

/// p50/p99/max per case from a timed loop. Bounded: `iterations` per case after a warm-up of a
/// tenth as many, each case stopping early after [`CASE_BUDGET`] (warm-up after a tenth of it),
/// so the loop takes under 30 s whatever the machine.
fn percentiles(iterations: usize) {
    let s = setup();
    println!("\npercentiles over {iterations} timed requests per case:");
    println!(
        "{:<28} {:>10} {:>10} {:>10} {:>10}",
        "case", "mean", "p50", "p99", "max"
    );
    for (name, case) in cases() {
        let warm_up = Instant::now();
        for _ in 0..iterations / 10 {
            black_box(case(&s));
            if warm_up.elapsed() > CASE_BUDGET / 10 {
                break;
            }
        }
        let budget = Instant::now();
        let mut times = Vec::with_capacity(iterations);
        for _ in 0..iterations {
            let start = Instant::now();
            black_box(case(black_box(&s)));
            times.push(start.elapsed());
            if budget.elapsed() > CASE_BUDGET {
                break;
            }
        }
        let mean = times.iter().sum::<Duration>() / times.len() as u32;
        times.sort();
        println!(
            "{name:<28} {:>10.1?} {:>10.1?} {:>10.1?} {:>10.1?}{}",
            mean,
            percentile(&times, 0.50),
            percentile(&times, 0.99),
            times[times.len() - 1],
            if times.len() < iterations {
                format!(" (stopped after {} requests)", times.len())
            } else {
                String::new()
            }
        );
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: there a short loop only
    // checks that the timing code runs.
    let full = std::env::args().any(|a| a == "--bench");
    percentiles(if full { 2_000 } else { 20 });
}
