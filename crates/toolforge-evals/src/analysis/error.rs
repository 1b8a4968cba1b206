//! Why an analysis refused its input.

/// Why an analysis refused its input.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnalysisError {
    /// Not enough sentences for the requested quantities.
    #[error("too few sentences in the {which}: need at least {needed}, got {got}")]
    TooFewSentences {
        which: &'static str,
        needed: usize,
        got: usize,
    },
    /// `baseline_label` names none of the variants.
    #[error("unknown baseline label {label:?}; the variants are: {}", labels.join(", "))]
    UnknownBaseline { label: String, labels: Vec<String> },
    /// `analyze_variants` got an empty list.
    #[error("no variants to analyze")]
    NoVariants,
    /// Two variants share a label (the result maps are keyed by label).
    #[error("duplicate variant label {label:?}")]
    DuplicateLabel { label: String },
    /// Embeddings of different lengths were compared.
    #[error("embedding dimension mismatch for {which}: expected {expected}, found {found}")]
    DimensionMismatch {
        which: String,
        expected: usize,
        found: usize,
    },
    /// A zero (or empty) embedding has no direction.
    #[error("the embedding of {which} is a zero or empty vector; cosine distance is undefined")]
    ZeroVector { which: String },
    /// NaN or infinity in an embedding.
    #[error("the embedding of {which} contains a non-finite value (NaN or infinity)")]
    NonFinite { which: String },
    /// Sentences and embeddings do not pair up.
    #[error("the {which} has {sentences} sentences but {embeddings} embeddings; they must pair up")]
    LengthMismatch {
        which: &'static str,
        sentences: usize,
        embeddings: usize,
    },
    /// The spike threshold is negative or not finite.
    #[error("acceleration_threshold must be a finite number ≥ 0, got {value}")]
    InvalidThreshold { value: f64 },
}
