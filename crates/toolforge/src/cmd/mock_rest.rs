//! `toolforge mock-rest`: the bundled mock exchange-rate API (`GET /rates/{BASE}`), loopback by
//! default, for demos, tests and CI without outbound internet.

use anyhow::Context as _;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Port to listen on.
    #[arg(long, default_value_t = 8811)]
    pub port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: std::net::IpAddr,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind((args.host, args.port))
        .await
        .with_context(|| format!("binding {}:{}", args.host, args.port))?;
    eprintln!(
        "mock exchange-rate API on http://{}/rates/USD",
        listener.local_addr()?
    );
    axum_serve(listener).await
}

async fn axum_serve(listener: tokio::net::TcpListener) -> anyhow::Result<()> {
    toolforge_toolkit::rest::serve_mock(listener, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
    .context("serving the mock REST API")
}
