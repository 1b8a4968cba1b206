//! Embedders: turn texts into vectors for the hybrid ranker.
//!
//! Why a trait with boxed futures: the broker, visibility search and the CLI hold one
//! `Arc<dyn Embedder>` chosen at start-up (hashing by default, an HTTP provider or a local
//! model), and cache keys need a stable [`Embedder::id`] naming model and dimensions.

mod cache;
mod embedder;
mod ensemble;
mod hashing;
mod http;
#[cfg(feature = "local-model")]
mod local;
#[cfg(feature = "local-model")]
mod mpnet;

pub use cache::{CachedEmbedder, EmbeddingStore, MemoryStore, cache_key};
pub use embedder::{EmbedError, Embedder, cosine};
pub use ensemble::EnsembleEmbedder;
pub use hashing::HashingEmbedder;
pub use http::{HttpApi, HttpEmbedder, HttpEmbedderConfig, VOYAGE_BASE_URL};
#[cfg(feature = "local-model")]
pub use local::{LocalEmbedder, LocalModelFiles};
