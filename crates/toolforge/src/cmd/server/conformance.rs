//! `toolforge server conformance`: the fixture the official MCP conformance suite expects,
//! on stdio (the default) or over HTTP (`-t sse|http`, or `--port`): Streamable HTTP at
//! `http://HOST:PORT/mcp`, and `/sse` and `GET /tools` as every built-in server serves them.

use std::sync::Arc;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;
use toolforge_gateway::{BuiltinHttpOptions, Filtered, builtin_routes};

use super::transport::Serve;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    transport: super::transport::TransportArgs,
    /// Address to bind over HTTP. Loopback by default; other hosts are added to the Host
    /// allow-list (DNS-rebinding protection).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Visibility of the fixture's tools, resources and prompts (stdio only: the HTTP fixture
    /// is the conformance suite's target and serves everything).
    #[command(flatten)]
    visibility: crate::cmd::visibility::VisibilityArgs,
}

pub async fn run(args: Args, config: &crate::config::Config) -> anyhow::Result<()> {
    let serve = args.transport.serve()?;
    let visibility = args.visibility.config(config)?;
    let Serve::Http { port, named } = serve else {
        if visibility.is_open() {
            return toolforge_conformance::serve_stdio().await;
        }
        let handler = Filtered::new(
            toolforge_conformance::Fixture::new(),
            "conformance",
            Arc::new(visibility),
        );
        return toolforge_gateway::serve_handler_stdio(handler).await;
    };
    anyhow::ensure!(
        visibility.is_open(),
        "visibility flags and MCP_*_TOOLS/TAGS apply to the stdio fixture only; \
         the HTTP fixture serves the conformance suite everything"
    );
    let listener = tokio::net::TcpListener::bind((args.host.as_str(), port))
        .await
        .with_context(|| format!("cannot bind {}:{port}", args.host))?;
    let addr = listener
        .local_addr()
        .context("listener has no local address")?;
    let cancel = CancellationToken::new();
    let opts = toolforge_conformance::HttpOptions {
        extra_hosts: vec![args.host.clone()],
        cancel: cancel.clone(),
    };
    // `/sse` and `GET /tools` of the same fixture (open visibility: it serves everything).
    let everything = Filtered::new(
        toolforge_conformance::Fixture::new(),
        "conformance",
        Arc::new(visibility),
    );
    let router = toolforge_conformance::router(opts).merge(builtin_routes(
        everything,
        &BuiltinHttpOptions {
            extra_hosts: vec![args.host.clone()],
            cancel: cancel.clone(),
        },
    ));
    eprintln!(
        "conformance fixture {}",
        super::transport::listening_line("", addr, named).trim_start()
    );
    tokio::spawn({
        let cancel = cancel.clone();
        async move {
            let _ = tokio::signal::ctrl_c().await;
            cancel.cancel();
        }
    });
    toolforge_gateway::serve_router(router, listener, cancel)
        .await
        .context("conformance fixture: HTTP server failed")
}
