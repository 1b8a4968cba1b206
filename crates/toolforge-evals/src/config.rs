//! The typed configuration the binary builds from the environment and hands to the server.
//!
//! The library never reads the environment: `toolforge server evals` maps `LM_STUDIO_SERVERS`,
//! `TOGETHER_API_KEY`, `HF_TOKEN`, the embedding variables, ... onto these types.

use std::sync::Arc;
use std::time::Duration;

use toolforge_llm::embed::Embedder;

/// Together's OpenAI-compatible API, version path included.
pub const TOGETHER_BASE_URL: &str = "https://api.together.xyz/v1";
/// The Hugging Face inference router's OpenAI-compatible API, version path included.
pub const HF_BASE_URL: &str = "https://router.huggingface.co/v1";

/// Everything the evals server needs.
#[derive(Clone)]
pub struct EvalsConfig {
    /// LM Studio (or any OpenAI-compatible local) servers, in priority order. Each entry is the
    /// server's root URL (`http://localhost:1234`); a trailing `/v1` is accepted.
    pub lm_studio_servers: Vec<String>,
    /// Concurrent requests per LM Studio server (one GPU, one request: 1 by default).
    pub lm_studio_slots: usize,
    /// Together AI, when a key is configured.
    pub together: Option<RemoteBackend>,
    /// The Hugging Face router, when a token is configured.
    pub huggingface: Option<RemoteBackend>,
    /// What embeds texts for the drift, variant and trajectory tools.
    pub embedding: EmbeddingConfig,
    /// Server-side limits of the tools that have no `timeout_seconds` parameter.
    pub timeouts: ToolTimeouts,
    /// How long a server's model list is trusted for routing before it is fetched again.
    pub manifest_ttl: Duration,
    /// Limit of one server's `/v1/models` fetch; a server slower than this is `unreachable`.
    pub manifest_timeout: Duration,
}

impl Default for EvalsConfig {
    fn default() -> Self {
        Self {
            lm_studio_servers: Vec::new(),
            lm_studio_slots: 1,
            together: None,
            huggingface: None,
            embedding: EmbeddingConfig::default(),
            timeouts: ToolTimeouts::default(),
            manifest_ttl: Duration::from_secs(60),
            manifest_timeout: Duration::from_secs(10),
        }
    }
}

impl std::fmt::Debug for EvalsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvalsConfig")
            .field("lm_studio_servers", &self.lm_studio_servers)
            .field("lm_studio_slots", &self.lm_studio_slots)
            .field("together", &self.together)
            .field("huggingface", &self.huggingface)
            .field("embedding", &self.embedding)
            .field("timeouts", &self.timeouts)
            .field("manifest_ttl", &self.manifest_ttl)
            .field("manifest_timeout", &self.manifest_timeout)
            .finish()
    }
}

/// A hosted OpenAI-compatible API (Together, the Hugging Face router).
#[derive(Clone)]
pub struct RemoteBackend {
    /// Base URL including the version path, e.g. [`TOGETHER_BASE_URL`].
    pub base_url: String,
    /// Sent as `Authorization: Bearer`.
    pub api_key: String,
    /// Models to offer without asking `/models` (`None`: discover them).
    pub models: Option<Vec<String>>,
    /// Concurrent requests to this API.
    pub slots: usize,
}

impl RemoteBackend {
    /// A backend at `base_url` with discovery and 4 concurrent requests.
    #[must_use]
    pub fn new(base_url: &str, api_key: &str) -> Self {
        Self {
            base_url: base_url.to_owned(),
            api_key: api_key.to_owned(),
            models: None,
            slots: 4,
        }
    }
}

impl std::fmt::Debug for RemoteBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteBackend")
            .field("base_url", &self.base_url)
            .field("api_key", &"<redacted>")
            .field("models", &self.models)
            .field("slots", &self.slots)
            .finish()
    }
}

/// Where embeddings come from.
#[derive(Clone)]
pub enum EmbeddingConfig {
    /// A ready embedder (hashing, the local model, an HTTP API).
    Embedder(Arc<dyn Embedder>),
    /// An embedding model served by one of the registered backends (LM Studio's
    /// `/v1/embeddings`), found by model id like any chat model.
    Served { model: String },
    /// No backend: the four embedding tools fail with `ImportError: <reason>`, the others work.
    Unavailable { reason: String },
}

impl Default for EmbeddingConfig {
    /// The deterministic hashing embedder: works offline, weak semantics.
    fn default() -> Self {
        Self::Embedder(Arc::new(toolforge_llm::embed::HashingEmbedder::default()))
    }
}

impl std::fmt::Debug for EmbeddingConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Embedder(e) => write!(f, "Embedder({})", e.id()),
            Self::Served { model } => write!(f, "Served({model})"),
            Self::Unavailable { reason } => write!(f, "Unavailable({reason})"),
        }
    }
}

/// Server-side limits of the tools without a `timeout_seconds` parameter (the seed's timeout
/// contract). Tools that take `timeout_seconds` use it as their limit.
#[derive(Debug, Clone)]
pub struct ToolTimeouts {
    pub list_models: Duration,
    pub calculate_drift: Duration,
    pub analyze_variants: Duration,
    pub analyze_trajectory: Duration,
    pub compare_trajectories: Duration,
    pub grade_selection: Duration,
}

impl Default for ToolTimeouts {
    fn default() -> Self {
        Self {
            list_models: Duration::from_secs(30),
            calculate_drift: Duration::from_secs(10),
            analyze_variants: Duration::from_secs(10),
            analyze_trajectory: Duration::from_secs(10),
            compare_trajectories: Duration::from_secs(10),
            grade_selection: Duration::from_secs(60),
        }
    }
}
