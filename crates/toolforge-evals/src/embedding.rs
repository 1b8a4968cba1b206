//! Embeddings for the drift, variant and trajectory tools: a configured embedder, an embedding
//! model served by a registered backend, or none (those four tools then fail with
//! `ImportError` and the others keep working, as the seed's degradation rule says).

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use toolforge_llm::embed::{EmbedError, Embedder, HttpEmbedder, HttpEmbedderConfig};

use crate::adapter::Composite;
use crate::config::EmbeddingConfig;
use crate::error::EvalError;

/// An embedding model found by id on the registered backends (LM Studio lists embedding models
/// in `/v1/models` next to chat models and serves them at `/v1/embeddings`). Embedding requests
/// take no chat slot: embedding models are small and LM Studio keeps them loaded beside the
/// chat model.
pub struct ServedEmbedder {
    composite: Arc<Composite>,
    model: String,
    id: String,
    /// One HTTP embedder per server, built on first use.
    clients: std::sync::Mutex<HashMap<String, Arc<HttpEmbedder>>>,
}

impl std::fmt::Debug for ServedEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServedEmbedder")
            .field("model", &self.model)
            .finish()
    }
}

impl ServedEmbedder {
    /// Embeds with `model`, wherever the composite finds it.
    #[must_use]
    pub fn new(composite: Arc<Composite>, model: &str) -> Self {
        Self {
            composite,
            model: model.to_owned(),
            id: format!("served:{model}"),
            clients: std::sync::Mutex::new(HashMap::new()),
        }
    }

    async fn embed_texts(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let servers = self
            .composite
            .locate(&self.model)
            .await
            .map_err(|e| EmbedError::Transport(e.to_string()))?;
        let server = servers
            .first()
            .ok_or_else(|| EmbedError::Transport(format!("no server lists {}", self.model)))?;
        let client = {
            let mut clients = self
                .clients
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match clients.get(server.url()) {
                Some(c) => Arc::clone(c),
                None => {
                    let c = Arc::new(HttpEmbedder::new(HttpEmbedderConfig::openai(
                        server.api_base(),
                        &self.model,
                        server.api_key().map(str::to_owned),
                    ))?);
                    clients.insert(server.url().to_owned(), Arc::clone(&c));
                    c
                }
            }
        };
        client.embed(texts).await
    }
}

impl Embedder for ServedEmbedder {
    fn id(&self) -> &str {
        &self.id
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(self.embed_texts(texts))
    }
}

/// The embedding side of the server, resolved once from the config.
#[derive(Clone)]
pub enum Embedding {
    Ready(Arc<dyn Embedder>),
    Unavailable(String),
}

impl std::fmt::Debug for Embedding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Ready(e) => write!(f, "Ready({})", e.id()),
            Self::Unavailable(r) => write!(f, "Unavailable({r})"),
        }
    }
}

impl Embedding {
    /// Resolves `config`; a served model routes through `composite`.
    #[must_use]
    pub fn from_config(config: &EmbeddingConfig, composite: &Arc<Composite>) -> Self {
        match config {
            EmbeddingConfig::Embedder(e) => Self::Ready(Arc::clone(e)),
            EmbeddingConfig::Served { model } => {
                Self::Ready(Arc::new(ServedEmbedder::new(Arc::clone(composite), model)))
            }
            EmbeddingConfig::Unavailable { reason } => Self::Unavailable(reason.clone()),
        }
    }

    /// One vector per text, in order.
    ///
    /// # Errors
    /// [`EvalError::EmbeddingUnavailable`] without a backend, [`EvalError::Embedding`] when it
    /// fails or answers with the wrong number of vectors.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EvalError> {
        let embedder = match self {
            Self::Ready(e) => e,
            Self::Unavailable(reason) => {
                return Err(EvalError::EmbeddingUnavailable(reason.clone()));
            }
        };
        let vectors = embedder
            .embed(texts)
            .await
            .map_err(|e| EvalError::Embedding(format!("{}: {e}", embedder.id())))?;
        if vectors.len() != texts.len() {
            return Err(EvalError::Embedding(format!(
                "{} returned {} vectors for {} texts",
                embedder.id(),
                vectors.len(),
                texts.len()
            )));
        }
        Ok(vectors)
    }
}
