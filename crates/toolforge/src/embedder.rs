//! Which embedder the process uses, from `EMBEDDER_BACKEND` (read once, here, in the binary).
//!
//! `none` (the default: BM25 only), `hashing` (zero-setup, weak), `local` (a BERT or MPNet
//! sentence model in-process from `EMBED_MODEL_DIR`, default `.tools/models/all-MiniLM-L6-v2`;
//! several folders separated by `:` run as an ensemble), `openai` (any
//! OpenAI-compatible `/v1/embeddings`: `EMBED_BASE_URL`, `EMBED_MODEL`, optional
//! `EMBED_API_KEY`), `voyage` (`VOYAGE_API_KEY`, `EMBED_MODEL` default `voyage-3.5`, optional
//! `VOYAGE_BASE_URL`; without the key: `hashing`, with a warning). An unknown value is an error
//! at start-up. Every embedder is wrapped in the content-hash cache, so a catalog is
//! embedded once per process.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use toolforge_llm::embed::{
    CachedEmbedder, Embedder, EnsembleEmbedder, HashingEmbedder, HttpEmbedder, HttpEmbedderConfig,
    LocalEmbedder,
};

use crate::config::env;

/// Default folder of the local model, relative to the working directory.
pub const DEFAULT_MODEL_DIR: &str = ".tools/models/all-MiniLM-L6-v2";

/// The embedder backends `EMBEDDER_BACKEND` can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    None,
    Hashing,
    Local,
    OpenAi,
    Voyage,
}

impl Backend {
    /// Parses `EMBEDDER_BACKEND` (case-insensitive; unset means `none`).
    pub fn from_env() -> anyhow::Result<Self> {
        match env("EMBEDDER_BACKEND").map(|v| v.trim().to_ascii_lowercase()) {
            None => Ok(Self::None),
            Some(v) => match v.as_str() {
                "none" | "bm25" => Ok(Self::None),
                "hashing" => Ok(Self::Hashing),
                "local" => Ok(Self::Local),
                "openai" => Ok(Self::OpenAi),
                "voyage" => Ok(Self::Voyage),
                other => anyhow::bail!(
                    "EMBEDDER_BACKEND={other:?} is not known; use none, hashing, local, openai \
                     or voyage"
                ),
            },
        }
    }
}

/// The local models' folders: `EMBED_MODEL_DIR` (several separated by `:`, like `PATH`, make
/// an ensemble) or [`DEFAULT_MODEL_DIR`].
pub fn model_dirs() -> Vec<PathBuf> {
    let dirs: Vec<PathBuf> = env("EMBED_MODEL_DIR")
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    if dirs.is_empty() {
        vec![PathBuf::from(DEFAULT_MODEL_DIR)]
    } else {
        dirs
    }
}

/// Builds the (cached) embedder for `backend`; `None` for [`Backend::None`].
pub fn build(backend: Backend) -> anyhow::Result<Option<Arc<dyn Embedder>>> {
    let inner: Arc<dyn Embedder> = match backend {
        Backend::None => return Ok(None),
        Backend::Hashing => Arc::new(HashingEmbedder::default()),
        Backend::Local => {
            let members = model_dirs()
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
            let base = env("EMBED_BASE_URL").context(
                "EMBEDDER_BACKEND=openai needs EMBED_BASE_URL (e.g. http://127.0.0.1:11434/v1)",
            )?;
            let model = env("EMBED_MODEL")
                .context("EMBEDDER_BACKEND=openai needs EMBED_MODEL (e.g. nomic-embed-text)")?;
            Arc::new(HttpEmbedder::new(HttpEmbedderConfig::openai(
                &base,
                &model,
                env("EMBED_API_KEY"),
            ))?)
        }
        Backend::Voyage => {
            let Some(key) = env("VOYAGE_API_KEY") else {
                tracing::warn!(
                    "EMBEDDER_BACKEND=voyage but VOYAGE_API_KEY is not set: using the hashing \
                     embedder instead"
                );
                return build(Backend::Hashing);
            };
            let model = env("EMBED_MODEL").unwrap_or_else(|| "voyage-3.5".to_owned());
            let mut config = HttpEmbedderConfig::voyage(&model, key);
            if let Some(base) = env("VOYAGE_BASE_URL") {
                config.base_url = base;
            }
            Arc::new(HttpEmbedder::new(config)?)
        }
    };
    Ok(Some(Arc::new(CachedEmbedder::in_memory(inner))))
}

/// The embedder `EMBEDDER_BACKEND` asks for.
pub fn from_env() -> anyhow::Result<Option<Arc<dyn Embedder>>> {
    build(Backend::from_env()?)
}
