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

/// Pool options for this process: `toolforge` in a config means this very executable, and the
/// catalog cache is the one `CATALOG_CACHE_BACKEND` names.
pub async fn pool_options() -> anyhow::Result<toolforge_mcp::PoolOptions> {
    Ok(toolforge_mcp::PoolOptions {
        self_command: std::env::current_exe()
            .ok()
            .map(|exe| ("toolforge".to_owned(), exe)),
        cache: catalog_cache().await?,
        ..Default::default()
    })
}

/// The catalog cache: `CATALOG_CACHE_BACKEND` = `memory` (default), `sqlite`
/// (`CATALOG_CACHE_PATH`, default `$XDG_CACHE_HOME/toolforge/catalog.sqlite`), `redis`
/// (`REDIS_URL`) or `none`; `CATALOG_CACHE_TTL` in seconds (default 86400). A Redis that does
/// not answer at start-up degrades to the memory cache with a warning.
pub async fn catalog_cache() -> anyhow::Result<Option<std::sync::Arc<toolforge_mcp::CatalogCache>>>
{
    use anyhow::Context as _;
    use std::sync::Arc;
    use toolforge_mcp::{CatalogCache, MemoryStore, RedisStore, SqliteStore, cache};
    let ttl = match env("CATALOG_CACHE_TTL") {
        Some(v) => {
            let secs: u64 = v.trim().parse().ok().filter(|s| *s > 0).with_context(|| {
                format!("CATALOG_CACHE_TTL is \"{v}\"; give a positive number of seconds")
            })?;
            std::time::Duration::from_secs(secs)
        }
        None => cache::DEFAULT_TTL,
    };
    let backend = env("CATALOG_CACHE_BACKEND").unwrap_or_else(|| "memory".to_owned());
    let store: Arc<dyn cache::CatalogStore> = match backend.to_ascii_lowercase().as_str() {
        "none" | "off" => return Ok(None),
        "memory" => Arc::new(MemoryStore::default()),
        "sqlite" => {
            let path = env("CATALOG_CACHE_PATH").map_or_else(
                || {
                    env("XDG_CACHE_HOME")
                        .map(std::path::PathBuf::from)
                        .or_else(|| env("HOME").map(|h| std::path::PathBuf::from(h).join(".cache")))
                        .unwrap_or_else(|| std::path::PathBuf::from("."))
                        .join("toolforge")
                        .join("catalog.sqlite")
                },
                std::path::PathBuf::from,
            );
            Arc::new(SqliteStore::open(&path).context("CATALOG_CACHE_BACKEND=sqlite")?)
        }
        "redis" => {
            let url = env("REDIS_URL").context(
                "CATALOG_CACHE_BACKEND=redis needs REDIS_URL (e.g. redis://127.0.0.1:6379/0)",
            )?;
            match RedisStore::connect(&url).await {
                Ok(store) => Arc::new(store),
                Err(e) => {
                    tracing::warn!("{e}; using the in-memory catalog cache instead");
                    Arc::new(MemoryStore::default())
                }
            }
        }
        other => anyhow::bail!(
            "CATALOG_CACHE_BACKEND is \"{other}\"; use memory (the default), sqlite, redis or none"
        ),
    };
    Ok(Some(Arc::new(CatalogCache::new(store, ttl))))
}

/// Resolves on Ctrl-C or SIGTERM.
/// Gives the gateway the key that seals `requestState` (`TOOLFORGE_STATE_KEY`, at least 32
/// bytes, the same on every replica); without it each process seals with a random key of its
/// own, so a retry must reach the replica that sealed it.
pub fn apply_state_key(shared: &toolforge_gateway::Shared) -> anyhow::Result<()> {
    match env("TOOLFORGE_STATE_KEY") {
        Some(key) => shared
            .set_state_key(key.as_bytes())
            .map_err(|e| anyhow::anyhow!("TOOLFORGE_STATE_KEY: {e}")),
        None => Ok(()),
    }
}

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
