//! The `toolforge` binary: parses the command line, reads the environment and files once into
//! typed config (the only place that does), wires the crates together and runs one command.

mod agent;
mod allocator;
mod cmd;
mod config;
mod embedder;
mod otel;
mod otel_stderr;
mod pool;
mod runtime;
mod scheduling;
mod state_key;
mod stores;
mod telemetry;

use clap::{Parser, Subcommand};

/// toolforge puts a large pool of MCP servers in front of a model: it merges their tools, shows
/// each request only the tools it may and should see, picks deterministically which server runs a
/// call, never overspends a cost ceiling, can plan without executing, and writes down why.
#[derive(Debug, Parser)]
#[command(name = "toolforge", version, about, long_about = None, propagate_version = true)]
#[command(
    after_help = "Logs go to stderr (RUST_LOG=debug for more); stdout carries results and the \
MCP stdio protocol.\nConfiguration: mcp.servers.json (or MCP_SERVERS_CONFIG), see README.md."
)]
struct Cli {
    /// Threads that run async work (default: tokio's, one per CPU core; fewer can suit a small
    /// machine shared with stdio backends, see docs/deploy.md).
    #[arg(long, global = true, value_name = "N", env = "TOOLFORGE_WORKER_THREADS",
          value_parser = clap::value_parser!(u16).range(1..=1024))]
    worker_threads: Option<u16>,
    /// How the kernel schedules `serve` and `gateway` (Linux): `normal` (the default) leaves the
    /// policy the process was started with; `batch` runs every thread as `SCHED_BATCH`, so that
    /// their wake-ups do not preempt backends and clients on the same machine (docs/deploy.md).
    /// Stdio backends start under `SCHED_OTHER` either way.
    #[arg(
        long,
        global = true,
        value_name = "POLICY",
        env = "TOOLFORGE_SCHEDULING",
        default_value = "normal"
    )]
    scheduling: scheduling::Scheduling,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the HTTP API and the gateway's MCP endpoint at /mcp.
    Serve(cmd::serve::Args),
    /// Serve the gateway over stdio, for desktop MCP clients.
    Gateway(cmd::gateway::Args),
    /// Run one built-in MCP server (toolkit, evals or the conformance fixture).
    #[command(subcommand)]
    Server(cmd::server::Command),
    /// Run the bundled mock exchange-rate REST API.
    MockRest(cmd::mock_rest::Args),
    /// Ask for something in plain words; the agent does it through the pool.
    Chat(cmd::chat::Args),
    /// Print the daily spend table from the trace file.
    CostReport(cmd::cost_report::Args),
    /// Check the trace file (its hash chain).
    #[command(subcommand)]
    Trace(cmd::trace::Command),
    /// Inspect the merged tool catalog.
    #[command(subcommand)]
    Tools(cmd::tools::Command),
    /// Show which server the selector picks for a tool call, and why.
    Select(cmd::select::Args),
    /// Seed 004's broker: which tools a rule file gives an intent.
    #[command(subcommand)]
    Broker(cmd::broker::Command),
    /// Run an evaluation (selection accuracy gate, retrieval metrics).
    #[command(subcommand)]
    Eval(cmd::eval::Command),
    /// Connect to an MCP server by URL and call a tool (a plain MCP client).
    Client(cmd::client::Args),
    /// Upstream OAuth grants: authorize a server, revoke, list.
    #[command(subcommand)]
    Auth(cmd::auth::Command),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let config = match config::Config::load() {
        Ok(config) => config,
        Err(err) => {
            eprintln!("error: {err:#}");
            return std::process::ExitCode::FAILURE;
        }
    };
    runtime::init_tls();
    let traces = match telemetry::init_tracing(&config.telemetry) {
        Ok(traces) => traces,
        Err(err) => {
            eprintln!("error: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let worker_threads = cli.worker_threads.map(usize::from);
    let serving = matches!(cli.command, Command::Serve(_) | Command::Gateway(_));
    // Before the runtime starts its threads, which take the policy from this one.
    if serving && let Err(err) = scheduling::apply(cli.scheduling) {
        tracing::warn!(policy = ?cli.scheduling, "cannot set the scheduling policy: {err}");
    }
    // A gateway on glibc's allocator caps its heap arenas (`allocator::limit_glibc_arenas`),
    // unless the operator set `MALLOC_ARENA_MAX`. With jemalloc (`allocator`), glibc's heap
    // holds only what C libraries allocate, and jemalloc has its own single arena.
    let built = if !allocator::JEMALLOC && serving && !config::process_env_sets("MALLOC_ARENA_MAX")
    {
        runtime::build_with_arenas_capped(worker_threads)
    } else {
        runtime::build(worker_threads)
    };
    let runtime = match built {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(run(cli.command, &config));
    // Commands flush what they own before returning; a blocking reader still parked on a child's
    // pipe must not hold the process open.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    // What the run left in the span queue goes out now (a drained `serve`, a finished `chat`).
    if let Some(traces) = &traces {
        traces.shutdown();
    }
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(command: Command, config: &config::Config) -> anyhow::Result<std::process::ExitCode> {
    use std::process::ExitCode;
    match command {
        Command::Serve(args) => cmd::serve::run(args, config)
            .await
            .map(|()| ExitCode::SUCCESS),
        Command::Gateway(args) => cmd::gateway::run(args, config)
            .await
            .map(|()| ExitCode::SUCCESS),
        Command::Server(command) => cmd::server::run(command, config)
            .await
            .map(|()| ExitCode::SUCCESS),
        Command::MockRest(args) => cmd::mock_rest::run(args).await.map(|()| ExitCode::SUCCESS),
        Command::Chat(args) => cmd::chat::run(args, config).await,
        Command::CostReport(args) => cmd::cost_report::run(args, config)
            .await
            .map(|()| ExitCode::SUCCESS),
        Command::Tools(command) => cmd::tools::run(command, config).await,
        Command::Trace(command) => cmd::trace::run(command, config).await,
        Command::Select(args) => cmd::select::run(args).await,
        Command::Broker(command) => cmd::broker::run(command, config).await,
        Command::Eval(command) => cmd::eval::run(command, config).await,
        Command::Client(args) => cmd::client::run(args, config).await,
        Command::Auth(command) => cmd::auth::run(command, config).await,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory as _;
        super::Cli::command().debug_assert();
    }
}
