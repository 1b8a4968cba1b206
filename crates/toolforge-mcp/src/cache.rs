//! The catalog cache: each server's last `tools/list`, with the time it was fetched, behind one
//! trait with three stores: memory (the default), a SQLite file (survives restarts, so a dry run
//! can plan before any server answers) and Redis (shared by replicas).
//!
//! Entries are keyed by the server's name *and* a fingerprint of how it is reached (command,
//! arguments, URL), so editing a server's configuration never serves the old server's tools.
//! The cache only ever adds availability: a store that fails (Redis gone, disk full) is logged
//! and counted, and the pool goes on serving the last lists it holds.

use std::collections::HashMap;
use std::hash::{Hash as _, Hasher as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::cache_error::CacheError;
use crate::config::{ServerConfig, Transport};
use crate::pins::{PINS_TABLE, PinStore, migrate};

/// Default time a cached list counts as fresh.
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);

/// How long a store may take before it counts as failed.
pub const STORE_TIMEOUT: Duration = Duration::from_secs(2);

/// One server's cached tool list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CachedTools {
    /// The MCP `Tool` objects exactly as the server listed them.
    pub tools: Vec<Value>,
    /// When they were fetched, in milliseconds since the Unix epoch.
    pub fetched_at_ms: u64,
}

/// Where cached lists live.
pub trait CatalogStore: Send + Sync {
    /// `memory`, `sqlite` or `redis`.
    fn backend(&self) -> &'static str;
    fn load<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<CachedTools>, CacheError>>;
    fn save<'a>(
        &'a self,
        key: &'a str,
        entry: &'a CachedTools,
    ) -> BoxFuture<'a, Result<(), CacheError>>;
    /// Where this store keeps tool pins, when it keeps them (the SQLite file does).
    fn pin_store(&self) -> Option<PinStore> {
        None
    }
    /// The SQLite connection other tables share (upstream OAuth grants), when it is a file.
    fn sqlite_connection(&self) -> Option<Arc<parking_lot::Mutex<rusqlite::Connection>>> {
        None
    }
}

/// Lists kept in this process only.
#[derive(Debug, Default)]
pub struct MemoryStore {
    entries: parking_lot::Mutex<HashMap<String, CachedTools>>,
}

impl CatalogStore for MemoryStore {
    fn backend(&self) -> &'static str {
        "memory"
    }

    fn load<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<CachedTools>, CacheError>> {
        let got = self.entries.lock().get(key).cloned();
        Box::pin(async move { Ok(got) })
    }

    fn save<'a>(
        &'a self,
        key: &'a str,
        entry: &'a CachedTools,
    ) -> BoxFuture<'a, Result<(), CacheError>> {
        self.entries.lock().insert(key.to_owned(), entry.clone());
        Box::pin(async { Ok(()) })
    }
}

/// Lists in a SQLite file (one row per server).
#[derive(Debug)]
pub struct SqliteStore {
    path: PathBuf,
    conn: Arc<parking_lot::Mutex<rusqlite::Connection>>,
}

fn sqlite_err(e: impl std::fmt::Display) -> CacheError {
    CacheError {
        backend: "sqlite",
        message: e.to_string(),
    }
}

impl SqliteStore {
    /// Opens (creating when missing) the cache file at `path`.
    ///
    /// # Errors
    /// The file or its directory cannot be created, or it is not a SQLite database.
    pub fn open(path: &Path) -> Result<Self, CacheError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| sqlite_err(format!("cannot create {}: {e}", dir.display())))?;
        }
        let conn = rusqlite::Connection::open(path)
            .map_err(|e| sqlite_err(format!("cannot open {}: {e}", path.display())))?;
        conn.busy_timeout(Duration::from_secs(2))
            .map_err(sqlite_err)?;
        conn.execute_batch(&format!(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE IF NOT EXISTS catalog (
                 key TEXT PRIMARY KEY,
                 fetched_at_ms INTEGER NOT NULL,
                 tools TEXT NOT NULL
             );
             {PINS_TABLE}"
        ))
        .map_err(|e| sqlite_err(format!("{}: {e}", path.display())))?;
        migrate(&conn).map_err(|e| sqlite_err(format!("{}: {e}", path.display())))?;
        Ok(Self {
            path: path.to_owned(),
            conn: Arc::new(parking_lot::Mutex::new(conn)),
        })
    }

    /// The file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The tool pins kept in the same file.
    #[must_use]
    pub fn pin_store(&self) -> PinStore {
        PinStore::sqlite(self.conn.clone())
    }

    /// The file's connection, for the other tables kept in it (`crate::auth::store::TokenStore`).
    pub(crate) fn connection(&self) -> Arc<parking_lot::Mutex<rusqlite::Connection>> {
        self.conn.clone()
    }
}

