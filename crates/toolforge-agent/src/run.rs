//! The run loop (DESIGN §2): catalog → visibility → broker → presentation → model → selector →
//! pool or dry-run → trace, under the cost guard.
//!
//! The tool subset and its presentation are fixed once per request, so every model call of a
//! run sends a byte-identical prefix (tools, then system prompt) and steps 2..n hit the prompt
//! cache.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use toolforge_llm::embed::{Embedder, HashingEmbedder};
use toolforge_llm::{
    Content, InputBound, Message, Model, ModelRequest, ModelResponse, PriceTable, Role, StopReason,
    ToolSpec, Usage,
};
use toolforge_select::broker::Rules;
use toolforge_select::{
    Call, Catalog, Limits, Namespace, OfferRequest, Presentation, Resolved, Selection, ServerEntry,
    ToolId,
};
use tracing::Instrument as _;

use crate::backend::{ToolBackend, ToolOutput};
use crate::cost::{Allowance, CostGuard, DEFAULT_CEILING_USD};
use crate::halt::HaltReason;
use crate::session::SessionStore;
use crate::trace::{
    RecordKind, SCHEMA_VERSION, TraceRecord, TraceSink, arguments_hash, timestamp_now,
};

/// The system prompt every provider gets.
pub const SYSTEM_PROMPT: &str = "You are toolforge's agent. Do what the user asks by calling the tools offered; call several at once when they do not depend on each other. Use only the tools offered and give arguments that match their input schemas. When you are done, reply with only one JSON object and nothing else: {\"answer\": \"<the answer in plain words>\", \"key_facts\": {<the facts the answer rests on, as JSON values>}}.";

/// Agent settings (the binary fills them from env and flags).
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// `COST_CEILING_USD`.
    pub ceiling_usd: f64,
    /// `MAX_AGENT_STEPS`: model turns per request.
    pub max_steps: u32,
    /// `max_tokens` asked of each model call before clamping.
    pub max_tokens: u32,
    /// Most tools shown to the model; larger catalogs are ranked against the request.
    pub max_tools: usize,
    /// The broker's rules (seed 004), applied with the intent of each request's message.
    pub rules: Rules,
    pub namespace: Namespace,
    /// Prompt-cache breakpoints (on by default).
    pub cache: bool,
    /// `TRACE_VERBOSE`: arguments in trace records.
    pub trace_verbose: bool,
    /// `TRACE_FAIL_CLOSED`: refuse to run (and stop a run) while the trace cannot be written.
    pub trace_fail_closed: bool,
    pub prices: PriceTable,
    pub system_prompt: String,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            ceiling_usd: DEFAULT_CEILING_USD,
            max_steps: 8,
            max_tokens: 1024,
            max_tools: toolforge_select::selection::DEFAULT_MAX_TOOLS,
            rules: Rules::default(),
            namespace: Namespace::Auto,
            cache: true,
            trace_verbose: false,
            trace_fail_closed: false,
            prices: PriceTable::default(),
            system_prompt: SYSTEM_PROMPT.to_owned(),
        }
    }
}

/// Narrows the catalog a request may see (the visibility layer plugs in here).
pub type Visibility = Arc<dyn Fn(&Catalog) -> Catalog + Send + Sync>;

/// One request.
#[derive(Clone, Default)]
pub struct RunRequest {
    pub message: String,
    /// Earlier turns of the conversation, oldest first (text only), sent before `message`.
    pub prior: Vec<Message>,
    /// Continues a session (recency), or a new one is made.
    pub session_id: Option<String>,
    pub dry_run: bool,
    pub visibility: Option<Visibility>,
    /// Who asks (`anonymous` without identity): policies and limits decide for it, and every
    /// trace record names it.
    pub principal: toolforge_policy::Principal,
    /// Cancelled when the caller goes away; in-flight tool calls are cancelled with it.
    pub cancel: Option<CancellationToken>,
}

impl std::fmt::Debug for RunRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunRequest")
            .field("message", &self.message)
            .field("prior_turns", &self.prior.len())
            .field("session_id", &self.session_id)
            .field("dry_run", &self.dry_run)
            .finish_non_exhaustive()
    }
}

