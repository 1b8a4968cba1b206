//! Process-level set-up and the environment: the only module of toolforge that reads env vars.
//! Everything read here is parsed once into typed config and handed to the libraries.
//!
//! Settings come from the environment, else from `./.env` (read once; the environment wins).
//! `.env` values are toolforge's own settings and `${VAR}` in the servers configuration; they
//! are not exported to the MCP servers toolforge starts.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::otel::{TraceSettings, Traces, TracesExporter};

/// Logs go to stderr: stdout belongs to the MCP stdio protocol and to command results. With
/// `OTEL_TRACES_EXPORTER=otlp`, toolforge's spans are exported too (see [`crate::otel`]); the
/// returned handle flushes them at exit. Call after [`init_tls`], before the async runtime.
///
/// # Errors
/// An unsupported `OTEL_TRACES_EXPORTER`, a malformed `OTEL_BSP_*` number, or an exporter that
/// cannot be built.
pub fn init_tracing() -> Result<Option<Traces>, String> {
    let filter = env("RUST_LOG")
        .and_then(|directives| EnvFilter::try_new(directives).ok())
        .unwrap_or_else(|| EnvFilter::new("info,rmcp=warn"));
    // The exported spans are not log lines: the log never shows them, whatever RUST_LOG says.
    let filter = match format!("{}=off", toolforge_mcp::trace_context::SPAN_TARGET).parse() {
        Ok(directive) => filter.add_directive(directive),
        Err(_) => filter,
    };
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(filter);
    let traces = Traces::start(trace_settings()?)?;
    // Two shapes rather than an optional layer: with no exporter the spans stay disabled.
    let _ = match &traces {
        Some(t) => tracing_subscriber::registry()
            .with(logs)
            .with(t.layer())
            .try_init(),
        None => tracing_subscriber::registry().with(logs).try_init(),
    };
    Ok(traces)
}

/// `OTEL_TRACES_EXPORTER`, its endpoint, `OTEL_SERVICE_NAME` and the batch processor's
/// `OTEL_BSP_SCHEDULE_DELAY` (milliseconds) and `OTEL_BSP_MAX_QUEUE_SIZE`.
fn trace_settings() -> Result<TraceSettings, String> {
    let number = |name: &str| {
        env(name)
            .map(|v| {
                v.trim()
                    .parse::<u64>()
                    .map_err(|_| format!("{name} is \"{v}\", which is not a whole number"))
            })
            .transpose()
    };
    Ok(TraceSettings {
        exporter: TracesExporter::parse(
            env("OTEL_TRACES_EXPORTER").as_deref(),
            env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").as_deref(),
            env("OTEL_EXPORTER_OTLP_ENDPOINT").as_deref(),
        )?,
        service_name: env("OTEL_SERVICE_NAME"),
        schedule_delay: number("OTEL_BSP_SCHEDULE_DELAY")?.map(std::time::Duration::from_millis),
        max_queue_size: number("OTEL_BSP_MAX_QUEUE_SIZE")?
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
    })
}

/// reqwest is built without a bundled crypto provider (ring is much cheaper to build than
/// aws-lc); install ring once, before any HTTPS client exists.
pub fn init_tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Settings from `./.env`, read once on first use. The environment wins over them.
static DOTENV: std::sync::LazyLock<std::collections::HashMap<String, String>> =
    std::sync::LazyLock::new(|| match std::fs::read_to_string(".env") {
        Ok(text) => parse_dotenv(&text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::collections::HashMap::new(),
        Err(e) => {
            eprintln!("warning: cannot read .env ({e}); using the environment only");
            std::collections::HashMap::new()
        }
    });

/// `KEY=value` lines: blank lines and `#` comments are skipped, an `export ` prefix is allowed,
/// and a value in single or double quotes is taken as is (without the quotes); an unquoted value
/// ends at ` #`.
fn parse_dotenv(text: &str) -> std::collections::HashMap<String, String> {
    let mut out = std::collections::HashMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let value = value.trim();
        let value = match value.chars().next() {
            Some(q @ ('"' | '\'')) => value[1..].split(q).next().unwrap_or_default(),
            _ => value.split(" #").next().unwrap_or_default().trim_end(),
        };
        out.insert(key.to_owned(), value.to_owned());
    }
    out
}

/// Reads one setting: the environment, else `./.env`. Empty values count as unset.
pub fn env(name: &str) -> Option<String> {
    raw_env(name).filter(|v| !v.trim().is_empty())
}

