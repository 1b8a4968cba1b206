//! Several embedders as one: each text's vectors from every member, concatenated.
//!
//! Why: two sentence models trained on different data make different mistakes, and the mean of
//! their cosine similarities ranks tools better than either alone (docs/retrieval.md has the
//! figures). Each member's vector is L2-normalised and scaled by `1/sqrt(n)` before the
//! concatenation, so the result is L2-normalised too and a dot product of two ensemble vectors
//! is exactly the mean of the members' cosines: every caller that ranks by dot product
//! (`toolforge_select::rank::dot`) gets the ensemble without knowing it is one.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::embedder::{EmbedError, Embedder, normalise};

/// The members' vectors of each text, concatenated (see the module docs).
pub struct EnsembleEmbedder {
    members: Vec<Arc<dyn Embedder>>,
    id: String,
}

impl std::fmt::Debug for EnsembleEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnsembleEmbedder")
            .field("id", &self.id)
            .finish()
    }
}

impl EnsembleEmbedder {
    /// An ensemble of `members`, in that order (the order is part of [`Embedder::id`], so
    /// cached vectors of another order are never mixed in). An empty list is accepted here and
    /// answered with an error by [`Embedder::embed`].
    pub fn new(members: Vec<Arc<dyn Embedder>>) -> Self {
        let ids: Vec<&str> = members.iter().map(|m| m.id()).collect();
        let id = format!("ensemble[{}]", ids.join("+"));
        Self { members, id }
    }
}

impl Embedder for EnsembleEmbedder {
    fn id(&self) -> &str {
        &self.id
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move {
            if self.members.is_empty() {
                return Err(EmbedError::Model(
                    "an ensemble needs at least one embedder".into(),
                ));
            }
            let scale = 1.0 / (self.members.len() as f32).sqrt();
            let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
            for member in &self.members {
                let vectors = member.embed(texts).await?;
                if vectors.len() != texts.len() {
                    return Err(EmbedError::BadResponse(format!(
                        "{} gave {} vectors for {} texts",
                        member.id(),
                        vectors.len(),
                        texts.len()
                    )));
                }
                for (acc, v) in out.iter_mut().zip(vectors) {
                    acc.extend(normalise(v).into_iter().map(|x| x * scale));
                }
            }
            Ok(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::embedder::cosine;

    /// Answers fixed vectors by text: "a" → `a`, anything else → `b`.
    struct Fixed {
        id: String,
        a: Vec<f32>,
        b: Vec<f32>,
    }

    impl Embedder for Fixed {
        fn id(&self) -> &str {
            &self.id
        }

        fn embed<'a>(
            &'a self,
            texts: &'a [String],
        ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
            let out = texts
                .iter()
                .map(|t| {
                    if t == "a" {
                        self.a.clone()
                    } else {
                        self.b.clone()
                    }
                })
                .collect();
            Box::pin(async move { Ok(out) })
        }
    }

    fn fixed(id: &str, a: &[f32], b: &[f32]) -> Arc<dyn Embedder> {
        Arc::new(Fixed {
            id: id.to_owned(),
            a: a.to_vec(),
            b: b.to_vec(),
        })
    }

    #[tokio::test]
    async fn dot_product_is_the_mean_of_the_members_cosines() {
        // Member one: cos(a, b) = 0; member two: cos(a, b) = 0.6 (and unnormalised vectors).
        let one = fixed("one", &[1.0, 0.0], &[0.0, 2.0]);
        let two = fixed("two", &[3.0, 4.0, 0.0], &[5.0, 0.0, 0.0]);
        let e = EnsembleEmbedder::new(vec![one, two]);
        assert_eq!(e.id(), "ensemble[one+two]");
        let v = e.embed(&["a".to_owned(), "b".to_owned()]).await.unwrap();
        assert_eq!(v[0].len(), 5);
        let dot: f32 = v[0].iter().zip(&v[1]).map(|(x, y)| x * y).sum();
        assert!((dot - 0.3).abs() < 1e-6, "dot {dot}");
        let norm: f32 = v[0].iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-6, "norm {norm}");
        assert!((cosine(&v[0], &v[1]) - 0.3).abs() < 1e-6);
    }

    #[tokio::test]
    async fn a_member_with_the_wrong_count_is_an_error() {
        struct Short;
        impl Embedder for Short {
            fn id(&self) -> &str {
                "short"
            }
            fn embed<'a>(
                &'a self,
                _texts: &'a [String],
            ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
                Box::pin(async { Ok(Vec::new()) })
            }
        }
        let e = EnsembleEmbedder::new(vec![fixed("one", &[1.0], &[1.0]), Arc::new(Short)]);
        let err = e.embed(&["a".to_owned()]).await.unwrap_err();
        assert!(
            err.to_string().contains("short gave 0 vectors for 1 texts"),
            "{err}"
        );
        let empty = EnsembleEmbedder::new(Vec::new());
        assert!(empty.embed(&["a".to_owned()]).await.is_err());
    }
}
