//! Process-level set-up and the environment: the only module of toolforge that reads env vars.
//! Everything read here is parsed once into typed config and handed to the libraries.

use tracing_subscriber::EnvFilter;

/// Logs go to stderr: stdout belongs to the MCP stdio protocol and to command results.
pub fn init_tracing() {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,rmcp=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// reqwest is built without a bundled crypto provider (ring is much cheaper to build than
/// aws-lc); install ring once, before any HTTPS client exists.
pub fn init_tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Reads one environment variable; empty values count as unset.
#[allow(clippy::disallowed_methods)]
pub fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The configuration file: `--config`, else `MCP_SERVERS_CONFIG`, else `./mcp.servers.json`.
pub fn servers_config_path(flag: Option<std::path::PathBuf>) -> std::path::PathBuf {
    flag.or_else(|| env("MCP_SERVERS_CONFIG").map(std::path::PathBuf::from))
        .unwrap_or_else(|| std::path::PathBuf::from("mcp.servers.json"))
}

/// Reads and parses the servers configuration, expanding `${VAR}` from the environment.
/// Warnings about unknown keys are logged.
pub fn load_pool_config(
    flag: Option<std::path::PathBuf>,
) -> anyhow::Result<toolforge_mcp::PoolConfig> {
    use anyhow::Context as _;
    let path = servers_config_path(flag);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read the servers configuration {} (pass --config FILE or set MCP_SERVERS_CONFIG)",
            path.display()
        )
    })?;
    #[allow(clippy::disallowed_methods)]
    let lookup = |name: &str| std::env::var(name).ok();
    let config = toolforge_mcp::config::parse(&text, &lookup)
        .with_context(|| format!("invalid servers configuration {}", path.display()))?;
    for w in &config.warnings {
        tracing::warn!("{}: {w}", path.display());
    }
    Ok(config)
}

/// Pool options for this process: `toolforge` in a config means this very executable.
pub fn pool_options() -> toolforge_mcp::PoolOptions {
    toolforge_mcp::PoolOptions {
        self_command: std::env::current_exe()
            .ok()
            .map(|exe| ("toolforge".to_owned(), exe)),
        ..Default::default()
    }
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