/// Whether the process environment itself (not `./.env`) sets `name`: for settings that the C
/// library reads there at start-up, such as `MALLOC_ARENA_MAX`.
#[allow(clippy::disallowed_methods)]
pub fn process_env_sets(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty())
}

/// Like [`env`], keeping empty values (for `${VAR}` expansion in the servers configuration).
#[allow(clippy::disallowed_methods)]
fn raw_env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .or_else(|| DOTENV.get(name).cloned())
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
    let lookup = |name: &str| raw_env(name);
    let config = toolforge_mcp::config::parse(&text, &lookup)
        .with_context(|| format!("invalid servers configuration {}", path.display()))?;
    for w in &config.warnings {
        tracing::warn!("{}: {w}", path.display());
    }
    Ok(config)
}

/// Pool options for this process: `toolforge` in a config means this very executable, the
/// catalog cache is the one `CATALOG_CACHE_BACKEND` names, and stdio servers start under the
/// kernel's default policy when this process runs as `SCHED_BATCH` (`crate::scheduling`).
pub async fn pool_options() -> anyhow::Result<toolforge_mcp::PoolOptions> {
    let cache = catalog_cache().await?;
    let tokens = token_store(cache.as_deref()).await?;
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

/// The key upstream OAuth grants are sealed with: `TOOLFORGE_TOKEN_KEY` (64 hex digits or
/// base64 of 32 bytes), else the file `TOOLFORGE_TOKEN_KEY_FILE` names.
///
/// # Errors
/// The variable or the file holds no 32-byte key, or the file cannot be read.
pub fn token_key() -> anyhow::Result<Option<toolforge_mcp::auth::SealKey>> {
    use anyhow::Context as _;
    if let Some(text) = env("TOOLFORGE_TOKEN_KEY") {
        return toolforge_mcp::auth::SealKey::parse(&text)
            .map(Some)
            .context("TOOLFORGE_TOKEN_KEY");
    }
    let Some(path) = env("TOOLFORGE_TOKEN_KEY_FILE") else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read TOOLFORGE_TOKEN_KEY_FILE {path}"))?;
    toolforge_mcp::auth::SealKey::parse(&text)
        .map(Some)
        .with_context(|| format!("TOOLFORGE_TOKEN_KEY_FILE {path}"))
}

/// Where upstream OAuth grants are kept: with a key ([`token_key`]), in Redis when `REDIS_URL`
/// is set (shared by replicas), else in the catalog cache's SQLite file; without a key, or
/// with neither, in this process's memory only (gone when it stops), sealed with a random key.
///
/// # Errors
/// A key that does not parse, or a SQLite file whose table cannot be made.
pub async fn token_store(
    cache: Option<&toolforge_mcp::CatalogCache>,
) -> anyhow::Result<Option<std::sync::Arc<toolforge_mcp::auth::TokenStore>>> {
    use toolforge_mcp::auth::TokenStore;
    let Some(key) = token_key()? else {
        return Ok(None);
    };
    if let Some(url) = env("REDIS_URL") {
        match tokio::time::timeout(
            std::time::Duration::from_secs(4),
            TokenStore::redis(&url, key.clone()),
        )
        .await
        {
            Ok(Ok(store)) => return Ok(Some(std::sync::Arc::new(store))),
            Ok(Err(e)) => {
                tracing::warn!("{e}; upstream OAuth grants are kept in this process only")
            }
            Err(_) => tracing::warn!(
                "Redis at REDIS_URL did not answer within 4 s; upstream OAuth grants are kept in \
                 this process only"
            ),
        }
        return Ok(Some(std::sync::Arc::new(TokenStore::memory(key))));
    }
    if let Some(store) = cache.and_then(|c| TokenStore::in_cache(c, key.clone())) {
        return Ok(Some(std::sync::Arc::new(store?)));
    }
    Ok(Some(std::sync::Arc::new(TokenStore::memory(key))))
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

/// The catalog cache: `CATALOG_CACHE_BACKEND` = `sqlite` (the default: persistent, so a dry
/// run can plan from what any earlier run listed; `CATALOG_CACHE_PATH`, default
/// `$XDG_CACHE_HOME/toolforge/catalog.sqlite`, else `~/.cache/...`), `memory`, `redis`
/// (`REDIS_URL`) or `none`; `CATALOG_CACHE_TTL` in seconds (default 86400). A Redis that does
/// not answer at start-up degrades to the memory cache with a warning, and so does a cache file
/// that cannot be opened when none was asked for.
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
    let chosen = env("CATALOG_CACHE_BACKEND");
    let backend = chosen.clone().unwrap_or_else(|| "sqlite".to_owned());
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
            match SqliteStore::open(&path) {
                Ok(store) => Arc::new(store),
                Err(e) if chosen.is_none() => {
                    tracing::warn!(
                        "{e}; using an in-memory catalog cache (set CATALOG_CACHE_PATH to a \
                         writable file for a persistent one)"
                    );
                    Arc::new(MemoryStore::default())
                }
                Err(e) => return Err(e).context("CATALOG_CACHE_BACKEND=sqlite"),
            }
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
            "CATALOG_CACHE_BACKEND is \"{other}\"; use sqlite (the default), memory, redis or none"
        ),
    };
    Ok(Some(Arc::new(CatalogCache::new(store, ttl))))
}

