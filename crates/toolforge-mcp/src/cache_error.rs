//! Why a catalog-cache store failed: the error of the cache's stores (memory, SQLite, Redis)
//! and of the pins table in the SQLite file. Its own module because `cache` opens `pins`, so
//! `pins` cannot reach back into `cache` for it.

/// Why a store failed.
#[derive(Debug, thiserror::Error)]
#[error("catalog cache ({backend}): {message}")]
pub struct CacheError {
    pub backend: &'static str,
    pub message: String,
}
