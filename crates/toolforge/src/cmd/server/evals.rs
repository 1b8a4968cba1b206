//! `toolforge server evals`: the LLM-evaluation MCP server (seed 003), over stdio (default) or
//! HTTP (`-t sse|http`: `/mcp`, `/sse`, `GET /tools`).
//!
//! Its settings: [`crate::config::EvalsSettings`].

use std::sync::Arc;

use anyhow::Context as _;
use toolforge_evals::{EmbeddingConfig, EvalsConfig, EvalsServer};
use toolforge_gateway::{BuiltinHttpOptions, Filtered, serve_handler_http, serve_handler_stdio};

use super::transport::Serve;
use crate::config::Config;
use crate::embedder;

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

fn embedding(config: &Config) -> EmbeddingConfig {
    if let Some(model) = &config.evals.embedding_model {
        return EmbeddingConfig::Served {
            model: model.clone(),
        };
    }
    let Some(backend) = config.embedder.backend else {
        return EmbeddingConfig::default();
    };
    // A backend that cannot start leaves the four embedding tools failing with the reason; the
    // other tools keep working (the seed's degradation rule).
    match embedder::build(backend, &config.embedder) {
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
    }
}

/// The evals server's configuration.
fn evals_config(config: &Config) -> EvalsConfig {
    let settings = &config.evals;
    EvalsConfig {
        lm_studio_servers: settings.lm_studio_servers.clone(),
        lm_studio_slots: settings.lm_studio_slots,
        together: settings.together.clone(),
        huggingface: settings.huggingface.clone(),
        embedding: embedding(config),
        ..EvalsConfig::default()
    }
}

pub async fn run(args: Args, config: &Config) -> anyhow::Result<()> {
    let serve = args.transport.serve()?;
    let visibility = Arc::new(args.visibility.config(config)?);
    let config = evals_config(config);
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
                crate::runtime::shutdown_signal().await;
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