/// One tool call of a run.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Step {
    /// The model turn that asked for it (1-based).
    pub step: u32,
    /// The name the model called.
    pub tool: String,
    /// The server that ran it (or would have, in a dry run); `null` for an unknown tool.
    pub server: Option<String>,
    /// The server's own name of the tool.
    pub server_tool: Option<String>,
    pub arguments: Value,
    /// The selector's rule that chose the server (`null` for an unknown tool).
    #[schemars(extend("enum" = ["explicit-mention", "argument-type", "session-recency", "cosine-similarity", "priority-order", "single-candidate", null]))]
    pub selection_rule: Option<String>,
    pub alternatives: Vec<String>,
    pub executed: bool,
    pub dry_run: bool,
    pub success: bool,
    pub error: Option<String>,
    pub corrective_retry: bool,
    pub latency_ms: f64,
    /// Attempts the pool made (retries are transient failures only).
    pub attempts: u32,
    pub retry_reason: Option<String>,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub cost_usd: f64,
    /// The result, shortened.
    pub result_summary: String,
    /// The structured result (or the text result parsed as JSON, or `{"text": ...}`).
    pub raw_result: Value,
    /// The ids of the policies that decided this call (only in the trace record).
    #[serde(skip)]
    pub policy: Option<String>,
}

/// What a run returns (the `/chat` response body).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[schemars(rename = "ChatResponse")]
pub struct RunResult {
    /// Also in every trace record of this run.
    pub session_id: String,
    /// The final answer in plain words (partial output when halted).
    pub response: String,
    /// `key_facts` from the model's JSON answer (`{}` when it gave none).
    pub key_facts: Value,
    pub steps: Vec<Step>,
    pub cost_usd: f64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub usage: Usage,
    pub model_calls: u32,
    pub halted: bool,
    pub halt_reason: Option<HaltReason>,
    pub error: Option<String>,
    pub dry_run: bool,
    pub model: String,
    pub ceiling_usd: f64,
    /// Every tool this request could see, by exposed name, in catalog order.
    pub available_tools: Vec<String>,
    /// The tools sent to the model (the broker's choice), by model-facing name.
    pub offered_tools: Vec<String>,
    /// Why those tools.
    pub broker_rationale: String,
}

/// Progress of a run, for streaming.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", content = "data")]
pub enum RunEvent {
    #[serde(rename = "session.start")]
    SessionStart {
        session_id: String,
        dry_run: bool,
        offered_tools: Vec<String>,
    },
    #[serde(rename = "tool.result")]
    ToolResult(Box<Step>),
    #[serde(rename = "final.response")]
    Final(Box<RunResult>),
}

/// The agent: one per process, shared by requests.
pub struct Agent {
    backend: Arc<dyn ToolBackend>,
    model: Arc<dyn Model>,
    sessions: Arc<dyn SessionStore>,
    traces: TraceSink,
    config: AgentConfig,
    /// `EMBEDDER_BACKEND`'s embedder: ranking and `cosine-similarity` (the hashing embedder
    /// decides `cosine-similarity` when none is configured; ranking is then BM25 alone).
    embedder: Option<Arc<dyn Embedder>>,
    /// The selection of the last catalog seen (rebuilt when the catalog changes).
    selection: tokio::sync::Mutex<Option<Arc<Selection>>>,
    metrics: Option<crate::metrics::Metrics>,
    /// The policy and limits every offer and call passes.
    governance: Arc<crate::governance::Governance>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("model", &self.model.model())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A call the model asked for, after routing.
enum Planned {
    Unknown,
    Invalid {
        id: ToolId,
        rule: String,
        alternatives: Vec<String>,
        message: String,
    },
    Run {
        id: ToolId,
        rule: String,
        alternatives: Vec<String>,
    },
}

fn short(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let cut: String = text.chars().take(max).collect();
        format!("{cut}…")
    }
}

/// Splits `total` into `n` parts that add up to it (earlier parts take the remainder).
fn split_even(total: u64, n: usize, i: usize) -> u64 {
    let n = n.max(1) as u64;
    total / n + u64::from((i as u64) < total % n)
}

/// The model's final text as answer and key facts: a JSON object `{"answer", "key_facts"}`
/// anywhere in the text, else the whole text.
#[must_use]
pub fn parse_answer(text: &str) -> (String, Value) {
    let trimmed = text.trim();
    let candidates = [
        Some(trimmed),
        trimmed
            .find('{')
            .zip(trimmed.rfind('}'))
            .filter(|(a, b)| a < b)
            .map(|(a, b)| &trimmed[a..=b]),
    ];
    for c in candidates.into_iter().flatten() {
        if let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(c)
            && let Some(answer) = obj.get("answer").and_then(Value::as_str)
        {
            let facts = match obj.get("key_facts") {
                Some(Value::Object(m)) => Value::Object(m.clone()),
                _ => json!({}),
            };
            return (answer.to_owned(), facts);
        }
    }
    (trimmed.to_owned(), json!({}))
}

