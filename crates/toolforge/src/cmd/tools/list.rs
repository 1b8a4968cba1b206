//! `toolforge tools list`: the merged catalog of the live pool.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::config::Config;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Servers configuration (default: $MCP_SERVERS_CONFIG, else ./mcp.servers.json).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the rows of `GET /tools` as JSON.
    #[arg(long)]
    pub json: bool,
    /// How tool names are exposed.
    #[arg(long, value_enum, default_value = "auto")]
    pub namespace: crate::cmd::serve::NamespaceArg,
}

pub async fn run(args: Args, config: &Config) -> anyhow::Result<ExitCode> {
    let pool = crate::pool::start(config, args.config).await?;
    let shared = toolforge_gateway::Shared::new(pool.clone(), args.namespace.into());
    let rows = toolforge_gateway::tool_rows(&shared);
    let health = pool.health();
    pool.shutdown().await;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        for h in &health {
            let state = serde_json::to_value(h.state)?;
            let err = h
                .last_error
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default();
            println!(
                "{} [{}] {} tools{err}",
                h.name,
                state.as_str().unwrap_or("?"),
                h.tools
            );
        }
        println!();
        for row in &rows {
            let first = row.description.lines().next().unwrap_or("");
            let first: String = first.chars().take(80).collect();
            let via = if row.exposed_name == row.name {
                String::new()
            } else {
                format!(" (as {})", row.exposed_name)
            };
            println!("{}/{}{via}  {first}", row.server, row.name);
        }
    }
    let degraded = health.iter().any(|h| {
        !matches!(
            h.state,
            toolforge_mcp::ServerState::Ready | toolforge_mcp::ServerState::Disabled
        )
    });
    Ok(if degraded {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}
