//! The tools as plain async functions, without MCP: what the server exposes and what any other
//! front end (a UI, a batch runner) would call. The MCP layer adds only argument schemas,
//! limits and the wire shape.
//!
//! Every function is stateless: routing caches (model manifests, slot counters) live in the
//! adapter and never carry a caller's data from one call to the next.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;
use serde_json::{Value, json};

use crate::adapter::{Composite, ModelListing};
use crate::analysis::{self, AnalysisError, TrajectoryOptions};
use crate::chat::{self, ChatRequest, ChatStream};
use crate::config::{EvalsConfig, ToolTimeouts};
use crate::embedding::Embedding;
use crate::error::EvalError;
use crate::judge::{self, Verdict};
use crate::react::{self, MockTools, ReActIteration};
use crate::variants;

/// One `react_step` call.
#[derive(Debug, Clone)]
pub struct StepRequest {
    pub model_id: String,
    pub system_prompt: String,
    pub initial_message: String,
    pub trace: Vec<ReActIteration>,
    /// `None`: tool-forwarding mode.
    pub mock_tools: Option<MockTools>,
    pub tools: Vec<Value>,
    pub call_counter: i64,
    pub temperature: f64,
    pub max_tokens: u32,
    pub response_format: Option<Value>,
}

/// The evals toolbox: the composite adapter and the embedder.
#[derive(Debug, Clone)]
pub struct Tools {
    composite: Arc<Composite>,
    embedding: Embedding,
    timeouts: ToolTimeouts,
}

/// How long a tool may run, and how to say it ran out.
#[derive(Debug, Clone, Copy)]
pub enum Limit {
    /// The caller's `timeout_seconds` (`httpx.TimeoutException` when exceeded).
    Requested(u64),
    /// The server-side limit of a tool without that parameter (`TimeoutError`).
    Fixed(Duration),
}

/// Runs `fut` within `limit`; dropping it on expiry cancels the HTTP request and frees its slot.
///
/// # Errors
/// `fut`'s error, or the timeout error for `tool`.
pub async fn within<T>(
    tool: &'static str,
    limit: Limit,
    fut: impl Future<Output = Result<T, EvalError>>,
) -> Result<T, EvalError> {
    let (duration, error) = match limit {
        Limit::Requested(seconds) => (
            Duration::from_secs(seconds),
            EvalError::RequestTimeout { tool, seconds },
        ),
        Limit::Fixed(d) => (
            d,
            EvalError::ToolTimeout {
                tool,
                seconds: d.as_secs_f64(),
            },
        ),
    };
    tokio::time::timeout(duration, fut)
        .await
        .unwrap_or(Err(error))
}

/// Checks a `timeout_seconds` argument (1 s to 1 h).
///
/// # Errors
/// [`EvalError::InvalidArgument`] outside that range.
pub fn requested(timeout_seconds: i64) -> Result<Limit, EvalError> {
    match u64::try_from(timeout_seconds) {
        Ok(s @ 1..=3600) => Ok(Limit::Requested(s)),
        _ => Err(EvalError::InvalidArgument(format!(
            "timeout_seconds must be between 1 and 3600, got {timeout_seconds}"
        ))),
    }
}

fn check_max_tokens(max_tokens: i64) -> Result<u32, EvalError> {
    u32::try_from(max_tokens)
        .ok()
        .filter(|&m| m >= 1)
        .ok_or_else(|| {
            EvalError::InvalidArgument(format!(
                "max_tokens must be a positive integer, got {max_tokens}"
            ))
        })
}

fn check_temperature(t: f64) -> Result<f64, EvalError> {
    if t.is_finite() && t >= 0.0 {
        Ok(t)
    } else {
        Err(EvalError::InvalidArgument(format!(
            "temperature must be a non-negative number, got {t}"
        )))
    }
}

fn check_messages(messages: &[Value]) -> Result<(), EvalError> {
    if messages.is_empty() {
        return Err(EvalError::InvalidArgument(
            "messages must hold at least one message, e.g. [{\"role\": \"user\", \"content\": \"...\"}]"
                .into(),
        ));
    }
    for (i, m) in messages.iter().enumerate() {
        if m.get("role").and_then(Value::as_str).is_none() {
            return Err(EvalError::InvalidArgument(format!(
                "messages[{i}] is not an OpenAI chat message (an object with a \"role\"): {m}"
            )));
        }
    }
    Ok(())
}

/// Parameters of `complete` besides model and messages, with the seed's defaults.
#[derive(Debug, Clone)]
pub struct CompleteOptions {
    pub temperature: f64,
    pub max_tokens: i64,
    pub tools: Option<Vec<Value>>,
    pub seed: Option<i64>,
    pub repeat_penalty: Option<f64>,
    pub response_format: Option<Value>,
}

