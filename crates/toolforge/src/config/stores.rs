//! Where state is kept: `REDIS_URL` (shared by replicas: sessions, rate limits, the catalog
//! cache when asked, OAuth grants, the `requestState` key and ledger); the catalog cache,
//! `CATALOG_CACHE_BACKEND` = `sqlite` (the default; `CATALOG_CACHE_PATH`, default
//! `$XDG_CACHE_HOME/toolforge/catalog.sqlite`, else `~/.cache/...`), `memory`, `redis` or
//! `none`, with `CATALOG_CACHE_TTL` in seconds (default 86400); the key upstream OAuth grants
//! are sealed with, `TOOLFORGE_TOKEN_KEY` or the file `TOOLFORGE_TOKEN_KEY_FILE` names; and
//! `TOOLFORGE_STATE_KEY`, the key that seals `requestState`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};

use super::source::Source;

#[derive(Debug, Clone)]
pub struct StoreSettings {
    pub redis_url: Option<String>,
    pub catalog: CatalogCacheSettings,
    pub token_key: Option<KeySource>,
    pub state_key: Option<String>,
}

/// The catalog cache's store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogBackend {
    None,
    Memory,
    /// A SQLite file; `chosen` when `CATALOG_CACHE_BACKEND` asked for it (then a file that
    /// cannot be opened is an error, not a fallback to memory).
    Sqlite {
        path: PathBuf,
        chosen: bool,
    },
    Redis {
        url: String,
    },
}

#[derive(Debug, Clone)]
pub struct CatalogCacheSettings {
    pub backend: CatalogBackend,
    pub ttl: Duration,
}

/// Where a key is read from: the variable's text, or a file it names.
#[derive(Debug, Clone)]
pub enum KeySource {
    Text(String),
    File(PathBuf),
}

impl StoreSettings {
    pub(super) fn read(env: &Source) -> anyhow::Result<Self> {
        let redis_url = env.text("REDIS_URL");
        Ok(Self {
            catalog: catalog(env, redis_url.as_deref())?,
            token_key: env
                .text("TOOLFORGE_TOKEN_KEY")
                .map(KeySource::Text)
                .or_else(|| env.path("TOOLFORGE_TOKEN_KEY_FILE").map(KeySource::File)),
            state_key: env.text("TOOLFORGE_STATE_KEY"),
            redis_url,
        })
    }
}

fn catalog(env: &Source, redis_url: Option<&str>) -> anyhow::Result<CatalogCacheSettings> {
    let ttl = match env.text("CATALOG_CACHE_TTL") {
        Some(v) => {
            let secs: u64 = v.trim().parse().ok().filter(|s| *s > 0).with_context(|| {
                format!("CATALOG_CACHE_TTL is \"{v}\"; give a positive number of seconds")
            })?;
            Duration::from_secs(secs)
        }
        None => toolforge_mcp::cache::DEFAULT_TTL,
    };
    let chosen = env.text("CATALOG_CACHE_BACKEND");
    let backend = match chosen.as_deref().map(str::to_ascii_lowercase).as_deref() {
        Some("none" | "off") => CatalogBackend::None,
        Some("memory") => CatalogBackend::Memory,
        None | Some("sqlite") => CatalogBackend::Sqlite {
            path: env.path("CATALOG_CACHE_PATH").unwrap_or_else(|| {
                env.path("XDG_CACHE_HOME")
                    .or_else(|| env.path("HOME").map(|h| h.join(".cache")))
                    .unwrap_or_else(|| PathBuf::from("."))
                    .join("toolforge")
                    .join("catalog.sqlite")
            }),
            chosen: chosen.is_some(),
        },
        Some("redis") => CatalogBackend::Redis {
            url: redis_url
                .context(
                    "CATALOG_CACHE_BACKEND=redis needs REDIS_URL (e.g. redis://127.0.0.1:6379/0)",
                )?
                .to_owned(),
        },
        Some(other) => bail!(
            "CATALOG_CACHE_BACKEND is \"{other}\"; use sqlite (the default), memory, redis or none"
        ),
    };
    Ok(CatalogCacheSettings { backend, ttl })
}

#[cfg(test)]
mod tests {
    use super::{CatalogBackend, StoreSettings};
    use crate::config::source::Source;

    #[test]
    fn the_catalog_cache_is_a_sqlite_file_under_the_cache_home_by_default() {
        let stores = StoreSettings::read(&Source::of(&[("HOME", "/home/a")])).unwrap();
        assert_eq!(
            stores.catalog.backend,
            CatalogBackend::Sqlite {
                path: "/home/a/.cache/toolforge/catalog.sqlite".into(),
                chosen: false
            }
        );
        assert_eq!(stores.catalog.ttl, toolforge_mcp::cache::DEFAULT_TTL);
    }

    #[test]
    fn a_redis_cache_needs_redis_url_and_an_unknown_backend_is_refused() {
        let err = StoreSettings::read(&Source::of(&[("CATALOG_CACHE_BACKEND", "redis")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("needs REDIS_URL"), "{err}");
        let err = StoreSettings::read(&Source::of(&[("CATALOG_CACHE_BACKEND", "disk")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("CATALOG_CACHE_BACKEND is \"disk\""), "{err}");
        let err = StoreSettings::read(&Source::of(&[("CATALOG_CACHE_TTL", "0")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("positive number of seconds"), "{err}");
    }
}
