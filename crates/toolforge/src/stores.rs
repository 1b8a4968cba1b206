//! The stores this process keeps state in, built from [`crate::config::StoreSettings`]: the
//! catalog cache, the upstream OAuth grants, and the gateway's `requestState` key and ledger.
//! A Redis that does not answer at start-up degrades to this process's memory with a warning,
//! never an outage.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use toolforge_mcp::auth::{SealKey, TokenStore};
use toolforge_mcp::{CatalogCache, MemoryStore, RedisStore, SqliteStore, cache};

use crate::config::{CatalogBackend, Config, KeySource};

/// The catalog cache the settings name (`None` for `none`). A SQLite file that cannot be opened
/// when none was asked for degrades to memory with a warning.
///
/// # Errors
/// A SQLite file asked for by `CATALOG_CACHE_BACKEND=sqlite` that cannot be opened.
pub async fn catalog_cache(config: &Config) -> anyhow::Result<Option<Arc<CatalogCache>>> {
    let settings = &config.stores.catalog;
    let store: Arc<dyn cache::CatalogStore> = match &settings.backend {
        CatalogBackend::None => return Ok(None),
        CatalogBackend::Memory => Arc::new(MemoryStore::default()),
        CatalogBackend::Sqlite { path, chosen } => match SqliteStore::open(path) {
            Ok(store) => Arc::new(store),
            Err(e) if !chosen => {
                tracing::warn!(
                    "{e}; using an in-memory catalog cache (set CATALOG_CACHE_PATH to a \
                     writable file for a persistent one)"
                );
                Arc::new(MemoryStore::default())
            }
            Err(e) => return Err(e).context("CATALOG_CACHE_BACKEND=sqlite"),
        },
        CatalogBackend::Redis { url } => match RedisStore::connect(url).await {
            Ok(store) => Arc::new(store),
            Err(e) => {
                tracing::warn!("{e}; using the in-memory catalog cache instead");
                Arc::new(MemoryStore::default())
            }
        },
    };
    Ok(Some(Arc::new(CatalogCache::new(store, settings.ttl))))
}

/// The key upstream OAuth grants are sealed with: `TOOLFORGE_TOKEN_KEY` (64 hex digits or
/// base64 of 32 bytes), else the file `TOOLFORGE_TOKEN_KEY_FILE` names.
///
/// # Errors
/// The variable or the file holds no 32-byte key, or the file cannot be read.
pub fn token_key(config: &Config) -> anyhow::Result<Option<SealKey>> {
    match &config.stores.token_key {
        None => Ok(None),
        Some(KeySource::Text(text)) => SealKey::parse(text)
            .map(Some)
            .context("TOOLFORGE_TOKEN_KEY"),
        Some(KeySource::File(path)) => {
            let text = std::fs::read_to_string(path).with_context(|| {
                format!("cannot read TOOLFORGE_TOKEN_KEY_FILE {}", path.display())
            })?;
            SealKey::parse(&text)
                .map(Some)
                .with_context(|| format!("TOOLFORGE_TOKEN_KEY_FILE {}", path.display()))
        }
    }
}

/// Where upstream OAuth grants are kept: with a key ([`token_key`]), in Redis when `REDIS_URL`
/// is set (shared by replicas), else in the catalog cache's SQLite file; without a key, or
/// with neither, in this process's memory only (gone when it stops), sealed with a random key.
///
/// # Errors
/// A key that does not parse, or a SQLite file whose table cannot be made.
pub async fn token_store(
    config: &Config,
    cache: Option<&CatalogCache>,
) -> anyhow::Result<Option<Arc<TokenStore>>> {
    let Some(key) = token_key(config)? else {
        return Ok(None);
    };
    if let Some(url) = &config.stores.redis_url {
        match tokio::time::timeout(Duration::from_secs(4), TokenStore::redis(url, key.clone()))
            .await
        {
            Ok(Ok(store)) => return Ok(Some(Arc::new(store))),
            Ok(Err(e)) => {
                tracing::warn!("{e}; upstream OAuth grants are kept in this process only")
            }
            Err(_) => tracing::warn!(
                "Redis at REDIS_URL did not answer within 4 s; upstream OAuth grants are kept in \
                 this process only"
            ),
        }
        return Ok(Some(Arc::new(TokenStore::memory(key))));
    }
    if let Some(store) = cache.and_then(|c| TokenStore::in_cache(c, key.clone())) {
        return Ok(Some(Arc::new(store?)));
    }
    Ok(Some(Arc::new(TokenStore::memory(key))))
}

/// Gives the gateway the key that seals `requestState`, the same on every replica:
/// `TOOLFORGE_STATE_KEY` (at least 32 bytes) when set; else, with `REDIS_URL`, the key kept in
/// Redis (generated once, [`crate::state_key`]). Without either (or when Redis does not answer,
/// with a warning) each process seals with a random key of its own, so a retry must reach the
/// replica that sealed it.
pub async fn apply_state_key(
    config: &Config,
    shared: &toolforge_gateway::Shared,
) -> anyhow::Result<()> {
    let redis_url = config.stores.redis_url.as_deref();
    // Replicas on one Redis share which sealed states were used, as they share the key.
    if let Some(url) = redis_url {
        match crate::state_key::RedisLedger::connect(url).await {
            Ok(ledger) => shared.set_state_ledger(Arc::new(ledger)),
            Err(e) => tracing::warn!(
                "{e:#}; used requestStates are remembered by this process only (a retry replayed \
                 to another replica is not caught)"
            ),
        }
    }
    if let Some(key) = &config.stores.state_key {
        return shared
            .set_state_key(key.as_bytes())
            .map_err(|e| anyhow::anyhow!("TOOLFORGE_STATE_KEY: {e}"));
    }
    let Some(url) = redis_url else {
        return Ok(());
    };
    match crate::state_key::shared_key(url).await {
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
