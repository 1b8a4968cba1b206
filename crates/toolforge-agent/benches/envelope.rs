//! The seed's envelope: cost and latency per canonical 3–5-step task.
//!
//! The real agent drives the real [`AnthropicModel`] against a fake of the Anthropic Messages
//! API on loopback (`POST /v1/messages` and `POST /v1/messages/count_tokens`) that checks the
//! headers, bills like the provider (input tokens are bytes/4; with `cache_control` the tools and
//! system prefix is written to the cache on its first sight and read from it afterwards) and
//! answers with a realistic latency: a time to first token of 450–900 ms (fixed per exchange,
//! drawn from a seeded sequence) plus 12 ms per output token (about 80 tokens/s), with tool calls
//! of 20–120 ms. The script calls each task's tools one per turn, then answers. Prices are the
//! default table's `claude-sonnet-4-6`.
//!
//! Each of the 8 tasks runs 5 times (all 40 runs 8 at a time). Printed: p50 and p95 of cost and
//! latency per task run, and the cache-read share of input tokens from step 2 on.
//!
//! Run: `cargo bench -p toolforge-agent --bench envelope` (about forty seconds: the latency is
//! simulated, so a debug build measures the same).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;
use toolforge_agent::{
    Agent, AgentConfig, MemorySessions, RunRequest, ToolBackend, ToolFailure, ToolOutput, TraceSink,
};
use toolforge_llm::anthropic::{API_VERSION, AnthropicConfig, AnthropicModel};
use toolforge_select::{Catalog, ServerEntry, Tool};

const API_KEY: &str = "bench-key-not-secret";
const MODEL: &str = "claude-sonnet-4-6";
const REPEATS: usize = 5;

/// Servers and their tools (name, description).
const SERVERS: &[(&str, &[(&str, &str)])] = &[
    (
        "crm",
        &[
            ("find_customer", "Find a customer by name or email."),
            (
                "list_orders",
                "List a customer's orders with their status and totals.",
            ),
            ("get_invoice", "Get one invoice with its line items."),
            ("add_note", "Add a note to a customer's record."),
        ],
    ),
    (
        "ops",
        &[
            (
                "list_pods",
                "List the pods of a Kubernetes namespace and their restarts.",
            ),
            ("get_pod_logs", "Read the recent logs of one pod."),
            ("restart_deployment", "Restart a Kubernetes deployment."),
            (
                "open_incident",
                "Open an incident with a title and a severity.",
            ),
        ],
    ),
    (
        "work",
        &[
            ("search_email", "Search the mailbox."),
            ("draft_email", "Draft an email reply."),
            ("create_ticket", "Create a ticket in the issue tracker."),
            ("post_message", "Post a message to a chat channel."),
        ],
    ),
];

/// The canonical tasks: a request and the tools it takes, in order (3 to 5 steps).
const TASKS: &[(&str, &[&str])] = &[
    (
        "Find customer Alice Nguyen, list her orders and add a note that she asked about a refund.",
        &["find_customer", "list_orders", "add_note"],
    ),
    (
        "Find customer Bob Lee, list his orders, get the invoice of the last one and add a note.",
        &["find_customer", "list_orders", "get_invoice", "add_note"],
    ),
    (
        "Which pods crash in payments? Read their logs, restart the deployment and open an incident.",
        &[
            "list_pods",
            "get_pod_logs",
            "restart_deployment",
            "open_incident",
        ],
    ),
    (
        "List the pods in checkout, read the logs of the failing one and open an incident.",
        &["list_pods", "get_pod_logs", "open_incident"],
    ),
    (
        "Find the accountant's email about Q3, draft a reply, open a ticket and tell #finance.",
        &[
            "search_email",
            "draft_email",
            "create_ticket",
            "post_message",
        ],
    ),
    (
        "Search mail for the outage report, open an incident, create a ticket, post to #ops and restart api.",
        &[
            "search_email",
            "open_incident",
            "create_ticket",
            "post_message",
            "restart_deployment",
        ],
    ),
    (
        "Find customer Carla Diaz, get her last invoice, draft an email about it and add a note.",
        &["find_customer", "get_invoice", "draft_email", "add_note"],
    ),
    (
        "Read the logs of pod api-1 in payments, create a ticket and post a summary to #payments.",
        &["get_pod_logs", "create_ticket", "post_message"],
    ),
];