impl CatalogStore for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    fn pin_store(&self) -> Option<PinStore> {
        Some(SqliteStore::pin_store(self))
    }

    fn sqlite_connection(&self) -> Option<Arc<parking_lot::Mutex<rusqlite::Connection>>> {
        Some(self.conn.clone())
    }

    fn load<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<CachedTools>, CacheError>> {
        let conn = self.conn.clone();
        let key = key.to_owned();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let conn = conn.lock();
                let row: Option<(i64, String)> = conn
                    .query_row(
                        "SELECT fetched_at_ms, tools FROM catalog WHERE key = ?1",
                        [&key],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .map(Some)
                    .or_else(|e| match e {
                        rusqlite::Error::QueryReturnedNoRows => Ok(None),
                        e => Err(sqlite_err(e)),
                    })?;
                row.map(|(at, tools)| {
                    Ok(CachedTools {
                        tools: serde_json::from_str(&tools).map_err(sqlite_err)?,
                        fetched_at_ms: u64::try_from(at).unwrap_or(0),
                    })
                })
                .transpose()
            })
            .await
            .map_err(sqlite_err)?
        })
    }

    fn save<'a>(
        &'a self,
        key: &'a str,
        entry: &'a CachedTools,
    ) -> BoxFuture<'a, Result<(), CacheError>> {
        let conn = self.conn.clone();
        let key = key.to_owned();
        let fetched_at_ms = entry.fetched_at_ms;
        // The text, not a clone of the entry, goes to the blocking thread: with thousands of
        // tools a clone of their JSON trees was the start-up peak.
        let tools = serde_json::to_string(&entry.tools);
        Box::pin(async move {
            let tools = tools.map_err(sqlite_err)?;
            tokio::task::spawn_blocking(move || {
                conn.lock()
                    .execute(
                        "INSERT INTO catalog (key, fetched_at_ms, tools) VALUES (?1, ?2, ?3)
                         ON CONFLICT(key) DO UPDATE SET fetched_at_ms = ?2, tools = ?3",
                        rusqlite::params![
                            key,
                            i64::try_from(fetched_at_ms).unwrap_or(i64::MAX),
                            tools
                        ],
                    )
                    .map(|_| ())
                    .map_err(sqlite_err)
            })
            .await
            .map_err(sqlite_err)?
        })
    }
}

/// Lists in Redis, one key per server under `toolforge:catalog:`, shared by replicas.
pub struct RedisStore {
    conn: redis::aio::ConnectionManager,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RedisStore")
    }
}

fn redis_err(e: impl std::fmt::Display) -> CacheError {
    CacheError {
        backend: "redis",
        message: e.to_string(),
    }
}

impl RedisStore {
    /// Connects to `url` (`redis://host:port/db`); reconnects by itself after a failure.
    ///
    /// # Errors
    /// The URL is invalid or the server does not answer.
    pub async fn connect(url: &str) -> Result<Self, CacheError> {
        let client = redis::Client::open(url).map_err(redis_err)?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(STORE_TIMEOUT))
            .set_response_timeout(Some(STORE_TIMEOUT))
            .set_number_of_retries(1);
        let conn = tokio::time::timeout(
            STORE_TIMEOUT * 2,
            redis::aio::ConnectionManager::new_with_config(client, config),
        )
        .await
        .map_err(|_| redis_err("no answer within 4 s"))?
        .map_err(redis_err)?;
        Ok(Self { conn })
    }
}

impl CatalogStore for RedisStore {
    fn backend(&self) -> &'static str {
        "redis"
    }

    fn load<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<CachedTools>, CacheError>> {
        Box::pin(async move {
            let mut conn = self.conn.clone();
            let got: Option<String> = redis::cmd("GET")
                .arg(format!("toolforge:catalog:{key}"))
                .query_async(&mut conn)
                .await
                .map_err(redis_err)?;
            got.map(|s| serde_json::from_str(&s).map_err(redis_err))
                .transpose()
        })
    }

    fn save<'a>(
        &'a self,
        key: &'a str,
        entry: &'a CachedTools,
    ) -> BoxFuture<'a, Result<(), CacheError>> {
        Box::pin(async move {
            let mut conn = self.conn.clone();
            let text = serde_json::to_string(entry).map_err(redis_err)?;
            redis::cmd("SET")
                .arg(format!("toolforge:catalog:{key}"))
                .arg(text)
                .query_async::<()>(&mut conn)
                .await
                .map_err(redis_err)
        })
    }
}

