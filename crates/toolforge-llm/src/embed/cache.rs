//! Embeddings cached by content hash, so a catalog's tool descriptions are embedded once.
//!
//! Why a content hash: the key is SHA-256 of the embedder id and the text, so a changed
//! description or a different model (or dimension count) can never be served a stale vector,
//! and the same description shared by two servers is embedded once. The store is a trait so a
//! persistent cache (SQLite, Redis) can plug in; the in-memory one is the default.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::RwLock;
use sha2::{Digest as _, Sha256};

use super::embedder::{EmbedError, Embedder};

/// Where cached vectors live. Keys are hex SHA-256 digests (see [`cache_key`]).
pub trait EmbeddingStore: Send + Sync {
    fn get(&self, key: &str) -> Option<Vec<f32>>;
    fn put(&self, key: &str, vector: &[f32]);
}

/// The default store: a process-wide map.
#[derive(Debug, Default)]
pub struct MemoryStore {
    map: RwLock<HashMap<String, Vec<f32>>>,
}

impl MemoryStore {
    /// Number of cached vectors.
    pub fn len(&self) -> usize {
        self.map.read().len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.map.read().is_empty()
    }
}

impl EmbeddingStore for MemoryStore {
    fn get(&self, key: &str) -> Option<Vec<f32>> {
        self.map.read().get(key).cloned()
    }

    fn put(&self, key: &str, vector: &[f32]) {
        self.map.write().insert(key.to_owned(), vector.to_vec());
    }
}

/// The cache key of `text` under the embedder named `embedder_id`: hex SHA-256 of
/// `embedder_id`, a NUL byte, and the text.
pub fn cache_key(embedder_id: &str, text: &str) -> String {
    let mut h = Sha256::new();
    h.update(embedder_id.as_bytes());
    h.update([0u8]);
    h.update(text.as_bytes());
    hex::encode(h.finalize())
}

/// Wraps an embedder: cached texts are answered from the store, the rest are embedded in one
/// call (each distinct text once) and stored.
pub struct CachedEmbedder {
    inner: Arc<dyn Embedder>,
    store: Arc<dyn EmbeddingStore>,
}

impl std::fmt::Debug for CachedEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedEmbedder")
            .field("inner", &self.inner.id())
            .finish()
    }
}

impl CachedEmbedder {
    pub fn new(inner: Arc<dyn Embedder>, store: Arc<dyn EmbeddingStore>) -> Self {
        Self { inner, store }
    }

    /// With a fresh in-memory store.
    pub fn in_memory(inner: Arc<dyn Embedder>) -> Self {
        Self::new(inner, Arc::new(MemoryStore::default()))
    }
}

impl Embedder for CachedEmbedder {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move {
            let keys: Vec<String> = texts.iter().map(|t| cache_key(self.id(), t)).collect();
            let mut out: Vec<Option<Vec<f32>>> = keys.iter().map(|k| self.store.get(k)).collect();
            // Each missing distinct text once, in first-seen order.
            let mut missing: Vec<usize> = Vec::new();
            let mut seen: HashMap<&str, ()> = HashMap::new();
            for (i, v) in out.iter().enumerate() {
                if v.is_none() && seen.insert(keys[i].as_str(), ()).is_none() {
                    missing.push(i);
                }
            }
            if !missing.is_empty() {
                let batch: Vec<String> = missing.iter().map(|&i| texts[i].clone()).collect();
                let vecs = self.inner.embed(&batch).await?;
                if vecs.len() != batch.len() {
                    return Err(EmbedError::BadResponse(format!(
                        "{} vectors for {} texts",
                        vecs.len(),
                        batch.len()
                    )));
                }
                let mut fresh: HashMap<&str, Vec<f32>> = HashMap::new();
                for (&i, v) in missing.iter().zip(vecs) {
                    self.store.put(&keys[i], &v);
                    fresh.insert(keys[i].as_str(), v);
                }
                for (i, slot) in out.iter_mut().enumerate() {
                    if slot.is_none() {
                        *slot = fresh.get(keys[i].as_str()).cloned();
                    }
                }
            }
            out.into_iter()
                .map(|v| v.ok_or_else(|| EmbedError::BadResponse("missing vector".into())))
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Counts the texts it is asked to embed; vector = [text length].
    struct Counting(AtomicUsize);

    impl Embedder for Counting {
        fn id(&self) -> &str {
            "counting/1"
        }
        fn embed<'a>(
            &'a self,
            texts: &'a [String],
        ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
            self.0.fetch_add(texts.len(), Ordering::SeqCst);
            Box::pin(async move { Ok(texts.iter().map(|t| vec![t.len() as f32]).collect()) })
        }
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    #[tokio::test]
    async fn each_distinct_text_is_embedded_once_and_order_is_kept() {
        let inner = Arc::new(Counting(AtomicUsize::new(0)));
        let store = Arc::new(MemoryStore::default());
        let cached = CachedEmbedder::new(inner.clone(), store.clone());
        let out = cached.embed(&s(&["ab", "abc", "ab"])).await.unwrap();
        assert_eq!(out, vec![vec![2.0], vec![3.0], vec![2.0]]);
        assert_eq!(inner.0.load(Ordering::SeqCst), 2);
        let out = cached.embed(&s(&["abcd", "abc"])).await.unwrap();
        assert_eq!(out, vec![vec![4.0], vec![3.0]]);
        assert_eq!(inner.0.load(Ordering::SeqCst), 3);
        assert_eq!(store.len(), 3);
    }

    #[test]
    fn key_depends_on_embedder_and_text() {
        let k = cache_key("m/384", "read file");
        assert_eq!(k.len(), 64);
        assert_ne!(k, cache_key("m/512", "read file"));
        assert_ne!(k, cache_key("m/384", "read files"));
        assert_eq!(k, cache_key("m/384", "read file"));
    }
}
