//! Which embedder the process uses, from `EMBEDDER_BACKEND` and the settings beside it
//! ([`crate::config::EmbedderSettings`]).
//!
//! `none` (the default: BM25 only), `hashing` (zero-setup, weak), `local` (a BERT or MPNet
//! sentence model in-process from `EMBED_MODEL_DIR`, default `.tools/models/all-MiniLM-L6-v2`;
//! several folders separated by `:` run as an ensemble), `openai` (any
//! OpenAI-compatible `/v1/embeddings`: `EMBED_BASE_URL`, `EMBED_MODEL`, optional
//! `EMBED_API_KEY`), `voyage` (`VOYAGE_API_KEY`, `EMBED_MODEL` default `voyage-3.5`, optional
//! `VOYAGE_BASE_URL`; without the key: `hashing`, with a warning). An unknown value is an error
//! at start-up. Every embedder is wrapped in the content-hash cache, so a catalog is
//! embedded once per process.

use std::sync::Arc;

use anyhow::Context as _;
use toolforge_llm::embed::{
    CachedEmbedder, Embedder, EnsembleEmbedder, HashingEmbedder, HttpEmbedder, HttpEmbedderConfig,
    LocalEmbedder,
};

pub use crate::config::EmbedderBackend as Backend;
use crate::config::EmbedderSettings;

/// Builds the (cached) embedder for `backend` as `settings` configure it; `None` for
/// [`Backend::None`].
pub fn build(
    backend: Backend,
    settings: &EmbedderSettings,
) -> anyhow::Result<Option<Arc<dyn Embedder>>> {
    let inner: Arc<dyn Embedder> = match backend {
        Backend::None => return Ok(None),
        Backend::Hashing => Arc::new(HashingEmbedder::default()),
        Backend::Local => {
            let members = settings
                .model_dirs
                .iter()
                .map(|dir| {
                    let model = LocalEmbedder::from_dir(dir).with_context(|| {
                        format!(
                            "EMBEDDER_BACKEND=local: loading the model from {}",
                            dir.display()
                        )
                    })?;
                    Ok(Arc::new(model) as Arc<dyn Embedder>)
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            match <[_; 1]>::try_from(members) {
                Ok([one]) => one,
                Err(members) => Arc::new(EnsembleEmbedder::new(members)),
            }
        }
        Backend::OpenAi => {
            let base = settings.base_url.as_deref().context(
                "EMBEDDER_BACKEND=openai needs EMBED_BASE_URL (e.g. http://127.0.0.1:11434/v1)",
            )?;
            let model = settings
                .model
                .as_deref()
                .context("EMBEDDER_BACKEND=openai needs EMBED_MODEL (e.g. nomic-embed-text)")?;
            Arc::new(HttpEmbedder::new(HttpEmbedderConfig::openai(
                base,
                model,
                settings.api_key.clone(),
            ))?)
        }
        Backend::Voyage => {
            let Some(key) = settings.voyage_api_key.clone() else {
                tracing::warn!(
                    "EMBEDDER_BACKEND=voyage but VOYAGE_API_KEY is not set: using the hashing \
                     embedder instead"
                );
                return build(Backend::Hashing, settings);
            };
            let model = settings.model.as_deref().unwrap_or("voyage-3.5");
            let mut config = HttpEmbedderConfig::voyage(model, key);
            if let Some(base) = &settings.voyage_base_url {
                config.base_url.clone_from(base);
            }
            Arc::new(HttpEmbedder::new(config)?)
        }
    };
    Ok(Some(Arc::new(CachedEmbedder::in_memory(inner))))
}

/// The embedder `EMBEDDER_BACKEND` asks for (none when unset).
pub fn from_settings(settings: &EmbedderSettings) -> anyhow::Result<Option<Arc<dyn Embedder>>> {
    build(settings.backend_or_none(), settings)
}
