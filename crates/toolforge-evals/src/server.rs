//! The MCP face of the evals tools: argument schemas with the seed's defaults, one limit per
//! call, and the wire shape of results and errors; stdio and Streamable HTTP serving.
//!
//! Results: objects go out as `structuredContent` plus the same JSON as text; `complete`'s
//! string and `calculate_drift`'s float go out as text (the float as Python prints it) with
//! `structuredContent: {"result": …}`, as Python MCP servers wrap scalar results.
//! Failures are tool results with `isError: true` and a message that starts with the seed's
//! exception kind (see [`crate::error`]); JSON-RPC errors are left to protocol problems
//! (unknown tool; rmcp reports undeserialisable arguments in-band too).

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use indexmap::IndexMap;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::{ErrorData as McpError, ServerHandler, tool, tool_handler, tool_router};
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};
use tracing::info;

use crate::analysis::TrajectoryOptions;
use crate::config::EvalsConfig;
use crate::error::EvalError;
use crate::pyjson;
use crate::react::{MockTools, ReActIteration};
use crate::tools::{CompleteOptions, Limit, StepRequest, Tools, requested, within};

/// The server's name in `initialize`.
pub const SERVER_NAME: &str = "toolforge-evals";

/// Tool order in `tools/list`: the seed's nine, then `grade_selection`.
pub const TOOL_ORDER: &[&str] = &[
    "list_models",
    "complete",
    "react_step",
    "judge",
    "calculate_drift",
    "analyze_variants",
    "generate_variants",
    "analyze_trajectory",
    "compare_trajectories",
    "grade_selection",
];

fn d_complete_temperature() -> f64 {
    0.7
}
fn d_max_tokens() -> i64 {
    2048
}
fn d_300() -> i64 {
    300
}
fn d_60() -> i64 {
    60
}
fn d_judge_temperature() -> f64 {
    0.1
}
fn d_judge_max_tokens() -> i64 {
    256
}
fn d_variants_temperature() -> f64 {
    0.3
}
fn d_variants_max_tokens() -> i64 {
    512
}
fn d_dimensions() -> Vec<String> {
    crate::variants::DEFAULT_DIMENSIONS
        .iter()
        .map(|d| (*d).to_owned())
        .collect()
}
fn d_baseline_label() -> String {
    "imperative".into()
}
fn d_constraint_name() -> String {
    "unnamed".into()
}
fn d_threshold() -> f64 {
    crate::analysis::DEFAULT_ACCELERATION_THRESHOLD
}

/// Arguments of `list_models` (none).
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct NoArgs {}

/// Arguments of `complete`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct CompleteArgs {
    /// A model id from list_models.
    pub model_id: String,
    /// OpenAI chat messages, e.g. [{"role": "user", "content": "..."}].
    pub messages: Vec<Value>,
    /// Sampling temperature: 0.0 for deterministic evaluation, 0.7 for general use.
    #[serde(default = "d_complete_temperature")]
    pub temperature: f64,
    /// Response length limit in tokens.
    #[serde(default = "d_max_tokens")]
    pub max_tokens: i64,
    /// Per-request timeout in seconds.
    #[serde(default = "d_300")]
    pub timeout_seconds: i64,
    /// OpenAI tool definitions passed to the model; tool calls are neither parsed nor
    /// dispatched (use react_step for tool loops).
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    /// Reproducibility seed (model support varies).
    #[serde(default)]
    pub seed: Option<i64>,
    /// Repetition penalty (model support varies).
    #[serde(default)]
    pub repeat_penalty: Option<f64>,
    /// Structured output schema, passed to the server unchanged.
    #[serde(default)]
    pub response_format: Option<Value>,
}

/// `mock_tools` must be present, and may be null (forwarding mode).
fn present_or_null<'de, D: Deserializer<'de>>(d: D) -> Result<Option<MockTools>, D::Error> {
    Option::<MockTools>::deserialize(d)
}

/// The schema of `mock_tools`: an object of objects of strings, or null; required.
struct NullableMockTools;

impl schemars::JsonSchema for NullableMockTools {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NullableMockTools".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = generator.subschema_for::<MockTools>();
        schema.insert("type".into(), json!(["object", "null"]));
        schema
    }
}