fn catalog() -> Catalog {
    let schema = json!({"type": "object", "properties": {
        "query": {"type": "string", "description": "What to look for, in plain words."},
        "id": {"type": "string", "description": "The identifier, when known."},
        "limit": {"type": "integer", "description": "At most this many results."}
    }});
    let servers = SERVERS
        .iter()
        .map(|(server, tools)| ServerEntry {
            name: (*server).to_owned(),
            tags: Vec::new(),
            aliases: Vec::new(),
            tools: tools
                .iter()
                .map(|(name, description)| {
                    let mut def = Map::new();
                    def.insert("name".into(), json!(name));
                    def.insert("description".into(), json!(description));
                    def.insert("inputSchema".into(), schema.clone());
                    Tool::from_mcp(server, def, &[]).expect("valid tool")
                })
                .collect(),
        })
        .collect();
    Catalog::new(servers, Vec::new()).expect("valid catalog")
}

/// A deterministic pseudo-random sequence (splitmix64), for latencies.
fn draw(seq: u64) -> u64 {
    let mut z = seq.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

struct Backend {
    seq: AtomicU64,
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
        let wait = 20 + draw(self.seq.fetch_add(1, Ordering::Relaxed)) % 101;
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(wait)).await;
            Ok(ToolOutput {
                text: format!(
                    "{server}/{tool}: ok. {}",
                    "Record 4711 updated; 3 related items found; nothing else changed. ".repeat(4)
                ),
                structured: None,
                is_error: false,
                attempts: 1,
                retry_reason: None,
            })
        })
    }
}

/// One exchange the fake billed: the step within its run and the input usage.
struct Billed {
    step: usize,
    input: u64,
    cache_read: u64,
}

#[derive(Default)]
struct Fake {
    cache: Mutex<std::collections::HashSet<[u8; 32]>>,
    log: Mutex<Vec<Billed>>,
    seq: AtomicU64,
    counts: AtomicU64,
}

fn tokens(v: &Value) -> u64 {
    (v.to_string().len() as u64).div_ceil(4)
}

fn checked(headers: &HeaderMap, body: &Bytes) -> Result<Value, Response> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if header("x-api-key") != Some(API_KEY) || header("anthropic-version") != Some(API_VERSION) {
        return Err((StatusCode::UNAUTHORIZED, "bad headers").into_response());
    }
    serde_json::from_slice(body)
        .map_err(|e| (StatusCode::BAD_REQUEST, e.to_string()).into_response())
}

async fn count_tokens(State(_fake): State<Arc<Fake>>, headers: HeaderMap, body: Bytes) -> Response {
    let body = match checked(&headers, &body) {
        Ok(b) => b,
        Err(r) => return r,
    };
    _fake.counts.fetch_add(1, Ordering::Relaxed);
    let n = tokens(&body["tools"]) + tokens(&body["system"]) + tokens(&body["messages"]);
    axum::Json(json!({"input_tokens": n})).into_response()
}

