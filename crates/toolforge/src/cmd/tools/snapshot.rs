//! `toolforge tools snapshot`: writes the live pool's catalog in the snapshot format that
//! `--catalog` options read (DESIGN §8).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use crate::config::Config;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Servers configuration (default: $MCP_SERVERS_CONFIG, else ./mcp.servers.json).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Where to write the snapshot (`-` for stdout).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

pub async fn run(args: Args, config: &Config) -> anyhow::Result<ExitCode> {
    let pool = crate::pool::start(config, args.config).await?;
    let catalog = pool.catalog();
    let health = pool.health();
    pool.shutdown().await;
    for h in health
        .iter()
        .filter(|h| h.state != toolforge_mcp::ServerState::Ready)
    {
        eprintln!(
            "warning: server {} is {:?}; its tools are missing from the snapshot{}",
            h.name,
            h.state,
            h.last_error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        );
    }
    let text = serde_json::to_string_pretty(&catalog.to_snapshot_json())?;
    if args.out.as_os_str() == "-" {
        println!("{text}");
    } else {
        std::fs::write(&args.out, text + "\n")
            .with_context(|| format!("cannot write {}", args.out.display()))?;
        eprintln!(
            "wrote {} tools from {} servers to {}",
            catalog.len(),
            catalog.servers.len(),
            args.out.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
