//! `toolforge gateway --stdio`: the gateway for desktop MCP clients.

use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Serve over stdin/stdout (the only transport of this command; `serve` is the HTTP one).
    #[arg(long, required = true)]
    pub stdio: bool,
    /// Servers configuration (default: $MCP_SERVERS_CONFIG, else ./mcp.servers.json).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// How tool names are exposed.
    #[arg(long, value_enum, default_value = "auto")]
    pub namespace: super::serve::NamespaceArg,
    /// Broker rule file (YAML or JSON; default: the configuration's
    /// "toolforge": {"broker": {"rules": FILE}}); narrows tools/list to a request's intent.
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    #[command(flatten)]
    pub visibility: super::visibility::VisibilityArgs,
    #[command(flatten)]
    pub tool_mode: super::visibility::ToolModeArgs,
    #[command(flatten)]
    pub governance: super::governance::GovernanceArgs,
    #[command(flatten)]
    pub who: super::governance::StdioIdentityArgs,
}

pub async fn run(args: Args, process: &crate::config::Config) -> anyhow::Result<()> {
    let mut visibility = args.visibility.config(process)?;
    let config_path = process.servers_config_path(args.config.clone());
    let config = crate::pool::load_config(process, args.config)?;
    let rules = super::broker::rules_for(args.rules.as_deref(), &config.settings, &config_path)?;
    visibility.governance = args
        .governance
        .build(process, &config.settings, &config_path)
        .await?;
    let stdio_identity = args.who.resolve(process, &config.settings).await?;
    let traces = crate::agent::trace_sink(&process.trace).await?;
    let pool = crate::pool::launch(process, config).await?;
    let shared = toolforge_gateway::Shared::with_options(
        pool.clone(),
        args.namespace.into(),
        visibility,
        args.tool_mode.mode(),
    );
    crate::stores::apply_state_key(process, &shared).await?;
    shared.set_memory_release(crate::allocator::release_free_memory);
    shared.set_rules(rules);
    shared.set_trail(traces.clone());
    if let Some(who) = stdio_identity {
        tracing::info!(principal = %who.principal, "stdio requests run as this principal");
        shared.set_stdio_identity(who);
    }
    let served = tokio::select! {
        r = toolforge_gateway::serve_stdio(shared) => r,
        () = crate::runtime::shutdown_signal() => Ok(()),
    };
    traces.flush().await;
    pool.shutdown().await;
    served
}
