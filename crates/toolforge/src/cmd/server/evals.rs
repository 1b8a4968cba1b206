//! `toolforge server evals`: the LLM-evaluation MCP server (seed 003), over stdio (default) or
//! HTTP (`-t sse|http`: `/mcp`, `/sse`, `GET /tools`).
//!
//! The environment, read here only:
//! - `LM_STUDIO_SERVERS`: comma-separated OpenAI-compatible server roots
//!   (`http://localhost:1234,http://192.168.1.20:1234`); `LM_STUDIO_SLOTS` requests at once per
//!   server (default 1).
//! - `TOGETHER_API_KEY` registers Together (`TOGETHER_BASE_URL`, default its public API;
//!   `TOGETHER_MODELS` a fixed comma-separated model list instead of discovery;
//!   `TOGETHER_SLOTS`, default 4).
//! - `HF_TOKEN` registers the Hugging Face router (`HF_BASE_URL`, `HF_MODELS`, `HF_SLOTS`).
//! - Embeddings for the drift, variant and trajectory tools: `EMBEDDING_MODEL` names a model
//!   served by the registered backends (LM Studio's `/v1/embeddings`); otherwise
//!   `EMBEDDER_BACKEND` (`hashing`, `local`, `openai`, `voyage`, or `none` to switch those tools
//!   off); unset, the offline hashing embedder.

use std::sync::Arc;

use anyhow::Context as _;
use toolforge_evals::{EmbeddingConfig, EvalsConfig, EvalsServer, RemoteBackend, config};
use toolforge_gateway::{BuiltinHttpOptions, Filtered, serve_handler_http, serve_handler_stdio};

use super::transport::Serve;
use crate::config::env;
use crate::embedder::{self, Backend};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub transport: super::transport::TransportArgs,
    /// Address to bind over HTTP.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: std::net::IpAddr,
    #[command(flatten)]
    pub visibility: crate::cmd::visibility::VisibilityArgs,
}

fn list(name: &str) -> Option<Vec<String>> {
    env(name).map(|v| {
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    })
}

fn slots(name: &str, default: usize) -> anyhow::Result<usize> {
    match env(name) {
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

fn remote(
    key_var: &str,
    base_var: &str,
    default_base: &str,
    models_var: &str,
    slots_var: &str,
) -> anyhow::Result<Option<RemoteBackend>> {
    let Some(key) = env(key_var) else {
        return Ok(None);
    };
    let base = env(base_var).unwrap_or_else(|| default_base.to_owned());
    check_url(base_var, &base)?;
    let mut backend = RemoteBackend::new(&base, &key);
    backend.models = list(models_var);
    backend.slots = slots(slots_var, 4)?;
    Ok(Some(backend))
}

fn embedding() -> anyhow::Result<EmbeddingConfig> {
    if let Some(model) = env("EMBEDDING_MODEL") {
        return Ok(EmbeddingConfig::Served { model });
    }
    if env("EMBEDDER_BACKEND").is_none() {
        return Ok(EmbeddingConfig::default());
    }
    let backend = Backend::from_env()?;
    // A backend that cannot start leaves the four embedding tools failing with the reason; the
    // other tools keep working (the seed's degradation rule).
    Ok(match embedder::build(backend) {
        Ok(Some(e)) => EmbeddingConfig::Embedder(e),
        Ok(None) => EmbeddingConfig::Unavailable {
            reason: "no embedding backend (EMBEDDER_BACKEND=none); set EMBEDDING_MODEL or \
                     EMBEDDER_BACKEND=hashing|local|openai|voyage"
                .into(),
        },
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), "The embedding backend is unavailable.");
            EmbeddingConfig::Unavailable {
                reason: format!("embedding backend unavailable: {e:#}"),
            }
        }
    })
}

/// The typed configuration from the environment.
pub fn config_from_env() -> anyhow::Result<EvalsConfig> {
    let lm_studio_servers = list("LM_STUDIO_SERVERS").unwrap_or_default();
    for url in &lm_studio_servers {
        check_url("LM_STUDIO_SERVERS", url)?;
    }
    Ok(EvalsConfig {
        lm_studio_servers,
        lm_studio_slots: slots("LM_STUDIO_SLOTS", 1)?,
        together: remote(
            "TOGETHER_API_KEY",
            "TOGETHER_BASE_URL",
            config::TOGETHER_BASE_URL,
            "TOGETHER_MODELS",
            "TOGETHER_SLOTS",
        )?,
        huggingface: remote(
            "HF_TOKEN",
            "HF_BASE_URL",
            config::HF_BASE_URL,
            "HF_MODELS",
            "HF_SLOTS",
        )?,
        embedding: embedding()?,
        ..EvalsConfig::default()
    })
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let serve = args.transport.serve()?;
    let visibility = Arc::new(args.visibility.config()?);
    let config = config_from_env()?;
    tracing::info!(embedding = ?config.embedding, "evals embedding backend");
    let server = EvalsServer::new(&config)?;
    // Start-up discovery: logs unreachable servers; never blocks or fails serving.
    let probe = {
        let composite = Arc::clone(server.tools().composite());
        tokio::spawn(async move { composite.probe().await })
    };
    let handler = Filtered::new(server, "evals", visibility);
    let served: anyhow::Result<()> = match serve {
        Serve::Stdio => serve_handler_stdio(handler).await,
        Serve::Http { port, named } => {
            let listener = tokio::net::TcpListener::bind((args.host, port))
                .await
                .with_context(|| format!("binding {}:{port}", args.host))?;
            eprintln!(
                "{}",
                super::transport::listening_line("evals", listener.local_addr()?, named)
            );
            let opts = BuiltinHttpOptions {
                extra_hosts: super::toolkit::bind_host(args.host),
                ..BuiltinHttpOptions::default()
            };
            let cancel = opts.cancel.clone();
            tokio::spawn(async move {
                crate::config::shutdown_signal().await;
                cancel.cancel();
            });
            serve_handler_http(handler, listener, opts)
                .await
                .map_err(anyhow::Error::from)
        }
    };
    probe.abort();
    served
}