async fn messages(State(fake): State<Arc<Fake>>, headers: HeaderMap, body: Bytes) -> Response {
    let body = match checked(&headers, &body) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let msgs = body["messages"].as_array().cloned().unwrap_or_default();
    let first = msgs
        .first()
        .and_then(|m| m["content"][0]["text"].as_str())
        .unwrap_or_default();
    let Some((_, calls)) = TASKS.iter().find(|(t, _)| *t == first) else {
        return (StatusCode::BAD_REQUEST, "no script").into_response();
    };
    let step = msgs.iter().filter(|m| m["role"] == "assistant").count();
    // Billing: the tools + system prefix is cached when marked, written once and read after.
    let prefix = tokens(&body["tools"]) + tokens(&body["system"]);
    let rest = tokens(&body["messages"]);
    let marked = body["system"][0].get("cache_control").is_some();
    let (mut input, mut write, mut read) = (prefix + rest, 0, 0);
    if marked && prefix >= 1024 {
        let key: [u8; 32] =
            Sha256::digest(format!("{}{}", body["tools"], body["system"]).as_bytes()).into();
        if fake.cache.lock().insert(key) {
            write = prefix;
        } else {
            read = prefix;
        }
        input = rest;
    }
    let n = fake.seq.fetch_add(1, Ordering::Relaxed);
    let (content, stop) = match calls.get(step) {
        Some(tool) => {
            let name = body["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["name"].as_str())
                .find(|t| *t == *tool || t.ends_with(&format!("__{tool}")))
                .unwrap_or(tool)
                .to_owned();
            (
                json!([
                    {"type": "text", "text": format!("Next I will use {name}.")},
                    {"type": "tool_use", "id": format!("toolu_{n:020}"), "name": name,
                     "input": {"query": first.chars().take(60).collect::<String>()}}
                ]),
                "tool_use",
            )
        }
        None => (
            json!([{"type": "text", "text": json!({"answer": format!("Done: {}.", calls.join(", ")), "key_facts": {"steps": calls.len()}}).to_string()}]),
            "end_turn",
        ),
    };
    let output = tokens(&content);
    fake.log.lock().push(Billed {
        step: step + 1,
        input: input + write + read,
        cache_read: read,
    });
    let ttft = 450 + draw(n) % 451;
    tokio::time::sleep(Duration::from_millis(ttft + 12 * output)).await;
    axum::Json(json!({
        "id": format!("msg_{n:020}"), "type": "message", "role": "assistant", "model": MODEL,
        "content": content, "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": input, "cache_creation_input_tokens": write,
                  "cache_read_input_tokens": read, "output_tokens": output},
    }))
    .into_response()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fake = Arc::new(Fake::default());
    let app = Router::new()
        .route("/v1/messages", post(messages))
        .route("/v1/messages/count_tokens", post(count_tokens))
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let model = AnthropicModel::new(AnthropicConfig {
        api_key: API_KEY.to_owned(),
        base_url: format!("http://{addr}"),
        model: MODEL.to_owned(),
        max_attempts: 1,
        timeout: Duration::from_secs(30),
        ..AnthropicConfig::default()
    })
    .unwrap();
    let agent = Arc::new(Agent::new(
        Arc::new(Backend {
            seq: AtomicU64::new(0),
        }),
        Arc::new(model),
        Arc::new(MemorySessions::default()),
        TraceSink::disabled(),
        AgentConfig::default(),
    ));
    let started = Instant::now();
    let semaphore = Arc::new(tokio::sync::Semaphore::new(8));
    let mut handles = Vec::new();
    for round in 0..REPEATS {
        for (task, (message, calls)) in TASKS.iter().enumerate() {
            let agent = agent.clone();
            let semaphore = semaphore.clone();
            handles.push(tokio::spawn(async move {
                let _permit = semaphore.acquire_owned().await.unwrap();
                let t0 = Instant::now();
                let r = agent
                    .run(
                        RunRequest {
                            message: (*message).to_owned(),
                            ..RunRequest::default()
                        },
                        None,
                    )
                    .await;
                assert!(!r.halted, "task {} round {round}: {r:?}", task + 1);
                assert_eq!(r.steps.len(), calls.len(), "task {}", task + 1);
                (r.cost_usd, t0.elapsed().as_secs_f64())
            }));
        }
    }
    let mut costs = Vec::new();
    let mut latencies = Vec::new();
    for h in handles {
        let (c, l) = h.await.unwrap();
        costs.push(c);
        latencies.push(l);
    }
    costs.sort_by(f64::total_cmp);
    latencies.sort_by(f64::total_cmp);
    let log = fake.log.lock();
    let later: Vec<&Billed> = log.iter().filter(|b| b.step >= 2).collect();
    let input: u64 = later.iter().map(|b| b.input).sum();
    let read: u64 = later.iter().map(|b| b.cache_read).sum();
    println!(
        "envelope: {} task runs ({} tasks x {REPEATS}), {} model calls, {} token counts, {:.1} s",
        costs.len(),
        TASKS.len(),
        log.len(),
        fake.counts.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64()
    );
    println!("| per task run | p50 | p95 | seed target (p95) |");
    println!("| --- | --- | --- | --- |");
    println!(
        "| cost (USD) | {:.4} | {:.4} | < 0.05 |",
        percentile(&costs, 50.0),
        percentile(&costs, 95.0)
    );
    println!(
        "| latency (s) | {:.2} | {:.2} | < 8 |",
        percentile(&latencies, 50.0),
        percentile(&latencies, 95.0)
    );
    println!(
        "cache-read share of input tokens from step 2 on: {:.1} %",
        100.0 * read as f64 / input.max(1) as f64
    );
}