impl Agent {
    #[must_use]
    pub fn new(
        backend: Arc<dyn ToolBackend>,
        model: Arc<dyn Model>,
        sessions: Arc<dyn SessionStore>,
        traces: TraceSink,
        config: AgentConfig,
    ) -> Self {
        Self {
            backend,
            model,
            sessions,
            traces,
            config,
            embedder: None,
            selection: tokio::sync::Mutex::new(None),
            metrics: None,
            governance: Arc::default(),
        }
    }

    /// Offers and calls pass `governance` (policy, then limits).
    #[must_use]
    pub fn with_governance(mut self, governance: Arc<crate::governance::Governance>) -> Self {
        self.governance = governance;
        self
    }

    /// Ranks tools and decides `cosine-similarity` with `embedder` (`EMBEDDER_BACKEND`).
    #[must_use]
    pub fn with_embedder(mut self, embedder: Option<Arc<dyn Embedder>>) -> Self {
        self.embedder = embedder;
        self
    }

    /// Records every finished run in `metrics` (OpenTelemetry).
    #[must_use]
    pub fn with_metrics(mut self, metrics: Option<crate::metrics::Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// The metrics runs are recorded in, if any.
    #[must_use]
    pub fn metrics(&self) -> Option<&crate::metrics::Metrics> {
        self.metrics.as_ref()
    }

    #[must_use]
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    #[must_use]
    pub fn model(&self) -> &dyn Model {
        self.model.as_ref()
    }

    #[must_use]
    pub fn backend(&self) -> &Arc<dyn ToolBackend> {
        &self.backend
    }

    #[must_use]
    pub fn sessions(&self) -> &Arc<dyn SessionStore> {
        &self.sessions
    }

    #[must_use]
    pub fn traces(&self) -> &TraceSink {
        &self.traces
    }

    /// The catalog this request may see.
    #[must_use]
    pub fn visible_catalog(&self, request: &RunRequest) -> Catalog {
        let catalog = self.backend.catalog();
        match &request.visibility {
            Some(v) => v(&catalog),
            None => catalog,
        }
    }

    /// The embedder of `cosine-similarity`: the configured one, else the hashing embedder.
    fn route_embedder(&self) -> Arc<dyn Embedder> {
        self.embedder
            .clone()
            .unwrap_or_else(|| Arc::new(HashingEmbedder::default()))
    }

    /// The selection for `catalog`: the cached one while the catalog is unchanged, else built
    /// (and its tools embedded) once. An embedder that fails leaves ranking to BM25 and
    /// `cosine-similarity` abstaining, with a warning.
    async fn selection(&self, catalog: Catalog) -> Arc<Selection> {
        let mut cached = self.selection.lock().await;
        if let Some(s) = cached.as_ref()
            && s.catalog() == &catalog
        {
            return Arc::clone(s);
        }
        let limits = Limits {
            max_tools: self.config.max_tools,
            ..Limits::default()
        };
        let mut selection = Selection::new(catalog, self.config.rules.clone(), limits);
        if let Some(embedder) = &self.embedder {
            match embedder.embed(&selection.rank_texts()).await {
                Ok(vectors) => selection = selection.with_rank_vectors(vectors),
                Err(e) => {
                    tracing::warn!(error = %e, "embedding the tools failed: ranking with BM25 alone")
                }
            }
        }
        let (ids, texts): (Vec<ToolId>, Vec<String>) = selection.route_texts().into_iter().unzip();
        if !texts.is_empty() {
            match self.route_embedder().embed(&texts).await {
                Ok(vectors) => {
                    selection =
                        selection.with_route_vectors(ids.into_iter().zip(vectors).collect());
                }
                Err(e) => {
                    tracing::warn!(error = %e, "embedding the overlap groups failed: cosine-similarity abstains")
                }
            }
        }
        let selection = Arc::new(selection);
        *cached = Some(Arc::clone(&selection));
        selection
    }

    /// Vectors of the request for ranking (`None` without a configured embedder) and for
    /// `cosine-similarity`.
    async fn request_vectors(
        &self,
        selection: &Selection,
        message: &str,
    ) -> (Option<Vec<Vec<f32>>>, Option<Vec<f32>>) {
        let texts = Selection::query_texts(message);
        let rank = match &self.embedder {
            Some(e) if selection.ranks_with_vectors() => match e.embed(&texts).await {
                Ok(v) => Some(v),
                Err(e) => {
                    tracing::warn!(error = %e, "embedding the request failed: ranking with BM25 alone");
                    None
                }
            },
            _ => None,
        };
        let route = match (&self.embedder, &rank) {
            (Some(_), Some(v)) => v.first().cloned(),
            _ => self
                .route_embedder()
                .embed(&texts[..1])
                .await
                .ok()
                .and_then(|mut v| v.pop()),
        };
        (rank, route)
    }

    /// Runs one request to its end. Events go to `events` when given.
    pub async fn run(
        &self,
        request: RunRequest,
        events: Option<mpsc::UnboundedSender<RunEvent>>,
    ) -> RunResult {
        let span = crate::spans::run(request.dry_run);
        let result = self
            .run_inner(request, events)
            .instrument(span.clone())
            .await;
        crate::spans::record_run(&span, &result);
        drop(span);
        if let Some(m) = &self.metrics {
            m.record_run(&result);
        }
        result
    }

    async fn run_inner(
        &self,
        request: RunRequest,
        events: Option<mpsc::UnboundedSender<RunEvent>>,
    ) -> RunResult {
        let session_id = request
            .session_id
            .clone()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let send = |e: RunEvent| {
            if let Some(tx) = &events {
                let _ = tx.send(e);
            }
        };
        if !request.dry_run {
            // Servers launched a moment ago (`serve` answers at once) get their start.
            self.backend.settled().await;
        }
        let mut visible = self.visible_catalog(&request);
        if self.governance.has_policy() {
            let principal = &request.principal;
            visible = visible.narrowed(
                |_, tool| {
                    self.governance
                        .permits_tool(principal, toolforge_policy::Action::List, tool)
                },
                |_| true,
            );
        }
        let full = Presentation::new(&visible, self.config.namespace);
        let available_tools: Vec<String> = full.tools().iter().map(|t| t.name.clone()).collect();
        let selection = self.selection(self.backend.catalog()).await;
        let (query_vectors, prompt_vector) =
            self.request_vectors(&selection, &request.message).await;
        let visible_ids: HashSet<ToolId> = visible.tools().map(|t| t.id()).collect();
        let span = crate::spans::offer();
        let offer = span.in_scope(|| {
            selection.offer(&OfferRequest {
                message: &request.message,
                intent: None,
                visible: Some(&visible_ids),
                query_vectors: query_vectors.as_deref(),
            })
        });
        crate::spans::record_offer(&span, offer.tools.len(), offer.left_out.len());
        drop(span);
        let rationale = offer.summary();
        if !offer.left_out.is_empty() {
            tracing::info!(
                session_id = %session_id,
                offered = offer.tools.len(),
                left_out = offer.left_out.len(),
                "{rationale}"
            );
        }
        let chosen_ids: HashSet<ToolId> = offer.ids().into_iter().collect();
        let subset = Catalog {
            servers: visible
                .servers
                .iter()
                .map(|s| ServerEntry {
                    tools: s
                        .tools
                        .iter()
                        .filter(|t| chosen_ids.contains(&t.id()))
                        .cloned()
                        .collect(),
                    ..s.clone()
                })
                .collect(),
            overlaps: visible.overlaps.clone(),
        };
        let presentation = Presentation::new(&subset, self.config.namespace);
        let specs: Vec<ToolSpec> = presentation
            .tools()
            .iter()
            .map(|t| ToolSpec {
                name: presentation.model_name(t).to_owned(),
                description: t.description.clone(),
                input_schema: t.input_schema.clone(),
            })
            .collect();
        let (price, known) = self.config.prices.price(self.model.model());
        if !known {
            tracing::warn!(
                model = self.model.model(),
                "no price configured for this model: charging the dearest known price"
            );
        }
        let mut result = RunResult {
            session_id: session_id.clone(),
            response: String::new(),
            key_facts: json!({}),
            steps: Vec::new(),
            cost_usd: 0.0,
            tokens_in: 0,
            tokens_out: 0,
            usage: Usage::default(),
            model_calls: 0,
            halted: false,
            halt_reason: None,
            error: None,
            dry_run: request.dry_run,
            model: self.model.model().to_owned(),
            ceiling_usd: self.config.ceiling_usd,
            available_tools,
            offered_tools: specs.iter().map(|s| s.name.clone()).collect(),
            broker_rationale: rationale,
        };
        send(RunEvent::SessionStart {
            session_id: session_id.clone(),
            dry_run: request.dry_run,
            offered_tools: result.offered_tools.clone(),
        });

        if !request.dry_run {
            let down: HashSet<String> = self.backend.unavailable().into_iter().collect();
            let needed: HashSet<&str> = chosen_ids.iter().map(|t| t.server.as_str()).collect();
            // Nothing to offer while servers are down: the tools it needs may be theirs.
            let blocked = if needed.is_empty() {
                !down.is_empty()
            } else {
                needed.iter().all(|s| down.contains(*s))
            };
            if blocked {
                let needed = if needed.is_empty() {
                    down.iter().map(String::as_str).collect()
                } else {
                    needed
                };
                let mut names: Vec<&str> = needed.into_iter().collect();
                names.sort_unstable();
                result.halted = true;
                result.halt_reason = Some(HaltReason::ServersUnavailable);
                result.error = Some(format!(
                    "the MCP servers this request needs are down: {}",
                    names.join(", ")
                ));
                send(RunEvent::Final(Box::new(result.clone())));
                return result;
            }
        }

        if self.config.trace_fail_closed && !self.traces.writable().await {
            halt_on_trace(&mut result);
            result.error = Some(format!(
                "{} Nothing was run.",
                result.error.take().unwrap_or_default()
            ));
            send(RunEvent::Final(Box::new(result.clone())));
            return result;
        }

        let mut guard = CostGuard::new(self.config.ceiling_usd, price);
        let mut history = self.sessions.history(&session_id).await;
        let mut rejected_once: HashSet<String> = HashSet::new();
        let mut messages = request.prior.clone();
        messages.push(Message::user(request.message.clone()));
        let mut finished = false;
        let mut trace_failed = false;

        for step in 1..=self.config.max_steps.max(1) {
            if request
                .cancel
                .as_ref()
                .is_some_and(CancellationToken::is_cancelled)
            {
                result.halted = true;
                result.halt_reason = Some(HaltReason::Cancelled);
                finished = true;
                break;
            }
            let mut model_request = ModelRequest {
                system: self.config.system_prompt.clone(),
                tools: specs.clone(),
                messages: messages.clone(),
                max_tokens: self.config.max_tokens,
                cache: self.config.cache,
            };
            let bound = self.input_bound(&guard, &model_request).await;
            let clamped = match guard.allow(bound.tokens, self.config.max_tokens) {
                Allowance::Halt => {
                    result.halted = true;
                    result.halt_reason = Some(HaltReason::CostCeiling);
                    finished = true;
                    break;
                }
                Allowance::Call { max_tokens } => {
                    model_request.max_tokens = max_tokens;
                    max_tokens < self.config.max_tokens
                }
            };
            let span = crate::spans::model_call(self.model.provider(), self.model.model());
            let called = self
                .model
                .complete(&model_request)
                .instrument(span.clone())
                .await;
            let response = match called {
                Ok(r) => r,
                Err(e) => {
                    crate::spans::record_model_error(&span);
                    result.halted = true;
                    result.halt_reason = Some(HaltReason::ModelError);
                    result.error = Some(e.to_string());
                    finished = true;
                    break;
                }
            };
            result.model_calls += 1;
            let cost = guard.record(bound, &response.usage);
            crate::spans::record_model_call(&span, &response.usage, cost);
            drop(span);
            result.usage.add(&response.usage);
            let uses: Vec<(String, String, Value)> = response
                .tool_uses()
                .into_iter()
                .map(|(id, name, input)| (id.to_owned(), name.to_owned(), input.clone()))
                .collect();
            if response.stop_reason == StopReason::MaxTokens || uses.is_empty() {
                // No tool call will carry this call's cost: it gets a record of its own.
                let traced = self
                    .trace(self.model_call_record(&session_id, step, &response, cost, &request))
                    .await;
                if !traced {
                    trace_failed = true;
                }
            }
            if response.stop_reason == StopReason::MaxTokens {
                result.response = response.text();
                result.halted = true;
                result.halt_reason = Some(if clamped {
                    HaltReason::CostCeiling
                } else {
                    HaltReason::MaxTokens
                });
                finished = true;
                break;
            }
            if uses.is_empty() {
                let (answer, facts) = parse_answer(&response.text());
                result.response = answer;
                result.key_facts = facts;
                finished = true;
                break;
            }
            // The caller left while the model answered: no new tool call starts.
            if request
                .cancel
                .as_ref()
                .is_some_and(CancellationToken::is_cancelled)
            {
                result.halted = true;
                result.halt_reason = Some(HaltReason::Cancelled);
                finished = true;
                break;
            }
            messages.push(Message {
                role: Role::Assistant,
                content: response.content.clone(),
            });

            // Route every call (in order), then run them concurrently.
            let n = uses.len();
            let mut planned = Vec::with_capacity(n);
            for (_, name, input) in &uses {
                let span = crate::spans::route();
                let plan = span.in_scope(|| {
                    self.route(
                        &presentation,
                        &selection,
                        prompt_vector.as_deref(),
                        &request.message,
                        &history,
                        name,
                        input,
                    )
                });
                let chosen = match &plan {
                    Planned::Run { id, rule, .. } | Planned::Invalid { id, rule, .. } => {
                        Some((id, rule.as_str()))
                    }
                    Planned::Unknown => None,
                };
                crate::spans::record_route(&span, chosen);
                planned.push(plan);
            }
            let principal = &request.principal;
            let dry_run = request.dry_run;
            let futures = uses.iter().zip(&planned).map(|((_, _, input), plan)| {
                let cancel = request.cancel.clone();
                let subset = &subset;
                async move {
                    let started = Instant::now();
                    // Policy, then limits: a refused call never reaches its server.
                    let admission = match plan {
                        Planned::Run { id, .. } => match subset.get(id) {
                            Some(tool) if dry_run => {
                                let d = self.governance.decide(
                                    principal,
                                    toolforge_policy::Action::Call,
                                    toolforge_policy::Target::Tool(crate::governance::tool_ref(
                                        tool,
                                    )),
                                    Some(input),
                                );
                                if d.allowed {
                                    Ok(Some(d))
                                } else {
                                    Err(crate::governance::Refusal::Denied {
                                        policy: d.deciding(),
                                        message: d.denial(
                                            toolforge_policy::Action::Call,
                                            &id.to_string(),
                                        ),
                                    })
                                }
                            }
                            Some(tool) => self
                                .governance
                                .admit_call(principal, tool, input)
                                .await
                                .map(Some),
                            None => Ok(None),
                        },
                        _ => Ok(None),
                    };
                    let outcome = match (plan, &admission) {
                        (Planned::Run { id, .. }, Ok(_)) if !dry_run => {
                            let args = match input {
                                Value::Object(m) => m.clone(),
                                _ => Map::new(),
                            };
                            Some(self.backend.call(&id.server, &id.name, args, cancel).await)
                        }
                        _ => None,
                    };
                    (outcome, started.elapsed().as_secs_f64() * 1000.0, admission)
                }
            });
            let outcomes = futures::future::join_all(futures).await;

            let mut results = Vec::with_capacity(n);
            for (i, (((use_id, name, input), plan), (outcome, latency_ms, admission))) in
                uses.iter().zip(planned).zip(outcomes).enumerate()
            {
                let corrective = rejected_once.contains(name);
                let tokens_in = split_even(response.usage.total_input(), n, i);
                let tokens_out = split_even(response.usage.output_tokens, n, i);
                let mut record = Step {
                    step,
                    tool: name.clone(),
                    server: None,
                    server_tool: None,
                    arguments: input.clone(),
                    selection_rule: None,
                    alternatives: Vec::new(),
                    executed: false,
                    dry_run: request.dry_run,
                    success: false,
                    error: None,
                    corrective_retry: corrective,
                    latency_ms,
                    attempts: 0,
                    retry_reason: None,
                    tokens_in,
                    tokens_out,
                    cost_usd: cost / n as f64,
                    result_summary: String::new(),
                    raw_result: Value::Null,
                    policy: None,
                };
                match &admission {
                    Ok(Some(decision)) if self.governance.has_policy() => {
                        record.policy = Some(decision.deciding());
                    }
                    Err(crate::governance::Refusal::Denied { policy, .. }) => {
                        record.policy = Some(policy.clone());
                    }
                    _ => {}
                }
                let (content, is_error) = match plan {
                    Planned::Unknown => {
                        let known: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
                        let msg = format!("unknown tool \"{name}\"");
                        record.error = Some(msg.clone());
                        (
                            format!("Error: {msg}. The tools offered are: {}.", known.join(", ")),
                            true,
                        )
                    }
                    Planned::Invalid {
                        id,
                        rule,
                        alternatives,
                        message,
                    } => {
                        record.server = Some(id.server.clone());
                        record.server_tool = Some(id.name.clone());
                        record.selection_rule = Some(rule);
                        record.alternatives = alternatives;
                        record.error = Some(message.clone());
                        let schema = subset
                            .get(&id)
                            .map(|t| t.input_schema.to_string())
                            .unwrap_or_default();
                        let text = if rejected_once.insert(name.clone()) {
                            format!(
                                "Error: the arguments do not match the input schema of \"{name}\" ({message}). Its schema is {schema}. Call it again with arguments that match."
                            )
                        } else {
                            format!(
                                "Error: the arguments still do not match the input schema of \"{name}\" ({message}); the call was not made."
                            )
                        };
                        (text, true)
                    }
                    Planned::Run {
                        id,
                        rule,
                        alternatives,
                    } => {
                        record.server = Some(id.server.clone());
                        record.server_tool = Some(id.name.clone());
                        record.selection_rule = Some(rule);
                        record.alternatives = alternatives;
                        if let Err(refusal) = admission {
                            let message = refusal.message().to_owned();
                            record.error = Some(message.clone());
                            record.raw_result = match &refusal {
                                crate::governance::Refusal::Limited { retry_after_ms, .. } => {
                                    json!({"error": message, "retryAfterMs": retry_after_ms})
                                }
                                crate::governance::Refusal::Denied { policy, .. } => {
                                    json!({"error": message, "policy": policy})
                                }
                            };
                            (format!("Error: {message}"), true)
                        } else {
                            match outcome {
                                None => {
                                    record.success = true;
                                    let synthetic = json!({
                                        "dry_run": true,
                                        "executed": false,
                                        "server": id.server,
                                        "tool": id.name,
                                        "note": "Dry run: this call was planned but not executed. Continue the plan as if it had succeeded, without inventing its result.",
                                    });
                                    record.raw_result = synthetic.clone();
                                    (synthetic.to_string(), false)
                                }
                                Some(Ok(out)) => {
                                    record.executed = true;
                                    record.success = !out.is_error;
                                    if out.is_error {
                                        record.error = Some(short(&out.text, 500));
                                    }
                                    record.raw_result = raw_result(&out);
                                    // Executed calls feed session recency (dry runs never do).
                                    history.push(id.clone());
                                    self.sessions.push(&session_id, id.clone()).await;
                                    let text = match &out.structured {
                                        Some(v) if out.text.trim().is_empty() => v.to_string(),
                                        _ => out.text.clone(),
                                    };
                                    record.attempts = out.attempts;
                                    record.retry_reason = out.retry_reason.clone();
                                    (text, out.is_error)
                                }
                                Some(Err(failure)) => {
                                    record.executed = true;
                                    record.error = Some(failure.error.clone());
                                    record.attempts = failure.attempts;
                                    record.retry_reason = failure.retry_reason.clone();
                                    (format!("Error: {}", failure.error), true)
                                }
                            }
                        }
                    }
                };
                record.result_summary = short(&content, 200);
                if record.raw_result.is_null() {
                    record.raw_result = json!({"text": content});
                }
                if !self
                    .trace(self.tool_call_record(&session_id, &request.principal, &record))
                    .await
                {
                    trace_failed = true;
                }
                send(RunEvent::ToolResult(Box::new(record.clone())));
                result.steps.push(record);
                results.push(Content::ToolResult {
                    tool_use_id: use_id.clone(),
                    content,
                    is_error,
                });
            }
            messages.push(Message {
                role: Role::User,
                content: results,
            });
            if trace_failed {
                halt_on_trace(&mut result);
                finished = true;
                break;
            }
        }
        if !finished {
            result.halted = true;
            result.halt_reason = Some(HaltReason::MaxSteps);
        }
        if result.halted && result.response.is_empty() {
            result.response = partial_output(&result);
        }
        result.cost_usd = guard.spent();
        result.tokens_in = result.usage.total_input();
        result.tokens_out = result.usage.output_tokens;
        send(RunEvent::Final(Box::new(result.clone())));
        result
    }

    #[allow(clippy::too_many_arguments)]
    fn route(
        &self,
        presentation: &Presentation,
        selection: &Selection,
        prompt_vector: Option<&[f32]>,
        prompt: &str,
        history: &[ToolId],
        name: &str,
        input: &Value,
    ) -> Planned {
        let (id, rule, alternatives) = match presentation.resolve_model_name(name) {
            None => return Planned::Unknown,
            Some(Resolved::Direct(id)) => (id, "single-candidate".to_owned(), Vec::new()),
            Some(Resolved::Group(group)) => {
                let call = Call {
                    candidates: &group.members,
                    prompt,
                    arguments: input,
                    session: history,
                    prompt_vector,
                };
                match selection.route(&call) {
                    Some(d) => (d.chosen, d.rule.to_owned(), d.alternatives),
                    None => return Planned::Unknown,
                }
            }
        };
        if let Some(message) = selection.argument_errors(&id, input) {
            return Planned::Invalid {
                id,
                rule,
                alternatives,
                message,
            };
        }
        Planned::Run {
            id,
            rule,
            alternatives,
        }
    }

    /// The bound the guard sizes the next call with: the byte bound when it already pays the
    /// whole `max_tokens` (no round trip needed), else the model's count while counts are
    /// trusted.
    async fn input_bound(&self, guard: &CostGuard, request: &ModelRequest) -> InputBound {
        let upper = InputBound::upper(request);
        let fits = matches!(
            guard.allow(upper.tokens, self.config.max_tokens),
            Allowance::Call { max_tokens } if max_tokens == self.config.max_tokens
        );
        if fits || !guard.trusts_counts() {
            return upper;
        }
        let counted = self.model.input_bound(request).await;
        if counted.tokens <= upper.tokens {
            counted
        } else {
            upper
        }
    }

    /// Writes one trace record: queued, or (fail-closed) written before the run goes on.
    /// `false` when a fail-closed write failed.
    async fn trace(&self, record: TraceRecord) -> bool {
        if self.config.trace_fail_closed {
            self.traces.emit_confirmed(record).await
        } else {
            self.traces.emit(record);
            true
        }
    }

    fn model_call_record(
        &self,
        session_id: &str,
        step: u32,
        response: &ModelResponse,
        cost: f64,
        request: &RunRequest,
    ) -> TraceRecord {
        TraceRecord {
            schema_version: SCHEMA_VERSION.to_owned(),
            kind: RecordKind::ModelCall,
            timestamp: timestamp_now(),
            session_id: session_id.to_owned(),
            step,
            server: None,
            tool: String::new(),
            arguments_hash: String::new(),
            arguments: None,
            latency_ms: 0.0,
            success: true,
            executed: false,
            dry_run: request.dry_run,
            tokens_in: response.usage.total_input(),
            tokens_out: response.usage.output_tokens,
            cost_usd: trace_cost(cost),
            selection_rule: None,
            alternatives: Vec::new(),
            attempt: 1,
            retries: 0,
            retry_reason: None,
            error: None,
            corrective_retry: false,
            principal: request.principal.to_string(),
            policy: None,
            decision: None,
            prev_hash: None,
        }
    }

    fn tool_call_record(
        &self,
        session_id: &str,
        principal: &toolforge_policy::Principal,
        step: &Step,
    ) -> TraceRecord {
        let attempt = step.attempts.max(1);
        TraceRecord {
            schema_version: SCHEMA_VERSION.to_owned(),
            kind: RecordKind::ToolCall,
            timestamp: timestamp_now(),
            session_id: session_id.to_owned(),
            step: step.step,
            server: step.server.clone(),
            tool: step
                .server_tool
                .clone()
                .unwrap_or_else(|| step.tool.clone()),
            arguments_hash: arguments_hash(&step.arguments),
            arguments: self.config.trace_verbose.then(|| step.arguments.clone()),
            latency_ms: (step.latency_ms * 10.0).round() / 10.0,
            success: step.success,
            executed: step.executed,
            dry_run: step.dry_run,
            tokens_in: step.tokens_in,
            tokens_out: step.tokens_out,
            cost_usd: trace_cost(step.cost_usd),
            selection_rule: step.selection_rule.clone(),
            alternatives: step.alternatives.clone(),
            attempt,
            retries: attempt - 1,
            retry_reason: step.retry_reason.clone(),
            error: step.error.clone(),
            corrective_retry: step.corrective_retry,
            principal: principal.to_string(),
            policy: step.policy.clone(),
            decision: None,
            prev_hash: None,
        }
    }
}

/// Dollars as traced: to the nano-dollar, so the trace sums to the responses' `cost_usd` to far
/// below a cent over any number of records, without float noise in the file.
fn trace_cost(usd: f64) -> f64 {
    (usd * 1e9).round() / 1e9
}

/// Halts `result` because the trace cannot be written (fail-closed mode).
fn halt_on_trace(result: &mut RunResult) {
    result.halted = true;
    result.halt_reason = Some(HaltReason::TraceUnavailable);
    result.error = Some(
        "the trace file cannot be written (is the disk full?), and TRACE_FAIL_CLOSED is on.".into(),
    );
}

fn raw_result(out: &ToolOutput) -> Value {
    if let Some(v) = &out.structured {
        return v.clone();
    }
    serde_json::from_str::<Value>(&out.text)
        .ok()
        .filter(|v| v.is_object() || v.is_array())
        .unwrap_or_else(|| json!({"text": out.text}))
}

fn partial_output(result: &RunResult) -> String {
    let done: Vec<String> = result
        .steps
        .iter()
        .filter(|s| s.success)
        .map(|s| format!("{} ({})", s.tool, short(&s.result_summary, 120)))
        .collect();
    let why = result.halt_reason.map_or("halted", HaltReason::as_str);
    if done.is_empty() {
        format!("Halted ({why}) before any tool call succeeded.")
    } else {
        format!("Halted ({why}). Completed so far: {}", done.join("; "))
    }
}