/// Resolves on Ctrl-C or SIGTERM.
/// Starts the pool for a server command (`serve`, `gateway`): clients are answered at once and
/// each server's tools appear as it becomes ready; the servers' first states are logged.
pub async fn launch_pool(
    config: toolforge_mcp::PoolConfig,
) -> anyhow::Result<std::sync::Arc<toolforge_mcp::Pool>> {
    let (pool, first) = toolforge_mcp::Pool::launch(config, pool_options().await?).await;
    let started = pool.clone();
    tokio::spawn(async move {
        first.wait().await;
        for h in started.health() {
            tracing::info!(server = %h.name, state = ?h.state, tools = h.tools, "server");
        }
    });
    Ok(pool)
}

/// Gives the gateway the key that seals `requestState`, the same on every replica:
/// `TOOLFORGE_STATE_KEY` (at least 32 bytes) when set; else, with `REDIS_URL`, the key kept in
/// Redis (generated once, [`crate::state_key`]). Without either (or when Redis does not answer,
/// with a warning) each process seals with a random key of its own, so a retry must reach the
/// replica that sealed it.
pub async fn apply_state_key(shared: &toolforge_gateway::Shared) -> anyhow::Result<()> {
    // Replicas on one Redis share which sealed states were used, as they share the key.
    if let Some(url) = env("REDIS_URL") {
        match crate::state_key::RedisLedger::connect(&url).await {
            Ok(ledger) => shared.set_state_ledger(std::sync::Arc::new(ledger)),
            Err(e) => tracing::warn!(
                "{e:#}; used requestStates are remembered by this process only (a retry replayed \
                 to another replica is not caught)"
            ),
        }
    }
    if let Some(key) = env("TOOLFORGE_STATE_KEY") {
        return shared
            .set_state_key(key.as_bytes())
            .map_err(|e| anyhow::anyhow!("TOOLFORGE_STATE_KEY: {e}"));
    }
    let Some(url) = env("REDIS_URL") else {
        return Ok(());
    };
    match crate::state_key::shared_key(&url).await {
        Ok(key) => shared
            .set_state_key(key.as_bytes())
            .map_err(|e| anyhow::anyhow!("the requestState key in Redis: {e}")),
        Err(e) => {
            tracing::warn!(
                "{e:#}; requestState is sealed with a key of this process (set TOOLFORGE_STATE_KEY \
                 to share one without Redis)"
            );
            Ok(())
        }
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

#[cfg(test)]
mod tests {
    use super::{backend_proxy, parse_dotenv};
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

    #[test]
    fn dotenv_lines_comments_quotes_and_export() {
        let vars = parse_dotenv(
            "# settings\n\
             LLM_PROVIDER=anthropic\n\
             export COST_CEILING_USD = 0.05   # five cents\n\
             ANTHROPIC_API_KEY=\"sk-ant #1\"\n\
             TRACE_SINK='logs/my traces.jsonl'\n\
             EMPTY=\n\
             not a line\n\
             BAD-KEY=x\n",
        );
        assert_eq!(vars["LLM_PROVIDER"], "anthropic");
        assert_eq!(vars["COST_CEILING_USD"], "0.05");
        assert_eq!(vars["ANTHROPIC_API_KEY"], "sk-ant #1");
        assert_eq!(vars["TRACE_SINK"], "logs/my traces.jsonl");
        assert_eq!(vars["EMPTY"], "");
        assert_eq!(vars.len(), 5);
    }
}
