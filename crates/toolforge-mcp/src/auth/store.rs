//! Grants kept per (server, principal), sealed ([`super::seal`]): in the catalog cache's
//! SQLite file (table `oauth_grants`), in Redis for replicas (`toolforge:oauth:grant:*` keys),
//! or in memory. A record is written only sealed and read only through [`TokenStore::load`],
//! which opens it for its own (server, principal); nothing here logs a record.
//!
//! [`Grant`] is what a record holds: the tokens, when they expire, and how to refresh them
//! (the token endpoint and the client that got them).

use std::collections::BTreeMap;
use std::sync::Arc;

pub use super::grant::Grant;
use super::seal::{self, SealKey};

/// Why the store failed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("token store ({backend}): {message}")]
pub struct StoreError {
    pub backend: &'static str,
    pub message: String,
}

fn sqlite_err(e: impl std::fmt::Display) -> StoreError {
    StoreError {
        backend: "sqlite",
        message: e.to_string(),
    }
}

fn redis_err(e: impl std::fmt::Display) -> StoreError {
    StoreError {
        backend: "redis",
        message: e.to_string(),
    }
}

enum Backend {
    Memory(parking_lot::Mutex<BTreeMap<(String, String), Vec<u8>>>),
    Sqlite(Arc<parking_lot::Mutex<rusqlite::Connection>>),
    Redis(redis::aio::ConnectionManager),
}

/// Where grants are kept.
pub struct TokenStore {
    backend: Backend,
    key: SealKey,
}

impl std::fmt::Debug for TokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.backend {
            Backend::Memory(_) => "TokenStore(memory)",
            Backend::Sqlite(_) => "TokenStore(sqlite)",
            Backend::Redis(_) => "TokenStore(redis)",
        })
    }
}

/// The table of grants in the catalog cache's SQLite file.
const TABLE: &str = "CREATE TABLE IF NOT EXISTS oauth_grants (
    server TEXT NOT NULL,
    principal TEXT NOT NULL,
    sealed BLOB NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (server, principal)
);";

/// The Redis key of (server, principal): both parts length-prefixed, so no pair of names
/// can collide with another.
fn redis_key(server: &str, principal: &str) -> String {
    format!(
        "toolforge:oauth:grant:{}:{server}:{principal}",
        server.len()
    )
}

const REDIS_INDEX: &str = "toolforge:oauth:grants";

impl TokenStore {
    /// Grants kept in this process only, sealed with `key`.
    #[must_use]
    pub fn memory(key: SealKey) -> Self {
        Self {
            backend: Backend::Memory(parking_lot::Mutex::default()),
            key,
        }
    }

    /// Grants in the SQLite file of `cache` (the catalog cache), sealed with `key`.
    ///
    /// # Errors
    /// The table cannot be created.
    pub fn sqlite(cache: &crate::cache::SqliteStore, key: SealKey) -> Result<Self, StoreError> {
        Self::sqlite_connection(cache.connection(), key)
    }

    /// Grants in the catalog cache's file, when the cache is a SQLite file.
    ///
    /// # Errors
    /// The table cannot be created.
    pub fn in_cache(
        cache: &crate::cache::CatalogCache,
        key: SealKey,
    ) -> Option<Result<Self, StoreError>> {
        cache
            .sqlite_connection()
            .map(|conn| Self::sqlite_connection(conn, key))
    }

    fn sqlite_connection(
        conn: Arc<parking_lot::Mutex<rusqlite::Connection>>,
        key: SealKey,
    ) -> Result<Self, StoreError> {
        conn.lock().execute_batch(TABLE).map_err(sqlite_err)?;
        Ok(Self {
            backend: Backend::Sqlite(conn),
            key,
        })
    }

    /// Grants in Redis at `url` (shared by every replica on it), sealed with `key`.
    ///
    /// # Errors
    /// Redis cannot be reached.
    pub async fn redis(url: &str, key: SealKey) -> Result<Self, StoreError> {
        let client = redis::Client::open(url).map_err(redis_err)?;
        let conn = redis::aio::ConnectionManager::new(client)
            .await
            .map_err(redis_err)?;
        Ok(Self {
            backend: Backend::Redis(conn),
            key,
        })
    }