/// Hit figures, as `/health` reports them.
#[derive(Debug, Default)]
struct Counters {
    hits: AtomicU64,
    stale: AtomicU64,
    misses: AtomicU64,
    writes: AtomicU64,
    errors: AtomicU64,
    refreshes: AtomicU64,
}

/// The cache the pool uses: a store, a TTL and counters.
pub struct CatalogCache {
    store: Arc<dyn CatalogStore>,
    ttl: Duration,
    counters: Counters,
    last_error: parking_lot::Mutex<Option<String>>,
}

impl std::fmt::Debug for CatalogCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogCache")
            .field("backend", &self.store.backend())
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

/// What a lookup found.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    /// Younger than the TTL.
    Fresh(CachedTools),
    /// Older than the TTL: serve it, and refresh in the background.
    Stale(CachedTools),
    Miss,
}

/// Milliseconds since the Unix epoch, now.
#[must_use]
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The cache key of a server: its name and a fingerprint of how it is reached.
#[must_use]
pub fn key(server: &ServerConfig) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    match &server.transport {
        Transport::Stdio { command, args, .. } => {
            "stdio".hash(&mut h);
            command.hash(&mut h);
            args.hash(&mut h);
        }
        Transport::Http { url, .. } => {
            "http".hash(&mut h);
            url.hash(&mut h);
        }
        Transport::Sse { url, .. } => {
            "sse".hash(&mut h);
            url.hash(&mut h);
        }
    }
    format!("{}:{:016x}", server.name, h.finish())
}

impl CatalogCache {
    #[must_use]
    pub fn new(store: Arc<dyn CatalogStore>, ttl: Duration) -> Self {
        Self {
            store,
            ttl,
            counters: Counters::default(),
            last_error: parking_lot::Mutex::new(None),
        }
    }

    /// An in-process cache with the default TTL.
    #[must_use]
    pub fn memory() -> Self {
        Self::new(Arc::new(MemoryStore::default()), DEFAULT_TTL)
    }

