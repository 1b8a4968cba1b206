//! `toolforge server <toolkit|evals|conformance>`: one built-in MCP server.

pub mod conformance;
pub mod evals;
pub mod toolkit;
pub mod transport;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Read-only SQL, REST, sandboxed Python and resource handles (seed 002).
    Toolkit(toolkit::Args),
    /// The LLM-evaluation tools (seed 003).
    Evals(evals::Args),
    /// The fixture the official MCP conformance suite's server scenarios expect.
    Conformance(conformance::Args),
}

pub async fn run(command: Command, config: &crate::config::Config) -> anyhow::Result<()> {
    match command {
        Command::Toolkit(args) => toolkit::run(args, config).await,
        Command::Evals(args) => evals::run(args, config).await,
        Command::Conformance(args) => conformance::run(args, config).await,
    }
}
