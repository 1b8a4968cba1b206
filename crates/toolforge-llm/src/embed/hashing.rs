//! The zero-setup default embedder: feature hashing of word unigrams and character trigrams.
//!
//! Why: it needs no model and no network, is fully deterministic across runs and machines
//! (FNV-1a, not the std randomised hasher), and still captures sub-word overlap such as
//! "files" vs "file" that plain BM25 misses.

use futures::future::BoxFuture;

use super::embedder::{EmbedError, Embedder};

/// Deterministic hashing embedder; vectors are L2-normalised.
#[derive(Debug, Clone)]
pub struct HashingEmbedder {
    dims: usize,
    id: String,
}

impl Default for HashingEmbedder {
    fn default() -> Self {
        Self::new(512)
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl HashingEmbedder {
    /// An embedder producing `dims`-dimensional vectors (at least 1).
    pub fn new(dims: usize) -> Self {
        let dims = dims.max(1);
        Self {
            dims,
            id: format!("hashing-v1/{dims}"),
        }
    }

    /// Vector dimensions.
    pub fn dims(&self) -> usize {
        self.dims
    }

    fn add(&self, v: &mut [f32], feature: &str, weight: f32) {
        let h = fnv1a(feature.as_bytes());
        let idx = (h % self.dims as u64) as usize;
        let sign = if (h >> 63) & 1 == 0 { 1.0 } else { -1.0 };
        v[idx] += sign * weight;
    }

    /// Embeds one text synchronously.
    pub fn embed_one(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; self.dims];
        let lower = text.to_lowercase();
        for word in lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            self.add(&mut v, &format!("w:{word}"), 1.0);
            let padded: Vec<char> = format!("#{word}#").chars().collect();
            for g in padded.windows(3) {
                let g: String = g.iter().collect();
                self.add(&mut v, &format!("c:{g}"), 0.5);
            }
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            for x in &mut v {
                *x /= norm;
            }
        }
        v
    }
}

impl Embedder for HashingEmbedder {
    fn id(&self) -> &str {
        &self.id
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        let out = texts.iter().map(|t| self.embed_one(t)).collect();
        Box::pin(async move { Ok(out) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::embedder::cosine;

    #[test]
    fn deterministic_and_normalised() {
        let e = HashingEmbedder::default();
        let a = e.embed_one("Read a file from disk");
        assert_eq!(a, e.embed_one("Read a file from disk"));
        assert_eq!(a.len(), 512);
        let n: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((n - 1.0).abs() < 1e-5);
        assert_eq!(e.id(), "hashing-v1/512");
    }

    #[test]
    fn similar_texts_are_closer_than_unrelated() {
        let e = HashingEmbedder::default();
        let q = e.embed_one("read files");
        let near = e.embed_one("read_file: read a file");
        let far = e.embed_one("send an email message");
        assert!(cosine(&q, &near) > cosine(&q, &far));
    }

    #[test]
    fn empty_text_is_zero_vector() {
        let e = HashingEmbedder::new(8);
        assert_eq!(e.embed_one(""), vec![0.0; 8]);
    }

    #[tokio::test]
    async fn trait_object_embeds_in_order() {
        let e: std::sync::Arc<dyn Embedder> = std::sync::Arc::new(HashingEmbedder::new(16));
        let texts = vec!["a b".to_string(), "c".to_string()];
        let out = e.embed(&texts).await.unwrap();
        let h = HashingEmbedder::new(16);
        assert_eq!(out, vec![h.embed_one("a b"), h.embed_one("c")]);
    }
}