impl Default for CompleteOptions {
    fn default() -> Self {
        Self {
            temperature: 0.7,
            max_tokens: 2048,
            tools: None,
            seed: None,
            repeat_penalty: None,
            response_format: None,
        }
    }
}

impl Tools {
    /// Registers the adapters and resolves the embedder of `config`.
    ///
    /// # Errors
    /// The HTTP client cannot be built.
    pub fn new(config: &EvalsConfig) -> Result<Self, EvalError> {
        let composite = Arc::new(Composite::new(config)?);
        let embedding = Embedding::from_config(&config.embedding, &composite);
        Ok(Self {
            composite,
            embedding,
            timeouts: config.timeouts.clone(),
        })
    }

    /// The router over every registered backend.
    #[must_use]
    pub fn composite(&self) -> &Arc<Composite> {
        &self.composite
    }

    /// The embedder of the drift, variant and trajectory tools.
    #[must_use]
    pub fn embedding(&self) -> &Embedding {
        &self.embedding
    }

    /// Limits of the tools without `timeout_seconds`.
    #[must_use]
    pub fn timeouts(&self) -> &ToolTimeouts {
        &self.timeouts
    }

    /// `list_models`: every server's model list, fetched now.
    ///
    /// # Errors
    /// No adapter registered.
    pub async fn list_models(&self) -> Result<ModelListing, EvalError> {
        self.composite.list_models().await
    }

    /// The internal streaming completion (`complete_stream` in the seed; not an MCP tool).
    ///
    /// # Errors
    /// No server for the model, a transport failure or an HTTP error status.
    pub async fn complete_stream(&self, request: &ChatRequest) -> Result<ChatStream, EvalError> {
        chat::stream(&self.composite, request).await
    }

    /// `complete`: the answer's text only (tool calls and latency are not part of it; a model
    /// that only called tools gives `""`).
    ///
    /// # Errors
    /// Invalid arguments, or as [`Tools::complete_stream`].
    pub async fn complete(
        &self,
        model_id: &str,
        messages: Vec<Value>,
        options: CompleteOptions,
    ) -> Result<String, EvalError> {
        check_messages(&messages)?;
        let request = ChatRequest {
            model: model_id.to_owned(),
            messages,
            temperature: check_temperature(options.temperature)?,
            max_tokens: check_max_tokens(options.max_tokens)?,
            tools: options.tools,
            seed: options.seed,
            repeat_penalty: options.repeat_penalty,
            response_format: options.response_format,
        };
        Ok(self.complete_stream(&request).await?.collect().await?.text)
    }

    /// `react_step`: one ReAct iteration (see [`react`]).
    ///
    /// # Errors
    /// Invalid arguments, or the model call fails.
    pub async fn react_step(&self, step: StepRequest) -> Result<Value, EvalError> {
        if step.call_counter < 0 {
            return Err(EvalError::InvalidArgument(format!(
                "call_counter must not be negative, got {}",
                step.call_counter
            )));
        }
        let request = ChatRequest {
            model: step.model_id.clone(),
            messages: react::build_messages(
                &step.system_prompt,
                &step.initial_message,
                &step.trace,
            ),
            temperature: check_temperature(step.temperature)?,
            max_tokens: check_max_tokens(i64::from(step.max_tokens))?,
            tools: Some(step.tools.clone()),
            seed: None,
            repeat_penalty: None,
            response_format: step.response_format.clone(),
        };
        let completion = self.complete_stream(&request).await?.collect().await?;
        Ok(react::step(
            step.trace.len(),
            step.mock_tools.as_ref(),
            step.call_counter,
            &completion,
        ))
    }

    /// `judge`: asks `judge_model` whether `response` meets `criteria`.
    ///
    /// # Errors
    /// The model call fails, or its answer holds no verdict (`ValueError`).
    pub async fn judge(
        &self,
        response: &str,
        criteria: &str,
        judge_model: &str,
        temperature: f64,
        max_tokens: i64,
    ) -> Result<Verdict, EvalError> {
        if criteria.trim().is_empty() {
            return Err(EvalError::InvalidArgument(
                "criteria must not be empty".into(),
            ));
        }
        let messages = vec![
            json!({"role": "system", "content": judge::SYSTEM_PROMPT}),
            json!({"role": "user", "content": judge::prompt(response, criteria)}),
        ];
        let raw = self
            .complete(
                judge_model,
                messages,
                CompleteOptions {
                    temperature,
                    max_tokens,
                    ..CompleteOptions::default()
                },
            )
            .await?;
        judge::parse(&raw)
    }

