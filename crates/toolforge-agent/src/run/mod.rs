//! The run loop (DESIGN §2): catalog → visibility → broker → presentation → model → selector →
//! pool or dry-run → trace, under the cost guard.
//!
//! The first offer and the names the model sees are fixed once per request (`offer`); tools a
//! search finds are appended after it (`offering`), so every model call of a run starts with
//! the tool list the first one sent and reads it from the prompt cache. `turns` runs the model
//! turns; each turn's tool calls are routed, admitted and run, and its searches answered, in
//! `calls`; `records` writes the trace; `result` is what a run returns.

mod calls;
mod config;
mod offer;
mod offering;
mod prepared;
mod provider_search;
mod records;
mod request;
pub(crate) mod result;
mod turns;

use std::collections::HashSet;
use std::sync::Arc;

use tokio::sync::mpsc;
use toolforge_llm::Model;
use toolforge_llm::embed::Embedder;
use toolforge_select::{Selection, ToolId};

pub use config::{AgentConfig, SYSTEM_PROMPT};
pub use request::{RunRequest, Visibility};
pub use result::{RunEvent, RunResult, SearchStep, Step, parse_answer};

use crate::backend::ToolBackend;
use crate::session::SessionStore;
use crate::trace::TraceSink;

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
    /// What principals called in their recent runs (learned pins).
    learned: Arc<crate::learned_pins::LearnedPins>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("model", &self.model.model())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
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
            learned: Arc::default(),
        }
    }

    /// Learns pins into (and offers them from) `learned`, e.g. one seeded from the trace.
    #[must_use]
    pub fn with_learned_pins(mut self, learned: Arc<crate::learned_pins::LearnedPins>) -> Self {
        self.learned = learned;
        self
    }

    /// What principals called in their recent runs.
    #[must_use]
    pub fn learned_pins(&self) -> &Arc<crate::learned_pins::LearnedPins> {
        &self.learned
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
}

/// What a run builds up as it goes: its result, the session's recency, the tools whose
/// arguments were refused once, and where its events go.
struct RunState {
    session_id: String,
    result: RunResult,
    history: Vec<ToolId>,
    rejected_once: HashSet<String>,
    /// A fail-closed trace write failed: the run stops after this turn.
    trace_failed: bool,
    /// The tools offered, growing as searches find more.
    offering: offering::Offering,
    events: Option<mpsc::UnboundedSender<RunEvent>>,
}

impl RunState {
    fn send(&self, event: RunEvent) {
        if let Some(tx) = &self.events {
            let _ = tx.send(event);
        }
    }

    /// Ends the run: the final event, then the result.
    fn finish(self) -> RunResult {
        self.send(RunEvent::Final(Box::new(self.result.clone())));
        self.result
    }
}
