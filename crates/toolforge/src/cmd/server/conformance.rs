//! `toolforge server conformance`: the fixture the official MCP conformance suite expects,
//! on stdio (the default) or on Streamable HTTP at `http://HOST:PORT/mcp`.

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Serve one session on stdin/stdout (the default when no --port is given).
    #[arg(long, conflicts_with = "port")]
    stdio: bool,
    /// Serve Streamable HTTP on this port (0 picks a free one); the endpoint is /mcp.
    #[arg(long)]
    port: Option<u16>,
    /// Address to bind with --port. Loopback by default; other hosts are added to the
    /// Host allow-list (DNS-rebinding protection).
    #[arg(long, default_value = "127.0.0.1", requires = "port")]
    host: String,
    /// Visibility of the fixture's tools, resources and prompts (stdio only: the HTTP fixture
    /// is the conformance suite's target and serves everything).
    #[command(flatten)]
    visibility: crate::cmd::visibility::VisibilityArgs,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let visibility = args.visibility.config()?;
    let Some(port) = args.port else {
        if visibility.is_open() {
            return toolforge_conformance::serve_stdio().await;
        }
        let handler = toolforge_gateway::Filtered::new(
            toolforge_conformance::Fixture::new(),
            "conformance",
            std::sync::Arc::new(visibility),
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
    eprintln!("conformance fixture listening on http://{addr}/mcp");
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        cancel.cancel();
    });
    toolforge_conformance::serve_http(listener, opts).await
}
