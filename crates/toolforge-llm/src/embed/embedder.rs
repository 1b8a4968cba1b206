//! What every embedder is: the trait, its error, and the vector arithmetic they share.

use futures::future::BoxFuture;

/// Why embedding failed.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("embedding provider rejected the credentials (HTTP {status}): {message}")]
    Auth { status: u16, message: String },
    #[error("embedding provider is rate limiting (HTTP 429): {0}")]
    RateLimited(String),
    #[error("embedding provider answered HTTP {status}: {message}")]
    Http { status: u16, message: String },
    #[error("embedding provider sent an unreadable answer: {0}")]
    BadResponse(String),
    #[error("embedding request failed: {0}")]
    Transport(String),
    #[error("local embedding model: {0}")]
    Model(String),
}

/// Something that embeds texts; one L2-normalised vector per input text, in input order (so a
/// dot product, e.g. `toolforge_select::rank::dot`, is the cosine similarity).
pub trait Embedder: Send + Sync {
    /// Names model and dimensions, e.g. `hashing-v1/512`; used in cache keys.
    fn id(&self) -> &str;

    /// Embeds `texts`, returning one vector per text in the same order.
    fn embed<'a>(&'a self, texts: &'a [String])
    -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>>;
}

/// Cosine similarity of two vectors (0 when either is zero or lengths differ).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// `v` scaled to unit length (all zeros stay zeros), so a dot product of two is their cosine.
pub(crate) fn normalise(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}