    /// Which backend, for logs and `/health`.
    #[must_use]
    pub fn backend(&self) -> &'static str {
        match self.backend {
            Backend::Memory(_) => "memory",
            Backend::Sqlite(_) => "sqlite",
            Backend::Redis(_) => "redis",
        }
    }

    async fn read(&self, server: &str, principal: &str) -> Result<Option<Vec<u8>>, StoreError> {
        match &self.backend {
            Backend::Memory(m) => Ok(m
                .lock()
                .get(&(server.to_owned(), principal.to_owned()))
                .cloned()),
            Backend::Sqlite(conn) => {
                let conn = conn.clone();
                let (server, principal) = (server.to_owned(), principal.to_owned());
                blocking(move || {
                    let conn = conn.lock();
                    let mut stmt = conn
                        .prepare_cached(
                            "SELECT sealed FROM oauth_grants WHERE server = ?1 AND principal = ?2",
                        )
                        .map_err(sqlite_err)?;
                    let mut rows = stmt.query([&server, &principal]).map_err(sqlite_err)?;
                    match rows.next().map_err(sqlite_err)? {
                        Some(row) => Ok(Some(row.get::<_, Vec<u8>>(0).map_err(sqlite_err)?)),
                        None => Ok(None),
                    }
                })
                .await
            }
            Backend::Redis(conn) => {
                let mut conn = conn.clone();
                redis::cmd("GET")
                    .arg(redis_key(server, principal))
                    .query_async::<Option<Vec<u8>>>(&mut conn)
                    .await
                    .map_err(redis_err)
            }
        }
    }

    /// The grant of `principal` for `server`. A record that does not open with this key (the
    /// key changed) is reported, not used.
    ///
    /// # Errors
    /// The backend failed, or the record does not open.
    pub async fn load(&self, server: &str, principal: &str) -> Result<Option<Grant>, StoreError> {
        let Some(sealed) = self.read(server, principal).await? else {
            return Ok(None);
        };
        let plain = seal::open(&self.key, server, principal, &sealed).map_err(|e| StoreError {
            backend: self.backend(),
            message: format!("the grant of {principal:?} for {server:?}: {e}"),
        })?;
        serde_json::from_slice(&plain)
            .map(Some)
            .map_err(|e| StoreError {
                backend: self.backend(),
                message: format!("the grant of {principal:?} for {server:?} is not readable ({e})"),
            })
    }

    /// Keeps `grant` as `principal`'s for `server` (replacing any).
    ///
    /// # Errors
    /// The backend failed.
    pub async fn save(
        &self,
        server: &str,
        principal: &str,
        grant: &Grant,
    ) -> Result<(), StoreError> {
        let plain = serde_json::to_vec(grant).map_err(|e| StoreError {
            backend: self.backend(),
            message: e.to_string(),
        })?;
        let sealed = seal::seal(&self.key, server, principal, &plain);
        match &self.backend {
            Backend::Memory(m) => {
                m.lock()
                    .insert((server.to_owned(), principal.to_owned()), sealed);
                Ok(())
            }
            Backend::Sqlite(conn) => {
                let conn = conn.clone();
                let (server, principal) = (server.to_owned(), principal.to_owned());
                blocking(move || {
                    conn.lock()
                        .execute(
                            "INSERT INTO oauth_grants (server, principal, sealed, updated_at)
                             VALUES (?1, ?2, ?3, ?4)
                             ON CONFLICT (server, principal) DO UPDATE
                             SET sealed = excluded.sealed, updated_at = excluded.updated_at",
                            rusqlite::params![
                                server,
                                principal,
                                sealed,
                                super::endpoint::now_secs() as i64
                            ],
                        )
                        .map(|_| ())
                        .map_err(sqlite_err)
                })
                .await
            }
            Backend::Redis(conn) => {
                let mut conn = conn.clone();
                redis::pipe()
                    .atomic()
                    .cmd("SET")
                    .arg(redis_key(server, principal))
                    .arg(sealed)
                    .ignore()
                    .cmd("HSET")
                    .arg(REDIS_INDEX)
                    .arg(redis_key(server, principal))
                    .arg(serde_json::json!([server, principal]).to_string())
                    .ignore()
                    .query_async::<()>(&mut conn)
                    .await
                    .map_err(redis_err)
            }
        }
    }

    /// Forgets `principal`'s grant for `server`; true when there was one.
    ///
    /// # Errors
    /// The backend failed.
    pub async fn remove(&self, server: &str, principal: &str) -> Result<bool, StoreError> {
        match &self.backend {
            Backend::Memory(m) => Ok(m
                .lock()
                .remove(&(server.to_owned(), principal.to_owned()))
                .is_some()),
            Backend::Sqlite(conn) => {
                let conn = conn.clone();
                let (server, principal) = (server.to_owned(), principal.to_owned());
                blocking(move || {
                    conn.lock()
                        .execute(
                            "DELETE FROM oauth_grants WHERE server = ?1 AND principal = ?2",
                            [&server, &principal],
                        )
                        .map(|n| n > 0)
                        .map_err(sqlite_err)
                })
                .await
            }
            Backend::Redis(conn) => {
                let mut conn = conn.clone();
                let (removed, _): (u64, u64) = redis::pipe()
                    .atomic()
                    .cmd("DEL")
                    .arg(redis_key(server, principal))
                    .cmd("HDEL")
                    .arg(REDIS_INDEX)
                    .arg(redis_key(server, principal))
                    .query_async(&mut conn)
                    .await
                    .map_err(redis_err)?;
                Ok(removed > 0)
            }
        }
    }

    /// The (server, principal) pairs that have a grant, of `server` or of all, in order.
    ///
    /// # Errors
    /// The backend failed.
    pub async fn list(&self, server: Option<&str>) -> Result<Vec<(String, String)>, StoreError> {
        let mut pairs: Vec<(String, String)> = match &self.backend {
            Backend::Memory(m) => m.lock().keys().cloned().collect(),
            Backend::Sqlite(conn) => {
                let conn = conn.clone();
                blocking(move || {
                    let conn = conn.lock();
                    let mut stmt = conn
                        .prepare("SELECT server, principal FROM oauth_grants")
                        .map_err(sqlite_err)?;
                    let rows = stmt
                        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                        .map_err(sqlite_err)?;
                    rows.collect::<Result<Vec<_>, _>>().map_err(sqlite_err)
                })
                .await?
            }
            Backend::Redis(conn) => {
                let mut conn = conn.clone();
                let values: Vec<String> = redis::cmd("HVALS")
                    .arg(REDIS_INDEX)
                    .query_async(&mut conn)
                    .await
                    .map_err(redis_err)?;
                values
                    .iter()
                    .filter_map(|v| serde_json::from_str::<(String, String)>(v).ok())
                    .collect()
            }
        };
        pairs.retain(|(s, _)| server.is_none_or(|want| s == want));
        pairs.sort();
        Ok(pairs)
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StoreError {
            backend: "sqlite",
            message: e.to_string(),
        })?
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::endpoint::{ClientAuth, TokenEndpoint};

    fn grant(token: &str) -> Grant {
        Grant {
            access_token: token.to_owned(),
            refresh_token: Some("refresh-me".into()),
            expires_at: Some(1),
            scopes: vec!["repo".into()],
            issuer: Some("https://id.example.com".into()),
            endpoint: TokenEndpoint {
                url: "https://id.example.com/token".into(),
                client_id: "gw".into(),
                client_secret: Some("client-secret".into()),
                auth: ClientAuth::ClientSecretBasic,
            },
            resource: Some("https://mcp.example.com/mcp".into()),
            obtained_at: 0,
        }
    }

    async fn round_trip(store: &TokenStore) {
        store
            .save("github", "alice", &grant("alice-token"))
            .await
            .unwrap();
        store
            .save("github", "bob", &grant("bob-token"))
            .await
            .unwrap();
        store
            .save("jira", "alice", &grant("alice-jira"))
            .await
            .unwrap();
        let alice = store.load("github", "alice").await.unwrap().unwrap();
        assert_eq!(alice.access_token, "alice-token");
        assert_eq!(
            store
                .load("github", "bob")
                .await
                .unwrap()
                .unwrap()
                .access_token,
            "bob-token"
        );
        assert!(store.load("github", "carol").await.unwrap().is_none());
        assert_eq!(
            store.list(Some("github")).await.unwrap(),
            [
                ("github".into(), "alice".into()),
                ("github".into(), "bob".into())
            ]
        );
        assert!(store.remove("github", "bob").await.unwrap());
        assert!(!store.remove("github", "bob").await.unwrap());
        assert!(store.load("github", "bob").await.unwrap().is_none());
        assert!(!format!("{alice:?}").contains("alice-token"));
        assert!(!format!("{alice:?}").contains("refresh-me"));
        assert!(!format!("{alice:?}").contains("client-secret"));
    }

    #[tokio::test]
    async fn grants_round_trip_per_server_and_principal() {
        round_trip(&TokenStore::memory(SealKey::random())).await;
        let dir = tempfile::tempdir().unwrap();
        let cache = crate::cache::SqliteStore::open(&dir.path().join("cache.db")).unwrap();
        round_trip(&TokenStore::sqlite(&cache, SealKey::random()).unwrap()).await;
    }

    #[tokio::test]
    async fn the_file_holds_no_token_and_survives_a_reopen_with_the_key_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cache.db");
        let key = SealKey::random();
        {
            let cache = crate::cache::SqliteStore::open(&path).unwrap();
            let store = TokenStore::sqlite(&cache, key.clone()).unwrap();
            store
                .save("github", "alice", &grant("alice-token"))
                .await
                .unwrap();
        }
        let bytes = std::fs::read(&path).unwrap();
        let wal = std::fs::read(dir.path().join("cache.db-wal")).unwrap_or_default();
        for needle in [&b"alice-token"[..], b"refresh-me", b"client-secret"] {
            assert!(!bytes.windows(needle.len()).any(|w| w == needle));
            assert!(!wal.windows(needle.len()).any(|w| w == needle));
        }
        let cache = crate::cache::SqliteStore::open(&path).unwrap();
        let reopened = TokenStore::sqlite(&cache, key).unwrap();
        assert_eq!(
            reopened
                .load("github", "alice")
                .await
                .unwrap()
                .unwrap()
                .access_token,
            "alice-token"
        );
        let other_key = TokenStore::sqlite(&cache, SealKey::random()).unwrap();
        let err = other_key.load("github", "alice").await.unwrap_err();
        assert!(err.to_string().contains("does not open"), "{err}");
    }

    #[test]
    fn redis_keys_cannot_collide() {
        assert_ne!(redis_key("a:b", "c"), redis_key("a", "b:c"));
    }
}