    #[must_use]
    pub fn backend(&self) -> &'static str {
        self.store.backend()
    }

    /// Where tool pins are kept alongside the lists (the SQLite file), if anywhere.
    #[must_use]
    pub fn pin_store(&self) -> Option<PinStore> {
        self.store.pin_store()
    }

    /// The SQLite file's connection, when the cache is one (upstream OAuth grants live there).
    #[must_use]
    pub fn sqlite_connection(&self) -> Option<Arc<parking_lot::Mutex<rusqlite::Connection>>> {
        self.store.sqlite_connection()
    }

    #[must_use]
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Whether a list fetched at `fetched_at_ms` is past the TTL now.
    #[must_use]
    pub fn is_stale(&self, fetched_at_ms: u64) -> bool {
        let ttl = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        now_ms().saturating_sub(fetched_at_ms) > ttl
    }

    fn failed(&self, e: &CacheError) {
        self.counters.errors.fetch_add(1, Ordering::Relaxed);
        tracing::warn!("{e}; serving the lists already held");
        *self.last_error.lock() = Some(e.to_string());
    }

    /// Looks `server` up. A failing store counts as a miss (and is logged).
    pub async fn lookup(&self, server: &ServerConfig) -> Lookup {
        let key = key(server);
        let got = match tokio::time::timeout(STORE_TIMEOUT, self.store.load(&key)).await {
            Ok(Ok(got)) => got,
            Ok(Err(e)) => {
                self.failed(&e);
                None
            }
            Err(_) => {
                self.failed(&CacheError {
                    backend: self.store.backend(),
                    message: format!("no answer within {STORE_TIMEOUT:?}"),
                });
                None
            }
        };
        match got {
            Some(entry) if self.is_stale(entry.fetched_at_ms) => {
                self.counters.stale.fetch_add(1, Ordering::Relaxed);
                Lookup::Stale(entry)
            }
            Some(entry) => {
                self.counters.hits.fetch_add(1, Ordering::Relaxed);
                Lookup::Fresh(entry)
            }
            None => {
                self.counters.misses.fetch_add(1, Ordering::Relaxed);
                Lookup::Miss
            }
        }
    }

    /// Stores `server`'s freshly listed tools. Failures are logged and counted, never returned.
    pub async fn store(&self, server: &ServerConfig, entry: &CachedTools) {
        let key = key(server);
        match tokio::time::timeout(STORE_TIMEOUT, self.store.save(&key, entry)).await {
            Ok(Ok(())) => {
                self.counters.writes.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Err(e)) => self.failed(&e),
            Err(_) => self.failed(&CacheError {
                backend: self.store.backend(),
                message: format!("no answer within {STORE_TIMEOUT:?}"),
            }),
        }
    }

    /// Counts one background refresh of a stale list.
    pub fn count_refresh(&self) {
        self.counters.refreshes.fetch_add(1, Ordering::Relaxed);
    }

    /// The figures `/health` shows.
    #[must_use]
    pub fn stats(&self) -> Value {
        let c = &self.counters;
        serde_json::json!({
            "backend": self.store.backend(),
            "ttl_seconds": self.ttl.as_secs(),
            "hits": c.hits.load(Ordering::Relaxed),
            "stale_served": c.stale.load(Ordering::Relaxed),
            "misses": c.misses.load(Ordering::Relaxed),
            "writes": c.writes.load(Ordering::Relaxed),
            "refreshes": c.refreshes.load(Ordering::Relaxed),
            "errors": c.errors.load(Ordering::Relaxed),
            "last_error": *self.last_error.lock(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(name: &str, command: &str) -> ServerConfig {
        let text = serde_json::json!({"mcpServers": {name: {"command": command}}}).to_string();
        crate::config::parse(&text, &|_| None)
            .unwrap()
            .servers
            .remove(0)
    }

    fn entry(at: u64) -> CachedTools {
        CachedTools {
            tools: vec![serde_json::json!({"name": "echo", "inputSchema": {"type": "object"}})],
            fetched_at_ms: at,
        }
    }

    #[test]
    fn keys_change_with_how_a_server_is_reached() {
        assert_eq!(key(&server("a", "x")), key(&server("a", "x")));
        assert_ne!(key(&server("a", "x")), key(&server("a", "y")));
        assert_ne!(key(&server("a", "x")), key(&server("b", "x")));
        assert!(key(&server("a", "x")).starts_with("a:"));
    }

    #[tokio::test]
    async fn fresh_stale_and_miss() {
        let cache = CatalogCache::new(Arc::new(MemoryStore::default()), Duration::from_secs(60));
        let s = server("a", "x");
        assert_eq!(cache.lookup(&s).await, Lookup::Miss);
        cache.store(&s, &entry(now_ms())).await;
        assert!(matches!(cache.lookup(&s).await, Lookup::Fresh(_)));
        cache.store(&s, &entry(now_ms() - 120_000)).await;
        assert!(matches!(cache.lookup(&s).await, Lookup::Stale(_)));
        let stats = cache.stats();
        assert_eq!(stats["hits"], 1);
        assert_eq!(stats["stale_served"], 1);
        assert_eq!(stats["misses"], 1);
        assert_eq!(stats["writes"], 2);
    }

    #[tokio::test]
    async fn sqlite_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/catalog.sqlite");
        let s = server("a", "x");
        {
            let cache = CatalogCache::new(Arc::new(SqliteStore::open(&path).unwrap()), DEFAULT_TTL);
            cache.store(&s, &entry(now_ms())).await;
        }
        let cache = CatalogCache::new(Arc::new(SqliteStore::open(&path).unwrap()), DEFAULT_TTL);
        match cache.lookup(&s).await {
            Lookup::Fresh(e) => assert_eq!(e.tools[0]["name"], "echo"),
            other => panic!("{other:?}"),
        }
        assert_eq!(cache.lookup(&server("a", "changed")).await, Lookup::Miss);
    }

    #[test]
    fn a_file_that_is_not_sqlite_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("catalog.sqlite");
        std::fs::write(
            &path,
            "this is not a database, just text long enough to matter",
        )
        .unwrap();
        let err = SqliteStore::open(&path).unwrap_err().to_string();
        assert!(err.contains("sqlite"), "{err}");
    }
}