/// Arguments of `react_step`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ReactStepArgs {
    /// Model to call.
    pub model_id: String,
    /// The system message.
    pub system_prompt: String,
    /// The user's goal or task.
    pub initial_message: String,
    /// Previous iterations, the canonical record (messages are rebuilt from it).
    pub trace: Vec<ReActIteration>,
    /// Mock responses: tool name → (key → observation). Keys are tried in order: the exact
    /// arguments as json.dumps(args, sort_keys=True), any argument's value, "_default".
    /// null selects tool-forwarding mode (calls come back in pending_tool_calls).
    #[serde(deserialize_with = "present_or_null")]
    #[schemars(with = "NullableMockTools")]
    pub mock_tools: Option<MockTools>,
    /// OpenAI tool definitions.
    pub tools: Vec<Value>,
    /// Running counter for unique tool call ids (pass back the returned call_counter).
    #[serde(default)]
    pub call_counter: i64,
    /// Sampling temperature (0.0 for deterministic evaluation).
    #[serde(default)]
    pub temperature: f64,
    /// Response length limit in tokens.
    #[serde(default = "d_max_tokens")]
    pub max_tokens: i64,
    /// Timeout in seconds.
    #[serde(default = "d_300")]
    pub timeout_seconds: i64,
    /// Structured output schema, passed to the server unchanged.
    #[serde(default)]
    pub response_format: Option<Value>,
}

/// Arguments of `judge`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct JudgeArgs {
    /// The model response to evaluate.
    pub response: String,
    /// Natural-language pass/fail criteria.
    pub criteria: String,
    /// The model that judges.
    pub judge_model: String,
    /// Low for consistent judging.
    #[serde(default = "d_judge_temperature")]
    pub temperature: f64,
    /// Judge answers are short.
    #[serde(default = "d_judge_max_tokens")]
    pub max_tokens: i64,
    /// Timeout in seconds.
    #[serde(default = "d_60")]
    pub timeout_seconds: i64,
}

/// Arguments of `calculate_drift`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct DriftArgs {
    /// First text (typically the model response).
    pub text_a: String,
    /// Second text (typically the expected exemplar).
    pub text_b: String,
}

/// Arguments of `analyze_variants`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AnalyzeVariantsArgs {
    /// Label → prompt text.
    #[schemars(with = "BTreeMap<String, String>")]
    pub variants: IndexMap<String, String>,
    /// Which variant is the baseline.
    #[serde(default = "d_baseline_label")]
    pub baseline_label: String,
    /// Label for the constraint set.
    #[serde(default = "d_constraint_name")]
    pub constraint_name: String,
}

/// Arguments of `generate_variants`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct GenerateVariantsArgs {
    /// The imperative constraint to rephrase.
    pub baseline: String,
    /// Model for generation.
    pub model_id: String,
    /// Grammatical dimensions: mood, voice, person, tense, frame.
    #[serde(default = "d_dimensions")]
    pub dimensions: Vec<String>,
    /// Low for consistent rephrasing.
    #[serde(default = "d_variants_temperature")]
    pub temperature: f64,
    /// Response length limit in tokens.
    #[serde(default = "d_variants_max_tokens")]
    pub max_tokens: i64,
    /// Timeout in seconds.
    #[serde(default = "d_60")]
    pub timeout_seconds: i64,
}

/// Arguments of `analyze_trajectory`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct AnalyzeTrajectoryArgs {
    /// Text passage (needs 2+ sentences).
    pub text: String,
    /// Accelerations above this are spikes.
    #[serde(default = "d_threshold")]
    pub acceleration_threshold: f64,
    /// Add the per-sentence breakdown.
    #[serde(default)]
    pub include_sentences: bool,
}

/// Arguments of `compare_trajectories`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct CompareTrajectoriesArgs {
    /// Reference passage (target structure), 3+ sentences.
    pub golden_text: String,
    /// Model-generated passage to evaluate, 3+ sentences.
    pub synthetic_text: String,
    /// Accelerations above this are spikes.
    #[serde(default = "d_threshold")]
    pub acceleration_threshold: f64,
}

/// Arguments of `grade_selection`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct GradeSelectionArgs {
    /// Path of a catalog snapshot (`toolforge tools snapshot` writes one).
    pub catalog: String,
    /// Path of the selection cases, JSON Lines.
    pub cases: String,
}

