//! The embedder: `EMBEDDER_BACKEND` (`none`, `hashing`, `local`, `openai`, `voyage`),
//! `EMBED_MODEL_DIR` (several folders separated by `:`, like `PATH`, make an ensemble),
//! `EMBED_BASE_URL`, `EMBED_MODEL`, `EMBED_API_KEY`, `VOYAGE_API_KEY`, `VOYAGE_BASE_URL`
//! ([`crate::embedder`] builds it).

use std::path::PathBuf;

use super::source::Source;

/// Default folder of the local model, relative to the working directory.
pub const DEFAULT_MODEL_DIR: &str = ".tools/models/all-MiniLM-L6-v2";

/// The embedder backends `EMBEDDER_BACKEND` can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EmbedderBackend {
    None,
    Hashing,
    Local,
    OpenAi,
    Voyage,
}

impl EmbedderBackend {
    /// Parses an `EMBEDDER_BACKEND` value (case-insensitive).
    pub fn parse(value: &str) -> anyhow::Result<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "none" | "bm25" => Ok(Self::None),
            "hashing" => Ok(Self::Hashing),
            "local" => Ok(Self::Local),
            "openai" => Ok(Self::OpenAi),
            "voyage" => Ok(Self::Voyage),
            other => anyhow::bail!(
                "EMBEDDER_BACKEND={other:?} is not known; use none, hashing, local, openai or \
                 voyage"
            ),
        }
    }
}

#[derive(Debug, Clone)]
pub struct EmbedderSettings {
    /// `EMBEDDER_BACKEND`; `None` when unset (most commands then use none; the evals server,
    /// the hashing embedder).
    pub backend: Option<EmbedderBackend>,
    /// The local models' folders, [`DEFAULT_MODEL_DIR`] unless `EMBED_MODEL_DIR` names some.
    pub model_dirs: Vec<PathBuf>,
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub api_key: Option<String>,
    pub voyage_api_key: Option<String>,
    pub voyage_base_url: Option<String>,
}

impl EmbedderSettings {
    pub(super) fn read(env: &Source) -> anyhow::Result<Self> {
        let backend = env
            .text("EMBEDDER_BACKEND")
            .map(|v| EmbedderBackend::parse(&v))
            .transpose()?;
        let mut model_dirs: Vec<PathBuf> = env
            .text("EMBED_MODEL_DIR")
            .map(|v| {
                std::env::split_paths(&v)
                    .filter(|p| !p.as_os_str().is_empty())
                    .collect()
            })
            .unwrap_or_default();
        if model_dirs.is_empty() {
            model_dirs.push(PathBuf::from(DEFAULT_MODEL_DIR));
        }
        Ok(Self {
            backend,
            model_dirs,
            base_url: env.text("EMBED_BASE_URL"),
            model: env.text("EMBED_MODEL"),
            api_key: env.text("EMBED_API_KEY"),
            voyage_api_key: env.text("VOYAGE_API_KEY"),
            voyage_base_url: env.text("VOYAGE_BASE_URL"),
        })
    }

    /// The backend asked for, `none` when unset.
    pub fn backend_or_none(&self) -> EmbedderBackend {
        self.backend.unwrap_or(EmbedderBackend::None)
    }
}