    /// `generate_variants`: rephrasings of `baseline` along `dimensions`, via `complete`.
    ///
    /// # Errors
    /// Empty baseline or unknown dimension, the model call fails, or its answer cannot be read
    /// (`ValueError`).
    pub async fn generate_variants(
        &self,
        baseline: &str,
        model_id: &str,
        dimensions: &[String],
        temperature: f64,
        max_tokens: i64,
    ) -> Result<Value, EvalError> {
        let baseline = baseline.trim();
        if baseline.is_empty() {
            return Err(EvalError::InvalidArgument(
                "baseline must not be empty".into(),
            ));
        }
        let labels = variants::labels(dimensions)?;
        let (system, user) = variants::prompt(baseline, &labels);
        let raw = self
            .complete(
                model_id,
                vec![
                    json!({"role": "system", "content": system}),
                    json!({"role": "user", "content": user}),
                ],
                CompleteOptions {
                    temperature,
                    max_tokens,
                    ..CompleteOptions::default()
                },
            )
            .await?;
        let found = variants::parse(&raw, baseline, &labels)?;
        let count = found.len();
        Ok(json!({
            "baseline": baseline,
            "dimensions_requested": dimensions,
            "variants": found,
            "variant_count": count,
        }))
    }

    /// `grade_selection`: the selection evaluation over two files.
    ///
    /// # Errors
    /// A file cannot be read or parsed.
    pub async fn grade_selection(
        &self,
        catalog: PathBuf,
        cases: PathBuf,
    ) -> Result<Value, EvalError> {
        tokio::task::spawn_blocking(move || crate::grade::grade_files(&catalog, &cases))
            .await
            .map_err(|e| EvalError::Grading(format!("the grading task failed: {e}")))?
    }

    /// `calculate_drift`: the cosine distance between the two texts' embeddings.
    ///
    /// # Errors
    /// No embedding backend (`ImportError`), the backend fails, or a text embeds to a zero
    /// vector (`ValueError`).
    pub async fn calculate_drift(&self, text_a: &str, text_b: &str) -> Result<f64, EvalError> {
        let vectors = self
            .embedding
            .embed(&[text_a.to_owned(), text_b.to_owned()])
            .await?;
        analysis::cosine_distance(&vectors[0], &vectors[1]).map_err(analysis_error)
    }

    /// `analyze_variants`: distances between prompt variants (label → text, in the caller's
    /// order).
    ///
    /// # Errors
    /// As [`Tools::calculate_drift`], or an unknown baseline label.
    pub async fn analyze_variants(
        &self,
        variants: &IndexMap<String, String>,
        baseline_label: &str,
        constraint_name: &str,
    ) -> Result<Value, EvalError> {
        let texts: Vec<String> = variants.values().cloned().collect();
        let vectors = self.embed_all(&texts).await?;
        let rows: Vec<(String, String, Vec<f32>)> = variants
            .iter()
            .zip(vectors)
            .map(|((label, text), v)| (label.clone(), text.clone(), v))
            .collect();
        analysis::analyze_variants(&rows, baseline_label, constraint_name).map_err(analysis_error)
    }

    /// `analyze_trajectory`: the sentence-level kinematics of `text`.
    ///
    /// # Errors
    /// As [`Tools::calculate_drift`], or fewer than two sentences.
    pub async fn analyze_trajectory(
        &self,
        text: &str,
        options: &TrajectoryOptions,
    ) -> Result<Value, EvalError> {
        let sentences = analysis::split_sentences(text);
        let vectors = self.embed_all(&sentences).await?;
        analysis::analyze_trajectory(&sentences, &vectors, options).map_err(analysis_error)
    }

    /// `compare_trajectories`: how well `synthetic`'s trajectory matches `golden`'s.
    ///
    /// # Errors
    /// As [`Tools::calculate_drift`], or fewer than three sentences in either text.
    pub async fn compare_trajectories(
        &self,
        golden: &str,
        synthetic: &str,
        acceleration_threshold: f64,
    ) -> Result<Value, EvalError> {
        let golden_sentences = analysis::split_sentences(golden);
        let synthetic_sentences = analysis::split_sentences(synthetic);
        // One request for both texts.
        let all: Vec<String> = golden_sentences
            .iter()
            .chain(&synthetic_sentences)
            .cloned()
            .collect();
        let mut vectors = self.embed_all(&all).await?;
        let synthetic_vectors = vectors.split_off(golden_sentences.len().min(vectors.len()));
        analysis::compare_trajectories(
            (&golden_sentences, &vectors),
            (&synthetic_sentences, &synthetic_vectors),
            acceleration_threshold,
        )
        .map_err(analysis_error)
    }

    /// Embeds `texts`; none embeds nothing (the analysis then reports too few sentences).
    async fn embed_all(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EvalError> {
        if texts.is_empty() {
            // Still fail as the seed says when no backend exists at all.
            if let Embedding::Unavailable(reason) = &self.embedding {
                return Err(EvalError::EmbeddingUnavailable(reason.clone()));
            }
            return Ok(Vec::new());
        }
        self.embedding.embed(texts).await
    }
}

fn analysis_error(e: AnalysisError) -> EvalError {
    EvalError::Analysis(e.to_string())
}