/// A tool's successful output before it is put on the wire.
enum Output {
    Object(Value),
    Text(String),
    Float(f64),
}

fn to_result(output: Result<Output, EvalError>) -> CallToolResult {
    match output {
        Ok(Output::Object(v)) => {
            let mut r = CallToolResult::success(vec![ContentBlock::text(v.to_string())]);
            r.structured_content = Some(v);
            r
        }
        Ok(Output::Text(s)) => {
            let mut r = CallToolResult::success(vec![ContentBlock::text(s.clone())]);
            r.structured_content = Some(json!({ "result": s }));
            r
        }
        Ok(Output::Float(x)) => {
            let mut r = CallToolResult::success(vec![ContentBlock::text(pyjson::float_repr(x))]);
            r.structured_content = Some(json!({ "result": x }));
            r
        }
        Err(e) => CallToolResult::error(vec![ContentBlock::text(e.to_string())]),
    }
}

fn object<T: serde::Serialize>(v: &T) -> Result<Output, EvalError> {
    serde_json::to_value(v)
        .map(Output::Object)
        .map_err(|e| EvalError::InvalidArgument(format!("could not encode the result: {e}")))
}

/// The evals MCP server; cheap to clone (one per HTTP session), the toolbox is shared.
#[derive(Clone)]
pub struct EvalsServer {
    tools: Arc<Tools>,
}

impl std::fmt::Debug for EvalsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvalsServer").finish_non_exhaustive()
    }
}

impl EvalsServer {
    /// Runs one tool within its limit and logs how it went.
    async fn run(
        &self,
        tool: &'static str,
        limit: Result<Limit, EvalError>,
        fut: impl Future<Output = Result<Output, EvalError>>,
    ) -> Result<CallToolResult, McpError> {
        let started = Instant::now();
        let out = match limit {
            Ok(limit) => within(tool, limit, fut).await,
            Err(e) => Err(e),
        };
        let elapsed_ms = started.elapsed().as_millis() as u64;
        match &out {
            Ok(_) => info!(tool, elapsed_ms, "Tool call finished."),
            Err(e) => info!(tool, elapsed_ms, error = %e, "Tool call failed."),
        }
        Ok(to_result(out))
    }

    fn fixed(d: std::time::Duration) -> Result<Limit, EvalError> {
        Ok(Limit::Fixed(d))
    }
}

#[tool_router]
impl EvalsServer {
    /// A server over `config`'s adapters and embedder.
    ///
    /// # Errors
    /// The HTTP client cannot be built.
    pub fn new(config: &EvalsConfig) -> Result<Self, EvalError> {
        Ok(Self::from_tools(Arc::new(Tools::new(config)?)))
    }

    /// A server over an existing toolbox.
    #[must_use]
    pub fn from_tools(tools: Arc<Tools>) -> Self {
        Self { tools }
    }

    /// The toolbox.
    #[must_use]
    pub fn tools(&self) -> &Arc<Tools> {
        &self.tools
    }

