//! The built-in servers' settings.
//!
//! The toolkit: its sample database under `$XDG_DATA_HOME/toolforge/toolkit/` (else
//! `~/.local/share/...`), and `MOCK_REST_BASE_URL`, the exchange-rate API its REST tool calls
//! (default the bundled mock's `http://127.0.0.1:8811`).
//!
//! The evals server (seed 003):
//! - `LM_STUDIO_SERVERS`: comma-separated OpenAI-compatible server roots
//!   (`http://localhost:1234,http://192.168.1.20:1234`); `LM_STUDIO_SLOTS` requests at once per
//!   server (default 1).
//! - `TOGETHER_API_KEY` registers Together (`TOGETHER_BASE_URL`, default its public API;
//!   `TOGETHER_MODELS` a fixed comma-separated model list instead of discovery;
//!   `TOGETHER_SLOTS`, default 4).
//! - `HF_TOKEN` registers the Hugging Face router (`HF_BASE_URL`, `HF_MODELS`, `HF_SLOTS`).
//! - `EMBEDDING_MODEL` names an embedding model served by the registered backends (LM Studio's
//!   `/v1/embeddings`) for the drift, variant and trajectory tools; otherwise the embedder
//!   settings say (unset: the offline hashing embedder).

use std::path::PathBuf;

use anyhow::Context as _;
use toolforge_evals::{RemoteBackend, config};

use super::source::Source;

#[derive(Debug, Clone)]
pub struct ToolkitSettings {
    /// Where the sample database is made when `--db` names none.
    pub default_db: PathBuf,
    pub rest_base_url: String,
}

impl ToolkitSettings {
    pub(super) fn read(env: &Source) -> Self {
        let data_home = env
            .path("XDG_DATA_HOME")
            .or_else(|| env.path("HOME").map(|h| h.join(".local/share")))
            .unwrap_or_else(|| PathBuf::from("."));
        Self {
            default_db: data_home
                .join("toolforge")
                .join("toolkit")
                .join("sample.db"),
            rest_base_url: env
                .text("MOCK_REST_BASE_URL")
                .unwrap_or_else(|| "http://127.0.0.1:8811".to_owned()),
        }
    }
}

#[derive(Debug, Clone)]
pub struct EvalsSettings {
    pub lm_studio_servers: Vec<String>,
    pub lm_studio_slots: usize,
    pub together: Option<RemoteBackend>,
    pub huggingface: Option<RemoteBackend>,
    pub embedding_model: Option<String>,
}

impl EvalsSettings {
    pub(super) fn read(env: &Source) -> anyhow::Result<Self> {
        let lm_studio_servers = env.list("LM_STUDIO_SERVERS").unwrap_or_default();
        for url in &lm_studio_servers {
            check_url("LM_STUDIO_SERVERS", url)?;
        }
        Ok(Self {
            lm_studio_servers,
            lm_studio_slots: slots(env, "LM_STUDIO_SLOTS", 1)?,
            together: remote(
                env,
                Remote {
                    key: "TOGETHER_API_KEY",
                    base: "TOGETHER_BASE_URL",
                    default_base: config::TOGETHER_BASE_URL,
                    models: "TOGETHER_MODELS",
                    slots: "TOGETHER_SLOTS",
                },
            )?,
            huggingface: remote(
                env,
                Remote {
                    key: "HF_TOKEN",
                    base: "HF_BASE_URL",
                    default_base: config::HF_BASE_URL,
                    models: "HF_MODELS",
                    slots: "HF_SLOTS",
                },
            )?,
            embedding_model: env.text("EMBEDDING_MODEL"),
        })
    }
}

/// The variables that register one hosted API.
struct Remote {
    key: &'static str,
    base: &'static str,
    default_base: &'static str,
    models: &'static str,
    slots: &'static str,
}

fn remote(env: &Source, names: Remote) -> anyhow::Result<Option<RemoteBackend>> {
    let Some(key) = env.text(names.key) else {
        return Ok(None);
    };
    let base = env
        .text(names.base)
        .unwrap_or_else(|| names.default_base.to_owned());
    check_url(names.base, &base)?;
    let mut backend = RemoteBackend::new(&base, &key);
    backend.models = env.list(names.models);
    backend.slots = slots(env, names.slots, 4)?;
    Ok(Some(backend))
}

fn slots(env: &Source, name: &str, default: usize) -> anyhow::Result<usize> {
    match env.text(name) {
        None => Ok(default),
        Some(v) => v
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|n| *n >= 1)
            .with_context(|| format!("{name}={v:?} must be a positive integer")),
    }
}

fn check_url(name: &str, url: &str) -> anyhow::Result<()> {
    let ok = (url.starts_with("http://") || url.starts_with("https://"))
        && url.split("://").nth(1).is_some_and(|rest| !rest.is_empty());
    anyhow::ensure!(
        ok,
        "{name}: {url:?} is not an http(s) URL (e.g. http://localhost:1234)"
    );
    Ok(())
}
