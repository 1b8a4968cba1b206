//! The MCP server pool of this process: the servers configuration read and parsed (`${VAR}`
//! expanded from the environment), the pool's options, and its launch for a server command.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;

use crate::config::{Config, process_env_sets};

/// Reads and parses the servers configuration `--config` (`flag`) or the config's default
/// names, expanding `${VAR}` from the environment. Warnings about unknown keys are logged.
pub fn load_config(
    config: &Config,
    flag: Option<PathBuf>,
) -> anyhow::Result<toolforge_mcp::PoolConfig> {
    let path = config.servers_config_path(flag);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read the servers configuration {} (pass --config FILE or set MCP_SERVERS_CONFIG)",
            path.display()
        )
    })?;
    let lookup = |name: &str| config.expand(name);
    let pool = toolforge_mcp::config::parse(&text, &lookup)
        .with_context(|| format!("invalid servers configuration {}", path.display()))?;
    for w in &pool.warnings {
        tracing::warn!("{}: {w}", path.display());
    }
    Ok(pool)
}

/// Pool options for this process: `toolforge` in a config means this very executable, the
/// catalog cache is the one the settings name, and stdio servers start under the kernel's
/// default policy when this process runs as `SCHED_BATCH` (`crate::scheduling`).
pub async fn options(config: &Config) -> anyhow::Result<toolforge_mcp::PoolOptions> {
    let cache = crate::stores::catalog_cache(config).await?;
    let tokens = crate::stores::token_store(config, cache.as_deref()).await?;
    Ok(toolforge_mcp::PoolOptions {
        self_command: std::env::current_exe()
            .ok()
            .map(|exe| ("toolforge".to_owned(), exe)),
        cache,
        backend_proxy: backend_proxy(process_env_sets),
        tokens,
        stdio_default_scheduling: crate::scheduling::runs_as_batch(),
        ..Default::default()
    })
}

/// Starts the pool of the servers configuration `flag` names (else the default one) and waits
/// for every server's first attempt: what a one-shot command (`tools list`, `tools snapshot`)
/// reads.
pub async fn start(
    config: &Config,
    flag: Option<PathBuf>,
) -> anyhow::Result<Arc<toolforge_mcp::Pool>> {
    let servers = load_config(config, flag)?;
    Ok(toolforge_mcp::Pool::start(servers, options(config).await?).await)
}

/// Starts the pool for a server command (`serve`, `gateway`): clients are answered at once and
/// each server's tools appear as it becomes ready; the servers' first states are logged.
pub async fn launch(
    config: &Config,
    pool: toolforge_mcp::PoolConfig,
) -> anyhow::Result<Arc<toolforge_mcp::Pool>> {
    let (pool, first) = toolforge_mcp::Pool::launch(pool, options(config).await?).await;
    let started = pool.clone();
    tokio::spawn(async move {
        first.wait().await;
        for h in started.health() {
            tracing::info!(server = %h.name, state = ?h.state, tools = h.tools, "server");
        }
    });
    Ok(pool)
}

/// How backends are reached: through the proxy the process environment names, if any (reqwest
/// reads these variables from it, upper case first; `NO_PROXY` alone names none), else
/// directly, without asking reqwest's proxy matcher about every request.
fn backend_proxy(sets: impl Fn(&str) -> bool) -> toolforge_mcp::BackendProxy {
    const NAMING_A_PROXY: [&str; 6] = [
        "ALL_PROXY",
        "all_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
    ];
    if NAMING_A_PROXY.iter().any(|name| sets(name)) {
        toolforge_mcp::BackendProxy::Environment
    } else {
        toolforge_mcp::BackendProxy::None
    }
}

#[cfg(test)]
mod tests {
    use super::backend_proxy;
    use toolforge_mcp::BackendProxy;

    #[test]
    fn backends_are_reached_through_a_proxy_only_when_a_variable_names_one() {
        for name in ["HTTP_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"] {
            assert_eq!(
                backend_proxy(|set| set == name),
                BackendProxy::Environment,
                "{name}"
            );
        }
        assert_eq!(backend_proxy(|_| false), BackendProxy::None);
        assert_eq!(
            backend_proxy(|set| set == "NO_PROXY" || set == "PATH"),
            BackendProxy::None
        );
    }
}