    #[tool(
        description = "Discover the models available across all configured servers (LM Studio, Together, Hugging Face). Returns models (deduplicated, sorted), servers (URL -> models) and unreachable (URLs whose model list could not be fetched). Call at start-up or before choosing a model.",
        annotations(read_only_hint = true, open_world_hint = true)
    )]
    async fn list_models(
        &self,
        Parameters(_args): Parameters<NoArgs>,
    ) -> Result<CallToolResult, McpError> {
        let limit = Self::fixed(self.tools.timeouts().list_models);
        self.run("list_models", limit, async {
            object(&self.tools.list_models().await?)
        })
        .await
    }

    #[tool(
        description = "One chat completion from model_id (a model from list_models) with OpenAI messages. Returns the response text only; tools are passed to the model but tool calls are not parsed (use react_step). Send a throwaway 'Respond with only pong' with max_tokens=8 first: a cold model needs 30-45 s to load.",
        annotations(read_only_hint = true, open_world_hint = true)
    )]
    async fn complete(
        &self,
        Parameters(a): Parameters<CompleteArgs>,
    ) -> Result<CallToolResult, McpError> {
        let limit = requested(a.timeout_seconds);
        self.run("complete", limit, async {
            let options = CompleteOptions {
                temperature: a.temperature,
                max_tokens: a.max_tokens,
                tools: a.tools,
                seed: a.seed,
                repeat_penalty: a.repeat_penalty,
                response_format: a.response_format,
            };
            let text = self
                .tools
                .complete(&a.model_id, a.messages, options)
                .await?;
            Ok(Output::Text(text))
        })
        .await
    }

    #[tool(
        description = "Execute one ReAct iteration, statelessly: the trace goes in, one step comes out, the caller owns the loop. With mock_tools, tool calls are answered from the mocks (new_iterations); with mock_tools null, they are returned undispatched in pending_tool_calls. A call to DONE completes the step. Pass the returned call_counter back next time.",
        annotations(read_only_hint = true, open_world_hint = true)
    )]
    async fn react_step(
        &self,
        Parameters(a): Parameters<ReactStepArgs>,
    ) -> Result<CallToolResult, McpError> {
        let limit = requested(a.timeout_seconds);
        self.run("react_step", limit, async {
            let max_tokens = u32::try_from(a.max_tokens).map_err(|_| {
                EvalError::InvalidArgument(format!(
                    "max_tokens must be a positive integer, got {}",
                    a.max_tokens
                ))
            })?;
            let step = StepRequest {
                model_id: a.model_id,
                system_prompt: a.system_prompt,
                initial_message: a.initial_message,
                trace: a.trace,
                mock_tools: a.mock_tools,
                tools: a.tools,
                call_counter: a.call_counter,
                temperature: a.temperature,
                max_tokens,
                response_format: a.response_format,
            };
            Ok(Output::Object(self.tools.react_step(step).await?))
        })
        .await
    }

    #[tool(
        description = "LLM-as-judge: judge_model decides whether response meets the natural-language criteria. Returns pass, reason, score (0-10 or null) and raw_response.",
        annotations(read_only_hint = true, open_world_hint = true)
    )]
    async fn judge(
        &self,
        Parameters(a): Parameters<JudgeArgs>,
    ) -> Result<CallToolResult, McpError> {
        let limit = requested(a.timeout_seconds);
        self.run("judge", limit, async {
            let v = self
                .tools
                .judge(
                    &a.response,
                    &a.criteria,
                    &a.judge_model,
                    a.temperature,
                    a.max_tokens,
                )
                .await?;
            object(&v)
        })
        .await
    }

    #[tool(
        description = "Cosine distance between the embeddings of two texts (0 identical, ~0.1-0.3 same meaning in other words, 0.5+ substantially different, 1 orthogonal, 2 opposite): how far a response drifted from an exemplar.",
        annotations(read_only_hint = true, open_world_hint = true)
    )]
    async fn calculate_drift(
        &self,
        Parameters(a): Parameters<DriftArgs>,
    ) -> Result<CallToolResult, McpError> {
        let limit = Self::fixed(self.tools.timeouts().calculate_drift);
        self.run("calculate_drift", limit, async {
            Ok(Output::Float(
                self.tools.calculate_drift(&a.text_a, &a.text_b).await?,
            ))
        })
        .await
    }

    #[tool(
        description = "Embed prompt variants (label -> text) and compute cosine distances from the baseline and between every pair; recommends the variants most likely to change model behaviour.",
        annotations(read_only_hint = true, open_world_hint = true)
    )]
    async fn analyze_variants(
        &self,
        Parameters(a): Parameters<AnalyzeVariantsArgs>,
    ) -> Result<CallToolResult, McpError> {
        let limit = Self::fixed(self.tools.timeouts().analyze_variants);
        self.run("analyze_variants", limit, async {
            Ok(Output::Object(
                self.tools
                    .analyze_variants(&a.variants, &a.baseline_label, &a.constraint_name)
                    .await?,
            ))
        })
        .await
    }

    #[tool(
        description = "Generate grammatical variants of an imperative constraint with model_id (dimensions: mood, voice, person, tense, frame). Returns baseline, dimensions_requested, variants (label -> text, the baseline under 'imperative') and variant_count; variants can go straight into analyze_variants.",
        annotations(read_only_hint = true, open_world_hint = true)
    )]
    async fn generate_variants(
        &self,
        Parameters(a): Parameters<GenerateVariantsArgs>,
    ) -> Result<CallToolResult, McpError> {
        let limit = requested(a.timeout_seconds);
        self.run("generate_variants", limit, async {
            Ok(Output::Object(
                self.tools
                    .generate_variants(
                        &a.baseline,
                        &a.model_id,
                        &a.dimensions,
                        a.temperature,
                        a.max_tokens,
                    )
                    .await?,
            ))
        })
        .await
    }

    #[tool(
        description = "Semantic velocity and acceleration of a passage, sentence by sentence in embedding space: spikes, deadpan (Adams) and Heller scores, circularity, tautology density, deceleration. heller_score > 0.5 or tautology_density > 0.3 flags circular reasoning.",
        annotations(read_only_hint = true, open_world_hint = true)
    )]
    async fn analyze_trajectory(
        &self,
        Parameters(a): Parameters<AnalyzeTrajectoryArgs>,
    ) -> Result<CallToolResult, McpError> {
        let limit = Self::fixed(self.tools.timeouts().analyze_trajectory);
        self.run("analyze_trajectory", limit, async {
            let options = TrajectoryOptions {
                acceleration_threshold: a.acceleration_threshold,
                include_sentences: a.include_sentences,
            };
            Ok(Output::Object(
                self.tools.analyze_trajectory(&a.text, &options).await?,
            ))
        })
        .await
    }

    #[tool(
        description = "Compare the trajectory of a synthetic passage with a golden one (DTW of the acceleration profiles, their correlation, spike positions and counts). fitness_score is 0-1, lower is a better structural match.",
        annotations(read_only_hint = true, open_world_hint = true)
    )]
    async fn compare_trajectories(
        &self,
        Parameters(a): Parameters<CompareTrajectoriesArgs>,
    ) -> Result<CallToolResult, McpError> {
        let limit = Self::fixed(self.tools.timeouts().compare_trajectories);
        self.run("compare_trajectories", limit, async {
            Ok(Output::Object(
                self.tools
                    .compare_trajectories(
                        &a.golden_text,
                        &a.synthetic_text,
                        a.acceleration_threshold,
                    )
                    .await?,
            ))
        })
        .await
    }

    #[tool(
        description = "Grade toolforge's five-rule server selector against labelled cases: catalog is a catalog snapshot file, cases a JSON Lines case file (paths on the server). Returns accuracy, total, passed, by_rule and the failing cases.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn grade_selection(
        &self,
        Parameters(a): Parameters<GradeSelectionArgs>,
    ) -> Result<CallToolResult, McpError> {
        let limit = Self::fixed(self.tools.timeouts().grade_selection);
        self.run("grade_selection", limit, async {
            Ok(Output::Object(
                self.tools
                    .grade_selection(PathBuf::from(a.catalog), PathBuf::from(a.cases))
                    .await?,
            ))
        })
        .await
    }
}

#[tool_handler]
impl ServerHandler for EvalsServer {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(
            rmcp::model::ServerCapabilities::builder()
                .enable_tools()
                .build(),
        )
        .with_server_info(rmcp::model::Implementation::new(
            SERVER_NAME,
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(
            "LLM evaluation tools: list_models, complete, react_step (one stateless ReAct step), \
             judge, calculate_drift, analyze_variants, generate_variants, analyze_trajectory, \
             compare_trajectories, grade_selection. Every tool is stateless."
                .to_string(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<rmcp::model::PaginatedRequestParams>,
        context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ListToolsResult, McpError> {
        // The router sorts by name; the seed's order reads better.
        let mut tools = Self::tool_router().list_all();
        tools.sort_by_key(|t| {
            TOOL_ORDER
                .iter()
                .position(|n| *n == t.name.as_ref())
                .unwrap_or(usize::MAX)
        });
        let supports_cache_hints = context
            .protocol_version()
            .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28);
        Ok(rmcp::model::ListToolsResult {
            result_type: Some(rmcp::model::ResultType::COMPLETE),
            tools,
            meta: None,
            next_cursor: None,
            ttl_ms: supports_cache_hints.then_some(0),
            cache_scope: supports_cache_hints.then_some(rmcp::model::CacheScope::Public),
        })
    }
}
